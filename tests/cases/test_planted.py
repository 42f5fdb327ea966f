"""Negative controls: every planted bug must make its case fail. The suite fails if one passes."""
from __future__ import annotations

import pytest

from emitters.registry import available_families
from harness.judging.core import FAIL
from harness.cases.planted import PLANTS, PlantError, Plant, plants_for
from harness.judging.runner import run_plant


def test_every_family_has_a_plant():
    have = set(available_families())
    planted = {p.family for p in PLANTS}
    assert have <= planted, f"families without a planted bug: {sorted(have - planted)}"


@pytest.mark.parametrize("plant", plants_for(), ids=lambda p: p.name)
def test_planted_bug_is_caught(emu, plant):
    results = run_plant(emu, plant, seed=99)
    assert results, f"plant {plant.name}: no case ran"
    caught = [r for r in results if r.verdict == FAIL]
    assert caught, (f"planted bug PASSED its case(s): {plant.name} in {plant.kernel} ({plant.bug}); verdicts "
                    f"{[(r.case.name, r.verdict) for r in results]}")


def test_a_plant_whose_pattern_vanished_is_an_error():
    from reference.modes import Mode
    bogus = Plant("bogus", "matmul", Mode.INT8_ACT, "gk_gemv", "tiny", "nothing", r"no_such_text\(", "")
    from emitters.registry import emit
    with pytest.raises(PlantError, match="occurs 0 time"):
        bogus.apply(emit("matmul", Mode.INT8_ACT, "tiny").code)


def test_a_plant_that_does_not_build_is_a_failed_case(emu):
    from reference.modes import Mode
    broken = Plant("no-build", "matmul", Mode.INT8_ACT, "gk_gemv", "tiny", "a syntax error",
                   r"float acc = 0\.f;", "float acc = 0.f this_is_not_cuda;")
    results = run_plant(emu, broken, seed=99)
    assert results and all(r.verdict == FAIL for r in results)
    assert all("did not build" in r.reason for r in results), [r.reason for r in results]
