"""harness.judging.metrics: general error metrics for arrays of any shape, float32 or float64."""
from __future__ import annotations

import json

import numpy as np
import pytest

from harness.judging import metrics


def test_basic_metrics_on_a_known_pair():
    ref = np.array([[1.0, -2.0], [4.0, 0.0]])
    act = np.array([[1.5, -2.0], [4.0, 0.0]], dtype=np.float32)
    assert metrics.max_abs(act, ref) == 0.5
    assert metrics.max_rel(act, ref) == 0.5
    assert metrics.nmse(act, ref) == pytest.approx(0.25 / 21)
    assert metrics.worst_index(act, ref) == (0, 0)
    assert metrics.cosine(ref, ref) == pytest.approx(1.0)
    assert metrics.cosine(ref, -ref) == pytest.approx(-1.0)


def test_relative_error_near_zero_and_floor():
    ref, act = np.array([0.0, 1.0]), np.array([1e-9, 1.0])
    assert metrics.max_rel(act, ref) == float("inf")
    assert metrics.max_rel(act, ref, floor=1e-3) == pytest.approx(1e-6)
    assert metrics.max_rel(ref, ref) == 0.0
    with pytest.raises(ValueError, match="floor"):
        metrics.max_rel(act, ref, floor=-1)


def test_ulp_distance_float32():
    one = np.float32(1.0)
    nxt = np.nextafter(one, np.float32(2))
    assert metrics.max_ulp_f32(np.array([nxt]), np.array([one])) == 1
    assert metrics.max_ulp_f32(np.array([np.float32(-0.0)]), np.array([np.float32(0.0)])) == 0
    tiny = np.float32(1e-45)
    assert metrics.max_ulp_f32(np.array([tiny]), np.array([-tiny])) == 2      # across zero
    assert metrics.max_ulp_f32(np.array([np.nan]), np.array([1.0])) == float("inf")
    assert metrics.max_ulp_f32(np.array([np.nan]), np.array([np.nan])) == 0
    assert metrics.ulp_distance_f32(np.array([np.nan, 1.0]), np.array([1.0, 1.0])).tolist() == [-1, 0]


def test_zero_vectors_and_nan():
    z = np.zeros(3)
    assert metrics.cosine(z, z) == 1.0 and metrics.cosine(z, np.ones(3)) == 0.0
    assert metrics.nmse(z, z) == 0.0 and metrics.nmse(np.ones(3), z) == float("inf")
    a = np.array([1.0, np.nan, 3.0])
    assert np.isnan(metrics.max_abs(a, np.ones(3)))
    assert metrics.worst_index(a, np.ones(3)) == (1,)


def test_histogram():
    ref = np.zeros(6)
    act = np.array([0.0, 1e-11, 1e-5, 0.5, np.inf, np.nan])
    h = metrics.error_histogram(act, ref)
    assert h["nan"] == 1 and sum(h["counts"]) == 5 and h["counts"][0] == 1 and h["counts"][-1] == 1
    with pytest.raises(ValueError, match="edges"):
        metrics.error_histogram(act, ref, edges=[1.0, 0.5])


def test_compare_and_validation():
    rng = np.random.default_rng(91)
    ref = rng.standard_normal((4, 5, 6))
    act = (ref + 1e-3 * rng.standard_normal(ref.shape)).astype(np.float32)
    c = metrics.compare(act, ref)
    assert c.size == 120 and c.worst_index == metrics.worst_index(act, ref) and c.nonfinite_actual == 0
    json.dumps(c.as_dict())
    with pytest.raises(ValueError, match="shape"):
        metrics.max_abs(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="dtype"):
        metrics.max_abs(np.array(["a"]), np.array(["b"]))
    with pytest.raises(ValueError, match="empty"):
        metrics.max_abs(np.ones(0), np.ones(0))


# A mutant or a broken kernel writes anything: no metric may print a numpy RuntimeWarning for it (they leaked
# into `qconform mutate`'s console), and the values still say what happened.
_WILD = [0.0, -0.0, 1.0, -2.5, 1e-45, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan]


def test_no_metric_warns_on_a_broken_kernels_output():
    import itertools
    import warnings
    rng = np.random.default_rng(18)
    cases = [(np.array(p, dtype=np.float32), np.array(q, dtype=np.float32))
             for p, q in itertools.product(itertools.combinations_with_replacement(_WILD, 2), repeat=2)]
    cases += [(rng.choice(_WILD, 16).astype(np.float32), rng.normal(size=16).astype(np.float32)) for _ in range(50)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for a, r in cases:
            metrics.compare(a, r)
            metrics.error_histogram(a, r)
            metrics.usage_histogram(metrics.abs_error(a, r), np.abs(r.astype(np.float64)))
    # the values still say what happened
    assert np.isnan(metrics.cosine(np.array([np.inf, 1.0]), np.array([1.0, 1.0])))
    assert metrics.cosine(np.array([3.4e38, 3.4e38], np.float32), np.array([1.0, 1.0])) == pytest.approx(1.0)


def test_negative_control_the_warning_filter_catches_numpy_warnings():
    import warnings
    with warnings.catch_warnings(), pytest.raises(RuntimeWarning):
        warnings.simplefilter("error")
        np.float64(np.inf) / np.float64(np.inf)
