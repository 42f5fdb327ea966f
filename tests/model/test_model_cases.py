"""`--inputs-from FILE.gguf`: every kernel is also judged on the inputs a reference decode of the checkpoint
feeds it (input variant `model`); the case replays from its name with the same file; an op or a shape the
capture cannot feed is unchecked with the reason, never passed; a planted bug fails its model case."""
from __future__ import annotations

import json

import numpy as np
import pytest

from harness.model.checkpoint import open_checkpoint

from emitters.registry import emit
from harness.cases.names import cases_for_contract
from harness.cli import main
from harness.judging.core import judge_case
from harness.judging.registry import FAIL, PASS, UNCHECKED
from harness.cases import model_inputs as case_inputs
from reference.modes import Mode


@pytest.fixture(scope="module")
def tiny_model(tiny_gguf):
    return tiny_gguf


@pytest.fixture(scope="module")
def emu():
    from harness.backends import get_backend
    return get_backend("emu")


@pytest.fixture
def captured(tiny_model):
    ck = open_checkpoint(tiny_model)
    case_inputs.use(case_inputs.capture(ck.weights, tiny_model, ck.sha256(), positions=4))
    yield case_inputs.active()
    case_inputs.use(None)


def test_model_cases_take_the_decodes_values(captured, emu):
    src = emit("moe", Mode.INT8_ACT, "tiny")
    module = emu.load(src.code)
    seen = {}
    for c in src.contracts:
        for case in cases_for_contract(c, "tiny", 4, variants=["model"]):
            res = judge_case(module, case, c)
            seen[(c.name, case.instance)] = res.verdict
            assert res.verdict == PASS, (case.name, res.reason)
    assert {k for k, _ in seen} == {c.name for c in src.contracts}
    # the router case reads the decode's own FFN-norm output and the layer's real router weights
    from harness.judging.core import prepare
    c = src.contract("moe_topk_idx")
    case = cases_for_contract(c, "tiny", 4, variants=["model"])[0]
    ctx = prepare(case, c)
    layer, pos = case_inputs.where(case)
    assert np.array_equal(ctx.args["logits"], captured.buffers[pos][(layer, "moe_logits")].astype(np.float32))


def test_an_op_or_shape_the_capture_cannot_feed_is_unchecked(captured, emu):
    src = emit("elementwise", None, "tiny")
    c = src.contract("k0_elem")
    case = cases_for_contract(c, "tiny", 4, variants=["model"])[0]
    res = judge_case(emu.load(src.code), case, c)
    assert res.verdict == UNCHECKED and "takes no inputs from the checkpoint" in res.reason
    tails = emit("moe", Mode.INT8_ACT, "tails")
    c = tails.contract("moe_topk_idx")
    case = cases_for_contract(c, "tails", 4, variants=["model"])[0]
    res = judge_case(emu.load(tails.code), case, c)
    assert res.verdict == UNCHECKED and "holds 32 values" in res.reason


def test_a_planted_bug_fails_its_model_case(captured, emu):
    from harness.cases.planted import PLANTS
    plant = next(p for p in PLANTS if p.name == "moe-down-lane")
    src = emit(plant.family, plant.mode, plant.shape)
    c = src.contract(plant.kernel)
    case = cases_for_contract(c, plant.shape, 4, variants=["model"])[0]
    assert judge_case(emu.load(plant.apply(src.code)), case, c).verdict == FAIL


def test_report_and_replay_with_inputs_from(tiny_model, tmp_path, capsys):
    out = tmp_path / "rep"
    try:
        rc = main(["report", "--backend", "emu", "--shapes", "tiny", "--modes", "int8act", "--families", "argmax",
                   "--seed", "5", "--inputs-from", str(tiny_model), "--model-positions", "3", "--no-generation",
                   "--out", str(out)])
    finally:
        case_inputs.use(None)
    assert rc == 0
    rows = json.loads((out / "report.json").read_text())["rows"]
    model = [r for r in rows if r["variant"] == "model"]
    assert model and all(r["verdict"] == "pass" for r in model)
    assert "--inputs-from" in model[0]["replay"] and "--model-positions 3" in model[0]["replay"]
    capsys.readouterr()
    try:
        assert main(["replay", model[0]["case"], "--backend", "emu", "--inputs-from", str(tiny_model),
                     "--model-positions", "3"]) == 0
    finally:
        case_inputs.use(None)
    assert "PASS" in capsys.readouterr().out
    assert main(["report", "--backend", "emu", "--inputs-from", str(tmp_path / "none.gguf")]) == 2
