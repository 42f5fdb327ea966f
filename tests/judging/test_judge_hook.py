"""The one judging hook (harness.judging.core.judge_outputs) the case runner and the launch-by-launch blame
share: an op's `extras` read from a launch's own arguments what its builder noted, and a judge that cannot
judge leaves the launch unchecked, never failed or passed."""
from __future__ import annotations

import numpy as np
import pytest

from emitters.registry import emit
from harness.cases.names import cases_for_contract
from harness.judging.core import FAIL, OPS, PASS, UNCHECKED, JudgeError, judge_case, judge_outputs, launch, prepare
from reference.modes import Mode

from .test_judge_logic import FakeModule, _gemv_case, gemv

# (family, mode, kernel) of every op with extras; instances/variants left to the case generator
WITH_EXTRAS = [
    ("matmul", Mode.INT8_ACT, "gk_gemv"),          # q8_gemv, int8 activation
    ("matmul", Mode.TWO_PASS_INT8, "k0_q8dp4a"),  # q8_gemv, two-pass activation
    ("matmul", Mode.DEQUANT, "gk_gemv_kv_deq"),   # q8_gemv writing a KV-cache row at d_pos
    ("matmul", Mode.INT8_ACT, "gk_gemv_qkv"),
    ("matmul", Mode.INT8_ACT, "gk_marlin_q8"),    # q8_gemm_mma
    ("moe", Mode.INT8_ACT, "moe_topk_idx"),
    ("moe", Mode.DEQUANT, "moe_topk"),            # moe_topk_mask
    ("moe", Mode.INT8_ACT, "moe_gate_up_silu"),
    ("moe", Mode.TWO_PASS_INT8, "moe_down_combine"),
    ("embed", None, "gk_embed"),
    ("norm", Mode.DEQUANT, "k5_add_row"),         # rms_norm with a residual operand
]


def _built(family, mode, kernel):
    c = emit(family, mode, "tiny").contract(kernel)
    cases = cases_for_contract(c, "tiny", 3)
    case = next((k for k in cases if k.variant == "gauss"), cases[0])
    return c, prepare(case, c)


@pytest.mark.parametrize("family, mode, kernel", WITH_EXTRAS, ids=[k for _, _, k in WITH_EXTRAS])
def test_extras_read_from_the_arguments_what_the_builder_noted(family, mode, kernel):
    _, ctx = _built(family, mode, kernel)
    derived = OPS[ctx.contract.op].extras(ctx)
    assert derived, f"{kernel}: extras derived nothing"
    for key, value in derived.items():
        noted = ctx.extra[key]
        if key == "x":
            # the builder knows the activation before quantization, the arguments only its quantized form:
            # they agree within half an int8 step of each 32-block, amax/127 (+ f32 rounding)
            x = np.asarray(noted, np.float64).reshape(-1, 32)
            step = np.repeat(np.abs(x).max(axis=1) / 127.0, 32).reshape(np.shape(noted))
            err = np.abs(np.asarray(noted, np.float64) - np.asarray(value, np.float64))
            assert np.all(err <= 0.5 * step * (1 + 1e-5) + 1e-6 * np.abs(noted)), kernel
            if derived["kind"] == "f32":
                assert np.array_equal(noted, value), kernel
        elif key == "w":
            assert np.array_equal(noted.quants, value.quants) and np.array_equal(noted.scales, value.scales)
        else:
            assert np.array_equal(np.asarray(noted), np.asarray(value)), f"{kernel}: {key}"


def test_extras_follow_the_arguments_not_the_builder():
    # Negative controls: the position and the token come from the launch's own d_pos / d_tok.
    _, ctx = _built("matmul", Mode.DEQUANT, "gk_gemv_kv_deq")
    ctx.args["d_pos"] = np.array([ctx.extra["pos"] + 1], np.int32)
    assert OPS["q8_gemv"].extras(ctx)["pos"] == ctx.extra["pos"] + 1
    _, ctx = _built("embed", None, "gk_embed")
    other = (ctx.extra["tok"] + 1) % (ctx.args["wq"].size // int(ctx.dims["E"]))
    ctx.args["d_tok"] = np.array([other], np.int32)
    assert OPS["embed_q8"].extras(ctx)["tok"] == other


def test_a_launch_without_builder_notes_is_judged_from_its_arguments():
    # What blame does: a fresh context with the launch's arguments only.
    c, built = _built("matmul", Mode.INT8_ACT, "gk_gemv")
    launch(FakeModule({"gk_gemv": gemv()}), built)
    built.extra.clear()
    judged = judge_outputs(built, ("mode",))
    assert judged.verdict == PASS and {x.against for x in judged.comparisons} == {"mode"}
    _, bad = _built("matmul", Mode.INT8_ACT, "gk_gemv")
    launch(FakeModule({"gk_gemv": gemv(scale_shift=1)}), bad)
    bad.extra.clear()
    assert judge_outputs(bad, ("mode",)).verdict == FAIL


@pytest.mark.parametrize("error", [ZeroDivisionError("judge bug"), JudgeError("contract not understood")])
def test_a_judge_that_raises_leaves_the_launch_unchecked(monkeypatch, error):
    c, case = _gemv_case()
    honest = judge_case(FakeModule({"gk_gemv": gemv(scale_shift=1)}), case, c)
    assert honest.verdict == FAIL                      # negative control: the judge itself fails a wrong kernel

    def broken(ctx):
        raise error
    monkeypatch.setitem(OPS, "q8_gemv", OPS["q8_gemv"].__class__(OPS["q8_gemv"].build, broken,
                                                                  OPS["q8_gemv"].extras))
    res = judge_case(FakeModule({"gk_gemv": gemv(scale_shift=1)}), case, c)
    assert res.verdict == UNCHECKED and str(error) in res.reason
    if not isinstance(error, JudgeError):
        assert "judge error, the tool's fault" in res.reason and "Traceback" in res.reason
    ctx = prepare(case, c)
    assert judge_outputs(ctx).verdict == UNCHECKED     # the same policy for every caller of the hook


def test_an_op_without_a_judge_is_unchecked(monkeypatch):
    c, case = _gemv_case()
    ctx = prepare(case, c)
    monkeypatch.delitem(OPS, "q8_gemv")
    judged = judge_outputs(ctx)
    assert judged.verdict == UNCHECKED and "no judge for op 'q8_gemv'" in judged.reason
