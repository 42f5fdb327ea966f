"""The 16-bit float types of device code on emu (emu_float16.hpp): __half and __nv_bfloat16, their pairs, their
conversions in every rounding mode, arithmetic, comparisons, math functions and operators. Each result is checked
bit for bit against a reference computed here from exact rational arithmetic (fractions.Fraction), which shares
nothing with the emulator's double-based rounding."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from .float_reference import BF16, HALF, round_exact, round_sqrt_exact, value

SEED = 20261205      # every random input below comes from it; a failure prints the offending inputs

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__global__ void from_float(const float* x, unsigned short* h, unsigned short* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[4 * i + 0] = __half_as_ushort(__float2half_rn(x[i]));
  h[4 * i + 1] = __half_as_ushort(__float2half_rz(x[i]));
  h[4 * i + 2] = __half_as_ushort(__float2half_rd(x[i]));
  h[4 * i + 3] = __half_as_ushort(__float2half_ru(x[i]));
  b[4 * i + 0] = __bfloat16_as_ushort(__float2bfloat16_rn(x[i]));
  b[4 * i + 1] = __bfloat16_as_ushort(__float2bfloat16_rz(x[i]));
  b[4 * i + 2] = __bfloat16_as_ushort(__float2bfloat16_rd(x[i]));
  b[4 * i + 3] = __bfloat16_as_ushort(__float2bfloat16_ru(x[i]));
}

__device__ __half from_bits(unsigned short u, __half) { return __ushort_as_half(u); }
__device__ __nv_bfloat16 from_bits(unsigned short u, __nv_bfloat16) { return __ushort_as_bfloat16(u); }
__device__ unsigned short bits_of(__half h) { return __half_as_ushort(h); }
__device__ unsigned short bits_of(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }

template <class T>
__device__ void arith(const unsigned short* a, const unsigned short* b, const unsigned short* c, unsigned short* out,
                      int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T x = from_bits(a[i], T()), y = from_bits(b[i], T()), z = from_bits(c[i], T());
  out[8 * i + 0] = bits_of(__hadd(x, y));
  out[8 * i + 1] = bits_of(__hsub(x, y));
  out[8 * i + 2] = bits_of(__hmul(x, y));
  out[8 * i + 3] = bits_of(__hdiv(x, y));
  out[8 * i + 4] = bits_of(__hfma(x, y, z));
  out[8 * i + 5] = bits_of(hsqrt(x));
  out[8 * i + 6] = bits_of(x * y + z);          // the operators: two roundings
  out[8 * i + 7] = bits_of(__hmax(x, y));
}
__global__ void arith_half(const unsigned short* a, const unsigned short* b, const unsigned short* c,
                           unsigned short* out, int n) { arith<__half>(a, b, c, out, n); }
__global__ void arith_bf16(const unsigned short* a, const unsigned short* b, const unsigned short* c,
                           unsigned short* out, int n) { arith<__nv_bfloat16>(a, b, c, out, n); }

__global__ void to_int(const unsigned short* a, const unsigned short* b, int* hi, long long* bl, unsigned* hu,
                       short* hs, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half h = __ushort_as_half(a[i]);
  __nv_bfloat16 f = __ushort_as_bfloat16(b[i]);
  hi[5 * i + 0] = __half2int_rn(h);
  hi[5 * i + 1] = __half2int_rz(h);
  hi[5 * i + 2] = __half2int_rd(h);
  hi[5 * i + 3] = __half2int_ru(h);
  hi[5 * i + 4] = h;                         // the implicit conversion: toward zero
  bl[2 * i + 0] = __bfloat162ll_rn(f);
  bl[2 * i + 1] = __bfloat162ll_ru(f);
  hu[i] = __half2uint_rn(h);
  hs[i] = __half2short_rz(h);
}

__global__ void from_int(const long long* v, unsigned short* h, unsigned short* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[2 * i + 0] = __half_as_ushort(__int2half_rz((int)v[i]));
  h[2 * i + 1] = __half_as_ushort(__int2half_ru((int)v[i]));
  b[2 * i + 0] = __bfloat16_as_ushort(__ll2bfloat16_rz(v[i]));
  b[2 * i + 1] = __bfloat16_as_ushort(__ll2bfloat16_rn(v[i]));
}

// Comparisons, NaN and zero rules, saturation and relu, on half pairs; every lane's results as bits.
__global__ void pairs(const __half2* a, const __half2* b, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half2 x = a[i], y = b[i];
  __half2 m = __hmax2(x, y), mn = __hmin2_nan(x, y), s = __hadd2_sat(x, y), r = __hfma2_relu(x, y, x);
  out[8 * i + 0] = __half_as_ushort(m.x) | (unsigned)__half_as_ushort(m.y) << 16;
  out[8 * i + 1] = __half_as_ushort(mn.x) | (unsigned)__half_as_ushort(mn.y) << 16;
  out[8 * i + 2] = __half_as_ushort(s.x) | (unsigned)__half_as_ushort(s.y) << 16;
  out[8 * i + 3] = __half_as_ushort(r.x) | (unsigned)__half_as_ushort(r.y) << 16;
  out[8 * i + 4] = __hlt2_mask(x, y);
  out[8 * i + 5] = __hltu2_mask(x, y);
  out[8 * i + 6] = (unsigned)__hbne2(x, y) | (unsigned)(x != y) << 1 | (unsigned)(x.x == y.x) << 2 |
                   (unsigned)__hisnan(x.x) << 3 | (unsigned)(__hisinf(x.x) + 1) << 4 | (unsigned)(bool)x.x << 6;
  __half2 e = h2exp(x);
  out[8 * i + 7] = __half_as_ushort(e.x) | (unsigned)__half_as_ushort(hrcp(x.y)) << 16;
}

// Shuffles and atomics of the pair types, and the operators of device code.
__global__ void warp_pairs(const __half2* a, __half2* hsum, __nv_bfloat162* bsum, __half* count) {
  __half2 v = a[threadIdx.x];
  __half2 w = __shfl_xor_sync(0xffffffffu, v, 1);
  atomicAdd(hsum, __hmul2(v, w));
  __nv_bfloat162 f = __float22bfloat162_rn(__half22float2(v));
  f += __shfl_down_sync(0xffffffffu, f, 1);
  if (threadIdx.x % 2 == 0) atomicAdd(bsum, f);
  __half one = 1;
  one++;
  atomicAdd(count, one - __float2half(1.0f));
}
"""


@pytest.fixture(scope="module")
def module(load):
    return load(SOURCE)


def random_bits(rng, fmt, n: int) -> np.ndarray:
    """Finite patterns of every binade, both signs, subnormals included."""
    bits = rng.integers(0, fmt[1], n).astype(np.uint16)
    return bits | (rng.integers(0, 2, n).astype(np.uint16) << 15)


def test_float_to_16_bit_in_every_rounding_mode(module):
    rng = np.random.default_rng(SEED)
    special = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 70000.0, -65520.0, 2.0 ** -24, 2.0 ** -25,
                        3 * 2.0 ** -26, -2.0 ** -26, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 3.3895314e38, 3.4e38,
                        1 + 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20, 1e-40, np.inf, -np.inf, np.nan], np.float32)
    wide = rng.integers(0, 2 ** 32, 3000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = (rng.uniform(-70000, 70000, 1000)).astype(np.float32)
    x = np.concatenate([special, wide, near])
    n = len(x)
    h = np.zeros(4 * n, np.uint16)
    b = np.zeros(4 * n, np.uint16)
    module.launch("from_float", ((n + 127) // 128,), (128,), 0, [x, h, b, np.int32(n)], outputs=(1, 2))
    for i, xi in enumerate(x):
        for fmt, got in ((HALF, h), (BF16, b)):
            for k, mode in enumerate(("rn", "rz", "rd", "ru")):
                if np.isnan(xi):
                    want = 0x7FFF
                elif np.isinf(xi):
                    want = (0x8000 if xi < 0 else 0) | fmt[1]         # an infinity converts exactly
                else:
                    want = round_exact(Fraction(float(xi)), fmt, mode)
                    if xi == 0:
                        want |= 0x8000 if np.signbit(xi) else 0
                assert got[4 * i + k] == want, (f"{fmt[0]} {mode} of {float(xi)!r} (float bits {x.view(np.uint32)[i]:#010x}): "
                                                f"{got[4 * i + k]:#06x}, want {want:#06x} (seed {SEED})")


def _fma_hard_cases(rng, fmt, n: int):
    """Triples where rounding a*b+c first to float and then to the format differs from the exact rounding (the
    double rounding that a correct fma must avoid), among many random ones."""
    a, b, c = (random_bits(rng, fmt, 200_000) for _ in range(3))
    va, vb, vc = (np.array([value(fmt, int(v)) for v in arr[:20_000]]) for arr in (a, b, c))
    with np.errstate(all="ignore"):
        twice = (va.astype(np.float32) * vb.astype(np.float32) + vc.astype(np.float32)).astype(np.float64)
        once = va * vb + vc
        differ = np.float16(twice) != np.float16(once) if fmt is HALF else twice != once
    pick = np.flatnonzero(np.isfinite(once) & (np.abs(once) < 60000) & differ)[:n]
    a, b, c = a[pick], b[pick], c[pick]
    if fmt is HALF:
        # Random triples rarely hit them in binary16: (1 + 2^-6)(1 + 2^-5) lies exactly halfway between two halves,
        # and a c of half a float ulp makes float round back onto that midpoint, while the exact sum lies above it.
        crafted = [(s * 2.0 ** e * (1 + 2.0 ** -6), 1 + 2.0 ** -5, s * 2.0 ** (e - 24))
                   for e in range(6) for s in (1, -1)]
        ca, cb, cc = (np.array(col, np.float16).view(np.uint16) for col in zip(*crafted))
        a, b, c = np.concatenate([a, ca]), np.concatenate([b, cb]), np.concatenate([c, cc])
    return a, b, c


@pytest.mark.parametrize("fmt", [HALF, BF16], ids=["half", "bf16"])
def test_arithmetic_rounds_once_and_exactly(module, fmt):
    rng = np.random.default_rng(SEED + fmt[1])
    a, b, c = (random_bits(rng, fmt, 600) for _ in range(3))
    ha, hb, hc = _fma_hard_cases(rng, fmt, 60)
    assert len(ha) >= 10, "the search for double-rounding cases found too few to test"
    a, b, c = np.concatenate([a, ha]), np.concatenate([b, hb]), np.concatenate([c, hc])
    n = len(a)
    out = np.zeros(8 * n, np.uint16)
    module.launch(f"arith_{fmt[0]}", ((n + 127) // 128,), (128,), 0, [a, b, c, out, np.int32(n)], outputs=(3,))
    for i in range(n):
        x, y, z = (Fraction(value(fmt, int(v[i]))) for v in (a, b, c))

        def exact(q):
            return round_exact(q, fmt) if q != 0 else None     # an exact zero's sign is not checked here

        want = {0: exact(x + y), 1: exact(x - y), 2: exact(x * y), 3: exact(x / y) if y else None,
                4: exact(x * y + z), 5: round_sqrt_exact(x, fmt) if x else None}
        product = round_exact(x * y, fmt) if x * y else None
        if product is not None and product & 0x7FFF < fmt[1]:
            want[6] = exact(Fraction(value(fmt, product & 0x7FFF)) * (-1 if product & 0x8000 else 1) + z)
        big = a[i] if x > y or (x == y and not a[i] & 0x8000) else b[i]
        want[7] = int(big)
        for k, w in want.items():
            got = int(out[8 * i + k])
            if w is None:
                if k == 3 and not y:                 # division by zero: an infinity or NaN, by the signs
                    assert got & 0x7FFF >= fmt[1], f"{fmt[0]} op {k} of {a[i]:#06x}/0 gave {got:#06x}"
                else:
                    assert got & 0x7FFF == 0, f"{fmt[0]} op {k} of {a[i]:#06x},{b[i]:#06x},{c[i]:#06x}: {got:#06x}, want a zero"
                continue
            assert got == w, (f"{fmt[0]} op {k} of a={a[i]:#06x} b={b[i]:#06x} c={c[i]:#06x}: {got:#06x}, "
                              f"want {w:#06x} (seed {SEED})")


def test_conversions_to_and_from_integers(module):
    hv = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.75, -3.75, 65504, -65504, 40000, -40000, np.inf, -np.inf,
                   np.nan, -0.0], np.float16)
    bv = np.array([0.5, 1.5, 2.5, -2.5, 1e10, -1e10, 3e38, -3e38, 1e19, np.inf, -np.inf, np.nan, 7.5, -7.5,
                   2.0 ** 62, -(2.0 ** 63)], np.float32)
    b_bits = (bv.view(np.uint32) >> 16).astype(np.uint16)      # truncated to bfloat16: bv becomes what they hold
    bv = (b_bits.astype(np.uint32) << 16).view(np.float32)
    n = len(hv)
    hi = np.zeros(5 * n, np.int32)
    bl = np.zeros(2 * n, np.int64)
    hu = np.zeros(n, np.uint32)
    hs = np.zeros(n, np.int16)
    module.launch("to_int", (1,), (n,), 0, [hv.view(np.uint16), b_bits, hi, bl, hu, hs, np.int32(n)],
                  outputs=(2, 3, 4, 5))

    def sat(v, lo, hi_):
        return 0 if np.isnan(v) else int(min(max(v, lo), hi_)) if np.isinf(v) else int(min(max(v, lo), hi_))

    def rn(v):
        return v if np.isnan(v) or np.isinf(v) else float(round(Fraction(float(v))))    # ties to even

    i32, i64 = (-2 ** 31, 2 ** 31 - 1), (-2 ** 63, 2 ** 63 - 1)
    for i, v in enumerate(hv.astype(np.float64)):
        assert hi[5 * i:5 * i + 5].tolist() == [sat(rn(v), *i32), sat(np.trunc(v), *i32), sat(np.floor(v), *i32),
                                                sat(np.ceil(v), *i32), sat(np.trunc(v), *i32)], f"half {v}"
        assert hu[i] == sat(rn(v), 0, 2 ** 32 - 1), f"half {v} to unsigned"
        assert hs[i] == sat(np.trunc(v), -2 ** 15, 2 ** 15 - 1), f"half {v} to short"
    for i, v in enumerate(bv.astype(np.float64)):
        assert bl[2 * i:2 * i + 2].tolist() == [sat(rn(v), *i64), sat(np.ceil(v), *i64)], f"bfloat16 {v}"

    ints = np.array([0, 1, -1, 2049, 2051, -2051, 65519, 65520, 70000, -70000, 2 ** 31 - 1, 2 ** 60 - 1,
                     2 ** 60 + 2 ** 52 + 1, -(2 ** 63), 2 ** 63 - 1, 257, 259], np.int64)
    h = np.zeros(2 * len(ints), np.uint16)
    b = np.zeros(2 * len(ints), np.uint16)
    module.launch("from_int", (1,), (len(ints),), 0, [ints, h, b, np.int32(len(ints))], outputs=(1, 2))
    for i, v in enumerate(ints.tolist()):
        v32 = int(np.int64(v).astype(np.int32))
        assert h[2 * i:2 * i + 2].tolist() == [round_exact(Fraction(v32), HALF, "rz"),
                                                round_exact(Fraction(v32), HALF, "ru")], f"int {v32} to half"
        assert b[2 * i:2 * i + 2].tolist() == [round_exact(Fraction(v), BF16, "rz"),
                                                round_exact(Fraction(v), BF16, "rn")], f"long long {v} to bfloat16"


def test_pair_comparisons_nan_zero_saturation_and_math(module):
    nan = np.float16(np.nan)
    xs = np.array([[1, 2], [-0.0, 0.0], [nan, 3], [nan, nan], [0.75, -2], [np.inf, -np.inf], [0.5, 0.25]], np.float16)
    ys = np.array([[2, 1], [0.0, -0.0], [5, nan], [nan, 1], [0.5, -3], [1, 1], [0.25, 0.5]], np.float16)
    n = len(xs)
    out = np.zeros(8 * n, np.uint32)
    module.launch("pairs", (1,), (n,), 0, [xs, ys, out, np.int32(n)], outputs=(2,))
    bits = lambda v: int(np.float16(v).view(np.uint16))     # noqa: E731

    def lanes(word):
        return [int(word) & 0xFFFF, int(word) >> 16]

    for i in range(n):
        x, y = xs[i].astype(np.float64), ys[i].astype(np.float64)
        want_max, want_min, want_sat, want_relu = [], [], [], []
        for p, q in zip(x, y):
            if np.isnan(p) or np.isnan(q):
                want_max.append(0x7FFF if np.isnan(p) and np.isnan(q) else bits(q if np.isnan(p) else p))
                want_min.append(0x7FFF)
            else:
                hi_ = max(p, q) if p != q else (0.0 if not (np.signbit(p) and np.signbit(q)) else -0.0)
                want_max.append(bits(hi_))
                want_min.append(bits(min(p, q) if p != q else (-0.0 if np.signbit(p) or np.signbit(q) else 0.0)))
            s = p + q
            want_sat.append(0 if np.isnan(s) or s <= 0 else bits(1.0) if s >= 1 else bits(s))
            r = p * q + p
            want_relu.append(0x7FFF if np.isnan(r) else 0 if r < 0 or (r == 0 and np.signbit(r)) else bits(r))
        assert lanes(out[8 * i + 0]) == want_max, f"__hmax2 {x} {y}"
        assert lanes(out[8 * i + 1]) == want_min, f"__hmin2_nan {x} {y}"
        assert lanes(out[8 * i + 2]) == want_sat, f"__hadd2_sat {x} {y}"
        assert lanes(out[8 * i + 3]) == want_relu, f"__hfma2_relu {x} {y}"
        lt = [p < q for p, q in zip(x, y)]
        ltu = [p < q or np.isnan(p) or np.isnan(q) for p, q in zip(x, y)]
        assert lanes(out[8 * i + 4]) == [0xFFFF * v for v in lt], f"__hlt2_mask {x} {y}"
        assert lanes(out[8 * i + 5]) == [0xFFFF * v for v in ltu], f"__hltu2_mask {x} {y}"
        hbne = all(p < q or p > q for p, q in zip(x, y))
        ne = all(not (p == q) for p, q in zip(x, y))
        flags = int(out[8 * i + 6])
        assert flags & 7 == hbne | ne << 1 | (x[0] == y[0]) << 2, f"comparisons {x} {y}"
        assert flags >> 3 & 1 == np.isnan(x[0]) and (flags >> 4 & 3) - 1 == (np.isinf(x[0]) * np.sign(x[0]) if np.isinf(x[0]) else 0)
        assert flags >> 6 & 1 == (bits(x[0]) & 0x7FFF != 0), f"bool of {x[0]}"
        with np.errstate(all="ignore"):
            want_exp = bits(np.exp(x[0])) if not np.isnan(x[0]) else 0x7FFF
            want_rcp = bits(1.0 / x[1]) if not np.isnan(x[1]) else 0x7FFF
        assert lanes(out[8 * i + 7]) == [want_exp, want_rcp], f"hexp {x[0]}, hrcp {x[1]}"


def test_pairs_shuffle_and_add_atomically(module):
    v = (np.arange(64) % 5).astype(np.float16).reshape(32, 2)      # small integers: every sum below is exact
    hsum = np.zeros(2, np.float16)
    bsum = np.zeros(2, np.uint16)
    count = np.zeros(1, np.float16)
    module.launch("warp_pairs", (1,), (32,), 0, [v, hsum, bsum, count])    # accumulators: read, then written
    partner = v[np.arange(32) ^ 1]
    assert np.array_equal(hsum.astype(np.float64), (v.astype(np.float64) * partner).sum(axis=0))  # exact: small sums
    down = v[np.minimum(np.arange(32) + 1, 31)]                  # lane 31 reads itself past the end
    even = (v.astype(np.float64) + down)[::2].sum(axis=0)
    got_b = (bsum.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(got_b.astype(np.float64), even), (got_b, even)
    assert count[0] == 32


def test_the_device_api_names_the_16_bit_functions():
    # The GPUVerify adapter drops a suite file's own body-less declarations of device API functions; the 16-bit
    # ones are spelled by token pasting in the header, once per format, and must be known by their full names.
    from harness.backends.emu.toolchain import device_api_has
    for name in ("__float2half_rz", "__float2bfloat16", "__bfloat162ull_ru", "__ull2half_rd", "__half22float2",
                 "__bfloat1622float2", "__halves2bfloat162", "__hgeu2_mask", "__hbltu2", "h2exp10", "__hfma_relu"):
        assert device_api_has(name), name
    for name in ("__bfloat162half2", "__half2bfloat162_rn", "NAME", "OP2"):      # no cross-format spellings
        assert not device_api_has(name), name
    for name in ("val", "make16", "round_to", "fadd", "shfl", "syncwarp"):      # the runtime's own helpers
        assert not device_api_has(name), name
