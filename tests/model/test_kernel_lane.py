"""The kernels-against-their-lane verdict of one step: budget, tie and failure (no backend needed)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from harness.model.kernel_lane import compare_step, kernel_budget, lane_verdict
from reference.decoder import teacher_forced

from .weights import small_weights


@pytest.fixture(scope="module")
def case():
    w = small_weights(3, n_expert=32, n_layer=1)
    rec = teacher_forced(w, "fast", [1, 2])[-1]
    return w, rec, kernel_budget(rec, "fast")


def test_logits_within_budget_pass_and_beyond_fail(case):
    w, rec, bud = case
    z = rec.logits + 0.5 * bud
    assert compare_step("fast", rec, z, rec.token, 1).verdict == "pass"
    z = rec.logits.copy()
    i = int(np.argmin(bud))
    z[i] += 3 * bud[i]
    s = compare_step("fast", rec, z, rec.token, 1)
    assert s.verdict == "fail" and s.worst_token == i and "beyond its budget" in s.reason
    z[i] = np.nan
    assert "non-finite" in compare_step("fast", rec, z, rec.token, 1).reason


def test_other_token_is_a_tie_only_within_the_two_budgets(case):
    w, rec, bud = case
    a = rec.token
    b = int(np.argsort(-rec.logits)[1])
    # a reference whose gap between a and b is 0.9 of the two budgets: both logits may move that far
    logits = rec.logits.copy()
    logits[b] = logits[a] - 0.9 * (bud[a] + bud[b])
    near = dataclasses.replace(rec, logits=logits)
    z = logits.copy()
    z[a] -= 0.9 * bud[a]
    z[b] += 0.9 * bud[b]
    s = compare_step("fast", near, z, b, 1)
    assert s.verdict == "tie" and "within the two tokens' budgets" in s.reason
    # the same token swap where the reference gap is beyond the budgets is a failure
    far = dataclasses.replace(rec, logits=rec.logits.copy())
    far.logits[b] = far.logits[a] - 3 * (bud[a] + bud[b])
    s = compare_step("fast", far, far.logits, b, 1)
    assert s.verdict == "fail" and "exceeds the two tokens' budgets" in s.reason


def test_lane_verdict_takes_the_worst_step(case):
    w, rec, bud = case
    ok = compare_step("fast", rec, rec.logits, rec.token, 0)
    bad = dataclasses.replace(ok, step=1, verdict="fail")
    tie = dataclasses.replace(ok, step=1, verdict="tie")
    assert lane_verdict([ok, ok], None) == ("pass", None)
    assert lane_verdict([ok, tie], None) == ("tie", None)
    assert lane_verdict([ok, bad, tie], None) == ("fail", 1)
    assert lane_verdict([], None)[0] == "unchecked"
