"""Negative controls of the lanes' logit bound: a reference lane with one planted numerical defect, judged with
the correct lane's derived bound, fails on the tiny and tails synthetic models, while every correct lane
passes or ties (harness.model.plants.LANE_PLANTS, docs/NUMERICS.md section 16)."""
import pytest

from harness.judging.registry import FAIL, PASS, TIE
from harness.model.generation import run_generation
from harness.model.plants import LANE_PLANTS, planted_streams
from harness.model.synthetic import synthetic_weights

PROMPT = [1, 2, 3]
N_TOKENS = 8


@pytest.fixture(scope="module", params=["tiny", "tails"])
def planted_run(request):
    weights = synthetic_weights(request.param, seed=0)
    lanes = sorted({p.lane for p in LANE_PLANTS})
    return request.param, run_generation(weights, prompt=PROMPT, n_tokens=N_TOKENS, lanes=("exact", *lanes),
                                         router_check=False, external=planted_streams(weights, LANE_PLANTS, N_TOKENS),
                                         external_lanes=tuple(lanes))


def test_every_planted_lane_fails_and_every_correct_lane_passes_or_ties(planted_run):
    preset, run = planted_run
    correct = {s.name: s.verdict for s in run.lanes}
    assert set(correct.values()) <= {PASS, TIE}, (preset, correct)
    planted = {s.name: (s.verdict, s.teacher.budget_usage) for s in run.external}
    assert set(planted) == {f"{p.lane}+{p.name}" for p in LANE_PLANTS}
    missed = {name: v for name, v in planted.items() if v[0] != FAIL}
    assert not missed, (preset, missed)
    assert run.failed
    for s in run.external:                     # judged with the correct lane's bound, not their own
        assert s.bound_lane == s.name.split("+")[0]
