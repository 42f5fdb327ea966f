"""RMSNorm / LayerNorm / softmax, RoPE and QK-norm, decode attention and its split-K form."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.attention import AttentionPartials, attention_partials, combine_partials, decode_attention
from reference.norm import layer_norm, rms_norm, softmax
from reference.rope import qk_norm_rope, rope_neox
from tests.reference.helpers import rng_for

U64 = 2.0 ** -53


@given(st.integers(0, 2**31 - 1), st.floats(1e-3, 1e3))
def test_rms_norm_is_scale_invariant(seed, c):
    rng = rng_for(seed)
    x = rng.standard_normal((3, 96))
    w = rng.standard_normal(96)
    eps = 1e-6
    a, b = rms_norm(c * x, w, eps), rms_norm(x, w, eps)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    # exact up to the eps term: |1/sqrt(ms + eps/c^2) - 1/sqrt(ms + eps)| * sqrt(ms) <= |eps/c^2 - eps| / (2 ms)
    rel = np.abs(eps / c**2 - eps) / (2 * ms) + 200 * U64
    assert np.all(np.abs(a - b) <= rel * np.abs(b) + 200 * U64 * np.abs(w)), f"seed {seed} c {c}"


def test_rms_norm_values_residual_and_weight():
    rng = rng_for(71)
    x, r, w = rng.standard_normal(64), rng.standard_normal(64), rng.standard_normal(64)
    v = x + r
    want = v / np.sqrt(np.mean(v * v) + 1e-6) * w
    assert np.allclose(rms_norm(x, w, 1e-6, residual=r), want, rtol=1e-14, atol=0)
    y = rms_norm(x)
    assert abs(np.mean(y * y) - 1) < 1e-4          # unit RMS up to the eps term


def test_layer_norm_and_softmax():
    rng = rng_for(72)
    x = rng.standard_normal((4, 128)) * 3 + 5
    y = layer_norm(x)
    assert np.allclose(y.mean(axis=-1), 0, atol=1e-13) and np.allclose(y.var(axis=-1), 1, atol=1e-4)
    p = softmax(x)
    assert np.allclose(p.sum(axis=-1), 1, atol=1e-15 * 128) and np.all(p > 0)
    assert np.allclose(softmax(x + 7.0), p, rtol=1e-13)
    assert np.array_equal(softmax(np.array([0.0, -np.inf])), [1.0, 0.0])


def test_non_finite_rows_give_nan_not_silent_values():
    x = np.array([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0]])
    y = rms_norm(x)
    assert np.all(np.isnan(y[0])) and np.all(np.isfinite(y[1]))
    assert np.all(np.isnan(softmax(np.array([np.inf, 0.0]))[:1]))
    assert np.all(np.isnan(softmax(np.array([-np.inf, -np.inf]))))


@pytest.mark.parametrize("call, match", [
    (lambda: rms_norm(np.ones(4), eps=0), "eps"),
    (lambda: rms_norm(np.ones(4), weight=np.ones(3)), r"weight: expected shape \(4,\)"),
    (lambda: rms_norm(np.ones(4), residual=np.ones(3)), "residual"),
    (lambda: layer_norm(np.ones(4), bias=np.ones(5)), "bias"),
    (lambda: softmax(np.ones((2, 0))), "empty"),
])
def test_norm_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_rope_is_identity_at_position_zero_and_preserves_pair_norms():
    rng = rng_for(73)
    hd = 64
    x = rng.standard_normal(4 * hd)
    assert np.array_equal(rope_neox(x, 0, 1e6, hd), x)
    y = rope_neox(x, 123, 1e6, hd)
    h, g = x.reshape(4, 2, hd // 2), y.reshape(4, 2, hd // 2)
    assert np.allclose(np.hypot(h[:, 0], h[:, 1]), np.hypot(g[:, 0], g[:, 1]), rtol=1e-14)


def test_rope_angles_and_neox_pairing():
    hd, pos, theta = 8, 5, 10000.0
    x = np.zeros(hd)
    x[1] = 1.0                                         # pair (1, 1 + hd/2)
    y = rope_neox(x, pos, theta, hd)
    ang = pos * theta ** (-2 * 1 / hd)
    assert np.allclose([y[1], y[1 + hd // 2]], [np.cos(ang), np.sin(ang)], rtol=1e-15)
    interleaved = np.zeros(hd)
    interleaved[2] = 1.0
    assert rope_neox(interleaved, pos, theta, hd)[3] == 0.0   # NeoX pairs i with i + half, never i + 1


def test_rope_per_row_positions_and_qk_norm():
    rng = rng_for(74)
    x = rng.standard_normal((3, 2 * 16))
    pos = np.array([0, 1, 7])
    y = rope_neox(x, pos, 1e4, 16)
    for r in range(3):
        assert np.array_equal(y[r], rope_neox(x[r], int(pos[r]), 1e4, 16))
    w = rng.standard_normal(16)
    z = qk_norm_rope(x[0], w, 3, 1e4, 16, 1e-6)
    heads = x[0].reshape(2, 16)
    normed = (heads / np.sqrt(np.mean(heads**2, axis=1, keepdims=True) + 1e-6) * w).reshape(-1)
    assert np.allclose(z, rope_neox(normed, 3, 1e4, 16), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("call, match", [
    (lambda: rope_neox(np.ones(6), 0, 1e4, 3), "even"),
    (lambda: rope_neox(np.ones(12), 0, 1e4, 8), "multiple of head_dim"),
    (lambda: rope_neox(np.ones(8), -1, 1e4, 8), "non-negative"),
    (lambda: rope_neox(np.ones(8), 0, 0.0, 8), "theta"),
    (lambda: rope_neox(np.ones((2, 8)), np.array([1, 2, 3]), 1e4, 8), "one position per row"),
])
def test_rope_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def kv(rng, length, n_kv, hd):
    return rng.standard_normal((length, n_kv * hd)), rng.standard_normal((length, n_kv * hd))


def test_length_one_returns_the_grouped_v():
    rng = rng_for(75)
    n_head, n_kv, hd = 8, 2, 16
    k, v = kv(rng, 5, n_kv, hd)
    q = rng.standard_normal(n_head * hd)
    out = decode_attention(q, k, v, n_head, n_kv, hd, length=1).reshape(n_head, hd)
    for h in range(n_head):
        assert np.array_equal(out[h], v[0].reshape(n_kv, hd)[h // (n_head // n_kv)])
    wrong_map = np.array([v[0].reshape(n_kv, hd)[h % n_kv] for h in range(n_head)])   # negative control
    assert not np.array_equal(out, wrong_map)


def test_decode_attention_matches_a_direct_softmax():
    rng = rng_for(76)
    n_head, n_kv, hd, length = 4, 2, 8, 9
    k, v = kv(rng, 12, n_kv, hd)
    q = rng.standard_normal(n_head * hd)
    out = decode_attention(q, k, v, n_head, n_kv, hd, length=length, scale=0.3).reshape(n_head, hd)
    for h in range(n_head):
        kh = k[:length].reshape(length, n_kv, hd)[:, h // 2]
        vh = v[:length].reshape(length, n_kv, hd)[:, h // 2]
        s = kh @ q.reshape(n_head, hd)[h] * 0.3
        p = np.exp(s - s.max())
        assert np.allclose(out[h], p @ vh / p.sum(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("length", [1, 7, 37])
def test_split_k_combine_equals_single_pass_for_every_split_count(length):
    rng = rng_for(77 + length)
    n_head, n_kv, hd = 8, 2, 32
    k, v = kv(rng, length, n_kv, hd)
    q = rng.standard_normal(n_head * hd) * 3
    single = decode_attention(q, k, v, n_head, n_kv, hd)
    # float64 rounding of two different summation orders over `length` terms (each term a few roundings)
    tol = 16 * (length + 8) * U64 * np.abs(v).max()
    for p in range(1, length + 3):
        parts = attention_partials(q, k, v, n_head, n_kv, hd, p)
        assert parts.m.shape == parts.d.shape == (n_head, p) and parts.acc.shape == (n_head, p, hd)
        assert np.all(np.abs(combine_partials(parts) - single) <= tol), f"seed {77 + length} splits {p}"
    empty = attention_partials(q, k, v, n_head, n_kv, hd, length + 2)
    assert np.all(np.isneginf(empty.m[:, length:])) and np.all(empty.d[:, length:] == 0)


def test_split_assignment_is_interleaved_and_negative_control():
    rng = rng_for(78)
    n_head, n_kv, hd, length, p = 2, 1, 4, 6, 3
    k, v = kv(rng, length, n_kv, hd)
    q = rng.standard_normal(n_head * hd)
    parts = attention_partials(q, k, v, n_head, n_kv, hd, p)
    s = (k @ q.reshape(n_head, hd).T).T / 2.0             # scale 1/sqrt(4)
    assert np.array_equal(parts.m[:, 1], np.maximum(s[:, 1], s[:, 4]))    # split 1 holds keys 1 and 4
    broken = AttentionPartials(parts.m, parts.d * 2, parts.acc)           # a wrong denominator is detected
    assert not np.allclose(combine_partials(broken), decode_attention(q, k, v, n_head, n_kv, hd))


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_head=6, n_kv=4), "divisible"),
    (dict(length=9), "length"),
    (dict(scale=-1.0), "scale"),
    (dict(head_dim=7), "q: expected shape"),
])
def test_attention_validation(kwargs, match):
    rng = rng_for(79)
    k, v = kv(rng, 8, 2, 8)
    args = dict(n_head=4, n_kv=2, head_dim=8)
    args.update(kwargs)
    q = rng.standard_normal(32)
    with pytest.raises(ValueError, match=match):
        decode_attention(q, k, v, **args)
