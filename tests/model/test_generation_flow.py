"""The generation run as one straight flow: the reference decoded once (phase 1), everything judged against those
records (phase 2), one typed GenerationRun, one progress total that never goes back, and report.json unchanged by
the rewrite (a document written by the previous implementation, tests/model/data/generation-before.json)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from harness.judging.progress import Progress
from harness.judging.records import finite_json
from harness.model.generation import KernelJob, run_generation
from harness.model.kernel_generation import KernelSetup, prepare_lanes
from harness.model.reference_lanes import ExternalStream, decode_reference
from harness.model.teacher import teacher_stats
from harness.reports.generation import run_dict
from reference import decoder as ref_decoder
from reference.decoder import generate, teacher_forced

from .report_diff import diff
from .weights import small_weights

BEFORE = Path(__file__).parent / "data" / "generation-before.json"
# BEFORE was written by the implementation before the two-phase flow (same inputs as the first test). A deliberate
# change of the numbers (a new bound) re-blesses it: python -m tests.model.test_generation_flow


def _before_run():
    w = small_weights(1)
    run = run_generation(w, prompt=[5], n_tokens=6, external=_flash_again(w, 6))
    return run, json.loads(json.dumps(finite_json(run_dict(run, [f"p{t}" for t in range(w.config.vocab)]))))


def _flash_again(w, n):
    def external(prompt, fed):
        recs = generate(w, "flash", prompt, n)
        return [ExternalStream("flash again", [r.token for r in recs[len(prompt) - 1:]],
                               [r.logits for r in teacher_forced(w, "flash", fed)], "fast")]
    return external


def test_report_json_is_what_the_previous_implementation_wrote():
    """Same weights, prompt and external stream as when BEFORE was written (fast and flash tie at generated step
    4, so the fork path and the external judging run): every field identical apart from timings; the only field
    the rewrite added is the teacher statistics' `fault` (None: nothing stopped the stream)."""
    run, new = _before_run()
    assert [s.verdict for s in run.streams] == ["pass", "tie", "tie", "pass", "tie"]
    added: list[str] = []
    assert diff(json.loads(BEFORE.read_text()), new, "", added) == []
    assert all(a.split(":")[0].endswith("teacher_forced.fault") for a in added), added


def test_the_comparison_sees_a_changed_value_and_ignores_timings():
    """Negative control of the comparison itself."""
    old = json.loads(BEFORE.read_text())
    new = json.loads(BEFORE.read_text())
    new["elapsed_s"] = 99.0
    assert diff(old, new) == []
    new["lanes"][2]["teacher_forced"]["kl_max"] *= 1.0 + 1e-12        # rounding of another summation order
    new["exact_margins"][0] += 2 ** -45
    assert diff(old, new) == []
    new["lanes"][1]["tokens"][4] += 1
    new["lanes"][2]["teacher_forced"]["kl_max"] *= 1.0 + 1e-3
    new["exact_margins"][1] = float("nan")
    found = diff(old, new)
    assert len(found) == 3 and ".exact_margins[1]" in found[0] and ".lanes[1].tokens[4]" in found[1] \
        and "kl_max" in found[2], found


@pytest.fixture
def decoders(monkeypatch):
    """Counts the reference decoders made, per (lane, router)."""
    made: Counter = Counter()
    init = ref_decoder.Decoder.__init__

    def counting(self, weights, lane, **kw):
        made[(lane, kw.get("router", "q8"))] += 1
        init(self, weights, lane, **kw)

    monkeypatch.setattr(ref_decoder.Decoder, "__init__", counting)
    return made


def test_every_reference_lane_is_decoded_once(decoders):
    w = small_weights(1)
    run = run_generation(w, prompt=[5], n_tokens=6)
    assert run.lanes[1].divergence is not None                # fast forks: still one decoder (and its fork)
    assert dict(decoders) == {("exact", "q8"): 1, ("exact", "float"): 1, ("precise", "q8"): 1, ("fast", "q8"): 1,
                              ("flash", "q8"): 1, ("twopass", "q8"): 1}


def test_a_lanes_free_records_are_its_own_free_run():
    """The records phase 1 keeps along a lane's free stream (teacher-forced up to the fork, the fork after it)
    are bit for bit those of a separate free run: the kernels are judged against them."""
    w = small_weights(1)
    ref = decode_reference(w, [5], 6, ["fast"])
    fast = ref.lane("fast")
    alone = generate(w, "fast", [5], 6)
    assert fast.free_tokens != ref.exact_tokens
    assert [r.input_token for r in alone] == fast.free_fed
    assert all(np.array_equal(a.logits, b.logits) for a, b in zip(alone, fast.free_records))
    assert fast.records_for(fast.free_fed[:3], ref.fed) is not None
    assert fast.records_for([5, 0, 0], ref.fed) is None


def test_kernels_are_judged_against_phase_1_with_one_progress_total(emu, decoders):
    """On the backend: the kernels' reference lane is not decoded again, and the one progress bar's total never
    changes while its count only grows, to the total."""
    w = small_weights(3, n_expert=32, n_layer=2)
    prompt, n = [1, 2, 3], 3
    setup = KernelSetup(emu)
    job = KernelJob(setup, prepare_lanes(w, ["precise"], len(prompt) + n - 1, setup))
    seen = []
    bar = Progress(enabled=False)
    count = bar.advance

    def advance(*a, **kw):
        count(*a, **kw)
        seen.append((bar.done, bar.total))

    bar.advance = advance
    run = run_generation(w, prompt=prompt, n_tokens=n, lanes=("exact",), router_check=False, kernels=job,
                         progress=bar)
    (k,) = run.kernels
    assert k.verdict == "pass" and k.tokens == k.ref_tokens and not run.failed
    assert [s.name for s in run.external] == ["precise kernels (emu)"] and run.backend == emu.describe()
    assert dict(decoders) == {("exact", "q8"): 1, ("precise", "q8"): 1}
    totals = {t for _, t in seen}
    dones = [d for d, _ in seen]
    assert len(seen) > 2 * len(prompt) and len(totals) == 1 and dones == sorted(dones) and dones[-1] <= bar.total
    assert bar.done == bar.total == totals.pop()


def test_a_non_finite_logit_leaves_the_budget():
    """Negative control of the one teacher_stats: a stream with an infinite logit is out of budget, with an
    infinite KL, not a NaN that compares as within."""
    w = small_weights(0)
    recs = generate(w, "precise", [1, 2], 2)
    logits = [r.logits.copy() for r in recs]
    bounds = [np.full(r.logits.shape, 1e-3) for r in recs]
    ok, _ = teacher_stats(recs, logits, bounds)
    assert ok.within_budget and ok.kl_max == 0 and ok.top1_agreement == 1
    logits[1][7] = np.inf
    bad, per_step = teacher_stats(recs, logits, bounds)
    assert not bad.within_budget and bad.budget_usage == np.inf and bad.worst.step == 1
    assert bad.kl_max == np.inf and bad.kl_p99 == np.inf and per_step[1].worst_token == 7


def test_the_walk_from_the_cli_to_the_report_passes_each_module_once(tiny1_gguf, tmp_path, capsys):
    """`generate --backend emu` traced from the CLI to the written report: no module of the stages calls back into
    one that called it (no callback keeps results, no closure ticks a caller's counter, no piece function), and
    the flow enters the stages in one order: decode (phase 1), judge the kernels (phase 2), render."""
    import sys

    from harness.cli import main
    edges: dict = {}
    order: list[str] = []
    stages = ("harness.cli", "harness.model", "harness.reports", "harness.judging")

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get("__name__", ""), frame.f_back.f_globals.get("__name__", "")
        if callee != caller and callee.startswith(stages) and caller.startswith(stages):
            edges.setdefault((caller, callee), f"{frame.f_back.f_code.co_name} -> {frame.f_code.co_name}")
            if callee not in order:
                order.append(callee)

    sys.setprofile(profile)
    try:
        rc = main(["generate", "--backend", "emu", "--model", str(tiny1_gguf), "--lanes", "fast", "--tokens", "2",
                   "--out", str(tmp_path / "rep"), "--emu-schedules", "2", "--no-router-effect"])
    finally:
        sys.setprofile(None)
    assert rc == 0, capsys.readouterr().out
    back = {f"{a} <-> {b}: {edges[(a, b)]}" for (a, b) in edges if (b, a) in edges}
    assert not back, back
    flow = [m for m in order if m in ("harness.model.generation", "harness.model.reference_lanes",
                                      "harness.model.kernel_generation", "harness.model.kernel_lane",
                                      "harness.reports.generation")]
    assert flow == ["harness.model.kernel_generation", "harness.model.generation", "harness.model.reference_lanes",
                    "harness.model.kernel_lane", "harness.reports.generation"], flow


if __name__ == "__main__":
    BEFORE.write_text(json.dumps(_before_run()[1], indent=1, allow_nan=False))
    print(f"wrote {BEFORE}")
