"""cuda_fp6.h, cuda_fp4.h and cuda_fp8.h's E8M0 on emu (emu_float_mx.hpp, emu_float8.hpp): the MX element formats
E2M3, E3M2 and E2M1 and the MX scale E8M0, checked bit for bit against references built here from the formats'
definitions (exact code values; rounding by exact comparison), in both rounding modes CUDA defines for each, with
saturation, NaN, infinities, signed zeros and subnormals."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from harness.backends import KernelFault
from .float_reference import E2M1, E2M3, E3M2, mx_decode, mx_encode

SEED = 46

SOURCE = r"""
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>

// Per value: E2M3, E3M2, E2M1 from double to nearest and toward zero, then from float to nearest; E8M0 toward zero
// and up, each with and without saturation.
__global__ void convert(const double* x, unsigned char* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned char* o = out + 13 * i;
  o[0] = __nv_cvt_double_to_fp6(x[i], __NV_E2M3, cudaRoundNearest);
  o[1] = __nv_cvt_double_to_fp6(x[i], __NV_E2M3, cudaRoundZero);
  o[2] = __nv_cvt_double_to_fp6(x[i], __NV_E3M2, cudaRoundNearest);
  o[3] = __nv_cvt_double_to_fp6(x[i], __NV_E3M2, cudaRoundZero);
  o[4] = __nv_cvt_double_to_fp4(x[i], __NV_E2M1, cudaRoundNearest);
  o[5] = __nv_cvt_double_to_fp4(x[i], __NV_E2M1, cudaRoundZero);
  o[6] = __nv_cvt_float_to_fp6((float)x[i], __NV_E2M3, cudaRoundNearest);
  o[7] = __nv_cvt_float_to_fp4((float)x[i], __NV_E2M1, cudaRoundNearest);
  o[8] = __nv_cvt_double_to_e8m0(x[i], __NV_SATFINITE, cudaRoundZero);
  o[9] = __nv_cvt_double_to_e8m0(x[i], __NV_NOSAT, cudaRoundZero);
  o[10] = __nv_cvt_double_to_e8m0(x[i], __NV_SATFINITE, cudaRoundPosInf);
  o[11] = __nv_cvt_float_to_e8m0((float)x[i], __NV_NOSAT, cudaRoundPosInf);
  __nv_fp4_e2m1 c(x[i]);                                  // the class: to nearest, saturating
  o[12] = c.__x;
}

// Codes back: every E2M3/E3M2/E2M1 code to half, and through the classes to float and int; E8M0 to bfloat16.
__global__ void widen(unsigned short* h, float* f, int* ints, unsigned short* bf) {
  unsigned code = threadIdx.x;
  h[3 * code + 0] = __nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)(code & 63), __NV_E2M3).x;
  h[3 * code + 1] = __nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)(code & 63), __NV_E3M2).x;
  h[3 * code + 2] = __nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)(code & 15), __NV_E2M1).x;
  __nv_fp6_e3m2 a; a.__x = (__nv_fp6_storage_t)(code & 63);
  __nv_fp4_e2m1 b; b.__x = (__nv_fp4_storage_t)(code & 15);
  f[2 * code + 0] = (float)a;
  f[2 * code + 1] = (float)b;
  ints[code] = (int)a;
  bf[code] = __nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)code).x;
}

// Packing: the first value in the low bits (a nibble for fp4, a byte for fp6), then back through the pair classes.
__global__ void pairs(const float2* x, unsigned* out, float2* back) {
  int t = threadIdx.x;
  out[4 * t + 0] = __nv_cvt_float2_to_fp4x2(x[t], __NV_E2M1, cudaRoundNearest);
  out[4 * t + 1] = __nv_cvt_float2_to_fp6x2(x[t], __NV_E3M2, cudaRoundZero);
  out[4 * t + 2] = __nv_cvt_float2_to_e8m0x2(x[t], __NV_SATFINITE, cudaRoundPosInf);
  __nv_fp4x4_e2m1 q(make_float4(x[t].x, x[t].y, -x[t].x, -x[t].y));
  out[4 * t + 3] = q.__x;
  back[t] = (float2)__nv_fp6x2_e2m3(x[t]);
}

__global__ void e8m0_of_ints(const long long* v, unsigned char* out) {
  out[threadIdx.x] = __nv_fp8_e8m0(v[threadIdx.x]).__x;     // the class rounds up, exactly
}

__global__ void bad_mode(const float* x, unsigned char* out, int which) {
  if (which == 0) out[0] = __nv_cvt_float_to_fp4(x[0], __NV_E2M1, cudaRoundPosInf);
  else out[0] = __nv_cvt_float_to_e8m0(x[0], __NV_SATFINITE, cudaRoundNearest);
}
"""


@pytest.fixture(scope="module")
def module(load):
    return load(SOURCE)


def e8m0(x: float, saturate: bool, up: bool) -> int:
    """|x| rounded to a power of two (down or up), 2^-127 below the range, 2^127 or NaN above, NaN for NaN."""
    if np.isnan(x):
        return 0xFF
    if np.isinf(x):
        return 0xFE if saturate else 0xFF
    a = abs(Fraction(float(x)))
    if a == 0:
        return 0x00
    e = a.numerator.bit_length() - a.denominator.bit_length()     # 2^e <= a < 2^(e+2): settle it exactly
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    if up and Fraction(2) ** e != a:
        e += 1
    if e < -127:
        return 0x00
    if e > 127:
        return 0xFE if saturate else 0xFF
    return e + 127


def test_conversions_round_once(module):
    rng = np.random.default_rng(SEED)
    special = []
    for fmt in (E2M3, E3M2, E2M1):                      # every midpoint and the doubles beside it
        vals = sorted({mx_decode(fmt, c) for c in range(1 << fmt[3])})
        for lo, hi in zip(vals, vals[1:]):
            m = float((lo + hi) / 2)
            special += [m, np.nextafter(m, -np.inf), np.nextafter(m, np.inf)]
    powers = [2.0 ** k for k in (-130, -127, -126, 0, 1, 127, 128)]
    special += powers + [np.nextafter(p, np.inf) for p in powers] + [np.nextafter(p, 0) for p in powers]
    x = np.array(special + [-s for s in special] + [0.0, -0.0, np.inf, -np.inf, np.nan, 6.0, 6.5, 7.5, 7.75, 28.0,
                                                    30.0, 32.0, 1e300, 1e-300]
                 + list(rng.uniform(-40, 40, 400)) + list(rng.uniform(-1, 1, 400) * 2.0 ** rng.integers(-8, 6, 400)),
                 np.float64)
    with np.errstate(over="ignore"):                   # float-exact: some calls take floats (1e300 becomes inf)
        x = x.astype(np.float32).astype(np.float64)
    n = len(x)
    out = np.zeros(13 * n, np.uint8)
    module.launch("convert", ((n + 127) // 128,), (128,), 0, [x, out, np.int32(n)], outputs=(1,))
    for i, xi in enumerate(x):
        want = [mx_encode(E2M3, xi, False), mx_encode(E2M3, xi, True), mx_encode(E3M2, xi, False),
                mx_encode(E3M2, xi, True), mx_encode(E2M1, xi, False), mx_encode(E2M1, xi, True),
                mx_encode(E2M3, xi, False), mx_encode(E2M1, xi, False),
                e8m0(xi, True, False), e8m0(xi, False, False), e8m0(xi, True, True), e8m0(xi, False, True),
                mx_encode(E2M1, xi, False)]
        got = out[13 * i:13 * i + 13].tolist()
        assert got == want, f"{xi!r}: {[hex(g) for g in got]}, want {[hex(w) for w in want]} (seed {SEED})"


def test_codes_widen_exactly(module):
    h = np.zeros(3 * 256, np.uint16)
    f = np.zeros(2 * 256, np.float32)
    ints = np.zeros(256, np.int32)
    bf = np.zeros(256, np.uint16)
    module.launch("widen", (1,), (256,), 0, [h, f, ints, bf], outputs=(0, 1, 2, 3))
    half = h.view(np.float16).astype(np.float64).reshape(256, 3)
    for code in range(64):
        assert half[code, 0] == mx_decode(E2M3, code) and half[code, 1] == mx_decode(E3M2, code)
        assert f[2 * code] == mx_decode(E3M2, code) and ints[code] == int(mx_decode(E3M2, code))   # toward zero
    for code in range(16):
        assert half[code, 2] == mx_decode(E2M1, code) and f[2 * code + 1] == mx_decode(E2M1, code)
    scale = (bf.astype(np.uint32) << 16).view(np.float32)
    assert all(scale[c] == 2.0 ** (c - 127) for c in range(255)) and bf[255] == 0x7FFF   # 2^-127: a subnormal


def test_packing_order_and_pair_classes(module):
    x = np.array([[1.5, -2.0], [0.25, 5.0], [7.0, 0.0], [-0.5, 3.0]], np.float32)
    out = np.zeros(4 * len(x), np.uint32)
    back = np.zeros_like(x)
    module.launch("pairs", (1,), (len(x),), 0, [x, out, back], outputs=(1, 2))
    for t, (a, b) in enumerate(x):
        assert out[4 * t] == mx_encode(E2M1, a, False) | mx_encode(E2M1, b, False) << 4
        assert out[4 * t + 1] == mx_encode(E3M2, a, True) | mx_encode(E3M2, b, True) << 8
        assert out[4 * t + 2] == e8m0(a, True, True) | e8m0(b, True, True) << 8
        codes = [mx_encode(E2M1, v, False) for v in (a, b, -a, -b)]
        assert out[4 * t + 3] == sum(c << (4 * k) for k, c in enumerate(codes))
        assert back[t].tolist() == [float(mx_decode(E2M3, mx_encode(E2M3, v, False))) for v in (a, b)]


def test_e8m0_of_64_bit_integers_rounds_up_exactly(module):
    v = np.array([1, 2, 3, 2**60, 2**60 + 1, -(2**62) - 5, 2**63 - 1, 0], np.int64)
    out = np.zeros(len(v), np.uint8)
    module.launch("e8m0_of_ints", (1,), (len(v),), 0, [v, out], outputs=(1,))
    # 2^60 + 1 is 2^60 in double: rounding through double would give 2^60, not 2^61
    assert out.tolist() == [127, 128, 129, 187, 188, 190, 190, 0]


@pytest.mark.parametrize("which, rule", [(0, "fp6 or fp4 with a rounding mode other than cudaRoundNearest"),
                                         (1, "e8m0 with a rounding mode other than cudaRoundZero or cudaRoundPosInf")])
def test_a_rounding_mode_cuda_does_not_define_traps(module, which, rule):
    with pytest.raises(KernelFault, match=rf"a conversion to {rule}.* at line \d+ \(CUDA asserts against it\)"):
        module.launch("bad_mode", (1,), (1,), 0, [np.ones(1, np.float32), np.zeros(1, np.uint8), np.int32(which)],
                      outputs=(1,))
