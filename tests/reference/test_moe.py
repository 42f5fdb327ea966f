"""Top-K routing and the MoE FFN in the three modes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reference.elementwise import silu
from reference.modes import Mode
from reference.moe import MoeWeights, moe_ffn, moe_ffn_dense, moe_trace, route_top_k
from reference.quant import quantize_act_int8, quantize_act_two_pass
from reference.shapes import TAILS, TINY
from tests.reference.helpers import gaussian_q8, outlier_activation, rng_for

logit_arrays = arrays(np.float32, st.integers(2, 40), elements=st.floats(-30, 30, width=32))


@given(logit_arrays, st.data())
def test_top_k_weights_sum_to_one_indices_distinct_and_best(logits, data):
    k = data.draw(st.integers(1, logits.size))
    idx, w = route_top_k(logits, k)
    assert idx.dtype == np.int64 and w.dtype == np.float64 and idx.shape == w.shape == (k,)
    assert len(set(idx.tolist())) == k
    assert abs(w.sum() - 1.0) <= 4 * k * 2.0 ** -53
    assert np.all(np.diff(w) <= 0)                                  # ranked best first
    rest = np.delete(logits, idx)
    assert rest.size == 0 or logits[idx].min() >= rest.max()


@given(logit_arrays, st.integers(-1000, 1000))
def test_top_k_invariant_to_adding_a_constant(logits, c):
    logits = np.round(logits * 1024) / 1024                         # on a 2^-10 grid: adding c is exact in f64
    k = max(1, logits.size // 3)
    idx0, w0 = route_top_k(logits, k)
    idx1, w1 = route_top_k(logits.astype(np.float64) + c, k)
    assert np.array_equal(idx0, idx1)
    assert np.allclose(w0, w1, rtol=1e-12, atol=0)


def _routes_ties_to_the_lower_index(router) -> bool:
    logits = np.array([1.0, 3.0, 2.0, 3.0, 3.0, 0.0])
    idx, w = router(logits, 2)
    return np.asarray(idx).tolist() == [1, 3] and np.allclose(w, [0.5, 0.5])


def _router_keeping_the_last_maximum(logits, k):
    idx, w = route_top_k(logits[::-1], k)                           # ties now go to the HIGHER index
    return logits.size - 1 - idx, w


def _router_without_renormalising(logits, k):
    idx, _ = route_top_k(logits, k)
    p = np.exp(logits - logits.max())
    return idx, p[idx] / p.sum()                                    # softmax over all E, not over the k kept


def test_ties_go_to_the_lower_index_and_negative_control():
    assert _routes_ties_to_the_lower_index(route_top_k)
    # negative controls: deliberately wrong routers fail the property the real one passes
    assert not _routes_ties_to_the_lower_index(_router_keeping_the_last_maximum)
    assert not _routes_ties_to_the_lower_index(_router_without_renormalising)


@pytest.mark.parametrize("logits, k, match", [
    (np.zeros(4), 5, "k <= E"),
    (np.zeros(4), 0, "positive integer"),
    (np.array([0.0, np.nan]), 1, "finite"),
    (np.zeros((2, 2)), 1, "1-D"),
])
def test_route_validation(logits, k, match):
    with pytest.raises(ValueError, match=match):
        route_top_k(logits, k)


def make_weights(shape, seed):
    rng = rng_for(seed)
    e, d, dff = shape.n_expert, shape.d, shape.dff
    return MoeWeights(router=gaussian_q8(rng, e, d, 0.05), gate=gaussian_q8(rng, e * dff, d),
                      up=gaussian_q8(rng, e * dff, d), down=gaussian_q8(rng, e * d, dff), top_k=shape.top_k), rng


@pytest.mark.parametrize("shape", [TINY, TAILS], ids=lambda s: s.name)
def test_dense_dequant_path_equals_the_sparse_one(shape):
    weights, rng = make_weights(shape, 61)
    x = outlier_activation(rng, shape.d)
    sparse = moe_ffn(x, weights, Mode.DEQUANT)
    dense = moe_ffn_dense(x, weights)
    trace = moe_trace(x, weights, Mode.DEQUANT)
    tol = 8 * (shape.dff + shape.top_k) * 2.0 ** -53 * (np.abs(trace.weights) @ np.abs(trace.expert_out))
    assert np.all(np.abs(sparse - dense) <= tol), f"seed 61 {shape.name}"
    # negative control: combining with the un-renormalized softmax weights is detected
    logits = trace.logits
    p = np.exp(logits - logits.max())
    p /= p.sum()
    wrong = p[trace.indices] @ trace.expert_out
    assert not np.all(np.abs(wrong - dense) <= tol)


@pytest.mark.parametrize("mode", list(Mode))
def test_trace_is_consistent_and_quantizes_x_and_h_once(mode):
    weights, rng = make_weights(TINY, 62)
    x = outlier_activation(rng, TINY.d)
    t = moe_trace(x, weights, mode)
    k, dff = TINY.top_k, TINY.dff
    assert t.gate.shape == t.up.shape == t.h.shape == (k, dff) and t.expert_out.shape == (k, TINY.d)
    assert np.array_equal(t.h, (silu(t.gate) * t.up).astype(np.float32).astype(np.float64))
    assert np.array_equal(t.out, t.weights @ t.expert_out)
    assert np.array_equal(t.indices, moe_trace(x, weights, Mode.DEQUANT).indices)  # router is DEQUANT in every mode
    if mode is Mode.DEQUANT:
        assert t.x_act is None and t.h_act is None
    elif mode is Mode.INT8_ACT:
        assert np.array_equal(t.x_act.hi, quantize_act_int8(x)[0])
        q, s = quantize_act_int8(t.h.reshape(-1).astype(np.float32))
        assert np.array_equal(t.h_act.hi, q) and np.array_equal(t.h_act.scales, s)
    else:
        hi, lo, s = quantize_act_two_pass(t.h.reshape(-1).astype(np.float32))
        assert np.array_equal(t.h_act.lo, lo) and np.array_equal(t.h_act.scales, s)


def test_int8_modes_are_close_to_dequant_and_two_pass_is_closer():
    weights, rng = make_weights(TAILS, 63)
    x = outlier_activation(rng, TAILS.d)
    ref = moe_ffn(x, weights, Mode.DEQUANT)
    e1 = np.abs(moe_ffn(x, weights, Mode.INT8_ACT) - ref).max()
    e2 = np.abs(moe_ffn(x, weights, Mode.TWO_PASS_INT8) - ref).max()
    scale = np.abs(ref).max()
    assert 0 < e2 < e1 < 0.1 * scale, f"seed 63: {e1} {e2} {scale}"


def test_moe_weights_validation():
    weights, _ = make_weights(TINY, 64)
    with pytest.raises(ValueError, match="gate/up"):
        MoeWeights(weights.router, weights.down, weights.up, weights.down, 2)
    with pytest.raises(ValueError, match="down"):
        MoeWeights(weights.router, weights.gate, weights.up, weights.down.take_rows(np.arange(10)), 2)
    with pytest.raises(ValueError, match="top_k"):
        MoeWeights(weights.router, weights.gate, weights.up, weights.down, TINY.n_expert + 1)
    with pytest.raises(ValueError, match=r"x: expected shape \(512,\)"):
        moe_ffn(np.zeros(256, np.float32), weights, Mode.DEQUANT)
