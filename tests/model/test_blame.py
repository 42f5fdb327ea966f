"""Blame: planted bugs in four kernels of the program are named; a clean step blames nobody."""
from __future__ import annotations

import pytest

from harness.model.blame import ReplayTarget, blame_step
from harness.model.chain import Chain, make_buffers
from harness.model.kernel_lane import first_bad_step, judge_lane
from harness.model.reference_lanes import decode_reference
from harness.model.plants import MODEL_PLANTS, model_plant
from harness.model.program import build_program

from .test_program import TINY_DIMS
from .weights import small_weights


@pytest.fixture(scope="module")
def small():
    return small_weights(3, n_expert=32, n_layer=1)


@pytest.fixture(scope="module")
def tiny():
    # d = 512: the fused QKV GEMV's 512-wide loop (where the scale-index plant sits) runs
    return small_weights(1, **TINY_DIMS, n_layer=1)


def _run(emu, weights, program, lane, prompt, n):
    m = emu.load(program.code)
    ch = Chain(program, m, make_buffers(program, m))
    ch.load_weights(weights)
    res, run, _ = judge_lane(weights, ch, decode_reference(weights, prompt, n, [lane]), "emu")
    return ch, res, run


@pytest.mark.parametrize("name", [p.name for p in MODEL_PLANTS])
def test_planted_bug_is_caught_and_blamed(emu, small, tiny, name):
    plant = model_plant(name)
    weights = tiny if name == "qkv-scale-index" else small
    prompt = list(range(1, 1 + max(3, plant.min_positions)))
    n = 2
    program = plant.program(weights.config, len(prompt) + n - 1)
    ch, res, run = _run(emu, weights, program, plant.lane, prompt, n)
    assert res.verdict == "fail", f"plant {name} not caught"
    step = first_bad_step(res, run)
    assert step is not None and step >= plant.min_positions - 1
    rep = blame_step(weights, program, ch.module, run.fed[:step + 1], replay=ReplayTarget(backend="emu"))
    assert rep.blamed is not None, rep.finding
    assert rep.blamed.kernel == plant.kernel, rep.finding
    assert f"--launch {rep.blamed.index}" in rep.replay and f"--lane {plant.lane}" in rep.replay
    assert all(v.verdict != "fail" for v in rep.launches if v.index < rep.blamed.index)


def test_the_32_key_plant_is_silent_below_33_positions(emu, small):
    """Negative control of the long-context plant: with 32 cached positions it changes nothing."""
    plant = model_plant("attn-32-keys")
    prompt = list(range(1, 32))
    program = plant.program(small.config, 32)
    _, res, run = _run(emu, small, program, plant.lane, prompt, 2)
    assert run.fault is None and res.verdict == "pass"


def test_a_clean_step_blames_no_launch(emu, small):
    program = build_program(small.config, "fast", maxseq=4)
    rep = blame_step(small, program, emu.load(program.code), [1, 2, 3], replay=ReplayTarget())
    assert rep.blamed is None and rep.replay is None
    assert "compose worse" in rep.finding
    assert len(rep.launches) == len(program.launches) + 1
    assert all(v.verdict in ("pass", "tie") for v in rep.launches)
