"""Write a conformance run as report.json (one row per case), report.md and report.html (harness.reports.html:
an overview grid, then an error histogram per kernel as inline SVG). Files are written atomically
(temporary file + rename)."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

from harness.cache import atomic_write
from harness.judging.records import VERDICTS, counts, finite_json
from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED

from .html import fmt, html_report

REPORT_VERSION = 1


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
_fmt = fmt      # one number format for the Markdown and the HTML report


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
    lines += timing_section(meta, rows)
    lines += ["", "## Cases", "", "Each row's metrics, budget and margin come from its headline comparison (the "
              "one nearest its budget); `-` in max ULP: integer output or an all-zero reference (see the note in "
              "report.json).", "", "| case | verdict | headline | max abs | max rel | NMSE | max ULP | cosine | "
              "budget at worst | margin | time ms | GB/s | blocks x schedules |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r.get("metrics") or {}
        cov = r.get("coverage") or {}
        lines.append(f"| `{r['case']}` | {r['verdict']} | {_fmt(r.get('headline_comparison'))} | "
                     f"{_fmt(m.get('max_abs'))} | {_fmt(m.get('max_rel'))} | "
                     f"{_fmt(m.get('nmse'))} | {_fmt(m.get('max_ulp'))} | {_fmt(m.get('cosine'), 9)} | "
                     f"{_fmt(r.get('budget_at_worst'))} | {_fmt(r.get('margin'))} | {_fmt(r.get('kernel_ms'))} | "
                     f"{_fmt(r.get('bandwidth_gbps'))} | {_fmt(cov.get('summary'))} |")
    vac = [r for r in rows if r.get("vacuous_budgets")]
    if vac:
        lines += ["", "## Vacuous budgets", "", "These cases pass, but under a budget that an all-zero output would "
                  "meet too: the bound says nothing about them.", ""]
        lines += [f"- `{r['case']}`: {'; '.join(r['vacuous_budgets'])}" for r in vac]
    bad = [r for r in rows if r["verdict"] in (FAIL, TIE, UNCHECKED)]
    if bad:
        lines += ["", "## Failures, ties and unchecked cases", ""]
        for r in bad:
            lines.append(f"- **{r['verdict']}** `{r['case']}`: {r['reason']}")
            if r["verdict"] == FAIL:
                lines.append(f"  - replay: `{r['replay']}`")
    return "\n".join(lines) + "\n"


def timing_section(meta: dict, rows: list[dict]) -> list[str]:
    """Where kernels were timed (a GPU): the copy bandwidth they are compared with, how many cases were timed,
    and each case whose timing was skipped, with the reason (another process held the device, a failed launch)."""
    if meta.get("copy_bandwidth_gbps") is None and not meta.get("copy_bandwidth_note") \
            and not any(r.get("kernel_ms") is not None for r in rows):
        return []
    lines = ["", "## Timing", ""]
    if meta.get("copy_bandwidth_gbps") is not None:
        lines.append(f"- device-to-device copy bandwidth (bytes read + written, same warm-up and batching as the "
                     f"kernels): {_fmt(meta['copy_bandwidth_gbps'])} GB/s")
    if meta.get("copy_bandwidth_note"):
        lines.append(f"- {meta['copy_bandwidth_note']}")
    timed = sum(1 for r in rows if r.get("kernel_ms") is not None)
    lines.append(f"- {timed} of {len(rows)} cases timed")
    for r in rows:
        for note in r.get("notes") or ():
            if note.startswith(("timing skipped", "timing launch failed")):
                lines.append(f"  - `{r['case']}`: {note}")
    return lines
