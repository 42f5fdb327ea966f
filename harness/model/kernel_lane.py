"""The kernels' token stream against the reference decoder's same lane.

The chain (harness.model.chain) runs a lane's kernels; the reference decoder (reference.decoder) runs the same
lane's arithmetic in NumPy. They make the same quantization decisions, so every step must agree:

* per step, every logit within the kernels' logit budget: the LM head's own derived bound in the lane
  (reference.decoder.logit_bound_vector without the exact record, worst case: the f32 warp-row accumulation
  gamma_(warp_row_depth(K)) sum|w x|, the stored logit's rounding, and in the int8 lanes one quantization
  step per head-input element -- what a code flipped by upstream float32 rounding differences can move);
* per generated step, the same token; a different one is a ``tie`` only where the reference's gap between its
  token and the kernels' is at most the two tokens' budgets (each logit may move by its budget), else ``fail``.

The comparison feeds the reference the kernels' own tokens (teacher-forced on the kernels' stream), so every
step is comparable even after a tie. The teacher-forced statistics feed the kernels the reference lane's free
stream. A fault (race, out-of-bounds write, unwritten output) ends the lane's run and is a failure at its step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED
from reference.decoder import StepRecord, logit_bound_vector, teacher_forced
from reference.model import ModelWeights

from .blame import BlameReport
from .chain import Chain, ChainFault, StepOutput, generate as chain_generate, generated_tokens, host_argmax
from .reference_lanes import ReferenceDecode
from .teacher import TeacherStats, teacher_stats

@dataclass
class KernelStep:
    """One decode step of the kernels against the reference lane fed the same token."""
    step: int
    position: int
    input_token: int
    kernel_token: Optional[int]        # the token the kernels picked (None on a prefill step before the last)
    ref_token: int
    max_err: float                     # max |kernel logit - reference logit|
    usage: float                       # max err/budget (<= 1 within budget)
    worst_token: int
    err_at_worst: float
    budget_at_worst: float
    ref_margin: float
    verdict: str
    reason: str = ""

    def as_dict(self) -> dict:
        return dict(vars(self))


@dataclass
class KernelLaneResult:
    lane: str
    backend: str
    source: str
    prompt: list[int]
    tokens: list[int]                  # the kernels' free-running generated tokens
    ref_tokens: list[int]              # the reference lane's free-running generated tokens
    steps: list[KernelStep]
    verdict: str
    first_bad: Optional[int] = None    # index into steps of the first failed step
    fault: Optional[str] = None
    teacher: TeacherStats = field(default_factory=lambda: TeacherStats(steps=0))   # fed the lane's free stream
    blame: Optional[BlameReport] = None
    seconds_per_step: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL

    @property
    def bad_step(self) -> Optional[int]:
        """The decode step of the first failed step (None: none failed)."""
        return None if self.first_bad is None else self.steps[self.first_bad].step

    @property
    def max_usage(self) -> Optional[float]:
        return max((s.usage for s in self.steps), default=None)

    def as_dict(self) -> dict:
        d = {k: v for k, v in vars(self).items() if k not in ("steps", "teacher", "blame")}
        d["teacher"] = self.teacher.as_dict()
        d["blame"] = self.blame.as_dict() if self.blame else None
        d["steps"] = [s.as_dict() for s in self.steps]
        return d


# -- running ---------------------------------------------------------------------------------------------------------
@dataclass
class KernelRun:
    """What a kernel run of one fed sequence gives: logits per step, the device's token per step (gk_argmax_adv;
    the host pick for the last prefill step of a free run), and a fault if one stopped it."""
    fed: list[int]
    logits: list[np.ndarray]
    tokens: list[Optional[int]]
    fault: Optional[ChainFault] = None
    seconds: float = 0.0


def run_free(chain: Chain, prompt: Sequence[int], n_tokens: int,
             tick: Optional[Callable[[], None]] = None) -> tuple[KernelRun, list[int]]:
    """The seed's generation loop on the kernels; returns (the run over its own fed sequence, generated tokens)."""
    chain.reset()
    t0 = time.perf_counter()
    outs: list[StepOutput] = []
    fault = None
    try:
        for o in chain_generate(chain, prompt, n_tokens):
            outs.append(o)
            if tick:
                tick()
    except ChainFault as exc:
        fault = exc
    n_prompt = len(prompt)
    gen = generated_tokens(outs, n_prompt) if len(outs) >= n_prompt else []
    fed = list(prompt) + gen
    # on a fault the faulting step's input token is known too (blame reruns that step)
    fed = fed[:len(outs) + 1] if fault else fed[:n_prompt + n_tokens - 1]
    toks = [None] * (n_prompt - 1) + gen
    return KernelRun(fed, [o.logits for o in outs], toks[:len(outs)], fault, time.perf_counter() - t0), gen


def _common_prefix(*seqs: Sequence[int]) -> int:
    n = min(len(x) for x in seqs)
    for i in range(n):
        if len({int(x[i]) for x in seqs}) > 1:
            return i
    return n


def run_fed(chain: Chain, fed: Sequence[int], n_prompt: int, tick: Optional[Callable[[], None]] = None,
            reuse: Optional[KernelRun] = None) -> KernelRun:
    """Teacher-forced: every token written from the host; gk_argmax_adv runs on every generated step. With
    `reuse`, an earlier fault-free run on this chain: the steps of the prefix that it, the caches and `fed`
    share are taken from it (same inputs, same results) and the run resumes after them."""
    t0 = time.perf_counter()
    start = 0
    if reuse is not None and reuse.fault is None:
        start = min(_common_prefix(reuse.fed, fed, chain.history), len(reuse.logits))
    run = KernelRun(list(fed), list(reuse.logits[:start]) if start else [], list(reuse.tokens[:start]) if start else [])
    if start:
        chain.resume_at(start)
    else:
        chain.reset()
    try:
        for pos in range(start, len(fed)):
            tok = fed[pos]
            gen_step = pos >= n_prompt - 1
            o = chain.step(int(tok), pos, advance=gen_step and pos >= n_prompt)
            run.logits.append(o.logits)
            run.tokens.append(None if not gen_step else (o.token if o.token is not None else host_argmax(o.logits)))
            if tick:
                tick()
    except ChainFault as exc:
        run.fault = exc
    run.seconds = time.perf_counter() - t0
    return run


# -- judging -----------------------------------------------------------------------------------------------------------
def kernel_budget(record: StepRecord, lane: str) -> np.ndarray:
    """Per-token bound on |kernel logit - reference-lane logit| (module docstring)."""
    return logit_bound_vector(record, lane, failure=None)


def compare_step(lane: str, record: StepRecord, logits: np.ndarray,
                 kernel_token: Optional[int], step: int) -> KernelStep:
    z = np.asarray(logits, dtype=np.float64)
    r = record.logits
    bud = kernel_budget(record, lane)
    err = np.abs(z - r)
    finite = np.all(np.isfinite(z))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / bud)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    w = int(np.argmax(ratio))
    usage = float(ratio[w])
    s = KernelStep(step, record.position, record.input_token, kernel_token, record.token,
                   float(np.nanmax(err)) if finite else float("inf"), usage, w, float(err[w]), float(bud[w]),
                   float(record.margin), PASS)
    if not finite:
        bad = int(np.flatnonzero(~np.isfinite(z))[0])
        s.verdict, s.reason = FAIL, f"logit {bad} is {z[bad]} (non-finite)"
    elif usage > 1.0:
        s.verdict, s.reason = FAIL, (f"logit {w} off by {err[w]:.3g}, beyond its budget {bud[w]:.3g} "
                                     f"({usage:.3g}x; kernels {z[w]:.7g}, reference {r[w]:.7g})")
    if kernel_token is not None and kernel_token != record.token:
        a, b = record.token, int(kernel_token)
        gap = float(r[a] - r[b])
        allowed = float(bud[a] + bud[b])
        if gap <= allowed and s.verdict != FAIL:
            s.verdict, s.reason = TIE, (f"token {b} instead of {a}: the reference gap {gap:.3g} is within the two "
                                        f"tokens' budgets {allowed:.3g}")
        elif gap > allowed:
            s.verdict = FAIL
            s.reason = "; ".join(x for x in (s.reason, f"token {b} instead of {a}: the reference gap {gap:.3g} "
                                                       f"exceeds the two tokens' budgets {allowed:.3g}") if x)
    return s


def compare_run(weights: ModelWeights, lane: str, run: KernelRun,
                records: Optional[list[StepRecord]] = None) -> tuple[list[KernelStep], list]:
    """Compare the kernels' run with the reference lane fed the same tokens (`records`: the lane's records of
    run.fed where already decoded); returns (steps, reference records)."""
    if not run.fed:
        return [], []
    recs = records if records is not None else teacher_forced(weights, lane, run.fed)
    steps = []
    for i, z in enumerate(run.logits):
        steps.append(compare_step(lane, recs[i], z, run.tokens[i] if i < len(run.tokens) else None, i))
    return steps, recs


def kernel_teacher_stats(lane: str, run: KernelRun, records: list) -> TeacherStats:
    """Kernels fed the reference lane's stream: budget usage, top-1 agreement and KL(reference || kernels)."""
    n = len(run.logits)
    bounds = [kernel_budget(r, lane) for r in records[:n]]
    stats, _ = teacher_stats(records[:n], run.logits, bounds, str(run.fault) if run.fault else None)
    return stats


def lane_verdict(steps: list[KernelStep], fault: Optional[ChainFault]) -> tuple[str, Optional[int]]:
    first_bad = next((i for i, s in enumerate(steps) if s.verdict == FAIL), None)
    if fault is not None and (first_bad is None or fault.step <= first_bad):
        return FAIL, None
    if first_bad is not None:
        return FAIL, first_bad
    if any(s.verdict == TIE for s in steps):
        return TIE, None
    if not steps:
        return UNCHECKED, None
    return PASS, None


def judge_lane(weights: ModelWeights, chain: Chain, ref: ReferenceDecode, backend: str,
               tick: Optional[Callable[[], None]] = None) -> tuple[KernelLaneResult, KernelRun, list]:
    """Run the chain's kernels free and teacher-forced and judge them against their reference lane as phase 1
    decoded it (`ref`: its records of the kernels' fed sequence where it has them, else that sequence decoded).
    Returns the result, the free run and the reference records of its fed sequence (what blame needs)."""
    prompt, n_prompt, lane = ref.prompt, ref.n_prompt, chain.program.lane
    lane_ref = ref.lane(lane)
    free, gen = run_free(chain, prompt, ref.n_tokens, tick)
    steps, recs = compare_run(weights, lane, free, lane_ref.records_for(free.fed, ref.fed))
    if free.fault is None and lane_ref.free_fed == free.fed:
        teacher_run = free
    else:
        teacher_run = run_fed(chain, lane_ref.free_fed, n_prompt, tick, reuse=free)
    verdict, first_bad = lane_verdict(steps, free.fault)
    res = KernelLaneResult(lane, backend, chain.program.source_label, list(prompt), gen, list(lane_ref.free_tokens),
                           steps, verdict, first_bad, str(free.fault) if free.fault else None,
                           kernel_teacher_stats(lane, teacher_run, lane_ref.free_records),
                           seconds_per_step=free.seconds / max(len(free.logits), 1))
    return res, free, recs


def first_bad_step(result: KernelLaneResult, run: KernelRun) -> Optional[int]:
    """The step blame reruns: the faulting step, or the first step out of budget / with a failed token."""
    if run.fault is not None and (result.first_bad is None or run.fault.step <= result.first_bad):
        return run.fault.step
    return result.first_bad


__all__ = ["KernelLaneResult", "KernelRun", "KernelStep", "compare_run", "compare_step", "first_bad_step",
           "judge_lane", "kernel_budget", "kernel_teacher_stats", "run_fed", "run_free"]
