"""Write a conformance run as report.json (one row per case), report.md and report.html (an error
histogram per kernel as inline SVG). Files are written atomically (temporary file + rename)."""
from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Optional

from harness.cache import atomic_write
from harness.judging.records import VERDICTS, counts, finite_json
from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED

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
    lines += timing_section(meta, rows)
    lines += ["", "## Cases", "", "| case | verdict | max abs | max rel | NMSE | max ULP | cosine | budget at worst | "
              "margin | time ms | GB/s | blocks x schedules |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r.get("metrics") or {}
        cov = r.get("coverage") or {}
        lines.append(f"| `{r['case']}` | {r['verdict']} | {_fmt(m.get('max_abs'))} | {_fmt(m.get('max_rel'))} | "
                     f"{_fmt(m.get('nmse'))} | {_fmt(m.get('max_ulp'))} | {_fmt(m.get('cosine'), 9)} | "
                     f"{_fmt(r.get('budget_at_worst'))} | {_fmt(r.get('margin'))} | {_fmt(r.get('kernel_ms'))} | "
                     f"{_fmt(r.get('bandwidth_gbps'))} | {_fmt(cov.get('summary'))} |")
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


# -- HTML ----------------------------------------------------------------------------------------------------
def _svg_histogram(hist: Optional[dict], title: str) -> str:
    """A bar chart of an error distribution {"edges": [...], "counts": [...]} (log10 |err| bins)."""
    if not hist or not hist.get("counts"):
        return "<p><em>no error distribution (integer or exact output)</em></p>"
    cnt = [float(v) for v in hist["counts"]]
    edges = hist.get("edges") or list(range(len(cnt) + 1))
    w, h, pad = 360, 120, 24
    top = max(cnt) or 1.0
    bw = (w - 2 * pad) / len(cnt)
    bars = []
    for i, v in enumerate(cnt):
        bh = (h - 2 * pad) * (v / top)
        x = pad + i * bw
        label = f"[{_fmt(edges[i])}, {_fmt(edges[i + 1])}): {int(v)}" if i + 1 < len(edges) else str(int(v))
        bars.append(f'<rect x="{x:.1f}" y="{h - pad - bh:.1f}" width="{max(bw - 1, 1):.1f}" height="{bh:.1f}" '
                    f'fill="#4a7ab7"><title>{html.escape(label)}</title></rect>')
    unit = html.escape(str(hist.get("unit", "log10 |err|")))
    axis = (f'<text x="{pad}" y="{h - 6}" font-size="10">{_fmt(edges[0])}</text>'
            f'<text x="{w - pad}" y="{h - 6}" font-size="10" text-anchor="end">{_fmt(edges[-1])}</text>'
            f'<text x="{w / 2}" y="{h - 6}" font-size="10" text-anchor="middle">{unit}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
            f'aria-label="{html.escape(title)}"><rect width="{w}" height="{h}" fill="#fafafa"/>'
            + "".join(bars) + axis + "</svg>")


def _merge_hist(hists: list[dict]) -> Optional[dict]:
    """Sum histograms that share bin edges (the judge uses fixed log10 bins); else keep the first."""
    hists = [h for h in hists if h and h.get("counts")]
    if not hists:
        return None
    base = dict(hists[0])
    same = [h for h in hists if h.get("edges") == base.get("edges")]
    base["counts"] = [sum(vals) for vals in zip(*(h["counts"] for h in same))]
    return base


def html_report(doc: dict) -> str:
    meta, rows = doc["meta"], doc["rows"]
    c = doc["summary"]
    esc = html.escape
    css = ("body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;font-size:13px}"
           "td,th{border:1px solid #ccc;padding:2px 6px} .pass{color:#176317} .fail{color:#b00;font-weight:bold}"
           ".tie{color:#a60} .unchecked{color:#666} section{margin-bottom:1.5em} code{font-size:12px}")
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>qconform report</title><style>{css}</style>"
           "</head><body><h1>qconform conformance report</h1>",
           f"<p>backend <code>{esc(str(meta.get('backend')))}</code>, seed <code>{esc(str(meta.get('seed')))}</code>, "
           f"shapes {esc(', '.join(meta.get('shapes', [])))}; {len(rows)} cases: "
           f"<span class='pass'>{c['pass']} pass</span>, <span class='tie'>{c['tie']} tie</span>, "
           f"<span class='fail'>{c['fail']} fail</span>, <span class='unchecked'>{c['unchecked']} unchecked</span>"
           "</p>"]
    if doc.get("unchecked_kernels"):
        out.append("<h2>Kernels not checked</h2><ul>" + "".join(
            f"<li><code>{esc(u['kernel'])}</code>: {esc(u['reason'])}</li>" for u in doc["unchecked_kernels"])
            + "</ul>")
    by_kernel: dict = defaultdict(list)
    for r in rows:
        by_kernel[(r["kernel"], r["mode"])].append(r)
    agg = per_kernel(rows)
    out.append("<h2>Kernels</h2>")
    for (k, m), rs in sorted(by_kernel.items()):
        v = kernel_verdict(agg[(k, m)])
        hist = _merge_hist([r.get("error_distribution") for r in rs])
        out.append(f"<section><h3><code>{esc(k)}</code> [{esc(m)}] <span class='{v}'>{v}</span></h3>")
        out.append(_svg_histogram(hist, f"error histogram of {k} [{m}]"))
        out.append("<table><tr><th>case</th><th>verdict</th><th>max abs</th><th>max rel</th><th>NMSE</th>"
                   "<th>max ULP</th><th>cosine</th><th>budget at worst</th><th>margin</th><th>reason</th></tr>")
        for r in rs:
            mt = r.get("metrics") or {}
            out.append(f"<tr><td><code>{esc(r['case'])}</code></td><td class='{r['verdict']}'>{r['verdict']}</td>"
                       f"<td>{_fmt(mt.get('max_abs'))}</td><td>{_fmt(mt.get('max_rel'))}</td>"
                       f"<td>{_fmt(mt.get('nmse'))}</td><td>{_fmt(mt.get('max_ulp'))}</td>"
                       f"<td>{_fmt(mt.get('cosine'), 9)}</td><td>{_fmt(r.get('budget_at_worst'))}</td>"
                       f"<td>{_fmt(r.get('margin'))}</td><td>{esc(r['reason'][:400])}</td></tr>")
        out.append("</table></section>")
    out.append("</body></html>\n")
    return "".join(out)
