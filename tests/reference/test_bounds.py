"""The error bounds hold on random and adversarial inputs, and are not vacuous on Gaussian ones."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.bounds import (U32, act_error_bound, hoeffding_factor, f32_accumulation_bound, gamma, q8_matmul_mode_bound,
                              warp_row_depth)
from reference.matmul import effective_activation, q8_matmul
from reference.modes import Mode
from reference.quant import Q8Tensor, quantize_act_int8
from tests.reference.helpers import gaussian_q8, outlier_activation, rng_for

INT8_MODES = [Mode.INT8_ACT, Mode.TWO_PASS_INT8]
# A bound is "not vacuous" when its largest value is within this factor of the largest observed error.
VACUITY_FACTOR = 50


def mode_error(x, w, mode, **kw):
    return np.abs(q8_matmul(x, w, mode, **kw) - q8_matmul(x, w, Mode.DEQUANT))


@given(st.integers(0, 2**31 - 1), st.sampled_from([32, 160, 512, 672]), st.sampled_from(INT8_MODES),
       st.booleans())
def test_mode_bound_holds_on_random_inputs(seed, k, mode, fma):
    rng = rng_for(seed)
    w = gaussian_q8(rng, 24, k, std=float(10.0 ** rng.uniform(-3, 1)))
    x = outlier_activation(rng, k, gain=float(rng.uniform(1, 100))) * np.float32(10.0 ** rng.uniform(-20, 20))
    err = mode_error(x, w, mode, fma=fma)
    bound = q8_matmul_mode_bound(x, w, mode, fma=fma)
    assert np.all(err <= bound), f"seed {seed} k {k} mode {mode} fma {fma}"


def adversarial_cases():
    rng = rng_for(51)
    k = 256
    signs = np.where(rng.random((16, k)) < 0.5, 127, -128).astype(np.int8)
    sat = Q8Tensor(signs, np.full((16, k // 32), 0.5, np.float32))
    ties = np.zeros(k, np.float32)
    ties[::32] = 127                               # scale exactly 1: every other lane an exact .5 tie
    ties[1::2] = (np.arange(k // 2) % 200 - 100 + 0.5).astype(np.float32)
    single = np.zeros(k, np.float32)
    single[::32] = 3.0                             # one nonzero per block
    zeros_and_tiny = np.zeros(k, np.float32)
    zeros_and_tiny[40:44] = 1e-38
    denormal = np.full(k, 2 ** -140, np.float32)
    huge = (rng.standard_normal(k) * 1e30).astype(np.float32)
    sign_aligned = np.where(sat.quants[0] > 0, 1.0, -1.0).astype(np.float32) * np.float32(0.49)
    for name, x in [("ties", ties), ("single", single), ("zeros/tiny", zeros_and_tiny), ("denormal", denormal),
                    ("huge", huge), ("aligned", sign_aligned)]:
        yield name, sat, x


@pytest.mark.parametrize("mode", INT8_MODES)
def test_mode_bound_holds_on_adversarial_inputs(mode):
    for name, w, x in adversarial_cases():
        for fma in (True, False):
            err = mode_error(x, w, mode, fma=fma)
            assert np.all(err <= q8_matmul_mode_bound(x, w, mode, fma=fma)), f"{name} {mode} fma={fma} (seed 51)"


@pytest.mark.parametrize("mode", INT8_MODES)
@pytest.mark.parametrize("k", [512, 2048])
def test_mode_bound_is_not_vacuous_on_gaussian_inputs(mode, k):
    rng = rng_for(52 + k)
    w = gaussian_q8(rng, 2048, k)
    x = rng.standard_normal(k).astype(np.float32)
    err = mode_error(x, w, mode)
    bound = q8_matmul_mode_bound(x, w, mode)
    ratio = bound.max() / err.max()
    print(f"{mode.value} K={k}: bound max / observed max = {ratio:.1f}")
    assert np.all(err <= bound) and ratio <= VACUITY_FACTOR, f"seed {52 + k}: ratio {ratio:.1f}"


def test_negative_control_a_wrong_product_violates_the_bound():
    rng = rng_for(53)
    w = gaussian_q8(rng, 64, 256)
    x = outlier_activation(rng, 256)
    q, s = quantize_act_int8(x)
    wrong_x = q * np.repeat(np.roll(s, 1).astype(np.float64), 32)        # activation scale index off by one
    wrong = w.dequantize() @ wrong_x
    assert not np.all(np.abs(wrong - q8_matmul(x, w, Mode.DEQUANT)) <= q8_matmul_mode_bound(x, w, Mode.INT8_ACT))


def test_dequant_bound_is_zero_and_act_bound_shapes():
    x = np.ones((2, 64), np.float32)
    assert np.all(act_error_bound(x, Mode.DEQUANT) == 0)
    assert act_error_bound(x, Mode.INT8_ACT).shape == (2, 2)
    w = gaussian_q8(rng_for(54), 8, 64)
    assert np.all(q8_matmul_mode_bound(x[0], w, Mode.DEQUANT) == 0)
    assert q8_matmul_mode_bound(x, w, Mode.TWO_PASS_INT8).shape == (2, 8)


def emulate_f32_kernel(x: np.ndarray, w: Q8Tensor) -> np.ndarray:
    """An int8-act kernel in float32: per block (float)dot * (s_w * s_a), accumulated sequentially in float32."""
    q, s = quantize_act_int8(x)
    nb = w.cols // 32
    dots = np.einsum("obj,bj->ob", w.quants.reshape(-1, nb, 32).astype(np.int64), q.reshape(nb, 32).astype(np.int64))
    terms = dots.astype(np.float32) * (w.scales * s[None, :])          # float32 products, one rounding each
    return np.cumsum(terms, axis=1, dtype=np.float32)[:, -1]          # sequential float32 sum


def test_f32_accumulation_bound_covers_a_float32_kernel():
    rng = rng_for(55)
    w = gaussian_q8(rng, 512, 2048)
    x = outlier_activation(rng, 2048)
    ref = q8_matmul(x, w, Mode.INT8_ACT)
    got = emulate_f32_kernel(x, w).astype(np.float64)
    bound = f32_accumulation_bound(x, w, Mode.INT8_ACT) + U32 * np.abs(ref)
    assert np.all(np.abs(got - ref) <= bound), "seed 55"
    # negative control: a float32 kernel that skipped the activation quantization (DEQUANT math) is outside
    # the accumulation-only budget of the INT8_ACT reference
    wrong = (w.dequantize().astype(np.float32) @ x).astype(np.float64)
    assert not np.all(np.abs(wrong - ref) <= bound)


def test_gamma_and_depth():
    assert gamma(0) == 0 and gamma(2048) == pytest.approx(2048 * U32 / (1 - 2048 * U32))
    with pytest.raises(ValueError, match="gamma_n"):
        gamma(2 ** 24)
    assert warp_row_depth(2048) == 2048 // 32 + 24
    assert np.array_equal(effective_activation(np.ones(32, np.float32), Mode.DEQUANT), np.ones(32))


def test_hoeffding_factor_is_the_union_bounded_gaussian_tail():
    assert hoeffding_factor(1, 2 * np.exp(-8.0)) == pytest.approx(4.0)      # 2 exp(-t^2/2) = p at t = 4
    assert hoeffding_factor(1000, 1e-6) == pytest.approx(np.sqrt(2 * np.log(2e9)))
    assert hoeffding_factor(10, 1e-6) < hoeffding_factor(1000, 1e-6) < hoeffding_factor(1000, 1e-9)
    for n, p, msg in ((0, 0.1, "n_events"), (True, 0.1, "n_events"), (5, 0.0, "failure"), (5, 1.0, "failure")):
        with pytest.raises(ValueError, match=msg):
            hoeffding_factor(n, p)


def test_squared_blocked_product_is_the_sum_of_squared_weights_times_x():
    from reference.matmul import blocked_product
    w = gaussian_q8(rng_for(91), 40, 96)
    v = np.abs(rng_for(92).standard_normal((2, 96)))
    dense = w.quants.astype(np.float64) * np.repeat(w.scales.astype(np.float64), 32, axis=1)
    assert np.allclose(blocked_product(w, v, squared=True), v @ (dense ** 2).T, rtol=1e-13)
    with pytest.raises(ValueError, match="at most one"):
        blocked_product(w, v, absolute=True, squared=True)
