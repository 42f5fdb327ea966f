"""Token exactness of the decoder lanes against the exact lane: free-running generation, teacher-forced
statistics, the F32-router effect and (optionally) an external token stream such as llama.cpp's.

Computation only; harness/reports/generation.py writes the report. One run:

1. the exact lane generates: the prompt is prefilled through the decode step, then N tokens are decoded
   greedily (len(prompt) + N - 1 steps); its token sequence S = prompt + generated[:-1] is the teacher's;
2. every other lane is fed S (teacher forcing: one record per step, whatever it would have chosen); at its
   first step whose greedy token differs from exact's, the decoder is forked and the fork continues on its
   own tokens -- the free-running stream, identical to a separate free run (same steps before the fork);
3. verdict per lane: ``pass`` (identical streams); ``tie`` when at the first divergence the exact lane's logit
   gap between its token and the lane's is at most the lane's derived logit bound there (the sum of the two
   tokens' bounds: each logit may move by its bound); ``fail`` otherwise (reference.decoder.logit_bound_vector,
   docs/NUMERICS.md "The logit bound"), and ``fail`` too when a teacher-forced logit leaves the bound at any step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from harness.judging.registry import FAIL, PASS, TIE
from reference.decoder import LANES, Decoder, StepRecord, generate, logit_bound_parts, teacher_forced
from reference.model import ModelWeights

KL_PERCENTILE = 99.0


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def kl_divergence(base_logits: np.ndarray, test_logits: np.ndarray) -> float:
    """KL(p_base || p_test) of the two softmax distributions, in nats (llama-perplexity --kl-divergence)."""
    lp, lq = log_softmax(base_logits), log_softmax(test_logits)
    return float(max(np.sum(np.exp(lp) * (lp - lq)), 0.0))


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

    def as_dict(self) -> dict:
        return dict(vars(self))


@dataclass
class StreamResult:
    """One lane (or an external stream) against exact."""

    name: str
    tokens: list[int]
    verdict: str
    divergence: Optional[Divergence]
    teacher: dict
    per_step: list[dict] = field(default_factory=list)     # exact margin and the lane's bound per generated step
    hidden_error: Optional[list[float]] = None             # per layer, max relative error over the steps
    bound_lane: Optional[str] = None                        # whose derived bound judged it (external streams)
    agrees_with_lane: Optional[int] = None                  # leading tokens equal to that lane's free stream


@dataclass
class RouterEffect:
    available: bool
    reason: str = ""
    flips_per_layer: list[int] = field(default_factory=list)   # steps whose expert set differs, per layer
    steps: int = 0
    max_logit_diff: float = 0.0
    top1_agreement: float = 1.0
    tokens_float: list[int] = field(default_factory=list)


@dataclass
class GenerationRun:
    model: str
    prompt: list[int]
    n_tokens: int
    exact_tokens: list[int]
    exact_margins: list[float]
    lanes: list[StreamResult]
    router: RouterEffect
    external: list[StreamResult] = field(default_factory=list)
    elapsed_s: float = 0.0
    config: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(r.verdict == FAIL for r in self.lanes + self.external)


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


def within_bound(verdict: str, stats: dict) -> str:
    """A stream whose teacher-forced logits leave the derived bound at any step fails, whether or not its
    greedy tokens changed: no arithmetic of the mode explains that error (teacher_stats' within_budget)."""
    return verdict if stats["within_budget"] else FAIL


def teacher_stats(exact: list[StepRecord], logits: list[np.ndarray], parts) -> tuple[dict, list[dict]]:
    """llama-perplexity --kl-divergence style statistics of teacher-forced logits against exact's, and the
    largest logit error against the derived per-token bound (`parts`, bound_parts) at each step."""
    kls, same, worst, per_step = [], 0, None, []
    rms_dp = []
    for step, (e, z) in enumerate(zip(exact, logits)):
        z = np.asarray(z, dtype=np.float64)
        kls.append(kl_divergence(e.logits, z))
        same += int(np.argmax(z) == e.token)
        p, q = np.exp(log_softmax(e.logits)), np.exp(log_softmax(z))
        rms_dp.append(float(q[e.token] - p[e.token]))
        bound = parts[step][0] + parts[step][1]
        err = np.abs(z - e.logits)
        o = int(np.argmax(err / np.maximum(bound, np.finfo(float).tiny)))
        usage = float(err[o] / bound[o]) if bound[o] > 0 else (0.0 if err[o] == 0 else float("inf"))
        entry = {"step": step, "max_err": float(err.max()), "bound_max": float(bound.max()), "usage": usage,
                 "worst_token": o, "err_at_worst": float(err[o]), "bound_at_worst": float(bound[o]),
                 "bound_at_max_err": float(bound[int(np.argmax(err))])}
        per_step.append(entry)
        if worst is None or usage > worst["usage"]:
            worst = entry
    kl = np.asarray(kls)
    stats = {"steps": len(kls), "kl_mean": float(kl.mean()), "kl_p99": float(np.percentile(kl, KL_PERCENTILE)),
             "kl_max": float(kl.max()), "kl_median": float(np.median(kl)), "top1_agreement": same / len(kls),
             "rms_delta_p": float(np.sqrt(np.mean(np.square(rms_dp)))),
             "max_logit_error": max(s["max_err"] for s in per_step), "worst": worst,
             "budget_usage": worst["usage"], "within_budget": worst["usage"] <= 1.0}
    stats.update(bound_over_error(per_step))
    return stats, per_step


def bound_over_error(per_step: list[dict]) -> dict:
    """How tight the bound is: per step, the smallest ratio bound / |error| over the tokens (1 / that step's
    usage); its minimum and median over the steps, and the median step's largest error with the bound of that
    token, side by side. A step whose logits are all exact has no ratio (inf)."""
    ratios = np.array([1.0 / s["usage"] if s["usage"] > 0 else np.inf for s in per_step])
    errs = np.array([s["max_err"] for s in per_step])
    mid = int(np.argsort(errs, kind="stable")[(len(errs) - 1) // 2])
    return {"bound_over_error_min": float(ratios.min()), "bound_over_error_median": float(np.median(ratios)),
            "median_step_error": float(errs[mid]), "median_step_bound": per_step[mid]["bound_at_max_err"]}


def hidden_error(exact: list[StepRecord], lane: list[StepRecord]) -> list[float]:
    """Per layer, the largest over the steps of max|x_lane - x_exact| / max|x_exact| (the residual after the
    layer)."""
    out = None
    for e, r in zip(exact, lane):
        rel = np.abs(r.hidden - e.hidden).max(axis=1) / np.maximum(np.abs(e.hidden).max(axis=1), 1e-300)
        out = rel if out is None else np.maximum(out, rel)
    return [float(v) for v in out]


# --------------------------------------------------------------------------------------------- running
def run_lane(weights: ModelWeights, lane: str, fed: list[int], n_prompt: int, n_tokens: int,
             exact_tokens: list[int], tick: Callable[[], None]) -> tuple[list[StepRecord], list[int]]:
    """(teacher-forced records over `fed`, the lane's free-running generated tokens), forking at the first
    divergence (see the module docstring)."""
    dec = Decoder(weights, lane, max_positions=len(fed), keep_hidden=True)
    records, free, fork = [], None, None
    for step, tok in enumerate(fed):
        rec = dec.step(tok)
        records.append(rec)
        tick()
        i = step - (n_prompt - 1)
        if i < 0 or free is not None:
            continue
        if rec.token != exact_tokens[i]:
            free = exact_tokens[:i] + [rec.token]
            fork = dec.fork()
    if free is None:
        return records, list(exact_tokens)
    while len(free) < n_tokens:
        free.append(fork.step(free[-1]).token)
        tick()
    return records, free


def router_effect(weights: ModelWeights, fed: list[int], exact: list[StepRecord], tick) -> RouterEffect:
    c = weights.config
    missing = [i for i in range(c.n_layer) if weights.layer(i).router_float is None]
    if missing:
        return RouterEffect(available=False,
                            reason=f"the model stores ffn_gate_inp in Q8_0 only (no float router in layer "
                                   f"{missing[0]}{' and others' if len(missing) > 1 else ''}); nothing to compare")
    recs = teacher_forced(weights, "exact", fed, router="float", on_step=lambda r: tick())
    flips = np.zeros(c.n_layer, dtype=int)
    for a, b in zip(exact, recs):
        for li in range(c.n_layer):
            flips[li] += int(set(a.experts[li].tolist()) != set(b.experts[li].tolist()))
    diff = max(float(np.abs(a.logits - b.logits).max()) for a, b in zip(exact, recs))
    agree = sum(a.token == b.token for a, b in zip(exact, recs)) / len(recs)
    return RouterEffect(available=True, flips_per_layer=flips.tolist(), steps=len(recs), max_logit_diff=diff,
                        top1_agreement=agree, tokens_float=[r.token for r in recs])


@dataclass
class ExternalStream:
    """A token stream computed elsewhere (llama.cpp): free-running tokens and teacher-forced logits per step
    of the exact lane's fed sequence; judged with the derived bound of the reference lane `bound_lane`."""

    name: str
    tokens: list[int]
    logits: list[np.ndarray]
    bound_lane: str


def run_generation(weights: ModelWeights, *, prompt: list[int], n_tokens: int, lanes=LANES, model_name: str = "model",
                   router_check: bool = True, external: Optional[Callable[[list[int], list[int]], list[ExternalStream]]] = None,
                   external_lanes: tuple = ("fast",), progress: Optional[Callable[[str, int, int], None]] = None
                   ) -> GenerationRun:
    """Run every lane against exact (module docstring). `external(prompt, fed)` returns external streams to
    judge; the reference lanes they are judged with (external_lanes) run even when not listed in `lanes`.
    progress(label, done, total) is called after every decode step."""
    lanes = list(lanes)
    for lane in lanes:
        if lane not in LANES:
            raise ValueError(f"lanes: unknown lane {lane!r}; expected some of {', '.join(LANES)}")
    if not prompt:
        raise ValueError("prompt: expected at least one token id")
    n_steps = len(prompt) + n_tokens - 1
    judged = [lane for lane in lanes if lane != "exact"]
    needed = judged + [x for x in (external_lanes if external else ()) if x not in judged]
    # every lane's teacher-forced steps, plus at most n_tokens - 1 free-running steps after a divergence
    total = n_steps * (1 + len(needed) + (1 if router_check else 0)) + (n_tokens - 1) * len(needed)
    done = [0]

    def tick(label: str) -> Callable[[], None]:
        def f() -> None:
            done[0] += 1
            if progress is not None:
                progress(label, done[0], total)
        return f

    t0 = time.perf_counter()
    exact_tick = tick("exact")
    exact = generate(weights, "exact", prompt, n_tokens, keep_hidden=True, on_step=lambda r: exact_tick())
    exact_tokens = [r.token for r in exact[len(prompt) - 1:]]
    fed = list(prompt) + exact_tokens[:-1]
    lane_parts: dict[str, list] = {}
    free_streams: dict[str, list[int]] = {}
    results = []
    for lane in needed:
        recs, free = run_lane(weights, lane, fed, len(prompt), n_tokens, exact_tokens, tick(lane))
        lane_parts[lane] = parts = bound_parts(recs, lane, exact)
        free_streams[lane] = free
        if lane not in judged:
            continue
        verdict, div = judge_divergence(free, exact, parts, len(prompt))
        stats, per_step = teacher_stats(exact, [r.logits for r in recs], parts)
        verdict = within_bound(verdict, stats)
        chart = _chart_rows(exact, recs, parts, len(prompt))
        results.append(StreamResult(name=lane, tokens=free, verdict=verdict, divergence=div, teacher=stats,
                                    per_step=chart, hidden_error=hidden_error(exact, recs)))
    effect = router_effect(weights, fed, exact, tick("float router")) if router_check else \
        RouterEffect(available=False, reason="not requested")
    ext_results = []
    if external is not None:
        for stream in external(list(prompt), fed):
            if stream.bound_lane not in lane_parts:
                raise ValueError(f"external: stream {stream.name} is judged with lane {stream.bound_lane!r}, "
                                 f"which did not run")
            parts = lane_parts[stream.bound_lane]
            if len(stream.logits) != len(fed):
                raise ValueError(f"external: {stream.name} gave {len(stream.logits)} teacher-forced steps, "
                                 f"expected {len(fed)}")
            verdict, div = judge_divergence(stream.tokens, exact, parts, len(prompt))
            stats, _ = teacher_stats(exact, stream.logits, parts)
            verdict = within_bound(verdict, stats)
            lane_free = free_streams.get(stream.bound_lane)
            agree = None if lane_free is None else next(
                (i for i, (a, b) in enumerate(zip(lane_free, stream.tokens)) if a != b), min(len(lane_free), len(stream.tokens)))
            ext_results.append(StreamResult(name=stream.name, tokens=list(stream.tokens), verdict=verdict,
                                            divergence=div, teacher=stats, bound_lane=stream.bound_lane,
                                            agrees_with_lane=agree))
    if progress is not None:
        progress("done", total, total)
    c = weights.config
    return GenerationRun(model=model_name, prompt=list(prompt), n_tokens=n_tokens, exact_tokens=exact_tokens,
                         exact_margins=[r.margin for r in exact[len(prompt) - 1:]], lanes=results, router=effect,
                         external=ext_results, elapsed_s=time.perf_counter() - t0,
                         config={k: getattr(c, k) for k in c.__dataclass_fields__})


def _chart_rows(exact: list[StepRecord], recs: list[StepRecord], parts, n_prompt: int) -> list[dict]:
    """Per generated step: exact's top-1/top-2 margin and the lane's bound on that margin's change."""
    rows = []
    for step in range(n_prompt - 1, len(exact)):
        e = exact[step]
        a, b = int(e.top5[0][0]), int(e.top5[0][1])
        bound, head, drift = _pair_bound(parts, step, (a, b))
        rows.append({"index": step - (n_prompt - 1), "margin": e.margin, "bound": bound, "bound_head": head,
                     "bound_drift": drift, "lane_token": recs[step].token, "exact_token": e.token})
    return rows
