"""The judging logic on a tiny in-test fake backend (numpy stand-ins for kernels), so each rule is seen
to pass the right answer and to fail (or tie) the wrong one without compiling anything."""
from __future__ import annotations

import numpy as np
import pytest

from emitters.registry import emit
from harness.judging import budgets as B
from harness.backends.base import LaunchInfo, LaunchResult
from harness.cases.names import cases_for_contract
from harness.judging.core import FAIL, PASS, TIE, UNCHECKED, judge_case
from harness.judging.tokens import argmax_comparison, token_comparison
from reference.modes import Mode


class FakeModule:
    """Launches numpy implementations by kernel name; args are updated in place like a real backend."""

    def __init__(self, impls):
        self.impls = impls

    @property
    def kernel_names(self):
        return tuple(self.impls)

    def launch(self, name, grid, block, shared_bytes, args, outputs=()):
        self.impls[name](*args)
        return LaunchResult(LaunchInfo(name, tuple(grid), tuple(block), shared_bytes))


def gemv(scale_shift: int = 0):
    """gk_gemv: y[o] = sum_b ws[o,b] xs[b] dot(wq[o,b], xq[b]); scale_shift plants a wrong scale index."""
    def run(y, wq, ws, xq, xs, K, N):
        nb = int(K) // 32
        dots = (wq.reshape(N, nb, 32).astype(np.int64) * xq.reshape(nb, 32)).sum(axis=2)
        s = np.roll(ws.reshape(N, nb), scale_shift, axis=1)
        y[:] = ((dots * s).astype(np.float32) * xs).sum(axis=1, dtype=np.float32)
    return run


def topk_idx(swap_last_with_next: bool = False):
    def run(logits, idx, w, E, K):
        z = logits.astype(np.float64)
        p = np.exp(z - z.max())
        p /= p.sum()
        order = np.argsort(-p, kind="stable")
        chosen = order[:K].copy()
        if swap_last_with_next:
            chosen[-1] = order[K]
        idx[:] = chosen
        w[:] = (p[chosen] / p[chosen].sum()).astype(np.float32)
    return run


def _gemv_case(variant="gauss"):
    src = emit("matmul", Mode.INT8_ACT, "tiny")
    c = src.contract("gk_gemv")
    return c, cases_for_contract(c, "tiny", 11, instances=["lm_head"])[0]


def test_correct_gemv_passes_with_margin_and_token():
    c, case = _gemv_case()
    res = judge_case(FakeModule({"gk_gemv": gemv()}), case, c)
    assert res.verdict == PASS, res.reason
    outs = {(x.output, x.against) for x in res.comparisons}
    assert ("y", "mode") in outs and ("y", "dequant") in outs and ("token (greedy argmax)", "dequant") in outs
    mode = next(x for x in res.comparisons if x.against == "mode")
    assert 0 < mode.usage < 1 and mode.margin > 0 and mode.budget.startswith("gamma_")


def test_wrong_scale_index_fails_with_replayable_reason():
    c, case = _gemv_case()
    res = judge_case(FakeModule({"gk_gemv": gemv(scale_shift=1)}), case, c)
    assert res.verdict == FAIL
    assert "exceeds budget" in res.reason and "index" in res.reason


def test_topk_exact_tie_is_a_tie_and_a_real_swap_fails():
    c = emit("moe", Mode.INT8_ACT, "tiny").contract("moe_topk_idx")
    cases = {k.variant: k for k in cases_for_contract(c, "tiny", 5)}
    good = judge_case(FakeModule({"moe_topk_idx": topk_idx()}), cases["gauss"], c)
    assert good.verdict == PASS, good.reason
    tie = judge_case(FakeModule({"moe_topk_idx": topk_idx(swap_last_with_next=True)}), cases["exact-tie"], c)
    assert tie.verdict == TIE and "exact tie" in tie.reason
    bad = judge_case(FakeModule({"moe_topk_idx": topk_idx(swap_last_with_next=True)}), cases["gauss"], c)
    assert bad.verdict == FAIL and "top-K set differs" in bad.reason


def topk_mask(zero_kth: bool = False):
    """moe_topk (dense): f32 max-shifted softmax, top K renormalized, 0 elsewhere, weights below f32's smallest
    normal flushed to 0 (as expf under FTZ does); zero_kth plants a dropped K-th weight."""
    def run(logits, w, E, K):
        e = np.exp((logits - logits.max()).astype(np.float32))
        e[e < np.finfo(np.float32).tiny] = 0.0
        order = np.argsort(-logits.astype(np.float64), kind="stable")[:K]
        w[:] = 0.0
        w[order] = e[order] / e[order].sum(dtype=np.float32)
        if zero_kth:
            w[order[-1]] = 0.0
    return run


def test_topk_mask_zero_weights_within_budget_pass_and_a_dropped_weight_fails():
    """A dominant router logit leaves the other selected experts' weights below f32's smallest normal: exact
    zeros there are correct (not 'too few nonzero entries'); a zero where the reference weight is well above
    its budget still fails."""
    c = emit("moe", Mode.DEQUANT, "tiny").contract("moe_topk")
    cases = {k.variant: k for k in cases_for_contract(c, "tiny", 5)}
    for variant in ("dominant", "dominant-first", "dominant-second"):
        res = judge_case(FakeModule({"moe_topk": topk_mask()}), cases[variant], c)
        assert res.verdict == PASS, (variant, res.reason)
        idx = next(x for x in res.comparisons if x.output == "idx (set)")
        assert "zero_weight_experts" in idx.metrics, idx.metrics
    good = judge_case(FakeModule({"moe_topk": topk_mask()}), cases["gauss"], c)
    assert good.verdict == PASS, good.reason
    bad = judge_case(FakeModule({"moe_topk": topk_mask(zero_kth=True)}), cases["gauss"], c)
    assert bad.verdict == FAIL and "nonzero entries, expected" in bad.reason and "budget" in bad.reason


def test_a_kernel_fault_fails_the_case():
    from harness.backends.base import OutOfBounds

    def boom(*args):
        raise OutOfBounds(None, "guard band after 'y' changed")
    c, case = _gemv_case()
    res = judge_case(FakeModule({"gk_gemv": boom}), case, c)
    assert res.verdict == FAIL and "guard band" in res.reason


def test_the_emulators_time_limit_is_unchecked_a_kernel_timeout_fails():
    from harness.backends.base import KernelTimeout

    def timeout(tool_limit):
        def run(*args):
            raise KernelTimeout(None, "a block did not finish within 120 s", tool_limit=tool_limit)
        return run
    c, case = _gemv_case()
    slow = judge_case(FakeModule({"gk_gemv": timeout(True)}), case, c)
    assert slow.verdict == UNCHECKED and "did not finish" in slow.reason and slow.fault == "KernelTimeout"
    hung = judge_case(FakeModule({"gk_gemv": timeout(False)}), case, c)      # e.g. a GPU watchdog
    assert hung.verdict == FAIL


def test_a_faulting_case_replays_with_the_block_sampling_it_ran():
    from harness.backends.base import RaceDetected
    from harness.judging.records import result_row

    def race(*args):
        raise RaceDetected(None, "'y' differs at 1 element(s) (on 6 sampled blocks)",
                           coverage={"grid_blocks": 1000, "block_sampling": "sampled:2", "runs": [], "sample": [0, 999],
                                     "summary": "1 schedule(s) on all 1000 blocks, 4 on 6 of 1000 blocks"})
    c, case = _gemv_case()
    res = judge_case(FakeModule({"gk_gemv": race}), case, c)
    assert res.verdict == FAIL and res.coverage["block_sampling"] == "sampled:2"
    row = result_row(res, "emu", "0" * 64)
    assert row["replay"].endswith("--backend emu --schedules sampled:2") and row["coverage"]["sample"] == [0, 999]


def test_an_op_without_judge_is_unchecked_not_passed():
    from dataclasses import replace
    c, case = _gemv_case()
    odd = replace(c, op="mystery_op")
    res = judge_case(FakeModule({"gk_gemv": gemv()}), replace(case, op="mystery_op"), odd)
    assert res.verdict == UNCHECKED and "no judge" in res.reason


def test_token_classification_near_tie_vs_failure():
    exact = np.array([1.0, 3.0, 2.999, -1.0])
    mode = np.array([1.0, 2.9996, 2.9994, -1.0])           # the mode's own logits err by up to 4e-4
    near = np.array([1.0, 2.9990, 2.9995, -1.0])           # picks index 2; reference gap 0.001 <= 2 x 4e-4 + ...
    c = token_comparison(near, exact, mode, 1e-4)
    assert c.verdict == TIE and "near-tie" in c.reason
    wild = np.array([1.0, 3.0, 2.999, 3.5])                # one wild logit: gap 4 is no near-tie
    c = token_comparison(wild, exact, mode, 1e-4)
    assert c.verdict == FAIL and "exceeds" in c.reason
    assert token_comparison(exact, exact, mode, 1e-4).verdict == PASS


def test_argmax_exact_tie_is_a_tie():
    z = np.array([0.0, 5.0, 1.0, 5.0], dtype=np.float32)
    assert argmax_comparison(1, z).verdict == PASS
    assert argmax_comparison(3, z).verdict == TIE
    assert argmax_comparison(2, z).verdict == FAIL
    assert argmax_comparison(9, z).verdict == FAIL


def test_budget_arithmetic_and_validation():
    assert B.gamma(10) == pytest.approx(10 * 2 ** -24, rel=1e-6)
    with pytest.raises(ValueError, match="gamma_n"):
        B.gamma(2 ** 25)
    b = B.Budget(np.array([1.0, 2.0, 0.0]), "test", "mode")
    assert b.usage(np.array([0.5, 1.0, 0.0])) == (0.5, 0)
    usage, i = b.usage(np.array([0.0, 0.0, 1e-9]))
    assert usage == float("inf") and i == 2           # any error where the budget is zero fails
    with pytest.raises(ValueError, match="non-negative"):
        B.Budget(np.array([-1.0]), "bad", "mode")


class FakeBackend:
    name = "fake"

    def __init__(self, make_module, fail_build=False, unsupported=False):
        self.make_module, self.fail_build, self.unsupported, self.loads = make_module, fail_build, unsupported, 0

    def load(self, source, flags=()):
        from harness.backends.base import BuildError, UnsupportedConstruct
        self.loads += 1
        if self.fail_build:
            raise BuildError("fake compiler: error: expected ';'")
        if self.unsupported:
            raise UnsupportedConstruct(None, "'__cluster_dims__' (line 3) is not provided by the fake runtime")
        return self.make_module(self.loads)

    def describe(self):
        return {"backend": self.name}


def _gemv_job(n_cases=3):
    from harness.judging.runner import Job
    c = emit("matmul", Mode.INT8_ACT, "tiny").contract("gk_gemv")
    cases = cases_for_contract(c, "tiny", 1)[:n_cases]
    return Job("fake", "// source", [(k, c) for k in cases])


def test_run_continues_in_a_fresh_module_after_a_crash():
    from harness.backends.base import KernelCrash
    from harness.judging.runner import run_cases

    def crash(*args):
        raise KernelCrash(None, "illegal address (sticky CUDA error)")

    be = FakeBackend(lambda n: FakeModule({"gk_gemv": crash if n == 1 else gemv()}))
    run = run_cases(be, [_gemv_job()], progress=False)
    verdicts = [r["verdict"] for r in run.rows]
    assert verdicts[0] == FAIL and "illegal address" in run.rows[0]["reason"]
    assert verdicts[1:] == [PASS] * (len(verdicts) - 1) and be.loads == 2


def test_a_source_that_does_not_build_fails_every_case():
    from harness.judging.runner import run_cases
    run = run_cases(FakeBackend(None, fail_build=True), [_gemv_job()], progress=False)
    assert run.rows and all(r["verdict"] == FAIL and "did not build" in r["reason"] for r in run.rows)


def test_a_source_the_backend_cannot_run_is_unchecked_at_load_and_at_launch():
    """An UnsupportedConstruct is the backend's limit (a GPU may run the kernel): never `fail`."""
    from harness.backends.base import UnsupportedConstruct
    from harness.judging.runner import run_cases
    run = run_cases(FakeBackend(None, unsupported=True), [_gemv_job()], progress=False)
    assert run.rows and all(r["verdict"] == UNCHECKED and "cannot be run on fake" in r["reason"]
                            and "__cluster_dims__" in r["reason"] for r in run.rows)

    def unsupported(*args):
        raise UnsupportedConstruct(None, "inline PTX 'barrier.cluster.arrive' (line 2) is a barrier form emu "
                                         "does not run")
    c, case = _gemv_case()
    res = judge_case(FakeModule({"gk_gemv": unsupported}), case, c)
    assert res.verdict == UNCHECKED and res.fault == "UnsupportedConstruct" and "barrier.cluster" in res.reason


def test_bytes_moved_counts_only_what_the_op_must_touch():
    from harness.judging.core import bytes_moved, prepare
    c = emit("moe", Mode.INT8_ACT, "tiny").contract("moe_gate_up_silu")
    ctx = prepare(cases_for_contract(c, "tiny", 1)[0], c)
    d = ctx.dims
    routed = d["K"] * d["N"] * d["Kd"]
    want = 2 * (routed + routed // 32 * 4) + d["Kd"] + d["Kd"] // 32 * 4 + d["K"] * 4 + d["K"] * d["N"] * 4
    assert bytes_moved(ctx) == want          # the E - K experts that are not routed are not counted
    g = emit("matmul", Mode.INT8_ACT, "tiny").contract("gk_gemv")
    gctx = prepare(cases_for_contract(g, "tiny", 1)[0], g)
    N, K = gctx.dims["N"], gctx.dims["K"]
    assert bytes_moved(gctx) == N * K + N * K // 32 * 4 + K + K // 32 * 4 + N * 4


def test_gpu_timing_reports_time_and_bandwidth_without_disturbing_inout_buffers():
    """On a GPU the runner times repeated launches; an in-place kernel (x += y) must be judged on the result
    of one launch, so the timed repeats run on copies."""
    from harness.judging.runner import Job, run_cases

    def add(x, y, n):
        x[:] = (x + y).astype(np.float32)

    class TimedModule(FakeModule):
        def launch(self, name, grid, block, shared_bytes, args, outputs=(), timing=None):
            res = super().launch(name, grid, block, shared_bytes, args, outputs)
            if timing:
                for _ in range(timing[0] + timing[1]):
                    self.impls[name](*args)
                res.elapsed_ms = 0.002
            return res

    class Gpu(FakeBackend):
        name = "gpu"

        def copy_bandwidth_gbps(self):
            return 4000.0

    c = emit("elementwise", None, "tiny").contract("gk_add")
    job = Job("fake", "// gk_add", [(k, c) for k in cases_for_contract(c, "tiny", 3)])
    run = run_cases(Gpu(lambda n: TimedModule({"gk_add": add})), [job], progress=False)
    row = run.rows[0]
    assert row["verdict"] == PASS, row["reason"]
    n = 512
    assert row["bytes_moved"] == 3 * n * 4 and row["kernel_ms"] == 0.002
    assert row["bandwidth_gbps"] == pytest.approx(3 * n * 4 / 2e-6 / 1e9)
    assert row["bandwidth_fraction_of_copy"] == pytest.approx(row["bandwidth_gbps"] / 4000.0)


@pytest.mark.parametrize("rule", ["floor", "unit"])
def test_an_all_zero_block_of_a_quant_epilogue_is_judged_by_the_contracts_zero_rule(rule):
    """The norm/attention quant epilogues' reference scales follow ctx.attrs["quant"]: an all-zero output block
    gets the floor rule's 1e-30/127 (or the unit rule's 1), and a kernel that follows its rule passes while one
    that follows the other rule fails."""
    from harness.judging.core import ref_act_scales, compare_float
    from reference.quant import quantize_act_int8
    values = np.zeros((2, 64), np.float64)
    values[0, 32:] = np.linspace(-3.0, 2.5, 32)           # block 1 is non-zero; blocks 0, 2, 3 are all zero
    s_ref = ref_act_scales(values, rule)
    zero_scale = np.float32(1e-30) / np.float32(127) if rule == "floor" else 1.0
    assert s_ref.shape == (4,)
    assert s_ref[[0, 2, 3]].tolist() == [float(np.float32(zero_scale))] * 3
    assert s_ref[1] == float(np.float32(np.float32(3.0) / np.float32(127)))
    own = quantize_act_int8(values.reshape(-1).astype(np.float32), zero_rule=rule)[1]
    other = quantize_act_int8(values.reshape(-1).astype(np.float32), zero_rule="unit" if rule == "floor" else "floor")[1]
    budget = B.Budget(B.U32 * s_ref, "u s", "mode")
    assert compare_float("as_", own, s_ref, budget).verdict == PASS
    assert compare_float("as_", other, s_ref, budget).verdict == FAIL
