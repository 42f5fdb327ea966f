"""report.html: an overview grid first (kernel x mode x shape, each cell coloured by its worst verdict with its
minimum margin, linking to the kernel's section, failing kernels first), then one section per kernel and mode
with an error histogram (log10 |error| / budget, so 0 is the budget line) and every case, each case's
headline comparison in its row and every other comparison listed under it."""
from __future__ import annotations

import html
from collections import defaultdict
from typing import Optional

PASS, TIE, FAIL, UNCHECKED = "pass", "tie", "fail", "unchecked"
# worst first: a cell shows its worst verdict, and the grid lists kernels with failures first
SEVERITY = {FAIL: 0, UNCHECKED: 1, TIE: 2, PASS: 3}
COLOURS = {PASS: "#cfeccf", TIE: "#fde7b0", FAIL: "#f5b5b5", UNCHECKED: "#dddddd"}
esc = html.escape


def fmt(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def anchor(kernel: str, mode: str) -> str:
    return f"k-{kernel}-{mode}".replace(" ", "_")


def worst_verdict(verdicts) -> str:
    vs = list(verdicts)
    if not vs:
        return UNCHECKED
    # a cell whose only non-pass cases are unchecked still says unchecked: it was not fully judged
    return min(vs, key=lambda v: SEVERITY.get(v, 1))


def _min_margin(rows) -> Optional[float]:
    ms = [r.get("margin") for r in rows if isinstance(r.get("margin"), (int, float))]
    return min(ms) if ms else None


def overview(rows: list[dict]) -> str:
    """The grid: one row per kernel, one column per (mode, shape); failing kernels first."""
    cells: dict = defaultdict(list)
    for r in rows:
        cells[(r["kernel"], r["mode"], r["shape"])].append(r)
    cols = sorted({(m, s) for _, m, s in cells})
    kernels = sorted({k for k, _, _ in cells},
                     key=lambda k: (min(SEVERITY.get(r["verdict"], 1) for (kk, _, _), rs in cells.items()
                                        if kk == k for r in rs), k))
    head = "".join(f"<th>{esc(m)}<br><small>{esc(s)}</small></th>" for m, s in cols)
    out = ["<section id='overview'><h2>Overview</h2><p>Each cell: the worst verdict of the kernel's cases in that "
           "mode and shape set, and their minimum margin (1 - max |error| / budget; negative: over budget). "
           "Click a cell for the kernel's section. Kernels with failures come first.</p>",
           f"<table class='grid'><tr><th>kernel</th>{head}</tr>"]
    for k in kernels:
        tds = []
        for m, s in cols:
            rs = cells.get((k, m, s))
            if not rs:
                tds.append("<td class='empty'></td>")
                continue
            v = worst_verdict(r["verdict"] for r in rs)
            mm = _min_margin(rs)
            bad = sum(1 for r in rs if r["verdict"] != PASS)
            title = f"{len(rs)} cases, {bad} not pass; min margin {fmt(mm)}"
            tds.append(f"<td class='cell {v}' style='background:{COLOURS.get(v, '#fff')}' title='{esc(title)}'>"
                       f"<a href='#{anchor(k, m)}'>{v}<br><small>{fmt(mm, 2)}</small></a></td>")
        out.append(f"<tr><th class='kname'><a href='#{anchor(k, cols[0][0] if cols else '')}'><code>{esc(k)}</code>"
                   f"</a></th>{''.join(tds)}</tr>")
    out.append("</table></section>")
    return "".join(out)


def svg_histogram(hist: Optional[dict], title: str) -> str:
    """Bars of log10(|error| / budget) with labelled axes and the budget line at 0."""
    if not hist or not hist.get("counts") or not hist.get("edges"):
        return "<p class='nohist'><em>no error distribution: integer or bit-for-bit outputs only</em></p>"
    edges = [float(e) for e in hist["edges"]]
    cnt = [int(c) for c in hist["counts"]]
    below, above, exact = int(hist.get("below", 0)), int(hist.get("above", 0)), int(hist.get("exact", 0))
    w, h, left, right, top, bottom = 480, 190, 56, 16, 14, 44
    pw, ph = w - left - right, h - top - bottom
    peak = max(cnt + [below, above, 1])
    x_of = (lambda v: left + (v - edges[0]) / (edges[-1] - edges[0]) * pw)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
             f'aria-label="{esc(title)}"><rect width="{w}" height="{h}" fill="#fafafa"/>']
    for i, v in enumerate(cnt):
        x0, x1 = x_of(edges[i]), x_of(edges[i + 1])
        bh = ph * v / peak
        over = edges[i] >= 0
        parts.append(f'<rect x="{x0 + 0.5:.1f}" y="{top + ph - bh:.1f}" width="{max(x1 - x0 - 1, 1):.1f}" '
                     f'height="{bh:.1f}" fill="{"#c0392b" if over else "#4a7ab7"}"><title>{v} elements with '
                     f'log10(|err|/budget) in [{edges[i]:g}, {edges[i + 1]:g})</title></rect>')
    # axes, ticks, labels
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#333"/>'
                 f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#333"/>')
    for e in edges:
        x = x_of(e)
        parts.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 4}" stroke="#333"/>'
                     f'<text x="{x:.1f}" y="{top + ph + 15}" font-size="10" text-anchor="middle">{e:g}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{h - 6}" font-size="11" text-anchor="middle">'
                 f'log10(|error| / budget)   (0 = budget line; right of it: over budget)</text>')
    parts.append(f'<text x="{left - 6}" y="{top + 8}" font-size="10" text-anchor="end">{peak}</text>'
                 f'<text x="{left - 6}" y="{top + ph}" font-size="10" text-anchor="end">0</text>'
                 f'<text x="14" y="{top + ph / 2:.1f}" font-size="11" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top + ph / 2:.1f})">elements</text>')
    if edges[0] <= 0 <= edges[-1]:
        x = x_of(0.0)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#c0392b" '
                     f'stroke-dasharray="4 3"/><text x="{x + 3:.1f}" y="{top + 10}" font-size="10" '
                     f'fill="#c0392b">budget</text>')
    parts.append("</svg>")
    extra = (f"<p class='histnote'><small>{exact} elements exact (error 0); {below} below 10^{edges[0]:g} of their "
             f"budget; {above} above 10^{edges[-1]:g} of it; {int(hist.get('nan', 0))} not finite</small></p>")
    return "".join(parts) + extra


def merge_hist(hists: list) -> Optional[dict]:
    """Sum histograms that share bin edges (the judge uses fixed bins)."""
    hists = [h for h in hists if h and h.get("counts") and h.get("edges")]
    if not hists:
        return None
    base = dict(hists[0])
    same = [h for h in hists if h.get("edges") == base["edges"]]
    base["counts"] = [sum(v) for v in zip(*(h["counts"] for h in same))]
    for k in ("below", "above", "exact", "nan"):
        base[k] = sum(int(h.get(k, 0)) for h in same)
    return base


def _metric_cells(m: dict) -> str:
    note = m.get("metric_note")
    ulp = m.get("max_ulp")
    ulp_cell = fmt(ulp) if ulp is not None else f"<span title='{esc(note or '')}'>- <small>{esc(note or '')}</small></span>"
    return (f"<td>{fmt(m.get('max_abs'))}</td><td>{fmt(m.get('max_rel'))}</td><td>{fmt(m.get('nmse'))}</td>"
            f"<td>{ulp_cell}</td><td>{fmt(m.get('cosine'), 9)}</td>")


def _comparison_list(r: dict) -> str:
    others = [c for c in r.get("comparisons", []) if f"{c['output']} vs {c['against']}" != r.get("headline_comparison")]
    if not others:
        return ""
    items = []
    for c in others:
        m = c.get("metrics") or {}
        items.append(f"<li><code>{esc(c['output'])}</code> vs {esc(c['against'])}: <span class='{esc(c['verdict'])}'>"
                     f"{esc(c['verdict'])}</span>, margin {fmt(c.get('margin'))}, max abs {fmt(m.get('max_abs'))}, "
                     f"budget {esc(str(c.get('budget') or '-'))}{(' -- ' + esc(c['reason'][:300])) if c.get('reason') else ''}"
                     "</li>")
    return f"<details><summary>{len(others)} other comparison(s)</summary><ul>{''.join(items)}</ul></details>"


def html_report(doc: dict) -> str:
    meta, rows = doc["meta"], doc["rows"]
    c = doc["summary"]
    css = ("body{font-family:sans-serif;margin:2em;max-width:1300px} table{border-collapse:collapse;font-size:13px}"
           "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top} .pass{color:#176317} "
           ".fail{color:#b00;font-weight:bold} .tie{color:#a60} .unchecked{color:#666} section{margin-bottom:1.5em}"
           "code{font-size:12px} table.grid td.cell{text-align:center;min-width:64px;color:#111;font-weight:normal}"
           "table.grid td.cell a{color:#111;text-decoration:none;display:block} table.grid th.kname{text-align:left}"
           "td.empty{background:#fff}")
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>qconform report</title><style>{css}</style>"
           "</head><body><h1>qconform conformance report</h1>",
           f"<p>backend <code>{esc(str(meta.get('backend')))}</code>, seed <code>{esc(str(meta.get('seed')))}</code>, "
           f"shapes {esc(', '.join(meta.get('shapes', [])))}; {len(rows)} cases: "
           f"<span class='pass'>{c['pass']} pass</span>, <span class='tie'>{c['tie']} tie</span>, "
           f"<span class='fail'>{c['fail']} fail</span>, <span class='unchecked'>{c['unchecked']} unchecked</span>"
           "</p>", overview(rows)]
    if doc.get("unchecked_kernels"):
        out.append("<h2>Kernels not checked</h2><ul>" + "".join(
            f"<li><code>{esc(u['kernel'])}</code>: {esc(u['reason'])}</li>" for u in doc["unchecked_kernels"])
            + "</ul>")
    by_kernel: dict = defaultdict(list)
    for r in rows:
        by_kernel[(r["kernel"], r["mode"])].append(r)
    out.append("<h2>Kernels</h2>")
    order = sorted(by_kernel, key=lambda km: (SEVERITY.get(worst_verdict(r["verdict"] for r in by_kernel[km]), 1), km))
    for k, m in order:
        rs = by_kernel[(k, m)]
        v = worst_verdict(r["verdict"] for r in rs)
        out.append(f"<section id='{anchor(k, m)}'><h3><code>{esc(k)}</code> [{esc(m)}] <span class='{v}'>{v}</span>"
                   f" <small><a href='#overview'>overview</a></small></h3>")
        out.append(svg_histogram(merge_hist([r.get("error_distribution") for r in rs]),
                                 f"error histogram of {k} [{m}]: log10(|error| / budget)"))
        out.append("<table><tr><th>case</th><th>verdict</th><th>headline comparison</th><th>max abs</th>"
                   "<th>max rel</th><th>NMSE</th><th>max ULP</th><th>cosine</th><th>budget at worst</th>"
                   "<th>margin</th><th>reason, notes, other comparisons</th></tr>")
        for r in sorted(rs, key=lambda r: (SEVERITY.get(r["verdict"], 1), r["case"])):
            notes = "".join(f"<br><em>{esc(n)}</em>" for n in (r.get("vacuous_budgets") or []) + (r.get("notes") or []))
            out.append(f"<tr><td><code>{esc(r['case'])}</code></td><td class='{r['verdict']}'>{r['verdict']}</td>"
                       f"<td>{esc(str(r.get('headline_comparison') or '-'))}</td>{_metric_cells(r.get('metrics') or {})}"
                       f"<td>{fmt(r.get('budget_at_worst'))}</td><td>{fmt(r.get('margin'))}</td>"
                       f"<td>{esc(r['reason'][:400])}{notes}{_comparison_list(r)}</td></tr>")
        out.append("</table></section>")
    out.append("</body></html>\n")
    return "".join(out)
