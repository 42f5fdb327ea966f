"""Teacher-forced statistics: a stream's logits at every step of a fed sequence against a reference's records of
the same steps (llama-perplexity --kl-divergence style), and the largest logit error against a derived per-token
bound. One function serves every stream: the lanes and llama.cpp against the exact lane (bound: the lane's logit
bound, head + drift) and the kernels against their reference lane (bound: the kernels' logit budget)."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np

from reference.decoder import StepRecord

KL_PERCENTILE = 99.0


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max()
    return z - np.log(np.exp(z).sum())


def kl_divergence(base_logits: np.ndarray, test_logits: np.ndarray) -> float:
    """KL(p_base || p_test) of the two softmax distributions, in nats (llama-perplexity --kl-divergence)."""
    lp, lq = log_softmax(base_logits), log_softmax(test_logits)
    return float(max(np.sum(np.exp(lp) * (lp - lq)), 0.0))


@dataclass(frozen=True)
class StepUsage:
    """One step's largest logit error and where it comes nearest its bound."""

    step: int
    max_err: float
    bound_max: float
    usage: float             # max over tokens of |error| / bound (<= 1: within the bound)
    worst_token: int
    err_at_worst: float
    bound_at_worst: float
    bound_at_max_err: float  # the bound of the token with the largest error


@dataclass(frozen=True)
class TeacherStats:
    """A stream fed a reference's tokens: agreement and divergence over the steps it ran (steps = 0: none ran,
    every other field None)."""

    steps: int
    kl_mean: Optional[float] = None
    kl_p99: Optional[float] = None
    kl_max: Optional[float] = None
    kl_median: Optional[float] = None
    top1_agreement: Optional[float] = None
    rms_delta_p: Optional[float] = None      # RMS of the change of the reference token's probability
    max_logit_error: Optional[float] = None
    worst: Optional[StepUsage] = None         # the step nearest its bound
    budget_usage: Optional[float] = None
    within_budget: Optional[bool] = None
    # how tight the bound is (bound_over_error)
    bound_over_error_min: Optional[float] = None
    bound_over_error_median: Optional[float] = None
    median_step_error: Optional[float] = None
    median_step_bound: Optional[float] = None
    fault: Optional[str] = None               # what stopped the stream early (a kernel fault)

    def as_dict(self) -> dict:
        return asdict(self)


def step_usage(step: int, reference: StepRecord, logits: np.ndarray, bound: np.ndarray) -> StepUsage:
    z = np.asarray(logits, dtype=np.float64)
    err = np.abs(z - reference.logits)
    if not np.all(np.isfinite(z)):
        bad = int(np.flatnonzero(~np.isfinite(z))[0])
        return StepUsage(step, float("inf"), float(bound.max()), float("inf"), bad, float("inf"), float(bound[bad]),
                         float(bound[bad]))
    o = int(np.argmax(err / np.maximum(bound, np.finfo(float).tiny)))
    usage = float(err[o] / bound[o]) if bound[o] > 0 else (0.0 if err[o] == 0 else float("inf"))
    return StepUsage(step, float(err.max()), float(bound.max()), usage, o, float(err[o]), float(bound[o]),
                     float(bound[int(np.argmax(err))]))


def bound_over_error(per_step: list[StepUsage]) -> dict:
    """How tight the bound is: per step, the smallest ratio bound / |error| over the tokens (1 / that step's
    usage); its minimum and median over the steps, and the median step's largest error with the bound of that
    token, side by side. A step whose logits are all exact has no ratio (inf)."""
    ratios = np.array([1.0 / s.usage if s.usage > 0 else np.inf for s in per_step])
    errs = np.array([s.max_err for s in per_step])
    mid = int(np.argsort(errs, kind="stable")[(len(errs) - 1) // 2])
    return {"bound_over_error_min": float(ratios.min()), "bound_over_error_median": float(np.median(ratios)),
            "median_step_error": float(errs[mid]), "median_step_bound": per_step[mid].bound_at_max_err}


def teacher_stats(reference: Sequence[StepRecord], logits: Sequence[np.ndarray], bounds: Sequence[np.ndarray],
                  fault: Optional[str] = None) -> tuple[TeacherStats, list[StepUsage]]:
    """Statistics of `logits` (one per step a stream ran) against the `reference` records of the same fed tokens,
    each step's error measured against `bounds[step]` (per token); and the per-step usages."""
    n = min(len(logits), len(reference))
    if n == 0:
        return TeacherStats(steps=0, fault=fault), []
    kls, same, dps, per_step = [], 0, [], []
    for step in range(n):
        e, z = reference[step], np.asarray(logits[step], dtype=np.float64)
        per_step.append(step_usage(step, e, z, np.asarray(bounds[step], dtype=np.float64)))
        if not np.all(np.isfinite(z)):
            kls.append(float("inf"))
            dps.append(float("inf"))
            continue
        kls.append(kl_divergence(e.logits, z))
        same += int(np.argmax(z) == e.token)
        p, q = np.exp(log_softmax(e.logits)), np.exp(log_softmax(z))
        dps.append(float(q[e.token] - p[e.token]))
    kl = np.asarray(kls)
    worst = max(per_step, key=lambda s: s.usage)    # the first of equal usages, as a scan keeps it
    with np.errstate(invalid="ignore"):      # inf - inf between two non-finite steps: the percentile is inf
        p99 = float(np.percentile(kl, KL_PERCENTILE))
    p99 = float("inf") if np.isnan(p99) and np.isinf(kl).any() else p99
    stats = TeacherStats(steps=n, kl_mean=float(kl.mean()), kl_p99=p99,
                         kl_max=float(kl.max()), kl_median=float(np.median(kl)), top1_agreement=same / n,
                         rms_delta_p=float(np.sqrt(np.mean(np.square(dps)))),
                         max_logit_error=max(s.max_err for s in per_step), worst=worst, budget_usage=worst.usage,
                         within_budget=bool(worst.usage <= 1.0), fault=fault, **bound_over_error(per_step))
    return stats, per_step


__all__ = ["KL_PERCENTILE", "StepUsage", "TeacherStats", "bound_over_error", "kl_divergence", "log_softmax",
           "step_usage", "teacher_stats"]
