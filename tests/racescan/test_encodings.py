"""The spec dtypes numpy lacks (bfloat16, fp8e4m3, fp8e5m2): their encoders against the exact references of the
emu tests (fractions, ties to even), and a race scan of a kernel that takes them, from a spec string."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from harness.racescan import make_args, parse_args, scan
from harness.racescan.encodings import bfloat16_bits, fp8_bits
from tests.backends.emu.float_reference import BF16, E4M3, E5M2, encode, round_exact

SEED = 4


def test_bfloat16_codes_are_the_exact_values_rounded_once():
    rng = np.random.default_rng(SEED)
    v = np.concatenate([rng.uniform(-3, 3, 2000) * 2.0 ** rng.integers(-130, 128, 2000),
                        [1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -40, -0.0, 0.0, 3.4e38, 1e-45]])
    got = bfloat16_bits(v)
    for x, g in zip(v, got):
        want = round_exact(Fraction(float(x)), BF16) if x != 0 else (0x8000 if np.signbit(x) else 0)
        if want & 0x7FFF == 0x7F80:
            want = (want & 0x8000) | 0x7F7F                  # the spec saturates to the largest finite value
        assert g == want, f"bfloat16 of {x!r}: {g:#06x}, want {want:#06x} (seed {SEED})"
    assert bfloat16_bits(np.array([np.nan]))[0] == 0x7FFF


@pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_fp8_codes_are_the_exact_values_rounded_once(fmt):
    rng = np.random.default_rng(SEED)
    v = np.concatenate([rng.uniform(-70000, 70000, 300), rng.uniform(-1, 1, 700) * 2.0 ** rng.integers(-20, 10, 700),
                        [464.0, 2.0 ** -10, 61440.0, np.inf, -np.inf, -0.0]])
    got = fp8_bits(v, fmt[0])
    for x, g in zip(v, got):
        assert g == encode(fmt, float(x), True), f"{fmt[0]} of {x!r}: {g:#04x} (seed {SEED})"


def test_a_spec_with_encoded_dtypes_scans(emu):
    src = r"""
#include <cuda_bf16.h>
#include <cuda_fp8.h>
__global__ void dequant(const __nv_fp8_e4m3* q, const __nv_bfloat16* scale, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = float(q[i]) * __bfloat162float(scale[i / 32]);
}
"""
    specs = parse_args("q:fp8e4m3[256]=random(-500,500) scale:bfloat16[8]=random(0,2) y:float32[256]!out n:int32=256")
    assert str(specs[0]) == "q:fp8e4m3[256]=random(-500,500)" and specs[1].dtype == np.uint16
    args, outputs = make_args(specs, SEED)
    assert args[0].dtype == np.uint8 and np.all(args[0] & 0x7F != 0x7F)        # saturated: no NaN code
    verdict = scan(emu, src, "dequant", (1,), (256,), 0, args, outputs)
    assert verdict.kind == "clean", verdict
    with pytest.raises(ValueError, match=r"range\(lo,hi\) is the domain of an integer scalar, not of bfloat16"):
        parse_args("s:bfloat16=range(0,4)")
    with pytest.raises(ValueError, match=r"unknown dtype 'fp8' \(numpy's names, or bfloat16, fp8e4m3, fp8e5m2\)"):
        parse_args("q:fp8[4]")
