"""Exact references for the emu's floating-point formats, shared by the tests of emu's 16-bit and 8-bit floats and
of racescan's encoders: values of bit patterns as fractions, and rational values rounded to a format by exact
comparisons (ties to the even pattern), with nothing of the emulator's own rounding."""
from __future__ import annotations

import bisect
import functools
from fractions import Fraction

import numpy as np

# ---- binary16 and bfloat16 ------------------------------------------------------------------------------------
HALF = ("half", 0x7C00, Fraction(2) ** 16)       # name, +inf's bits, the value inf stands for when rounding
BF16 = ("bf16", 0x7F80, Fraction(2) ** 128)


def value(fmt, bits: int) -> float:
    if fmt is HALF:
        return float(np.array([bits], np.uint16).view(np.float16)[0])
    return float(np.array([bits << 16], np.uint32).view(np.float32)[0])


def _magnitude(fmt, bits: int) -> Fraction:
    return fmt[2] if bits == fmt[1] else Fraction(value(fmt, bits))


def round_exact(q: Fraction, fmt, mode: str = "rn") -> int:
    """The bits of the rational q in the format under a rounding mode (IEEE 754: ties to even; overflow past the
    largest finite value by half an ulp or more is infinity when rounding to nearest)."""
    sign = 0x8000 if q < 0 else 0
    m = abs(q)
    lo, hi = 0, fmt[1]
    if m >= fmt[2]:
        lo = fmt[1] - 1
    else:
        while hi - lo > 1:                       # the largest pattern whose magnitude is <= m
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if _magnitude(fmt, mid) <= m else (lo, mid)
    below, above = lo, lo + 1
    if _magnitude(fmt, below) == m:
        return sign | below
    if mode == "rn":
        d_lo, d_hi = m - _magnitude(fmt, below), _magnitude(fmt, above) - m
        pick = below if d_lo < d_hi or (d_lo == d_hi and below % 2 == 0) else above
    elif mode == "rz":
        pick = below
    elif mode == "rd":
        pick = below if not sign else above
    else:
        pick = above if not sign else below
    return sign | min(pick, fmt[1])


def round_sqrt_exact(q: Fraction, fmt) -> int:
    """The bits of sqrt(q) rounded to nearest, found by squaring candidates (no square root is taken)."""
    if q < 0:
        return 0x7FFF
    lo, hi = 0, fmt[1]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _magnitude(fmt, mid) ** 2 <= q else (lo, mid)
    if _magnitude(fmt, lo) ** 2 == q:
        return lo
    middle = (_magnitude(fmt, lo) + _magnitude(fmt, lo + 1)) / 2
    return lo if q < middle ** 2 or (q == middle ** 2 and lo % 2 == 0) else lo + 1



# ---- FP8 -------------------------------------------------------------------------------------------------------
E4M3 = ("e4m3", 3, 7)
E5M2 = ("e5m2", 2, 15)


def decode(fmt, code: int):
    """The exact value of an 8-bit code (None for NaN, a float infinity for E5M2's)."""
    _, m, bias = fmt
    sign = -1 if code & 0x80 else 1
    ex, mant = (code & 0x7F) >> m, code & ((1 << m) - 1)
    if fmt is E4M3 and code & 0x7F == 0x7F:
        return None
    if fmt is E5M2 and ex == 0x1F:
        return None if mant else sign * float("inf")
    if ex == 0:
        return sign * Fraction(mant, 1 << m) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(mant, 1 << m)) * Fraction(2) ** (ex - bias)


@functools.lru_cache(maxsize=None)
def _finite_codes(fmt) -> tuple[tuple[int, Fraction], ...]:
    """The non-negative finite codes and their values."""
    return tuple((c, decode(fmt, c)) for c in range(0x80)
                 if decode(fmt, c) is not None and abs(decode(fmt, c)) != float("inf"))


def encode(fmt, x: float, saturate: bool) -> int:
    """x rounded to the nearest code (ties to the even code), with CUDA's overflow and NaN rules."""
    sign = 0x80 if np.signbit(x) else 0
    if np.isnan(x):
        return sign | (0x7F if fmt is E4M3 else 0x7E | int(np.array([x]).view(np.uint64)[0] >> 50) & 1)
    finite = _finite_codes(fmt)
    largest, largest_value = max(finite, key=lambda cv: cv[1])
    a = abs(Fraction(x)) if np.isfinite(x) else None
    if a is None:
        best = None
    else:
        k = bisect.bisect_left([v for _, v in finite], a)      # the values are increasing with the codes
        best, value = min(finite[max(k - 1, 0):k + 1], key=lambda cv: (abs(cv[1] - a), cv[0] & 1))
        # the code one past the largest stands for the next binade's value when rounding (IEEE's overflow rule)
        top = largest_value + Fraction(2) ** ((largest >> fmt[1]) - fmt[2] - fmt[1])
        if abs(top - a) < abs(value - a) or (abs(top - a) == abs(value - a) and best & 1):
            best = None
    if best is None:                                          # past the largest finite value
        return sign | (largest if saturate else (0x7F if fmt is E4M3 else 0x7C))
    return sign | best


# ---- binary32 --------------------------------------------------------------------------------------------------
def round_binary32(q: Fraction) -> np.float32:
    """The rational q rounded to binary32, to nearest with ties to even, by exact comparison of the candidates around
    numpy's (possibly twice rounded) conversion."""
    guess = np.float32(float(q))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    return min((c for c in candidates if np.isfinite(c)),
               key=lambda c: (abs(Fraction(float(c)) - q), int(np.array([c]).view(np.uint32)[0]) & 1))


# ---- the MX formats: E2M3, E3M2 (six bits), E2M1 (four bits); no infinity or NaN -------------------------------
E2M3 = ("e2m3", 3, 1, 6)          # name, mantissa bits, bias, bits with the sign
E3M2 = ("e3m2", 2, 3, 6)
E2M1 = ("e2m1", 1, 1, 4)


def mx_decode(fmt, code: int) -> Fraction:
    _, m, bias, bits = fmt
    sign = -1 if code >> (bits - 1) & 1 else 1
    magnitude = code & ((1 << (bits - 1)) - 1)
    ex, mant = magnitude >> m, magnitude & ((1 << m) - 1)
    if ex == 0:
        return sign * Fraction(mant, 1 << m) * Fraction(2) ** (1 - bias)
    return sign * (1 + Fraction(mant, 1 << m)) * Fraction(2) ** (ex - bias)


def mx_encode(fmt, x: float, toward_zero: bool) -> int:
    """x rounded to the nearest code (ties to the even code) or toward zero, saturating at the largest value; NaN
    gives the positive largest value (the CUDA Math API's rules for these formats)."""
    bits = fmt[3]
    codes = [(c, mx_decode(fmt, c)) for c in range(1 << (bits - 1))]     # non-negative, increasing with the code
    top = codes[-1][0]
    if np.isnan(x):
        return top
    sign = (1 << (bits - 1)) if np.signbit(x) else 0
    if np.isinf(x):
        return sign | top
    a = abs(Fraction(float(x)))
    if a >= codes[-1][1]:
        return sign | top
    k = max(c for c, v in codes if v <= a)
    if toward_zero or codes[k][1] == a:
        return sign | k
    below, above = codes[k][1], codes[k + 1][1]
    if a - below < above - a or (a - below == above - a and k % 2 == 0):
        return sign | k
    return sign | (k + 1)
