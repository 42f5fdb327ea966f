"""A judged case as a JSON-ready record: the row report.json holds for it, its replay command, and the verdict
counts of a run. In: `CaseResult`s and what ran them (contract, backend, source hash). Out: plain dicts with
non-finite floats spelled as strings, so the files stay valid JSON."""
from __future__ import annotations

import math
import shlex
from typing import Optional

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
                   schedules: Optional[str] = None) -> str:
    cmd = ["qconform", "replay", case_name]
    if source_path:
        cmd += ["--source", source_path]
    if backend:
        cmd += ["--backend", backend]
    if schedules:    # the emu block sampling the case ran with (the sample follows from it and the grid)
        cmd += ["--schedules", schedules]
    return " ".join(shlex.quote(c) for c in cmd)


def _primary(res: CaseResult) -> Optional[Comparison]:
    """The comparison that speaks for the case: the worst-used float comparison against the mode-faithful
    reference, else the first comparison."""
    floats = [c for c in res.comparisons if c.usage is not None and c.against == "mode" and c.metrics.get("max_abs")
              is not None]
    if floats:
        return max(floats, key=lambda c: c.usage)
    return res.comparisons[0] if res.comparisons else None


def result_row(res: CaseResult, contract, backend: str, sha256: str, copy_bw: Optional[float] = None,
               source_path: Optional[str] = None) -> dict:
    case = res.case
    prim = _primary(res)
    worst = max((c for c in res.comparisons if c.usage is not None), key=lambda c: c.usage, default=None)
    row = {
        "case": case.name, "kernel": case.kernel, "family": case.family, "op": case.op,
        "mode": mode_label(case.mode), "shape": case.shape, "instance": case.instance, "variant": case.variant,
        "seed": case.seed, "backend": backend, "source_sha256": sha256, "verdict": res.verdict,
        "reason": res.reason, "dims": res.dims, "launch": res.launch,
        "metrics": {k: prim.metrics.get(k) for k in PRIMARY_METRICS} if prim else {},
        "error_distribution": prim.histogram if prim else None,
        "budget": prim.budget if prim else None,
        "budget_at_worst": prim.budget_at_worst if prim else None,
        "observed_at_worst": prim.observed_at_worst if prim else None,
        "margin": worst.margin if worst else None,
        "worst_comparison": f"{worst.output} vs {worst.against}" if worst else None,
        "comparisons": [comparison_dict(c) for c in res.comparisons],
        "kernel_ms": res.elapsed_ms, "bytes_moved": res.bytes_moved,
        "bandwidth_gbps": (res.bytes_moved / (res.elapsed_ms * 1e-3) / 1e9
                           if res.elapsed_ms and res.bytes_moved else None),
        "copy_bandwidth_gbps": copy_bw,
        "notes": list(res.notes),      # how the kernel was timed (batches, spread) or why it was not, and more
        "wall_s": round(res.wall_s, 4),
        "coverage": res.coverage,
        "replay": replay_command(case.name, source_path, "emu" if res.coverage else None,
                                 res.coverage["block_sampling"] if res.coverage else None),
    }
    if row["bandwidth_gbps"] and copy_bw:
        row["bandwidth_fraction_of_copy"] = row["bandwidth_gbps"] / copy_bw
    return finite_json(row)


def counts(rows: list[dict]) -> dict:
    out = {v: 0 for v in VERDICTS}
    for r in rows:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out
