"""Write a conformance run as report.json (one row per case), report.md and report.html, written atomically
(temporary file + rename). Both documents are the same blocks (harness.reports.document): the summary, the
per-kernel verdicts, then per kernel and mode its error histogram (HTML) and every case, each case's metrics,
budget and margin from its headline comparison; the HTML page opens with the overview grid
(harness.reports.html)."""
from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path

from harness.cache import atomic_write
from harness.judging.records import VERDICTS, counts, finite_json
from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED

from .charts import svg_histogram
from .document import (SEVERITY, Block, Cell, Chart, Heading, Items, Raw, Table, Text, fmt, html_page, markdown,
                       worst_verdict)
from .html import anchor, comparison_list, merge_hist, overview, ulp_note

REPORT_VERSION = 1


def write_reports(out_dir: Path, run) -> list[Path]:
    out_dir = Path(out_dir)
    doc = {"version": REPORT_VERSION, "meta": finite_json(run.meta), "summary": counts(run.rows),
           "unchecked_kernels": run.unchecked, "rows": run.rows}
    paths = [out_dir / "report.json", out_dir / "report.md", out_dir / "report.html"]
    atomic_write(paths[0], json.dumps(doc, indent=1, sort_keys=False) + "\n")
    atomic_write(paths[1], markdown(blocks(doc)))
    atomic_write(paths[2], html_report(doc))
    return paths


def html_report(doc: dict) -> str:
    return html_page("qconform report", blocks(doc, grid=True))


# -- row builders ----------------------------------------------------------------------------------------------------
def per_kernel(rows: list[dict]) -> dict:
    """(kernel, mode) -> its rows, in the report's order."""
    groups: dict = defaultdict(list)
    for r in rows:
        groups[(r["kernel"], r["mode"])].append(r)
    return groups


def _min_margin(rows: list[dict]):
    ms = [r.get("margin") for r in rows if isinstance(r.get("margin"), (int, float))]
    return min(ms) if ms else None


def kernel_table(rows: list[dict]) -> Table:
    t = Table(["kernel", "mode", "verdict", "cases", *VERDICTS, "min margin"])
    for (k, m), rs in sorted(per_kernel(rows).items()):
        v = worst_verdict(r["verdict"] for r in rs)
        t.add([Cell(k, code=True), m, Cell(v, v), len(rs), *(sum(r["verdict"] == x for r in rs) for x in VERDICTS),
               _min_margin(rs)], v)
    return t


def case_table(rows: list[dict]) -> Table:
    t = Table(["case", "verdict", "headline", "max abs", "max rel", "NMSE", "max ULP", "cosine", "budget at worst",
               "margin", "time ms", "GB/s", "blocks x schedules", "reason, notes, other comparisons"])
    for r in sorted(rows, key=lambda r: (SEVERITY.get(r["verdict"], 1), r["case"])):
        m = r.get("metrics") or {}
        notes = [*(r.get("vacuous_budgets") or []), *(r.get("notes") or [])]
        reason = r["reason"][:400]
        html_reason = "".join([html.escape(reason), *(f"<br><em>{html.escape(n)}</em>" for n in notes), comparison_list(r)])
        ulp = Cell(fmt(m.get("max_ulp"))) if m.get("max_ulp") is not None else Cell("-", html=ulp_note(m))
        t.add([Cell(r["case"], code=True), Cell(r["verdict"], r["verdict"]), r.get("headline_comparison"),
               m.get("max_abs"), m.get("max_rel"), m.get("nmse"), ulp, fmt(m.get("cosine"), 9),
               r.get("budget_at_worst"), r.get("margin"), r.get("kernel_ms"), r.get("bandwidth_gbps"),
               (r.get("coverage") or {}).get("summary"), Cell(reason, html=html_reason)], r["verdict"])
    return t


# -- blocks ----------------------------------------------------------------------------------------------------------
def summary_blocks(doc: dict) -> list[Block]:
    meta, rows, c = doc["meta"], doc["rows"], doc["summary"]
    out: list[Block] = [Heading("qconform conformance report", 1),
                        Text(f"backend `{meta.get('backend')}`; seed `{meta.get('seed')}`; shapes "
                             f"{', '.join(meta.get('shapes', []))}; modes {', '.join(meta.get('modes', []))}")]
    if meta.get("source"):
        out.append(Text(f"source `{meta['source']}` (sha256 `{meta.get('source_sha256', '')[:16]}...`)"))
    out += [Text(f"{len(rows)} cases: **{c[PASS]} pass, {c[TIE]} tie, {c[FAIL]} fail, {c[UNCHECKED]} unchecked**"),
            Text("A budget is a derived per-element error bound; margin = 1 - max(|err| / budget) over the compared "
                 "outputs (negative: over budget).")]
    return out


def unchecked_blocks(doc: dict) -> list[Block]:
    if not doc.get("unchecked_kernels"):
        return []
    return [Heading("Kernels not checked"), Items([f"`{u['kernel']}`: {u['reason']}" for u in doc["unchecked_kernels"]])]


def timing_section(meta: dict, rows: list[dict]) -> list[Block]:
    """Where kernels were timed (a GPU): the copy bandwidth they are compared with, how many cases were timed,
    and each case whose timing was skipped, with the reason (another process held the device, a failed launch)."""
    if meta.get("copy_bandwidth_gbps") is None and not meta.get("copy_bandwidth_note") \
            and not any(r.get("kernel_ms") is not None for r in rows):
        return []
    items = []
    if meta.get("copy_bandwidth_gbps") is not None:
        items.append(f"device-to-device copy bandwidth (bytes read + written, same warm-up and batching as the "
                     f"kernels): {fmt(meta['copy_bandwidth_gbps'])} GB/s")
    if meta.get("copy_bandwidth_note"):
        items.append(meta["copy_bandwidth_note"])
    timed = sum(1 for r in rows if r.get("kernel_ms") is not None)
    items.append(f"{timed} of {len(rows)} cases timed")
    skipped = [f"`{r['case']}`: {note}" for r in rows for note in r.get("notes") or ()
               if note.startswith(("timing skipped", "timing launch failed"))]
    return [Heading("Timing"), Items(items), *([Text("Timing skipped:"), Items(skipped)] if skipped else [])]


def case_blocks(rows: list[dict]) -> list[Block]:
    groups = per_kernel(rows)
    out: list[Block] = [Heading("Cases"),
                        Text("Per kernel and mode: a histogram of log10(|error| / budget) of every compared element "
                             "(0 is the budget line; HTML report) and every case, worst first. Each row's metrics, "
                             "budget and margin come from its headline comparison (the one nearest its budget); `-` in "
                             "max ULP: integer output or an all-zero reference (see the note in report.json).")]
    order = sorted(groups, key=lambda km: (SEVERITY.get(worst_verdict(r["verdict"] for r in groups[km]), 1), km))
    for k, m in order:
        rs = groups[(k, m)]
        v = worst_verdict(r["verdict"] for r in rs)
        out += [Heading(f"`{k}` [{m}] {v}", 3, anchor=anchor(k, m)),
                Chart(svg_histogram(merge_hist([r.get("error_distribution") for r in rs]),
                                    f"error histogram of {k} [{m}]: log10(|error| / budget)")),
                case_table(rs)]
    return out


def attention_blocks(rows: list[dict]) -> list[Block]:
    """Vacuous budgets, then every failure, tie and unchecked case with its reason (a failure with its replay)."""
    out: list[Block] = []
    vac = [r for r in rows if r.get("vacuous_budgets")]
    if vac:
        out += [Heading("Vacuous budgets"), Text("These cases pass, but under a budget that an all-zero output would "
                                                 "meet too: the bound says nothing about them.")]
        out.append(Items([f"`{r['case']}`: {'; '.join(r['vacuous_budgets'])}" for r in vac]))
    bad = [r for r in rows if r["verdict"] in (FAIL, TIE, UNCHECKED)]
    if bad:
        out += [Heading("Failures, ties and unchecked cases"),
                Items([f"**{r['verdict']}** `{r['case']}`: {r['reason']}"
                       + (f" (replay: `{r['replay']}`)" if r["verdict"] == FAIL and r.get("replay") else "")
                       for r in bad])]
    return out


def blocks(doc: dict, grid: bool = False) -> list[Block]:
    """The report; `grid`: with the HTML overview grid."""
    rows = doc["rows"]
    return [*summary_blocks(doc), *([Raw(overview(rows))] if grid else []), Heading("Kernels"), kernel_table(rows),
            *unchecked_blocks(doc), *timing_section(doc["meta"], rows), *case_blocks(rows), *attention_blocks(rows)]


__all__ = ["REPORT_VERSION", "blocks", "case_table", "html_report", "kernel_table", "timing_section",
           "write_reports"]
