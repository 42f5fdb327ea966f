"""A judged case as a JSON-ready record: the row report.json holds for it, its replay command, and the verdict
counts of a run. In: `CaseResult`s and what ran them (contract, backend, source hash). Out: plain dicts with
non-finite floats spelled as strings, so the files stay valid JSON."""
from __future__ import annotations

import math
import re
import shlex
from typing import Optional, Sequence

from emitters.registry import mode_label

from .core import CaseResult
from .registry import FAIL, PASS, TIE, UNCHECKED, Comparison

VERDICTS = (PASS, TIE, FAIL, UNCHECKED)
PRIMARY_METRICS = ("max_abs", "max_rel", "nmse", "max_ulp", "cosine", "worst_index")


def finite_json(x):
    """JSON has no inf/nan: write them as strings so the file stays valid JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: finite_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite_json(v) for v in x]
    if hasattr(x, "item") and callable(x.item):
        return finite_json(x.item())
    return x


def comparison_dict(c: Comparison) -> dict:
    return {"output": c.output, "against": c.against, "verdict": c.verdict, "metrics": c.metrics,
            "budget": c.budget, "budget_at_worst": c.budget_at_worst, "observed_at_worst": c.observed_at_worst,
            "usage": c.usage, "margin": c.margin, "reason": c.reason, "histogram": c.histogram}


def replay_command(case_name: str, source_path: Optional[str] = None, backend: Optional[str] = None,
                   schedules: Optional[str] = None, include_dirs: Sequence[str] = ()) -> str:
    cmd = ["qconform", "replay", case_name]
    if source_path:
        cmd += ["--source", source_path]
        for d in include_dirs:
            cmd += ["-I", d]
    if backend:
        cmd += ["--backend", backend]
    if schedules:    # the emu block sampling the case ran with (the sample follows from it and the grid)
        cmd += ["--schedules", schedules]
    return " ".join(shlex.quote(c) for c in cmd)


def headline(res: CaseResult) -> Optional[Comparison]:
    """The comparison that speaks for the case: among the budgeted comparisons with the worst verdict (fail,
    else tie, else pass), the one nearest to (or furthest past) its budget, i.e. the largest usage; among
    equals the first float comparison. The row's metrics, budget and margin all come
    from it, so they describe one comparison; every other comparison stays listed under it."""
    if not res.comparisons:
        return None
    # the comparison that decided the verdict (a failed one, else a tie) when it has a budget; else the one
    # nearest its budget (a tie of the greedy token has no per-element budget: the row keeps a budgeted
    # headline, and the token comparison is in the reason and listed under it)
    severity = {FAIL: 2, TIE: 1}
    used = [c for c in res.comparisons if c.usage is not None]
    if not used:
        return res.comparisons[0]
    worst = max(severity.get(c.verdict, 0) for c in used)
    used = [c for c in used if severity.get(c.verdict, 0) == worst]
    top = max(c.usage for c in used)
    best = [c for c in used if c.usage == top]
    return next((c for c in best if "mismatches" not in c.metrics), best[0])


def result_row(res: CaseResult, backend: str, sha256: str, copy_bw: Optional[float] = None,
               source_path: Optional[str] = None, include_dirs: Sequence[str] = ()) -> dict:
    case = res.case
    head = headline(res)
    vacuous = [f"{c.output} vs {c.against}: {c.metrics['vacuous_budget']}" for c in res.comparisons
               if c.metrics.get("vacuous_budget")]
    row = {
        "case": case.name, "kernel": case.kernel, "family": case.family, "op": case.op,
        "mode": mode_label(case.mode), "shape": case.shape, "instance": case.instance, "variant": case.variant,
        "seed": case.seed, "backend": backend, "source_sha256": sha256, "verdict": res.verdict,
        "reason": res.reason, "dims": res.dims, "launch": res.launch,
        "headline_comparison": f"{head.output} vs {head.against}" if head else None,
        "metrics": {k: head.metrics.get(k) for k in PRIMARY_METRICS + ("metric_note",)
                    if k in head.metrics or k in PRIMARY_METRICS} if head else {},
        "error_distribution": head.histogram if head else None,
        "budget": head.budget if head else None,
        "budget_at_worst": head.budget_at_worst if head else None,
        "observed_at_worst": head.observed_at_worst if head else None,
        "margin": head.margin if head else None,
        "worst_comparison": f"{head.output} vs {head.against}" if head else None,
        "comparisons": [comparison_dict(c) for c in res.comparisons],
        "vacuous_budgets": vacuous,
        "kernel_ms": res.elapsed_ms, "bytes_moved": res.bytes_moved,
        "bandwidth_gbps": (res.bytes_moved / (res.elapsed_ms * 1e-3) / 1e9
                           if res.elapsed_ms and res.bytes_moved else None),
        "copy_bandwidth_gbps": copy_bw,
        "notes": list(res.notes),      # how the kernel was timed (batches, spread) or why it was not, and more
        "wall_s": round(res.wall_s, 4),
        "coverage": res.coverage,
        "replay": replay_command(case.name, source_path, "emu" if res.coverage else None,
                                 res.coverage["block_sampling"] if res.coverage else None,
                                 include_dirs) + _model_replay(case),
    }
    if row["bandwidth_gbps"] and copy_bw:
        row["bandwidth_fraction_of_copy"] = row["bandwidth_gbps"] / copy_bw
    return finite_json(row)


def _model_replay(case) -> str:
    """A model case replays only with the same checkpoint (and decode length)."""
    if case.variant != "model":
        return ""
    from harness.cases import model_inputs as case_inputs
    cap = case_inputs.active()
    return "" if cap is None else (f" --inputs-from {shlex.quote(cap.path)} --model-positions {cap.positions}")


def counts(rows: list[dict]) -> dict:
    out = {v: 0 for v in VERDICTS}
    for r in rows:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


# Exit statuses of a run (the README's "Exit status"): every judged case passed or tied / a case failed /
# nothing could be judged (every case unchecked, no case at all).
EXIT_PASS, EXIT_FAIL, EXIT_NOTHING_CHECKED = 0, 1, 3


def exit_status(rows: list[dict]) -> int:
    c = counts(rows)
    if c[FAIL]:
        return EXIT_FAIL
    return EXIT_PASS if c[PASS] + c[TIE] else EXIT_NOTHING_CHECKED


def combined_status(*statuses: int) -> int:
    """The status of a run made of parts: a failure anywhere fails it; it checked something when any part did."""
    if EXIT_FAIL in statuses:
        return EXIT_FAIL
    return EXIT_PASS if EXIT_PASS in statuses else max(statuses, default=EXIT_NOTHING_CHECKED)


def grouped_reasons(rows: list[dict], verdict: str) -> list[tuple[str, int, str]]:
    """(reason, count, an example case) for the rows of `verdict`, one entry per kind of reason, most frequent
    first. Cases of one kind differ only in their numbers (an index, a value), so the numbers are left out of
    the grouping key; the example keeps its own full reason."""
    groups: dict[str, list] = {}
    for r in rows:
        if r["verdict"] != verdict:
            continue
        reason = r.get("reason") or ""
        key = re.sub(r"[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)", "#", reason)
        groups.setdefault(key, []).append(r)
    out = [(g[0]["reason"] or "", len(g), g[0]["case"]) for g in groups.values()]
    return sorted(out, key=lambda t: -t[1])
