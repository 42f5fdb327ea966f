"""cuda_fp8.h on emu (emu_float8.hpp): E4M3 and E5M2 conversions checked bit for bit against a reference built here
from the formats' definitions alone (a table of the 256 codes' exact values; rounding to the nearest code, ties to
the even one), with both saturation modes, NaN, infinities, signed zeros and subnormals."""
from __future__ import annotations

import numpy as np
import pytest

from .float_reference import E4M3, E5M2, decode, encode

SEED = 8

SOURCE = r"""
#include <cuda_fp8.h>

__global__ void to_fp8(const double* x, unsigned char* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[4 * i + 0] = __nv_cvt_double_to_fp8(x[i], __NV_NOSAT, __NV_E4M3);
  out[4 * i + 1] = __nv_cvt_double_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
  out[4 * i + 2] = __nv_cvt_float_to_fp8((float)x[i], __NV_NOSAT, __NV_E5M2);
  out[4 * i + 3] = __nv_cvt_float_to_fp8((float)x[i], __NV_SATFINITE, __NV_E5M2);
}

__global__ void from_fp8(unsigned short* h, int* ints, float* f) {
  unsigned char code = (unsigned char)threadIdx.x;
  h[2 * threadIdx.x + 0] = __nv_cvt_fp8_to_halfraw(code, __NV_E4M3).x;
  h[2 * threadIdx.x + 1] = __nv_cvt_fp8_to_halfraw(code, __NV_E5M2).x;
  __nv_fp8_e4m3 a;
  a.__x = code;
  __nv_fp8_e5m2 b;
  b.__x = code;
  ints[2 * threadIdx.x + 0] = (int)(signed char)a;   // toward zero, saturating, NaN to 0
  ints[2 * threadIdx.x + 1] = (int)b;
  f[threadIdx.x] = (float)__nv_fp8_e4m3(1000 * (int)threadIdx.x - 128000);   // an int: through float, saturating
}

__global__ void pairs(const float4* x, unsigned* out) {
  __nv_fp8x4_e4m3 q(x[threadIdx.x]);
  float4 back = (float4)q;
  __nv_fp8x2_e5m2 p(__floats2half2_rn(back.x, back.y));
  out[2 * threadIdx.x + 0] = q.__x;
  out[2 * threadIdx.x + 1] = p.__x;
}
"""

@pytest.fixture(scope="module")
def module(load):
    return load(SOURCE)


def test_conversions_to_fp8_round_once_to_nearest_even(module):
    rng = np.random.default_rng(SEED)
    mids = []
    for fmt in (E4M3, E5M2):                                  # every midpoint and its neighbours: the ties
        vals = sorted({decode(fmt, c) for c in range(0x7C) if decode(fmt, c) is not None})
        for lo, hi in zip(vals, vals[1:]):
            m = float((lo + hi) / 2)
            mids += [m, -m, np.nextafter(m, 0), np.nextafter(m, np.inf)]
    x = np.array(mids + [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 448.0, 464.0, 464.00001, 480.0, 57344.0,
                         61439.0, 61440.0, 1e30, 2.0 ** -10, 2.0 ** -17, 1.5 * 2.0 ** -17, 2.0 ** -18]
                 + list(rng.uniform(-600, 600, 500)) + list(rng.uniform(-1, 1, 500) * 2.0 ** rng.integers(-20, 17, 500)),
                 np.float64)
    x = x.astype(np.float32).astype(np.float64)               # float-exact: the E5M2 calls take floats
    n = len(x)
    out = np.zeros(4 * n, np.uint8)
    module.launch("to_fp8", ((n + 127) // 128,), (128,), 0, [x, out, np.int32(n)], outputs=(1,))
    for i, xi in enumerate(x):
        want = [encode(E4M3, xi, False), encode(E4M3, xi, True), encode(E5M2, xi, False), encode(E5M2, xi, True)]
        got = out[4 * i:4 * i + 4].tolist()
        assert got == want, f"{xi!r}: {[hex(g) for g in got]}, want {[hex(w) for w in want]} (seed {SEED})"


def test_fp8_codes_to_half_int_and_from_int(module):
    h = np.zeros(512, np.uint16)
    ints = np.zeros(512, np.int32)
    f = np.zeros(256, np.float32)
    module.launch("from_fp8", (1,), (256,), 0, [h, ints, f], outputs=(0, 1, 2))
    for code in range(256):
        for k, fmt in enumerate((E4M3, E5M2)):
            v = decode(fmt, code)
            got = h[2 * code + k]
            if v is None:
                assert got == 0x7FFF, f"{fmt[0]} NaN code {code:#04x} widened to {got:#06x}"
            else:
                want = np.array([float(v)], np.float16).view(np.uint16)[0] if v != 0 else (0x8000 if code & 0x80 else 0)
                assert got == want, f"{fmt[0]} code {code:#04x} widened to {got:#06x}, want {want:#06x}"
            lim = (-128, 127) if fmt is E4M3 else (-2 ** 31, 2 ** 31 - 1)
            want_int = 0 if v is None else int(max(min(int(v) if abs(v) != float("inf") else (lim[1] if v > 0 else lim[0]),
                                                      lim[1]), lim[0]))
            assert ints[2 * code + k] == want_int, f"{fmt[0]} code {code:#04x} to integer: {ints[2 * code + k]}"
        val = 1000 * code - 128000                               # through float, then saturating to +-448
        want = float(decode(E4M3, encode(E4M3, float(np.float32(val)), True)))
        assert f[code] == want, f"__nv_fp8_e4m3({val}) = {f[code]}, want {want}"


def test_pair_and_quad_classes(module):
    x = np.random.default_rng(SEED + 1).uniform(-500, 500, (32, 4)).astype(np.float32)
    out = np.zeros(64, np.uint32)
    module.launch("pairs", (1,), (32,), 0, [x, out], outputs=(1,))
    for t in range(32):
        q = [encode(E4M3, float(v), True) for v in x[t]]
        assert out[2 * t] == q[0] | q[1] << 8 | q[2] << 16 | q[3] << 24, f"fp8x4 of {x[t]}"
        back = [float(decode(E4M3, c)) for c in q[:2]]
        halves = [float(np.float16(b)) for b in back]
        p = [encode(E5M2, hv, True) for hv in halves]
        assert out[2 * t + 1] == p[0] | p[1] << 8, f"fp8x2 e5m2 of {halves}"
