"""The lanes' logit bound is tight and holds (docs/NUMERICS.md section 16): on the quick start's run (tiny
synthetic model, seed 0, prompt 1,2,3, 16 tokens) the bound of the int8 lanes is at most 3x the observed
teacher-forced error at the median step, and never below it there, on another tiny seed and on tails."""
import pytest

from harness.model.generation import run_generation
from harness.model.synthetic import synthetic_weights

INT8_LANES = ("fast", "flash", "twopass")


@pytest.mark.parametrize("preset, seed, prompt", [("tiny", 0, [1, 2, 3]), ("tiny", 3, [10, 100, 5, 42]),
                                                  ("tails", 0, [1, 2, 3])])
def test_bound_is_within_3x_of_the_error_at_the_median_step_and_never_below_it(preset, seed, prompt):
    run = run_generation(synthetic_weights(preset, seed=seed), prompt=prompt, n_tokens=16, router_check=False,
                         lanes=("exact", "precise", *INT8_LANES))
    for s in run.lanes:
        t = s.teacher
        assert t.within_budget and t.bound_over_error_min >= 1.0, (preset, seed, s.name, t.worst)
        if s.name in INT8_LANES:
            assert t.bound_over_error_median <= 3.0, (preset, seed, s.name, t.bound_over_error_median)
            assert t.median_step_error <= t.median_step_bound, t
