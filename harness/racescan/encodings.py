"""Number formats numpy has no dtype for, as the bit patterns a kernel reads: bfloat16 (uint16) and the FP8 formats
E4M3 and E5M2 (uint8). In: float64 values. Out: their codes, each value rounded once to the nearest code, ties to
the even one; past the largest finite value, that value (CUDA's __NV_SATFINITE); NaN to the format's NaN."""
from __future__ import annotations

import functools

import numpy as np


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 codes: float32 first (exact for every bfloat16 and, with round-to-odd, a correct first step),
    then the high 16 bits rounded to nearest even, saturated to the largest finite value."""
    v = np.asarray(values, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):      # past float's range: infinity, saturated below
        f = v.astype(np.float32)
        inexact = np.isfinite(f) & (f.astype(np.float64) != v)
    bits = f.view(np.uint32).copy()
    even = inexact & (bits % 2 == 0)                        # round to odd: the neighbour toward v keeps the sticky bit
    away = np.abs(v[even]) > np.abs(f[even].astype(np.float64))
    bits[even] = np.where(away, bits[even] + 1, bits[even] - 1).astype(np.uint32)
    rounded = ((bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    finite_in = np.isfinite(v)
    overflow = finite_in & ((rounded & 0x7FFF) >= 0x7F80)
    rounded[overflow] = (rounded[overflow] & 0x8000) | 0x7F7F
    rounded[np.isinf(v)] = (np.signbit(v[np.isinf(v)]).astype(np.uint16) << 15) | 0x7F7F
    rounded[np.isnan(v)] = 0x7FFF
    return rounded


@functools.lru_cache(maxsize=None)
def _fp8_table(mantissa: int, bias: int, e4m3: bool) -> tuple[np.ndarray, np.ndarray]:
    """The non-negative finite codes of an FP8 format and their values, increasing."""
    codes = np.arange(0x80)
    ex, mant = codes >> mantissa, codes & ((1 << mantissa) - 1)
    values = np.where(ex == 0, mant / (1 << mantissa) * 2.0 ** (1 - bias),
                      (1 + mant / (1 << mantissa)) * 2.0 ** (ex - bias))
    finite = codes != 0x7F if e4m3 else ex != 0x1F
    return codes[finite].astype(np.uint8), values[finite]


def fp8_bits(values: np.ndarray, kind: str) -> np.ndarray:
    """FP8 codes of `kind` "e4m3" or "e5m2" (saturating to the largest finite value)."""
    codes, table = _fp8_table(3, 7, True) if kind == "e4m3" else _fp8_table(2, 15, False)
    v = np.asarray(values, np.float64)
    a = np.minimum(np.abs(np.nan_to_num(v, nan=0.0)), table[-1])
    hi = np.clip(np.searchsorted(table, a), 0, len(table) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - table[lo], table[hi] - a
    pick = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (codes[hi] % 2 == 0)), hi, lo)
    out = codes[pick] | (np.signbit(v).astype(np.uint8) << 7)
    out[np.isnan(v)] = 0x7F
    return out


# spec name -> (the dtype the kernel's data has, the encoder)
ENCODINGS = {
    "bfloat16": (np.dtype("uint16"), bfloat16_bits),
    "fp8e4m3": (np.dtype("uint8"), lambda v: fp8_bits(v, "e4m3")),
    "fp8e5m2": (np.dtype("uint8"), lambda v: fp8_bits(v, "e5m2")),
}
