"""q8_matmul in the three modes against integer-exact oracles, streaming memory, validation."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from reference.bounds import U64, gamma
from reference.matmul import q8_matmul
from reference.modes import Mode
from reference.quant import Q8Tensor, quantize_act_int8, quantize_act_two_pass, quantize_activation
from tests.reference.helpers import gaussian_q8, outlier_activation, rng_for


def f64_tolerance(w: Q8Tensor, terms_abs: np.ndarray) -> np.ndarray:
    """float64 rounding of a K-term sum: gamma_(K+3) in float64 times sum |terms|."""
    return gamma(w.cols + 3, U64) * terms_abs


def abs_terms(w: Q8Tensor, x_eff: np.ndarray) -> np.ndarray:
    return np.abs(w.dequantize()) @ np.abs(x_eff)


def int_block_dots(w: Q8Tensor, q: np.ndarray) -> np.ndarray:
    """Exact int64 per-block dots (N, nb) of the weight quants with int8 activation quants."""
    nb = w.cols // 32
    return np.einsum("obj,bj->ob", w.quants.reshape(w.rows, nb, 32).astype(np.int64),
                     q.reshape(nb, 32).astype(np.int64))


@pytest.mark.parametrize("k", [512, 672])
def test_dequant_equals_the_dequantized_weight_times_x(k):
    rng = rng_for(31 + k)
    w = gaussian_q8(rng, 200, k)
    x = outlier_activation(rng, k)
    got = q8_matmul(x, w, Mode.DEQUANT)
    want = w.dequantize() @ x.astype(np.float64)
    assert np.all(np.abs(got - want) <= f64_tolerance(w, abs_terms(w, x))), f"seed {31 + k}"


def test_int8act_equals_int32_block_dots_times_both_scales():
    rng = rng_for(32)
    w = gaussian_q8(rng, 150, 672)
    x = outlier_activation(rng, 672)
    q, s = quantize_act_int8(x)
    dots = int_block_dots(w, q)
    assert np.abs(dots).max() < 2 ** 31                  # what __dp4a's int32 accumulator holds
    want = (w.scales.astype(np.float64) * s.astype(np.float64) * dots).sum(axis=1)
    got = q8_matmul(x, w, Mode.INT8_ACT)
    x_eff = q * np.repeat(s.astype(np.float64), 32)
    assert np.all(np.abs(got - want) <= f64_tolerance(w, abs_terms(w, x_eff))), "seed 32"


def test_twopass_equals_hi_and_lo_dots():
    rng = rng_for(33)
    w = gaussian_q8(rng, 150, 512)
    x = outlier_activation(rng, 512)
    hi, lo, s = quantize_act_two_pass(x)
    sh = s.astype(np.float64)
    want = (w.scales.astype(np.float64) * (sh * int_block_dots(w, hi) + sh / 128 * int_block_dots(w, lo))).sum(axis=1)
    got = q8_matmul(x, w, Mode.TWO_PASS_INT8)
    x_eff = hi * np.repeat(sh, 32) + lo * np.repeat(sh / 128, 32)
    assert np.all(np.abs(got - want) <= f64_tolerance(w, abs_terms(w, x_eff))), "seed 33"


def test_negative_control_scale_index_off_by_one_is_detected():
    rng = rng_for(34)
    w = gaussian_q8(rng, 64, 256)
    x = outlier_activation(rng, 256)
    q, s = quantize_act_int8(x)
    wrong = (w.scales.astype(np.float64) * np.roll(s, 1).astype(np.float64) * int_block_dots(w, q)).sum(axis=1)
    got = q8_matmul(x, w, Mode.INT8_ACT)
    x_eff = q * np.repeat(s.astype(np.float64), 32)
    assert not np.all(np.abs(got - wrong) <= f64_tolerance(w, abs_terms(w, x_eff)))


@pytest.mark.parametrize("mode", list(Mode))
def test_batched_rows_equal_single_rows_and_shapes(mode):
    rng = rng_for(35)
    w = gaussian_q8(rng, 40, 96)
    x = rng.standard_normal((3, 96)).astype(np.float32)
    y = q8_matmul(x, w, mode)
    assert y.shape == (3, 40) and y.dtype == np.float64
    for r in range(3):
        assert np.array_equal(q8_matmul(x[r], w, mode), y[r])
    assert q8_matmul(x[0], w, mode).shape == (40,)


@pytest.mark.parametrize("mode", [Mode.INT8_ACT, Mode.TWO_PASS_INT8])
def test_a_kernels_own_quantized_activation_can_be_passed(mode):
    rng = rng_for(36)
    w = gaussian_q8(rng, 30, 128)
    x = outlier_activation(rng, 128)
    act = quantize_activation(x, mode)
    assert np.array_equal(q8_matmul(None, w, mode, act=act), q8_matmul(x, w, mode))
    other = quantize_activation(x, Mode.INT8_ACT if mode is Mode.TWO_PASS_INT8 else Mode.TWO_PASS_INT8)
    with pytest.raises(ValueError, match="act: holds"):
        q8_matmul(None, w, mode, act=other)
    with pytest.raises(ValueError, match="either x or act"):
        q8_matmul(x, w, mode, act=act)
    with pytest.raises(ValueError, match="DEQUANT"):
        q8_matmul(None, w, Mode.DEQUANT, act=act)


def test_weight_scale_rejects_unknown_precision():
    rng = rng_for(37)
    w = gaussian_q8(rng, 20, 64)
    x = rng.standard_normal(64).astype(np.float32)
    with pytest.raises(ValueError, match="weight_scale"):
        q8_matmul(x, w, Mode.DEQUANT, weight_scale="bf16")


def test_activation_is_read_as_float32():
    rng = rng_for(38)
    w = gaussian_q8(rng, 10, 64)
    x64 = rng.standard_normal(64)
    assert np.array_equal(q8_matmul(x64, w, "dequant"), q8_matmul(x64.astype(np.float32), w, "dequant"))


@pytest.mark.parametrize("args, match", [
    ((np.zeros(63, np.float32),), "does not match the weight's K"),
    ((np.zeros((2, 2, 64), np.float32),), "1-D or 2-D"),
    ((None,), "required unless act"),
])
def test_bad_inputs(args, match):
    w = gaussian_q8(rng_for(39), 4, 64)
    with pytest.raises(ValueError, match=match):
        q8_matmul(*args, w, Mode.DEQUANT)


def test_bad_weight_and_mode():
    with pytest.raises(ValueError, match="Q8Tensor"):
        q8_matmul(np.zeros(32, np.float32), np.zeros((4, 32)), Mode.DEQUANT)
    w = gaussian_q8(rng_for(40), 4, 32)
    with pytest.raises(ValueError, match="unknown mode"):
        q8_matmul(np.zeros(32, np.float32), w, "fp8")


def test_streams_the_weight_peak_extra_memory_is_small():
    """A 16384 x 2048 weight (dequantized: 256 MiB of float64) must not be dequantized whole."""
    rng = rng_for(41)
    rows, k = 16384, 2048
    w = Q8Tensor(rng.integers(-127, 128, (rows, k), dtype=np.int8), np.full((rows, k // 32), 2.0 ** -10, np.float32))
    x = rng.standard_normal(k).astype(np.float32)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        for mode in Mode:
            q8_matmul(x, w, mode)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    print(f"q8_matmul peak extra memory on a {rows}x{k} weight: {peak / 2**20:.1f} MiB")
    assert peak <= 32 * 2 ** 20, f"peak extra {peak / 2**20:.1f} MiB: the weight is not streamed"


@pytest.mark.parametrize("mode", [Mode.INT8_ACT, Mode.TWO_PASS_INT8])
@pytest.mark.parametrize("k", [160, 672, 2048])
def test_quantized_product_equals_the_dequantized_activation_product(mode, k):
    """The float32 integer-dot path of q8_matmul gives blocked_product's float64 value bit for bit, on block
    scales spread over 2^-20 .. 2^5 and activations spread over many orders of magnitude."""
    from reference.matmul import blocked_product, blocked_product_quantized
    from reference.quant import Q8Tensor, quantize_activation
    rng = rng_for(36)
    n = 70
    w = Q8Tensor(rng.integers(-128, 128, (n, k), dtype=np.int8),
                 (rng.uniform(0.5, 1.5, (n, k // 32)) * 2.0 ** rng.integers(-20, 5, (n, k // 32)))
                 .astype(np.float16).astype(np.float32))
    x = (rng.standard_normal((2, k)) * np.exp(3 * rng.standard_normal((2, k)))).astype(np.float32)
    act = quantize_activation(x, mode)
    got = blocked_product_quantized(w, act)
    for r in range(2):
        assert np.array_equal(got[r], blocked_product(w, act.dequantize()[r:r + 1])[0])
