"""The decode program on the emu backend: token exactness against the reference lane, buffers, faults."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.model.chain import Chain, ChainFault, HostBuffers, ResidentBuffers, make_buffers
from harness.model.kernel_lane import judge_lane, run_fed
from harness.model.reference_lanes import decode_reference
from harness.model.program import LANES, build_program
from harness.cases.planted import Plant

from .weights import small_weights

PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def weights():
    # 32 experts: moe_topk_idx launches E threads and needs whole warps (its contract's precondition)
    return small_weights(3, n_expert=32, n_layer=2)


def _chain(emu, weights, lane, maxseq, code=None, resident=None):
    p = build_program(weights.config, lane, maxseq=maxseq, sources=[("test.cu", code)] if code else None)
    m = emu.load(p.code)
    ch = Chain(p, m, make_buffers(p, m, resident))
    ch.load_weights(weights)
    return ch


@pytest.mark.parametrize("lane", LANES)
def test_kernels_match_their_reference_lane_token_for_token(emu, weights, lane):
    ch = _chain(emu, weights, lane, maxseq=len(PROMPT) + 3)
    res, run, _ = judge_lane(weights, ch, decode_reference(weights, PROMPT, 4, [lane]), "emu")
    assert run.fault is None
    assert res.verdict == "pass", [s.reason for s in res.steps if s.verdict != "pass"]
    assert res.tokens == res.ref_tokens and len(res.tokens) == 4
    assert len(res.steps) == len(PROMPT) + 3 and all(s.usage <= 1.0 for s in res.steps)
    assert res.teacher.top1_agreement == 1.0
    # the stream is the device's: gk_argmax_adv picked every token after the first
    assert all(s.kernel_token == s.ref_token for s in res.steps[len(PROMPT) - 1:])


def test_resident_and_host_buffers_agree_bit_for_bit(emu, weights):
    fed = PROMPT + [5, 7]
    res = _chain(emu, weights, "fast", maxseq=len(fed), resident=True)
    host = _chain(emu, weights, "fast", maxseq=len(fed), resident=False)
    assert isinstance(res.buffers, ResidentBuffers) and isinstance(host.buffers, HostBuffers)
    a, b = run_fed(res, fed, len(PROMPT)), run_fed(host, fed, len(PROMPT))
    for x, y in zip(a.logits, b.logits):
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32))
    assert a.tokens == b.tokens


def test_twopass_lane_runs_on_host_buffers(emu, weights):
    ch = _chain(emu, weights, "twopass", maxseq=4)
    assert isinstance(ch.buffers, HostBuffers)
    with pytest.raises(ValueError, match="only host buffers"):
        ResidentBuffers(ch.program.buffers, ch.module).row_arg(
            next(v for l in ch.program.launches for _, v in l.bindings if hasattr(v, "length")), 0)


def test_a_fault_names_step_position_layer_and_launch(emu, weights):
    clean = build_program(weights.config, "precise", maxseq=4)
    code = Plant("oob", "model", None, "gk_add", "model", "writes one past the end", r"x\[i\] \+= y\[i\]",
                 "x[i + 1] += y[i]").apply(clean.code)
    ch = _chain(emu, weights, "precise", maxseq=4, code=code)
    with pytest.raises(ChainFault) as info:
        ch.step(1, 0)
    msg = str(info.value)
    assert re.search(r"step 0 \(position 0\), layer 0, launch \d+ gk_add<<<.*\(moe_residual\): OutOfBounds", msg), msg
    assert info.value.launch.kernel == "gk_add" and info.value.launch.layer == 0


def test_an_unwritten_cache_row_reads_as_nan(emu, weights):
    """The caches start as the unwritten pattern (NaN): a kernel reading a row nobody wrote is visible."""
    ch = _chain(emu, weights, "fast", maxseq=4)
    ch.reset()
    kc = ch.buffers.read("kc[0]")
    assert np.isnan(kc).all()
    ch.step(1, 0)
    kc = ch.buffers.read("kc[0]")
    assert np.isfinite(kc[0]).all() and np.isnan(kc[1:]).all()


def test_one_token_needs_no_row_past_the_prompt(emu, weights):
    """--tokens 1: the host's pick after the prefill is the whole stream, so a cache of exactly the prompt's rows
    is enough (the device's decode state is not written: no decode step follows)."""
    ch = _chain(emu, weights, "fast", maxseq=len(PROMPT))
    res, run, _ = judge_lane(weights, ch, decode_reference(weights, PROMPT, 1, ["fast"]), "emu")
    assert run.fault is None and res.verdict == "pass" and res.tokens == res.ref_tokens and len(res.tokens) == 1


def test_positions_past_the_cache_are_refused(emu, weights):
    ch = _chain(emu, weights, "fast", maxseq=2)
    with pytest.raises(ValueError, match=r"position: 2 outside the KV cache's 2 rows"):
        ch.step(1, 2)
    with pytest.raises(ValueError, match=r"token: 96 outside the vocabulary"):
        ch.step(96, 0)


def test_a_teacher_forced_run_resumes_on_a_shared_prefix_with_the_same_results(emu, weights):
    ch = _chain(emu, weights, "fast", maxseq=6)
    first = run_fed(ch, [1, 2, 3, 4, 5, 6], 3)
    other = [1, 2, 3, 4, 9, 9]
    resumed = run_fed(ch, other, 3, reuse=first)
    assert ch.history == other and ch.steps == 6
    fresh = run_fed(ch, other, 3)
    for x, y in zip(resumed.logits, fresh.logits):
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32))
    assert resumed.tokens == fresh.tokens
    with pytest.raises(ValueError, match="cannot resume at 7"):
        ch.resume_at(7)
