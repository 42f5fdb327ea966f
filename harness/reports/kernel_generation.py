"""The generation report with the kernels: the part-1 report (harness.reports.generation) plus, per kernel
lane, the kernels against the reference lane (verdict, per-step logit error against the budget as a chart,
teacher-forced statistics), the blame section and the token-lock checks. Same three files."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Callable, Optional, Sequence

from harness.cache import atomic_write
from harness.judging.records import finite_json

from harness.model.generation import GenerationRun
from harness.model.kernel_lane import KernelLaneResult
from harness.model.locks import LockCheck

from .generation import COLORS, _g, _svg_lines, _tok, html_report, markdown, run_dict

BLAME_HELP = ("Blame reruns the first step where the kernels left the lane's budget, launch by launch, each launch "
              "fed the reference lane's values of its inputs (weights, the earlier positions' KV rows, the buffers "
              "the step's earlier launches wrote). Each launch is judged by its own conformance judge under its "
              "per-case budget; the first one out of budget is the kernel to blame, and the command reruns that "
              "launch alone. 'Every launch within budget' means the per-kernel budgets compose worse than they "
              "claim.")


def _cell(text) -> str:
    """Text safe inside a markdown table cell (the budgets' |err| would split it)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _blame_md(b: dict) -> list[str]:
    out = [f"**Blame (step {b['step']})**: {b['finding']}", ""]
    if b.get("replay"):
        out += [f"    {b['replay']}", ""]
    bl = b.get("blamed")
    if bl:
        out += ["| kernel | layer | step | output | largest-error element | budget use | budget there | reason |",
                "|---|---|---|---|---|---|---|---|",
                f"| `{bl['kernel']}` | {bl['layer']} | {b['step']} | {_cell(bl['output'] or bl.get('fault') or '')} | "
                f"{bl['worst_index']} | {_g(bl['usage'])} | {_g(bl['budget'])} | "
                f"{_cell((bl['reason'] or '').splitlines()[0][:300]) if bl['reason'] else ''} |", ""]
    worst = sorted((l for l in b["launches"] if l.get("usage") is not None), key=lambda l: -l["usage"])[:5]
    if worst:
        out += ["Largest budget use of the rerun launches:", "", "| launch | verdict | output | usage |",
                "|---|---|---|---|"]
        out += [f"| {l['where']} | {l['verdict']} | {_cell(l['output'])} | {_g(l['usage'])} |" for l in worst]
        out.append("")
    for n in b.get("notes") or []:
        out.append(f"- note: {n}")
    return out


def kernel_markdown(results: Sequence[KernelLaneResult], locks: Sequence[LockCheck], piece=None) -> str:
    out = ["", "## Kernels against their reference lane", "",
           "The kernels run as the generation program runs them; the reference lane is fed the kernels' own tokens "
           "so every step compares. A different token is a tie only where the reference's gap is within the two "
           "tokens' budgets (docs/NUMERICS.md, \"Kernels against their lane\").", "",
           "| lane | backend | verdict | first bad step | max budget use | tokens = lane's | s/step | source |",
           "|---|---|---|---|---|---|---|---|"]
    for r in results:
        use = max((s.usage for s in r.steps), default=None)
        first = "none" if r.first_bad is None else str(r.steps[r.first_bad].step)
        if r.fault:
            first = f"fault: {r.fault.splitlines()[0][:200]}"
        out.append(f"| {r.lane} | {r.backend} | {r.verdict} | {first} | {_g(use)} | "
                   f"{'yes' if r.tokens == r.ref_tokens else 'no'} | {r.seconds_per_step:.3f} | {r.source} |")
    for r in results:
        out += ["", f"### {r.lane} ({r.backend}): {r.verdict}", "",
                "kernels: " + " ".join(_tok(t, piece) for t in r.tokens),
                "", "lane:    " + " ".join(_tok(t, piece) for t in r.ref_tokens), ""]
        bad = [s for s in r.steps if s.verdict != "pass"]
        if bad:
            out += ["| step | position | kernel token | lane token | verdict | reason |", "|---|---|---|---|---|---|"]
            out += [f"| {s.step} | {s.position} | {s.kernel_token} | {s.ref_token} | {s.verdict} | {_cell(s.reason)} |"
                    for s in bad[:20]]
            out.append("")
        t = r.teacher
        if t.get("steps"):
            out.append(f"Teacher-forced on the lane's stream: {t['steps']} steps, same top-1 "
                       f"{100 * t['top1_agreement']:.1f}%, KL mean {_g(t['kl_mean'])}, KL max {_g(t['kl_max'])}, "
                       f"max logit error {_g(t['max_logit_error'])}, budget use {_g(t['budget_usage'])}.")
        if r.blame:
            out += [""] + _blame_md(r.blame)
        for n in r.notes:
            out.append(f"- {n}")
    if locks:
        out += ["", "## Token locks", "", "| lane | backend | status | first changed step | locked | now |",
                "|---|---|---|---|---|---|"]
        out += [f"| {c.stream.lane} | {c.stream.backend} | {c.status} | {_g(c.first_changed)} | {_g(c.locked_token)} | "
                f"{_g(c.new_token)} |" for c in locks]
    out += ["", BLAME_HELP]
    return "\n".join(out) + "\n"


def kernel_html(results: Sequence[KernelLaneResult], locks: Sequence[LockCheck], piece=None) -> str:
    esc = html.escape
    out = ["<h2>Kernels against their reference lane</h2><table><tr><th>lane</th><th>backend</th><th>verdict</th>"
           "<th>first bad step</th><th>max budget use</th><th>same tokens</th><th>s/step</th></tr>"]
    for r in results:
        use = max((s.usage for s in r.steps), default=None)
        first = "none" if r.first_bad is None else str(r.steps[r.first_bad].step)
        if r.fault:
            first = "fault: " + esc(r.fault.splitlines()[0][:200])
        out.append(f"<tr><td>{esc(r.lane)}</td><td>{esc(r.backend)}</td><td class='{r.verdict}'>{r.verdict}</td>"
                   f"<td>{first}</td><td>{_g(use)}</td><td>{'yes' if r.tokens == r.ref_tokens else 'no'}</td>"
                   f"<td>{r.seconds_per_step:.3f}</td></tr>")
    out.append("</table><h3>Per-step error of the kernels</h3><p>max |kernel logit - lane logit| (solid) and the "
               "budget at that token (dashed), per decode step (prefill included); red line: first bad step.</p>")
    for r in results:
        series = [(f"error {r.lane}", [s.err_at_worst for s in r.steps], COLORS[1]),
                  (f"bound {r.lane} (budget at worst)", [s.budget_at_worst for s in r.steps], COLORS[2])]
        marks = [(r.steps[r.first_bad].step, "first bad step")] if r.first_bad is not None else []
        out.append(f"<h4>{esc(r.lane)} <span class='{r.verdict}'>{r.verdict}</span></h4>"
                   + _svg_lines(series, f"{r.lane} kernels: logit error and budget per step", "decode step",
                                marks=marks))
        if r.blame:
            out.append("<pre>" + esc("\n".join(_blame_md(r.blame))) + "</pre>")
    if locks:
        out.append("<h3>Token locks</h3><ul>" + "".join(f"<li>{esc(c.stream.lane)} ({esc(c.stream.backend)}): "
                                                       f"{esc(c.status)} {esc(c.message)}</li>" for c in locks)
                   + "</ul>")
    out.append(f"<p>{esc(BLAME_HELP)}</p>")
    return "\n".join(out)


def write_report(out_dir: "str | Path", run: GenerationRun, results: Sequence[KernelLaneResult],
                 locks: Sequence[LockCheck] = (), piece: Optional[Callable[[int], str]] = None,
                 meta: Optional[dict] = None) -> list[Path]:
    out = Path(out_dir)
    paths = [out / "report.json", out / "report.md", out / "report.html"]
    doc = run_dict(run, piece)
    doc["kernels"] = [r.as_dict() for r in results]
    doc["locks"] = [c.as_dict() for c in locks]
    doc.update(meta or {})
    doc["failed"] = bool(doc["failed"] or any(r.failed for r in results) or any(c.failed for c in locks))
    atomic_write(paths[0], json.dumps(finite_json(doc), indent=1, allow_nan=False) + "\n")
    atomic_write(paths[1], markdown(run, piece) + kernel_markdown(results, locks, piece))
    page = html_report(run, piece)
    page = page.replace("</body></html>", kernel_html(results, locks, piece) + "</body></html>")
    atomic_write(paths[2], page)
    return paths


__all__ = ["BLAME_HELP", "kernel_html", "kernel_markdown", "write_report"]
