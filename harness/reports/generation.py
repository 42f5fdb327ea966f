"""Write a generation run (harness.model.generation.GenerationRun) as report.json, report.md and report.html
(inline SVG: exact's margin and each lane's bound per generated step; hidden-state error per layer)."""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Callable, Optional

from harness.cache import atomic_write
from harness.judging.records import finite_json

from harness.model.generation import GenerationRun, StreamResult
from reference.decoder import LOGIT_BOUND_FAILURE

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")


def run_dict(run: GenerationRun, piece: Optional[Callable[[int], str]] = None) -> dict:
    def stream(s: StreamResult) -> dict:
        d = {"name": s.name, "verdict": s.verdict, "tokens": s.tokens,
             "divergence": s.divergence.as_dict() if s.divergence else None, "teacher_forced": s.teacher,
             "per_step": s.per_step, "hidden_error_per_layer": s.hidden_error}
        if s.bound_lane:
            d["judged_with_bound_of"] = s.bound_lane
            d["leading_tokens_equal_to_that_lane"] = s.agrees_with_lane
        if piece is not None:
            d["pieces"] = [piece(t) for t in s.tokens]
        return d

    doc = {"kind": "generation", "model": run.model, "config": run.config, "prompt": run.prompt,
           "n_tokens": run.n_tokens, "exact_tokens": run.exact_tokens, "exact_margins": run.exact_margins,
           "lanes": [stream(s) for s in run.lanes], "external": [stream(s) for s in run.external],
           "router_effect": vars(run.router), "elapsed_s": round(run.elapsed_s, 3),
           "failed": run.failed}
    if piece is not None:
        doc["prompt_pieces"] = [piece(t) for t in run.prompt]
        doc["exact_pieces"] = [piece(t) for t in run.exact_tokens]
    return doc


def _g(v, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        return f"{v:.{digits}g}"
    return str(v)


def _bound_cells(t: dict, within: str, between: str) -> str:
    """The observed error and the bound side by side: the median step's largest logit error / the bound of that
    token, then the ratio bound / error over the steps (min, median)."""
    return (f"{_g(t['median_step_error'])}{within}{_g(t['median_step_bound'])}{between}"
            f"{_g(t['bound_over_error_min'])}, {_g(t['bound_over_error_median'])}")


def _tok(t: int, piece) -> str:
    return f"{t} `{piece(t)}`" if piece else str(t)


def markdown(run: GenerationRun, piece=None) -> str:
    out = [f"# qconform generate: {run.model}", "",
           f"prompt {run.prompt}, {run.n_tokens} tokens, {run.elapsed_s:.1f} s", "",
           "## Verdicts (free-running, against the exact lane)", "",
           "| stream | verdict | first divergence | exact token | its token | exact margin | exact gap | bound "
           "(head + drift) |", "|---|---|---|---|---|---|---|---|"]
    for s in run.lanes + run.external:
        d = s.divergence
        if d is None:
            out.append(f"| {s.name} | {s.verdict} | none | | | | | |")
        else:
            out.append(f"| {s.name} | {s.verdict} | {d.index} | {_tok(d.exact_token, piece)} | "
                       f"{_tok(d.lane_token, piece)} | {_g(d.exact_margin)} | {_g(d.exact_gap)} | "
                       f"{_g(d.bound)} ({_g(d.bound_head)} + {_g(d.bound_drift)}) |")
    out += ["", "## Token streams", "", "| step | exact | " + " | ".join(s.name for s in run.lanes + run.external)
            + " |", "|---" * (2 + len(run.lanes) + len(run.external)) + "|"]
    for i, t in enumerate(run.exact_tokens):
        cells = []
        for s in run.lanes + run.external:
            u = s.tokens[i] if i < len(s.tokens) else None
            cells.append("" if u is None else (_tok(u, piece) if u != t else "="))
        out.append(f"| {i} | {_tok(t, piece)} | " + " | ".join(cells) + " |")
    out += ["", "## Teacher-forced (every stream fed the exact lane's tokens)", "",
            "| stream | steps | same top-1 | KL mean | KL p99 | KL max | RMS dp | max logit error | budget use | "
            "median step: error / bound | bound / error: min, median |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in run.lanes + run.external:
        t = s.teacher
        out.append(f"| {s.name} | {t['steps']} | {100 * t['top1_agreement']:.1f}% | {_g(t['kl_mean'])} | "
                   f"{_g(t['kl_p99'])} | {_g(t['kl_max'])} | {_g(t['rms_delta_p'])} | {_g(t['max_logit_error'])} | "
                   f"{_g(t['budget_usage'])} | {_bound_cells(t, ' / ', ' | ')} |")
    for s in run.external:
        out.append(f"\n{s.name} is judged with the `{s.bound_lane}` lane's bound; its first {s.agrees_with_lane} of "
                   f"{len(s.tokens)} tokens equal that lane's free-running stream.")
    r = run.router
    out += ["", "## F32-router effect (exact lane, float router instead of the Q8_0 one)", ""]
    if not r.available:
        out.append(f"not available: {r.reason}")
    else:
        out.append(f"{r.steps} teacher-forced steps; routing flips per layer {r.flips_per_layer}; max logit "
                   f"difference {_g(r.max_logit_diff)}; same top-1 {100 * r.top1_agreement:.1f}%")
    out += ["", "## Hidden-state error per layer (teacher-forced, max over steps, relative)", "",
            "| layer | " + " | ".join(s.name for s in run.lanes) + " |", "|---" * (1 + len(run.lanes)) + "|"]
    for li in range(run.config.get("n_layer", 0)):
        out.append(f"| {li} | " + " | ".join(_g(s.hidden_error[li]) for s in run.lanes) + " |")
    out += ["", "A lane's bound at a step is derived in docs/NUMERICS.md (\"Logit bound\"): the LM head's own "
            "arithmetic in the lane's mode plus the measured drift of its input, propagated through the head as "
            f"independent errors (Hoeffding), holding at each step except with probability {LOGIT_BOUND_FAILURE:g}."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- SVG
def _svg_lines(series: list[tuple[str, list[float], str]], title: str, xlabel: str, log: bool = True,
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


def html_report(run: GenerationRun, piece=None) -> str:
    esc = html.escape
    css = ("body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;font-size:13px}"
           "td,th{border:1px solid #ccc;padding:2px 6px} .pass{color:#176317} .fail{color:#b00;font-weight:bold}"
           ".tie{color:#a60} code{font-size:12px} .diff{background:#fee}")
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>qconform generate</title><style>{css}</style>"
           f"</head><body><h1>qconform generate: {esc(run.model)}</h1>",
           f"<p>prompt <code>{esc(str(run.prompt))}</code>, {run.n_tokens} tokens, {run.elapsed_s:.1f} s</p>",
           "<h2>Verdicts</h2><table><tr><th>stream</th><th>verdict</th><th>first divergence</th><th>exact token</th>"
           "<th>its token</th><th>exact margin</th><th>exact gap</th><th>bound</th><th>head</th><th>drift</th></tr>"]
    for s in run.lanes + run.external:
        d = s.divergence
        cells = ["none", "", "", "", "", "", "", ""] if d is None else [
            str(d.index), esc(_tok(d.exact_token, piece)), esc(_tok(d.lane_token, piece)), _g(d.exact_margin),
            _g(d.exact_gap), _g(d.bound), _g(d.bound_head), _g(d.bound_drift)]
        out.append(f"<tr><td>{esc(s.name)}</td><td class='{s.verdict}'>{s.verdict}</td>"
                   + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table><h2>Token streams</h2><table><tr><th>step</th><th>exact</th>"
               + "".join(f"<th>{esc(s.name)}</th>" for s in run.lanes + run.external) + "</tr>")
    for i, t in enumerate(run.exact_tokens):
        row = f"<tr><td>{i}</td><td>{esc(_tok(t, piece))}</td>"
        for s in run.lanes + run.external:
            u = s.tokens[i] if i < len(s.tokens) else None
            cls = " class='diff'" if u != t else ""
            row += f"<td{cls}>{'' if u is None else esc(_tok(u, piece))}</td>"
        out.append(row + "</tr>")
    out.append("</table><h2>Teacher-forced statistics</h2><table><tr><th>stream</th><th>steps</th><th>same top-1</th>"
               "<th>KL mean</th><th>KL p99</th><th>KL max</th><th>RMS &Delta;p</th><th>max logit error</th>"
               "<th>budget use</th><th>median step: error / bound</th><th>bound / error: min, median</th></tr>")
    for s in run.lanes + run.external:
        t = s.teacher
        out.append(f"<tr><td>{esc(s.name)}</td><td>{t['steps']}</td><td>{100 * t['top1_agreement']:.1f}%</td>"
                   f"<td>{_g(t['kl_mean'])}</td><td>{_g(t['kl_p99'])}</td><td>{_g(t['kl_max'])}</td>"
                   f"<td>{_g(t['rms_delta_p'])}</td><td>{_g(t['max_logit_error'])}</td>"
                   f"<td>{_g(t['budget_usage'])}</td><td>{_bound_cells(t, ' / ', '</td><td>')}</td></tr>")
    out.append("</table>")
    for s in run.external:
        out.append(f"<p>{esc(s.name)} is judged with the <code>{esc(str(s.bound_lane))}</code> lane's bound; its first "
                   f"{s.agrees_with_lane} of {len(s.tokens)} tokens equal that lane's free-running stream.</p>")
    out.append("<h2>Margin and bound per step</h2>"
               "<p>Exact lane's top-1/top-2 margin (solid) and each lane's derived bound on that margin's change "
               "(dashed); a lane can flip a token only where its bound reaches the margin. Red line: first "
               "divergence.</p>")
    for s in run.lanes:
        series = [("exact margin", [r["margin"] for r in s.per_step], COLORS[0]),
                  (f"bound {s.name}", [r["bound"] for r in s.per_step], COLORS[1]),
                  (f"bound {s.name} (head only)", [r["bound_head"] for r in s.per_step], COLORS[2])]
        marks = [(s.divergence.index, "first divergence")] if s.divergence else []
        out.append(f"<h3>{esc(s.name)} <span class='{s.verdict}'>{s.verdict}</span></h3>"
                   + _svg_lines(series, f"{s.name}: margin and bound per generated step", "generated step",
                                marks=marks))
    layers = [(s.name, s.hidden_error or [], COLORS[(i + 1) % len(COLORS)]) for i, s in enumerate(run.lanes)]
    out.append("<h2>Hidden-state error per layer</h2><p>max over teacher-forced steps of "
               "max|x<sub>lane</sub> - x<sub>exact</sub>| / max|x<sub>exact</sub>|, residual after each layer.</p>"
               + _svg_lines(layers, "relative hidden-state error per layer", "layer"))
    r = run.router
    out.append("<h2>F32-router effect</h2>")
    if not r.available:
        out.append(f"<p>not available: {esc(r.reason)}</p>")
    else:
        out.append(f"<p>{r.steps} teacher-forced steps of the exact lane with the float router: routing flips per "
                   f"layer <code>{esc(str(r.flips_per_layer))}</code>, max logit difference "
                   f"{_g(r.max_logit_diff)}, same top-1 {100 * r.top1_agreement:.1f}%.</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_generation_report(out_dir: "str | Path", run: GenerationRun,
                            piece: Optional[Callable[[int], str]] = None) -> list[Path]:
    out = Path(out_dir)
    paths = [out / "report.json", out / "report.md", out / "report.html"]
    atomic_write(paths[0], json.dumps(finite_json(run_dict(run, piece)), indent=1, allow_nan=False) + "\n")
    atomic_write(paths[1], markdown(run, piece))
    atomic_write(paths[2], html_report(run, piece))
    return paths
