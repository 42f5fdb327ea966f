"""Inline PTX's one-operand f32 math (ex2, lg2, sin, cos, tanh, rsqrt, rcp, sqrt) and the 16-bit packing conversions
(cvt.rn.f16x2.f32, cvt.rn.bf16x2.f32) on emu, against numpy: .rn results bit for bit (IEEE), .approx results within
one unit in the last place of the double function (the GPU's approximations are documented within a few), .ftz's
flushing of subnormal operands and results exactly."""
from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from tests.backends.emu.test_rewrite import deferred_asm
from tests.backends.emu.float_reference import BF16, round_exact

OPS = ["ex2.approx.f32", "ex2.approx.ftz.f32", "lg2.approx.f32", "sin.approx.f32", "cos.approx.ftz.f32",
       "tanh.approx.f32", "rsqrt.approx.f32", "rcp.approx.ftz.f32", "rcp.rn.f32", "sqrt.rn.f32", "sqrt.approx.f32"]

SOURCE = "\n".join(
    [f'__device__ float op{i}(float x) {{ float y; asm("{op} %0, %1;" : "=f"(y) : "f"(x)); return y; }}'
     for i, op in enumerate(OPS)]
    + ["__global__ void apply(const float* x, float* y, int n) {",
       "  int i = threadIdx.x + blockIdx.x * blockDim.x; if (i >= n) return;"]
    + [f"  y[{i} * n + i] = op{i}(x[i]);" for i in range(len(OPS))]
    + ["}",
       "__global__ void pack(const float* a, const float* b, unsigned* h, unsigned* bf, unsigned* hr, int n) {",
       "  int i = threadIdx.x; if (i >= n) return; unsigned d;",
       '  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a[i]), "f"(b[i])); h[i] = d;',
       '  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a[i]), "f"(b[i])); bf[i] = d;',
       '  asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(a[i]), "f"(b[i])); hr[i] = d;',
       "}"])

REFERENCE = {"ex2": np.exp2, "lg2": np.log2, "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
             "rsqrt": lambda d: 1.0 / np.sqrt(d), "rcp": lambda d: 1.0 / d, "sqrt": np.sqrt}
SUBNORMAL = np.float32(2.0**-127)


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def _flush(v: np.ndarray) -> np.ndarray:
    return np.where(np.abs(v) < np.float32(2.0**-126), np.copysign(np.float32(0), v), v)


def test_one_operand_math(module):
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(200) * 20, rng.uniform(0, 1e4, 50), [0.0, -0.0, 1.0, 0.5, -140.0, -149.5],
                        [np.inf, -np.inf, np.nan]]).astype(np.float32)
    x = np.concatenate([x, np.array([SUBNORMAL, -SUBNORMAL], np.float32)])
    n = x.size
    y = np.zeros(len(OPS) * n, np.float32)
    module.launch("apply", ((n + 63) // 64,), (64,), 0, [x, y, np.int32(n)], outputs=(1,))
    y = y.reshape(len(OPS), n)
    for i, op in enumerate(OPS):
        name, mode = op.split(".")[:2]
        ftz = ".ftz" in op
        arg = _flush(x) if ftz else x
        with np.errstate(all="ignore"):
            expect = REFERENCE[name](arg.astype(np.float64)).astype(np.float32)
        if ftz:
            expect = _flush(expect)
        got = y[i]
        same_nan = np.isnan(got) == np.isnan(expect)
        assert same_nan.all(), f"{op}: NaN where numpy has none (or the reverse) at x={x[~same_nan][:4]}"
        finite = ~np.isnan(expect)
        if mode == "rn":
            assert np.array_equal(got[finite].view(np.uint32), expect[finite].view(np.uint32)), op
        else:
            ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - expect[finite].view(np.int32).astype(np.int64))
            assert ulps.max() <= 1, f"{op}: {ulps.max()} ulps at x={x[finite][ulps.argmax()]}"
    # .ftz, exactly: ex2 of a subnormal operand is ex2(0) = 1 either way, of -140 a subnormal 2^-140 or 0
    at = {float(v): k for k, v in enumerate(x) if not np.isnan(v)}
    assert y[0][at[-140.0]] == np.float32(2.0**-140) and y[1][at[-140.0]] == 0.0
    assert y[7][at[float(SUBNORMAL)]] == np.inf and y[8][at[float(SUBNORMAL)]] == np.float32(2.0**127)   # rcp


def test_pack_two_floats_to_16_bits(module):
    rng = np.random.default_rng(6)
    a = np.concatenate([rng.standard_normal(60) * 100, [-1.5, np.nan, 70000.0, -0.0]]).astype(np.float32)
    b = np.concatenate([rng.standard_normal(60), [2.0**-25, -3.0, np.inf, 1.0]]).astype(np.float32)
    n = a.size
    h, bf, hr = (np.zeros(n, np.uint32) for _ in range(3))
    module.launch("pack", (1,), (64,), 0, [a, b, h, bf, hr, np.int32(n)], outputs=(2, 3, 4))
    def half(v):
        with np.errstate(over="ignore"):          # 70000 is past binary16's range: infinity
            return v.astype(np.float16).view(np.uint16).astype(np.uint32)
    nan_a = np.isnan(a)
    assert np.array_equal((h >> 16)[~nan_a], half(a)[~nan_a]) and np.array_equal(h & 0xFFFF, half(b))
    assert np.all((h >> 16)[nan_a] & 0x7C00 == 0x7C00) and np.all((h >> 16)[nan_a] & 0x3FF)     # a NaN stays one
    def bf_ref(v):
        sign = lambda t: 0x8000 if np.signbit(t) else 0
        return np.array([0x7FFF if np.isnan(t) else sign(t) if t == 0 else 0x7F80 | sign(t) if np.isinf(t)
                         else round_exact(Fraction(float(t)), BF16) for t in v], np.uint32)
    assert np.array_equal(bf >> 16, bf_ref(a)) and np.array_equal(bf & 0xFFFF, bf_ref(b))
    relu = lambda v: np.where(v < 0, np.float32(0), v)
    assert np.array_equal((hr >> 16)[~nan_a], half(relu(a))[~nan_a]) and np.array_equal(hr & 0xFFFF, half(relu(b)))


@pytest.mark.parametrize("instruction", ["ex2.rn.f32", "tanh.approx.ftz.f32", "rsqrt.rn.f32"])
def test_forms_ptx_does_not_define_are_named(instruction):
    src = f'__global__ void k(float* y){{\n  asm("{instruction} %0, %1;" : "=f"(y[0]) : "f"(y[1]));\n}}\n'
    assert re.search(rf"inline PTX '{instruction}' \(line 2\) is not a form PTX defines", deferred_asm(src))
