"""The reports' inline SVG charts: line charts (the generation report) and error histograms (the conformance
report)."""
from __future__ import annotations

import html
import math
from typing import Optional

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def svg_lines(series: list[tuple[str, list[float], str]], title: str, xlabel: str, log: bool = True,
               marks: Optional[list[tuple[int, str]]] = None) -> str:
    w, h, pad = 560, 220, 44
    pts = [v for _, ys, _ in series for v in ys if v is not None and math.isfinite(v) and (v > 0 or not log)]
    n = max((len(ys) for _, ys, _ in series), default=0)
    if not pts or n == 0:
        return f"<p><em>{html.escape(title)}: nothing to draw</em></p>"
    f = (lambda v: math.log10(v)) if log else (lambda v: v)
    lo, hi = min(map(f, pts)), max(map(f, pts))
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1

    def xy(i, v):
        x = pad + (w - 2 * pad) * (i / max(n - 1, 1))
        y = h - pad - (h - 2 * pad) * ((f(v) - lo) / (hi - lo))
        return x, y

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" '
             f'aria-label="{html.escape(title)}"><rect width="{w}" height="{h}" fill="#fafafa"/>',
             f'<text x="{w / 2}" y="14" font-size="12" text-anchor="middle">{html.escape(title)}</text>']
    for i, (label, ys, color) in enumerate(series):
        coords = [xy(j, v) for j, v in enumerate(ys) if v is not None and math.isfinite(v) and (v > 0 or not log)]
        if coords:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
            dash = ' stroke-dasharray="4 3"' if label.startswith("bound") else ""
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{path}">'
                         f'<title>{html.escape(label)}</title></polyline>')
            for x, y in coords:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{color}"/>')
        parts.append(f'<text x="{w - pad + 4}" y="{30 + 12 * i}" font-size="10" fill="{color}">'
                     f'{html.escape(label)}</text>')
    for i, label in marks or []:
        x, _ = xy(i, 10 ** lo if log else lo)
        parts.append(f'<line x1="{x:.1f}" y1="{pad}" x2="{x:.1f}" y2="{h - pad}" stroke="#b00" '
                     f'stroke-width="1"><title>{html.escape(label)}</title></line>')
    ylab = (lambda v: f"1e{v:.1f}") if log else (lambda v: f"{v:.3g}")
    parts += [f'<text x="4" y="{pad}" font-size="10">{ylab(hi)}</text>',
              f'<text x="4" y="{h - pad}" font-size="10">{ylab(lo)}</text>',
              f'<text x="{pad}" y="{h - 8}" font-size="10">0</text>',
              f'<text x="{w - pad}" y="{h - 8}" font-size="10" text-anchor="end">{n - 1}</text>',
              f'<text x="{w / 2}" y="{h - 8}" font-size="10" text-anchor="middle">{html.escape(xlabel)}</text>',
              "</svg>"]
    return "".join(parts)


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
             f'aria-label="{html.escape(title)}"><rect width="{w}" height="{h}" fill="#fafafa"/>']
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


__all__ = ["COLORS", "svg_histogram", "svg_lines"]
