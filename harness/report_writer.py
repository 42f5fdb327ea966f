"""Write a conformance run as report.json (one row per case), report.md and report.html (harness.report_html:
an overview grid, then an error histogram per kernel as inline SVG). Files are written atomically
(temporary file + rename)."""
from __future__ import annotations

import json
import math
import shlex
from collections import defaultdict
from pathlib import Path
from typing import Optional

from emitters.registry import mode_label

from .judge import FAIL, PASS, TIE, UNCHECKED, CaseResult, Comparison
from .report_html import html_report
from harness.cache import atomic_write

REPORT_VERSION = 1
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


def replay_command(case_name: str, source_path: Optional[str] = None, backend: Optional[str] = None) -> str:
    cmd = ["qconform", "replay", case_name]
    if source_path:
        cmd += ["--source", source_path]
    if backend:
        cmd += ["--backend", backend]
    return " ".join(shlex.quote(c) for c in cmd)


def headline(res: CaseResult) -> Optional[Comparison]:
    """The comparison that speaks for the case: among the comparisons with the case's verdict (fail, else tie,
    else pass), the one nearest to (or furthest past) its budget, i.e. the largest usage; among equals the
    first float comparison. The row's metrics, budget and margin all come
    from it, so they describe one comparison; every other comparison stays listed under it."""
    if not res.comparisons:
        return None
    # the comparison that decided the verdict first (a failed one, else a tie), then the largest usage
    severity = {FAIL: 2, TIE: 1}
    worst = max(severity.get(c.verdict, 0) for c in res.comparisons)
    pool = [c for c in res.comparisons if severity.get(c.verdict, 0) == worst]
    used = [c for c in pool if c.usage is not None]
    if not used:
        return pool[0]
    top = max(c.usage for c in used)
    best = [c for c in used if c.usage == top]
    return next((c for c in best if "mismatches" not in c.metrics), best[0])


def result_row(res: CaseResult, contract, backend: str, sha256: str, copy_bw: Optional[float] = None,
               source_path: Optional[str] = None) -> dict:
    case = res.case
    head = headline(res)
    notes = [f"{c.output} vs {c.against}: {c.metrics['vacuous_budget']}" for c in res.comparisons
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
        "notes": notes,
        "kernel_ms": res.elapsed_ms, "bytes_moved": res.bytes_moved,
        "bandwidth_gbps": (res.bytes_moved / (res.elapsed_ms * 1e-3) / 1e9
                           if res.elapsed_ms and res.bytes_moved else None),
        "copy_bandwidth_gbps": copy_bw,
        "wall_s": round(res.wall_s, 4),
        "replay": replay_command(case.name, source_path) + _model_replay(case),
    }
    if row["bandwidth_gbps"] and copy_bw:
        row["bandwidth_fraction_of_copy"] = row["bandwidth_gbps"] / copy_bw
    return finite_json(row)


def _model_replay(case) -> str:
    """A model case replays only with the same checkpoint (and decode length)."""
    if case.variant != "model":
        return ""
    from .model import case_inputs
    cap = case_inputs.active()
    return "" if cap is None else (f" --inputs-from {shlex.quote(cap.path)} --model-positions {cap.positions}")


def counts(rows: list[dict]) -> dict:
    out = {v: 0 for v in VERDICTS}
    for r in rows:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


def write_reports(out_dir: Path, run) -> list[Path]:
    out_dir = Path(out_dir)
    doc = {"version": REPORT_VERSION, "meta": finite_json(run.meta), "summary": counts(run.rows),
           "unchecked_kernels": run.unchecked, "rows": run.rows}
    paths = [out_dir / "report.json", out_dir / "report.md", out_dir / "report.html"]
    atomic_write(paths[0], json.dumps(doc, indent=1, sort_keys=False) + "\n")
    atomic_write(paths[1], markdown(doc))
    atomic_write(paths[2], html_report(doc))
    return paths


# -- Markdown ------------------------------------------------------------------------------------------------
def _fmt(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def per_kernel(rows: list[dict]) -> dict:
    """(kernel, mode) -> verdict counts, worst usage, reasons."""
    agg: dict = defaultdict(lambda: {"cases": 0, **{v: 0 for v in VERDICTS}, "min_margin": None, "reasons": []})
    for r in rows:
        a = agg[(r["kernel"], r["mode"])]
        a["cases"] += 1
        a[r["verdict"]] += 1
        m = r.get("margin")
        if isinstance(m, (int, float)):
            a["min_margin"] = m if a["min_margin"] is None else min(a["min_margin"], m)
        if r["verdict"] in (FAIL, TIE, UNCHECKED) and r["reason"]:
            a["reasons"].append(f"{r['case']}: {r['reason']}")
    return agg


def kernel_verdict(a: dict) -> str:
    if a[FAIL]:
        return FAIL
    if a[UNCHECKED] and not (a[PASS] or a[TIE]):
        return UNCHECKED
    if a[TIE]:
        return TIE
    return PASS


def markdown(doc: dict) -> str:
    meta, rows = doc["meta"], doc["rows"]
    c = doc["summary"]
    lines = ["# qconform conformance report", ""]
    lines.append(f"- backend: `{meta.get('backend')}`; seed: `{meta.get('seed')}`; shapes: "
                 f"{', '.join(meta.get('shapes', []))}; modes: {', '.join(meta.get('modes', []))}")
    if meta.get("source"):
        lines.append(f"- source: `{meta['source']}` (sha256 `{meta.get('source_sha256', '')[:16]}...`)")
    lines.append(f"- cases: {len(rows)}: **{c['pass']} pass, {c['tie']} tie, {c['fail']} fail, "
                 f"{c['unchecked']} unchecked**")
    lines.append("- a budget is a derived per-element error bound; margin = 1 - max(|err| / budget) over the "
                 "compared outputs (negative: over budget)")
    lines.append("")
    lines += ["## Kernels", "", "| kernel | mode | verdict | cases | pass | tie | fail | unchecked | min margin |",
              "|---|---|---|---|---|---|---|---|---|"]
    agg = per_kernel(rows)
    for (k, m), a in sorted(agg.items()):
        lines.append(f"| `{k}` | {m} | **{kernel_verdict(a)}** | {a['cases']} | {a[PASS]} | {a[TIE]} | {a[FAIL]} | "
                     f"{a[UNCHECKED]} | {_fmt(a['min_margin'])} |")
    if doc.get("unchecked_kernels"):
        lines += ["", "## Kernels not checked", ""]
        for u in doc["unchecked_kernels"]:
            lines.append(f"- `{u['kernel']}`: {u['reason']}")
    lines += ["", "## Cases", "", "Each row's metrics, budget and margin come from its headline comparison (the "
              "one nearest its budget); `-` in max ULP: integer output or an all-zero reference (see the note in "
              "report.json).", "", "| case | verdict | headline | max abs | max rel | NMSE | max ULP | cosine | "
              "budget at worst | margin | time ms | GB/s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r.get("metrics") or {}
        lines.append(f"| `{r['case']}` | {r['verdict']} | {_fmt(r.get('headline_comparison'))} | "
                     f"{_fmt(m.get('max_abs'))} | {_fmt(m.get('max_rel'))} | "
                     f"{_fmt(m.get('nmse'))} | {_fmt(m.get('max_ulp'))} | {_fmt(m.get('cosine'), 9)} | "
                     f"{_fmt(r.get('budget_at_worst'))} | {_fmt(r.get('margin'))} | {_fmt(r.get('kernel_ms'))} | "
                     f"{_fmt(r.get('bandwidth_gbps'))} |")
    vac = [r for r in rows if r.get("notes")]
    if vac:
        lines += ["", "## Vacuous budgets", "", "These cases pass, but under a budget that an all-zero output would "
                  "meet too: the bound says nothing about them.", ""]
        lines += [f"- `{r['case']}`: {'; '.join(r['notes'])}" for r in vac]
    bad = [r for r in rows if r["verdict"] in (FAIL, TIE, UNCHECKED)]
    if bad:
        lines += ["", "## Failures, ties and unchecked cases", ""]
        for r in bad:
            lines.append(f"- **{r['verdict']}** `{r['case']}`: {r['reason']}")
            if r["verdict"] == FAIL:
                lines.append(f"  - replay: `{r['replay']}`")
    return "\n".join(lines) + "\n"


