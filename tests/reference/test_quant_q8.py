"""Q8_0 weights: bit-identical to gguf-py on any input, round trips, adversarial blocks, validation."""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reference.quant import Q8Tensor, _round_half_away_f32, dequantize_q8_0, quantize_q8_0
from tests.reference.helpers import rng_for

Q8 = GGMLQuantizationType.Q8_0


def gguf_bytes(w: np.ndarray) -> np.ndarray:
    return gguf_quantize(np.asarray(w, dtype=np.float32), Q8)


def assert_same_bytes(w: np.ndarray, note: str = "") -> None:
    ours = quantize_q8_0(w).to_gguf_blocks()
    theirs = gguf_bytes(w)
    if not np.array_equal(ours, theirs):
        bad = np.argwhere(ours != theirs)[0]
        raise AssertionError(f"{note}: Q8_0 bytes differ from gguf-py at byte {tuple(bad)}: {ours[tuple(bad)]} vs "
                             f"{theirs[tuple(bad)]}; block input {np.asarray(w)[bad[0], (bad[1] // 34) * 32:][:32]!r}")


finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-8e6, max_value=8e6)


@given(arrays(np.float32, st.tuples(st.integers(1, 3), st.sampled_from([32, 64, 96])), elements=finite_f32))
def test_bytes_equal_gguf_on_arbitrary_floats(w):
    assert_same_bytes(w, "hypothesis")


@given(st.integers(0, 2**31 - 1))
def test_bytes_equal_gguf_on_gaussian_rows(seed):
    rng = rng_for(seed)
    w = (rng.standard_normal((4, 256)) * 10.0 ** rng.uniform(-6, 3)).astype(np.float32)
    assert_same_bytes(w, f"seed {seed}")


def test_exact_half_ties_round_away_from_zero_like_ggml():
    # amax = 127 makes d = 1 and 1/d = 1, so x*id = x: every k + 0.5 for |x| < 127 is an exact tie.
    halves = (np.arange(-253, 254, 2) / 2).astype(np.float32)
    w = np.zeros((halves.size, 32), np.float32)
    w[:, 0] = 127.0
    w[:, 1] = halves
    t = quantize_q8_0(w)
    assert np.array_equal(t.quants[:, 1], (np.trunc(halves) + np.sign(halves)).astype(np.int8))
    assert_same_bytes(w, "ties")


def test_values_one_ulp_around_every_half_round_like_gguf():
    base = (np.arange(0, 255) / 2 + 0.5).astype(np.float32)
    near = np.concatenate([np.nextafter(base, np.float32(0)), base, np.nextafter(base, np.float32(200))])
    w = np.zeros((near.size, 32), np.float32)
    w[:, 0] = 127.0
    w[:, 1] = np.minimum(near, np.float32(127))
    w[:, 2] = -w[:, 1]
    assert_same_bytes(w, "one ulp around halves")


def test_round_half_away_helper_matches_gguf_rounding_on_all_floats_near_integers_and_halves():
    # every float32 within 64 ulps of each k/2, k in [0, 256]: the helper's float32 trick against ggml's rounding
    centers = (np.arange(0, 257) / 2).astype(np.float32)
    steps = np.arange(-64, 65)
    bits = centers.view(np.int32)[:, None] + steps[None, :]
    v = bits[bits >= 0].astype(np.int32).view(np.float32)
    v = np.concatenate([v, -v])
    expected = np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)   # exact in float64
    got = np.trunc(_round_half_away_f32(v))
    assert np.array_equal(got, expected)


def test_negative_control_half_even_rounding_breaks_gguf_identity():
    halves = np.float32([0.5, 1.5, 2.5, -2.5, 126.5])
    w = np.zeros((halves.size, 32), np.float32)
    w[:, 0] = 127.0
    w[:, 1] = halves
    wrong = np.rint(halves).astype(np.int8)                               # round-half-even: a wrong variant
    gguf_q = gguf_bytes(w).reshape(-1, 34)[:, 3].view(np.int8)
    assert not np.array_equal(wrong, gguf_q)
    assert np.array_equal(quantize_q8_0(w).quants[:, 1], gguf_q)


def test_all_zero_single_nonzero_and_saturated_blocks():
    w = np.zeros((4, 64), np.float32)
    w[1, 5] = -3.25                      # single nonzero: it maps to -127 exactly
    w[2, :32] = 1.0                      # all equal: all 127
    w[3, 32:] = np.float32(-2.0)
    t = quantize_q8_0(w)
    assert np.all(t.quants[0] == 0) and np.all(t.scales[0] == 0)
    assert t.quants[1, 5] == -127 and np.count_nonzero(t.quants[1]) == 1
    assert np.all(t.quants[2, :32] == 127) and np.all(t.quants[3, 32:] == -127)
    assert t.quants.min() >= -127          # ggml's Q8_0 never emits -128
    assert_same_bytes(w, "zero/single/saturated")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # gguf-py's own inf/NaN casts in these blocks
def test_denormal_and_tiny_blocks_follow_gguf():
    tiny = np.float32([1e-45, 1e-40, 1e-38, 3e-37, 1e-36, 1e-30, 6e-5])
    w = np.zeros((tiny.size, 32), np.float32)
    w[:, 0] = tiny
    w[:, 1] = -tiny / 2
    w[:, 2] = tiny / 3
    assert_same_bytes(w, "denormal/tiny")
    t = quantize_q8_0(w)
    assert np.all(t.quants[:4] == 0)     # 1/d overflows: defined as zero quants (gguf-py on x86-64 agrees)
    assert np.all(t.scales[:5] == 0)     # d underflows float16


def test_huge_magnitudes_near_the_float16_scale_limit():
    w = np.zeros((2, 32), np.float32)
    w[0, :3] = [8.3e6, -4e6, 1.0]
    w[1, :2] = [-6e6, 3e6]
    assert_same_bytes(w, "huge")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_inf_are_refused_with_the_position(bad):
    w = np.zeros((2, 32), np.float32)
    w[1, 7] = bad
    with pytest.raises(ValueError, match=r"w\[1, 7\]"):
        quantize_q8_0(w)


def test_float64_beyond_float32_range_is_refused_not_wrapped():
    w = np.zeros((1, 32))
    w[0, 3] = 1e39
    with pytest.raises(ValueError, match=r"w\[0, 3\] = inf"):
        quantize_q8_0(w)


def test_scale_overflowing_float16_is_refused():
    w = np.zeros((1, 64), np.float32)
    w[0, 40] = 9e6
    with pytest.raises(ValueError, match=r"block \(0, 1\).*float16"):
        quantize_q8_0(w)


@pytest.mark.parametrize("w, match", [
    (np.zeros((2, 33), np.float32), "multiple of 32"),
    (np.zeros(64, np.float32), "2-D"),
    (np.zeros((2, 32), np.int32), "integer"),
    (np.zeros((0, 32), np.float32), "at least one row"),
])
def test_bad_weight_input(w, match):
    with pytest.raises(ValueError, match=match):
        quantize_q8_0(w)


def test_dequantize_equals_gguf_and_is_exact():
    rng = rng_for(11)
    w = (rng.standard_normal((64, 320)) * 0.05).astype(np.float32)
    t = quantize_q8_0(w)
    ref = gguf_dequantize(gguf_bytes(w), Q8)
    assert np.array_equal(dequantize_q8_0(t), ref.astype(np.float64)), "seed 11"
    assert np.array_equal(dequantize_q8_0(t, dtype=np.float32), ref), "seed 11"
    explicit = t.quants.astype(np.float64) * np.repeat(t.scales.astype(np.float64), 32, axis=1)
    assert np.array_equal(dequantize_q8_0(t), explicit)
    # the round trip error is at most half a step per element (plus the float16 rounding of the scale)
    step = np.repeat(t.scales.astype(np.float64), 32, axis=1)
    assert np.all(np.abs(dequantize_q8_0(t) - w) <= step * 0.5 + np.abs(w) * 2.0 ** -10)


def test_negative_control_scale_index_off_by_one_changes_dequantization():
    rng = rng_for(12)
    t = quantize_q8_0(rng.standard_normal((3, 128)).astype(np.float32))
    shifted = np.roll(t.scales, 1, axis=1)
    wrong = t.quants.astype(np.float64) * np.repeat(shifted.astype(np.float64), 32, axis=1)
    assert not np.array_equal(wrong, dequantize_q8_0(t))


def test_gguf_block_round_trip_and_layout():
    rng = rng_for(13)
    w = rng.standard_normal((5, 96)).astype(np.float32)
    raw = gguf_bytes(w)
    t = Q8Tensor.from_gguf_blocks(raw, w.shape)
    assert np.array_equal(t.to_gguf_blocks(), raw)
    assert t.to_gguf_blocks().shape == (5, 3 * 34)
    assert np.array_equal(Q8Tensor.from_gguf_blocks(raw.reshape(-1), (5, 96)).quants, t.quants)


@pytest.mark.parametrize("raw, shape, match", [
    (np.zeros(34 * 3, np.uint8), (1, 64), "needs 68 bytes"),
    (np.zeros(68, np.int8), (1, 64), "uint8"),
    (np.zeros(68, np.uint8), (1, 60), "multiple of 32"),
    (np.zeros(68, np.uint8), (64,), r"\(rows, cols\)"),
])
def test_from_gguf_blocks_validation(raw, shape, match):
    with pytest.raises(ValueError, match=match):
        Q8Tensor.from_gguf_blocks(raw, shape)


def test_q8tensor_rejects_non_float16_scales_and_bad_shapes():
    q = np.zeros((1, 32), np.int8)
    with pytest.raises(ValueError, match="float16"):
        Q8Tensor(q, np.float32([[0.1]]))
    with pytest.raises(ValueError, match="scales"):
        Q8Tensor(q, np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="quants"):
        Q8Tensor(q.astype(np.int16), np.zeros((1, 1), np.float32))
    with pytest.raises(ValueError, match="finite"):
        Q8Tensor(q, np.float32([[np.inf]]))


def test_take_rows_and_validation():
    t = quantize_q8_0(rng_for(14).standard_normal((6, 32)).astype(np.float32))
    sub = t.take_rows(np.array([4, 1]))
    assert np.array_equal(sub.quants, t.quants[[4, 1]]) and np.array_equal(sub.scales, t.scales[[4, 1]])
    with pytest.raises(ValueError, match=r"\[0, 6\)"):
        t.take_rows(np.array([6]))
