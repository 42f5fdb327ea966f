"""The HTML-only parts of the conformance report (harness.reports.writer): the overview grid (kernel x mode x
shape, each cell coloured by its worst verdict with its minimum margin, linking to the kernel's section,
failing kernels first) and the richer cells of the case table (a case's other comparisons, folded)."""
from __future__ import annotations

import html
from collections import defaultdict
from typing import Optional

from harness.judging.registry import PASS

from .document import COLOURS, SEVERITY, fmt, worst_verdict

esc = html.escape


def anchor(kernel: str, mode: str) -> str:
    return f"k-{kernel}-{mode}".replace(" ", "_")


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


def ulp_note(m: dict) -> str:
    """The max-ULP cell where there is no ULP figure: '-' with the reason."""
    note = esc(m.get("metric_note") or "")
    return f"<span title='{note}'>- <small>{note}</small></span>"


def comparison_list(r: dict) -> str:
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


__all__ = ["anchor", "comparison_list", "merge_hist", "overview", "ulp_note"]
