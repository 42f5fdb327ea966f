"""A generation run, start to end: token exactness of the decoder lanes (and of external streams: llama.cpp, the
kernels on a backend) against the exact lane, in two phases, into one typed `GenerationRun`.

Phase 1 (harness.model.reference_lanes) decodes the reference once: the exact lane, every other lane fed the
exact lane's tokens and forked at its first divergence (its free-running stream), the F32-router effect. Phase
2 judges against those records: the kernel lanes on a backend against their reference lane
(harness.model.kernel_lane, via harness.model.kernel_generation), then every stream against exact:

* verdict per stream: ``pass`` (identical streams); ``tie`` when at the first divergence the exact lane's logit
  gap between its token and the stream's is at most the lane's derived logit bound there (the sum of the two
  tokens' bounds: each logit may move by its bound); ``fail`` otherwise (reference.decoder.logit_bound_vector,
  docs/NUMERICS.md "The logit bound"), and ``fail`` too when a teacher-forced logit leaves the bound at any step;
  an external stream is judged with the bound of the reference lane of its arithmetic;
* teacher-forced statistics (harness.model.teacher) and, per generated step, exact's margin and the lane's
  bound on its change; the hidden-state error per layer.

Computation only; harness/reports/generation.py renders the run.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from harness.judging.progress import Progress
from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED
from reference.decoder import LANES, StepRecord, logit_bound_parts
from reference.model import ModelConfig, ModelWeights

from .kernel_generation import KernelSetup, LaneRunner, judge_kernel_lanes, kernel_steps
from .kernel_lane import KernelLaneResult
from .locks import LockCheck, LockRequest, check_kernel_streams
from .reference_lanes import ExternalStream, ReferenceDecode, RouterEffect, decode_reference, reference_steps
from .teacher import TeacherStats, teacher_stats

@dataclass
class Divergence:
    """The first generated step where a stream leaves the exact lane's."""

    index: int            # position in the generated tokens
    step: int             # decode step (0-based over prompt + generated)
    exact_token: int
    lane_token: int
    exact_margin: float   # exact top-1 minus top-2 logit there
    exact_gap: float      # exact logit of its token minus that of the lane's token
    bound: float          # the lane's bound on the change of that gap (sum of the two tokens' bounds)
    bound_head: float     # ... of which the LM head's own arithmetic
    bound_drift: float    # ... of which the propagated measured drift of the head input


@dataclass
class MarginStep:
    """Per generated step: exact's top-1/top-2 margin and the lane's bound on that margin's change."""

    index: int
    margin: float
    bound: float
    bound_head: float
    bound_drift: float
    lane_token: int
    exact_token: int


@dataclass
class StreamResult:
    """One lane (or an external stream) against exact."""

    name: str
    tokens: list[int]
    verdict: str
    divergence: Optional[Divergence]
    teacher: TeacherStats
    per_step: list[MarginStep] = field(default_factory=list)
    hidden_error: Optional[list[float]] = None             # per layer, max relative error over the steps
    bound_lane: Optional[str] = None                        # whose derived bound judged it (external streams)
    agrees_with_lane: Optional[int] = None                  # leading tokens equal to that lane's free stream


@dataclass
class GenerationRun:
    """The whole run, as every renderer (report.json, .md, .html, the console) reads it."""

    model: str
    config: ModelConfig
    prompt: list[int]
    n_tokens: int
    exact_tokens: list[int]
    exact_margins: list[float]
    lanes: list[StreamResult]
    router: RouterEffect
    external: list[StreamResult] = field(default_factory=list)
    backend: Optional[str] = None                           # the kernels' backend; None: reference lanes only
    sources: list[str] = field(default_factory=list)        # --source files of the kernels
    kernels: list[KernelLaneResult] = field(default_factory=list)
    locks: list[LockCheck] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def streams(self) -> list[StreamResult]:
        return self.lanes + self.external

    @property
    def failed(self) -> bool:
        return (any(s.verdict == FAIL for s in self.streams) or any(k.failed for k in self.kernels)
                or any(c.failed for c in self.locks))


# --------------------------------------------------------------------------------------------- judging
def bound_parts(records: list[StepRecord], lane: str, exact: list[StepRecord]) -> list:
    """Per step, the (head, drift) parts of `lane`'s logit bound (reference.decoder.logit_bound_parts): one
    pass over the LM head per step, shared by the verdict, the statistics and the chart."""
    return [logit_bound_parts(r, lane, e) for r, e in zip(records, exact)]


def _pair_bound(parts, step: int, tokens: tuple[int, int]) -> tuple[float, float, float]:
    """(bound on the change of the gap between two tokens' logits, its head part, its drift part)."""
    head, drift = parts[step]
    a, b = tokens
    h, d = float(head[a] + head[b]), float(drift[a] + drift[b])
    return h + d, h, d


def judge_divergence(tokens: list[int], exact: list[StepRecord], parts, n_prompt: int
                     ) -> tuple[str, Optional[Divergence]]:
    """Verdict of a generated stream `tokens` against the exact run; `parts` (bound_parts) are the per-step
    bounds of the lane whose derived bound explains a divergence (the stream's own lane, or for an external
    stream the reference lane of its arithmetic), from its teacher-forced records."""
    exact_tokens = [r.token for r in exact[n_prompt - 1:]]
    for i, (a, b) in enumerate(zip(exact_tokens, tokens)):
        if a == b:
            continue
        step = n_prompt - 1 + i
        e = exact[step]
        gap = float(e.logits[a] - e.logits[b])
        bound, head, drift = _pair_bound(parts, step, (a, b))
        div = Divergence(index=i, step=step, exact_token=a, lane_token=b, exact_margin=e.margin, exact_gap=gap,
                         bound=bound, bound_head=head, bound_drift=drift)
        return (TIE if gap <= bound else FAIL), div
    if len(tokens) != len(exact_tokens):
        raise ValueError(f"tokens: the stream has {len(tokens)} tokens, the exact run {len(exact_tokens)}")
    return PASS, None


def within_bound(verdict: str, stats: TeacherStats) -> str:
    """A stream whose teacher-forced logits leave the derived bound at any step fails, whether or not its
    greedy tokens changed: no arithmetic of the mode explains that error (teacher_stats' within_budget)."""
    return verdict if stats.within_budget else FAIL


def exact_stats(exact: list[StepRecord], logits: Sequence[np.ndarray], parts) -> TeacherStats:
    """Teacher-forced statistics against exact, each step's error against the lane's bound (head + drift)."""
    stats, _ = teacher_stats(exact, logits, [head + drift for head, drift in parts])
    return stats


def hidden_error(exact: list[StepRecord], lane: list[StepRecord]) -> list[float]:
    """Per layer, the largest over the steps of max|x_lane - x_exact| / max|x_exact| (the residual after the
    layer)."""
    out = None
    for e, r in zip(exact, lane):
        rel = np.abs(r.hidden - e.hidden).max(axis=1) / np.maximum(np.abs(e.hidden).max(axis=1), 1e-300)
        out = rel if out is None else np.maximum(out, rel)
    return [float(v) for v in out]


def margin_steps(exact: list[StepRecord], recs: list[StepRecord], parts, n_prompt: int) -> list[MarginStep]:
    rows = []
    for step in range(n_prompt - 1, len(exact)):
        e = exact[step]
        a, b = int(e.top5[0][0]), int(e.top5[0][1])
        bound, head, drift = _pair_bound(parts, step, (a, b))
        rows.append(MarginStep(step - (n_prompt - 1), e.margin, bound, head, drift, recs[step].token, e.token))
    return rows


def judge_lanes(ref: ReferenceDecode, lanes: Sequence[str]) -> list[StreamResult]:
    """Every reference lane in `lanes` against exact."""
    out = []
    for lane in lanes:
        d = ref.lane(lane)
        verdict, div = judge_divergence(d.free_tokens, ref.exact, d.bound_parts, ref.n_prompt)
        stats = exact_stats(ref.exact, [r.logits for r in d.on_exact], d.bound_parts)
        out.append(StreamResult(name=lane, tokens=list(d.free_tokens), verdict=within_bound(verdict, stats),
                                divergence=div, teacher=stats,
                                per_step=margin_steps(ref.exact, d.on_exact, d.bound_parts, ref.n_prompt),
                                hidden_error=hidden_error(ref.exact, d.on_exact)))
    return out


def judge_external(ref: ReferenceDecode, stream: ExternalStream) -> StreamResult:
    """A stream computed elsewhere against exact, with its bound lane's derived bound; `unchecked` (with the
    reason in teacher.fault) where the tool could not compute it."""
    if stream.bound_lane not in ref.lanes:
        raise ValueError(f"external: stream {stream.name} is judged with lane {stream.bound_lane!r}, "
                         f"which did not run")
    if stream.unchecked:
        return StreamResult(name=stream.name, tokens=[], verdict=UNCHECKED, divergence=None,
                            teacher=TeacherStats(steps=0, fault=stream.unchecked), bound_lane=stream.bound_lane)
    lane = ref.lanes[stream.bound_lane]
    if len(stream.logits) != len(ref.fed):
        raise ValueError(f"external: {stream.name} gave {len(stream.logits)} teacher-forced steps, "
                         f"expected {len(ref.fed)}")
    verdict, div = judge_divergence(stream.tokens, ref.exact, lane.bound_parts, ref.n_prompt)
    stats = exact_stats(ref.exact, stream.logits, lane.bound_parts)
    free = lane.free_tokens
    agree = next((i for i, (a, b) in enumerate(zip(free, stream.tokens)) if a != b),
                 min(len(free), len(stream.tokens)))
    return StreamResult(name=stream.name, tokens=list(stream.tokens), verdict=within_bound(verdict, stats),
                        divergence=div, teacher=stats,
                        bound_lane=stream.bound_lane, agrees_with_lane=agree)


# --------------------------------------------------------------------------------------------- running
@dataclass
class KernelJob:
    """The kernel lanes of a run on a backend: loaded programs (prepare_lanes) and what the report names."""

    setup: KernelSetup
    runners: list[LaneRunner]
    lock: Optional[LockRequest] = None


def run_generation(weights: ModelWeights, *, prompt: list[int], n_tokens: int, lanes=LANES, model_name: str = "model",
                   router_check: bool = True,
                   external: Optional[Callable[[list[int], list[int]], list[ExternalStream]]] = None,
                   external_lanes: tuple = ("fast",), kernels: Optional[KernelJob] = None,
                   progress: Optional[Progress] = None) -> GenerationRun:
    """Phase 1, then phase 2 (module docstring). `external(prompt, fed)` returns external streams to judge (the
    exact lane's fed sequence); the reference lanes they are judged with (external_lanes) and the kernel lanes'
    reference lanes are decoded even when not listed in `lanes`. One progress total (harness.judging.progress)
    covers both phases: at most the decode steps each can run, completed at the end (it never goes back)."""
    lanes = list(lanes)
    judged = [lane for lane in lanes if lane != "exact"]
    extra = list(external_lanes if external is not None else ())
    extra += [r.lane for r in kernels.runners] if kernels is not None else []
    needed = judged + [x for x in dict.fromkeys(extra) if x not in judged]
    n_steps = len(prompt) + n_tokens - 1
    total = reference_steps(len(prompt), n_tokens, len(needed), router_check)
    total += kernel_steps(n_steps, len(kernels.runners)) if kernels is not None else 0
    bar = progress if progress is not None else Progress(enabled=False)
    bar.show("reference lanes", 0, total)
    t0 = time.perf_counter()
    bar.case("reference lanes")
    ref = decode_reference(weights, list(prompt), n_tokens, lanes=needed, router_check=router_check,
                           tick=bar.advance)
    streams = list(external(list(prompt), ref.fed)) if external is not None else []
    results: list[KernelLaneResult] = []
    if kernels is not None:
        bar.case("kernels")
        results, kernel_streams = judge_kernel_lanes(weights, ref, kernels.runners, kernels.setup,
                                                     kernels.setup.backend.name, bar.advance)
        streams += kernel_streams
    bar.show("done", total, total)
    run = GenerationRun(model=model_name, config=weights.config, prompt=list(prompt), n_tokens=n_tokens,
                        exact_tokens=ref.exact_tokens, exact_margins=[r.margin for r in ref.exact[len(prompt) - 1:]],
                        lanes=judge_lanes(ref, judged), router=ref.router,
                        external=[judge_external(ref, s) for s in streams], kernels=results)
    if kernels is not None:
        run.backend, run.sources = kernels.setup.backend.describe(), list(kernels.setup.source_paths)
        if kernels.lock is not None:
            run.locks = check_kernel_streams(kernels.lock, prompt, results)
    run.elapsed_s = time.perf_counter() - t0
    return run


__all__ = ["Divergence", "GenerationRun", "KernelJob", "MarginStep", "StreamResult", "bound_parts", "exact_stats",
           "hidden_error", "judge_divergence", "judge_external", "judge_lanes", "margin_steps", "run_generation",
           "within_bound"]
