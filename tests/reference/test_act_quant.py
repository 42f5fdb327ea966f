"""The kernels' int8 activation quantizers: bit-exact float32 arithmetic, error bounds, edge rules."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reference.bounds import INT8_ACT_SLACK, TWO_PASS_SLACK_FMA, TWO_PASS_SLACK_NOFMA, U32
from reference.modes import Mode
from reference.quant import (QuantizedActivation, quantize_act_int8, quantize_act_two_pass, quantize_activation)
from tests.reference.helpers import outlier_activation, rng_for

F = np.float32


def oracle_block_floor(block: np.ndarray) -> tuple[list[int], np.float32]:
    """moe_qact / k*_qact for one 32-block, written as the kernel reads, on float32 scalars."""
    av = F(0)
    for v in block:                               # fmaxf: a NaN operand is ignored
        a = abs(F(v))
        av = a if (a > av or np.isnan(av)) else av
    amax = av if av > F(1e-30) else F(1e-30)
    sc = F(amax) / F(127)
    out = []
    for v in block:
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.rint(F(v) / sc)
        q = 0 if np.isnan(t) else int(max(min(t, 2.0 ** 31 - 1), -2.0 ** 31))
        out.append(max(-128, min(127, q)))
    return out, sc


def oracle_block_one(block: np.ndarray) -> tuple[list[int], np.float32]:
    """gk_quant_act / gk_rmsnorm_q8 for one 32-block: scale = a > 0 ? a/127 : 1, (signed char)__float2int_rn."""
    a = F(np.fmax.reduce(np.abs(block.astype(F))))
    sc = a / F(127) if a > 0 else F(1)
    out = []
    for v in block:
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.rint(F(v) / sc)
        q = 0 if np.isnan(t) else int(max(min(t, 2.0 ** 31 - 1), -2.0 ** 31))
        out.append(((q + 128) % 256) - 128)
    return out, sc


block_values = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(arrays(np.float32, st.sampled_from([32, 64, 96]), elements=block_values))
def test_floor_rule_matches_the_kernel_written_out(x):
    q, s = quantize_act_int8(x, "floor")
    for b in range(x.size // 32):
        oq, osc = oracle_block_floor(x[b * 32:(b + 1) * 32])
        assert s[b] == osc and q[b * 32:(b + 1) * 32].tolist() == oq, f"block {b}: {x[b * 32:(b + 1) * 32]!r}"


@given(arrays(np.float32, st.sampled_from([32, 64]), elements=block_values))
def test_one_rule_matches_the_kernel_written_out(x):
    q, s = quantize_act_int8(x, "unit")
    for b in range(x.size // 32):
        oq, osc = oracle_block_one(x[b * 32:(b + 1) * 32])
        assert s[b] == osc and q[b * 32:(b + 1) * 32].tolist() == oq, f"block {b}: {x[b * 32:(b + 1) * 32]!r}"


@given(arrays(np.float32, 64, elements=block_values), st.sampled_from(["floor", "unit"]))
def test_single_pass_reconstruction_within_half_a_step(x, rule):
    q, s = quantize_act_int8(x, rule)
    step = np.repeat(s.astype(np.float64), 32)
    err = np.abs(x.astype(np.float64) - q * step)
    tiny_one = rule == "unit" and np.any(np.repeat(s, 32) < np.finfo(np.float32).tiny)  # underflowed scale: unbounded
    if not tiny_one:
        assert np.all(err <= step * (0.5 + INT8_ACT_SLACK * U32)), f"x={x!r}"


@given(arrays(np.float32, 64, elements=block_values), st.booleans())
def test_two_pass_reconstruction_within_a_256th_step(x, fma):
    hi, lo, s = quantize_act_two_pass(x, fma=fma)
    sh = np.repeat(s.astype(np.float64), 32)
    recon = hi * sh + lo * sh / 128
    slack = TWO_PASS_SLACK_FMA if fma else TWO_PASS_SLACK_NOFMA
    assert np.all(np.abs(x.astype(np.float64) - recon) <= sh / 128 * (0.5 + slack * U32)), f"x={x!r} fma={fma}"
    assert np.array_equal(hi, quantize_act_int8(x, "floor")[0])


def test_round_half_to_even_on_exact_ties_and_negative_control():
    # amax 127 -> scale exactly 1, so v / scale = v: the .5 values are exact ties
    x = np.zeros(32, F)
    x[0] = 127
    x[1:8] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5]
    q, s = quantize_act_int8(x)
    assert s[0] == 1.0
    assert q[1:8].tolist() == [0, 2, 2, 0, -2, -2, 126]
    half_away = (np.trunc(x[1:8]) + np.sign(x[1:8])).astype(int).tolist()   # a wrong variant
    assert half_away != q[1:8].tolist()


def test_zero_block_rules_differ_only_in_the_scale():
    x = np.zeros(64, F)
    x[32:] = 1.0
    qf, sf = quantize_act_int8(x, "floor")
    qo, so = quantize_act_int8(x, "unit")
    assert sf[0] == F(1e-30) / F(127) and so[0] == 1.0
    assert np.all(qf[:32] == 0) and np.all(qo[:32] == 0)
    assert sf[1] == so[1] and np.array_equal(qf[32:], qo[32:])


def test_tiny_blocks_floor_versus_one_rule():
    x = np.zeros(32, F)
    x[0], x[1] = F(1e-35), F(-5e-36)
    qf, sf = quantize_act_int8(x, "floor")          # amax floored to 1e-30: quants 0
    assert np.all(qf == 0) and sf[0] == F(1e-30) / F(127)
    qo, so = quantize_act_int8(x, "unit")            # scale amax/127: full resolution
    assert qo[0] == 127 and qo[1] == -64 and so[0] == F(1e-35) / F(127)
    # a denormal amax whose /127 underflows to 0: v/0 = inf -> INT_MAX -> low byte -1; 0/0 -> 0; -inf -> 0
    y = np.zeros(32, F)
    y[0], y[1] = F(2 ** -149 * 3), F(-2 ** -149)
    qu, su = quantize_act_int8(y, "unit")
    assert su[0] == 0 and qu[0] == -1 and qu[1] == 0 and qu[2] == 0


def test_nan_and_inf_lanes():
    x = np.linspace(-1, 1, 64).astype(F)
    x[3] = np.nan
    x[40] = np.inf
    q, s = quantize_act_int8(x)
    assert q[3] == 0                                 # NaN quantizes to 0; the amax ignores it
    ref_q, ref_s = quantize_act_int8(np.where(np.isnan(x[:32]), F(0), x[:32]))
    assert s[0] == ref_s[0] and np.array_equal(np.delete(q[:32], 3), np.delete(ref_q, 3))
    assert np.isinf(s[1]) and np.all(q[32:] == 0)    # an Inf lane: scale Inf, every quant 0
    hi, lo, sh = quantize_act_two_pass(x)
    assert hi[3] == 0 and lo[3] == 0 and np.all(lo[32:] == 0)
    qa, sa = quantize_act_int8(np.full(32, np.nan, F), "unit")
    assert sa[0] == 1.0 and np.all(qa == 0)


def test_saturation_the_amax_lane_maps_to_127():
    rng = rng_for(21)
    x = outlier_activation(rng, 4096)
    q, s = quantize_act_int8(x)
    blocks = np.abs(x.reshape(-1, 32))
    lanes = np.argmax(blocks, axis=1)
    assert np.all(np.abs(q.reshape(-1, 32)[np.arange(128), lanes]) == 127), "seed 21"
    assert q.min() >= -128 and q.max() <= 127


def test_two_pass_fma_is_correctly_rounded_and_differs_from_separate_rounding():
    rng = rng_for(22)
    x = (rng.standard_normal(32 * 2048) * rng.uniform(0.1, 10.0)).astype(F)
    hi_f, lo_f, s = quantize_act_two_pass(x, fma=True)
    hi_n, lo_n, _ = quantize_act_two_pass(x, fma=False)
    assert np.array_equal(hi_f, hi_n)
    assert np.any(lo_f != lo_n), "seed 22: fma and separate rounding never differed"
    # the fused residual is the float32 nearest to the exact v - qh*sh (checked on a sample, exactly)
    sh = np.repeat(s, 32)
    r64 = x.astype(np.float64) - hi_f * sh.astype(np.float64)
    r = r64.astype(F)
    for i in rng.choice(x.size, 64, replace=False):
        exact = Fraction(float(x[i])) - int(hi_f[i]) * Fraction(float(sh[i]))
        here = abs(Fraction(float(r[i])) - exact)
        for nb in (np.nextafter(r[i], F(np.inf)), np.nextafter(r[i], F(-np.inf))):
            assert here <= abs(Fraction(float(nb)) - exact), f"seed 22 index {i}"


def test_rows_are_independent_and_shapes():
    rng = rng_for(23)
    x = rng.standard_normal((3, 96)).astype(F)
    q, s = quantize_act_int8(x)
    assert q.shape == (3, 96) and s.shape == (3, 3) and q.dtype == np.int8 and s.dtype == np.float32
    for r in range(3):
        qr, sr = quantize_act_int8(x[r])
        assert np.array_equal(qr, q[r]) and np.array_equal(sr, s[r])
    hi, lo, sh = quantize_act_two_pass(x)
    assert hi.shape == lo.shape == (3, 96) and sh.shape == (3, 3)


def test_quantized_activation_container():
    rng = rng_for(24)
    x = rng.standard_normal(64).astype(F)
    a = quantize_activation(x, Mode.TWO_PASS_INT8)
    assert a.mode is Mode.TWO_PASS_INT8
    sh = np.repeat(a.scales.astype(np.float64), 32)
    assert np.array_equal(a.dequantize(), a.hi * sh + a.lo * (sh * 0.0078125))
    assert quantize_activation(x, "dequant") is None
    assert quantize_activation(x, "int8act").mode is Mode.INT8_ACT
    with pytest.raises(ValueError, match="zero_rule"):
        quantize_activation(x, "twopass", zero_rule="unit")
    with pytest.raises(ValueError, match="scales"):
        QuantizedActivation(a.hi, a.scales[:1])
    with pytest.raises(ValueError, match="lo"):
        QuantizedActivation(a.hi, a.scales, a.lo[:32])


@pytest.mark.parametrize("x, match", [
    (np.zeros(33, F), "multiple of 32"),
    (np.zeros((2, 2, 32), F), "1-D or 2-D"),
    (np.zeros(32, np.int16), "integer"),
])
def test_bad_activation_input(x, match):
    with pytest.raises(ValueError, match=match):
        quantize_act_int8(x)


def test_bad_rule_and_fma_arguments():
    with pytest.raises(ValueError, match="zero_rule"):
        quantize_act_int8(np.zeros(32, F), "half")
    with pytest.raises(ValueError, match="fma"):
        quantize_act_two_pass(np.zeros(32, F), fma="yes")
