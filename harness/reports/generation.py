"""A generation run (harness.model.generation.GenerationRun) as report.json, report.md, report.html (inline SVG:
exact's margin and each lane's bound per generated step; hidden-state error per layer; with kernels, their
per-step error against the budget) and the console summary. Each table has one row builder here (or, for the
kernels, in harness.reports.kernel_generation); harness.reports.document renders it in every format."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Optional, Sequence

from harness.cache import atomic_write
from harness.judging.records import finite_json
from harness.judging.registry import UNCHECKED
from harness.model.generation import GenerationRun, StreamResult
from reference.decoder import LOGIT_BOUND_FAILURE

from .charts import COLORS, svg_lines
from .document import (DIFF, Block, Cell, Chart, Heading, Table, Text, console, fmt, html_page,
                       markdown as render_markdown, percent, piece_of, token_text)
from .kernel_generation import kernel_blocks, kernel_dicts, kernel_table, lock_table

Pieces = Optional[Sequence[str]]     # each token id's printable piece


# -- report.json -----------------------------------------------------------------------------------------------------
def stream_dict(s: StreamResult, pieces: Pieces = None) -> dict:
    d = {"name": s.name, "verdict": s.verdict, "tokens": s.tokens,
         "divergence": asdict(s.divergence) if s.divergence else None, "teacher_forced": s.teacher.as_dict(),
         "per_step": [asdict(m) for m in s.per_step], "hidden_error_per_layer": s.hidden_error}
    if s.bound_lane:
        d["judged_with_bound_of"] = s.bound_lane
        d["leading_tokens_equal_to_that_lane"] = s.agrees_with_lane
    if s.verdict == UNCHECKED:
        d["reason"] = s.teacher.fault
    if pieces is not None:
        d["pieces"] = [piece_of(pieces, t) for t in s.tokens]
    return d


def run_dict(run: GenerationRun, pieces: Pieces = None) -> dict:
    doc = {"kind": "generation", "model": run.model,
           "config": asdict(run.config), "prompt": run.prompt,
           "n_tokens": run.n_tokens, "exact_tokens": run.exact_tokens, "exact_margins": run.exact_margins,
           "lanes": [stream_dict(s, pieces) for s in run.lanes],
           "external": [stream_dict(s, pieces) for s in run.external],
           "router_effect": vars(run.router), "elapsed_s": round(run.elapsed_s, 3), "failed": run.failed}
    if pieces is not None:
        doc["prompt_pieces"] = [piece_of(pieces, t) for t in run.prompt]
        doc["exact_pieces"] = [piece_of(pieces, t) for t in run.exact_tokens]
    if run.backend is not None:
        doc.update(kernel_dicts(run))
        doc["backend"], doc["sources"] = run.backend, run.sources
    return doc


# -- row builders ----------------------------------------------------------------------------------------------------
def verdict_table(run: GenerationRun, pieces: Pieces = None) -> Table:
    t = Table(["stream", "verdict", "first divergence", "exact token", "its token", "exact margin", "exact gap",
               "bound", "head", "drift"], title=f"generate {run.model}: streams against the exact lane")
    for s in run.streams:
        d = s.divergence
        cells = ["none", "", "", "", "", "", "", ""] if d is None else [
            d.index, token_text(d.exact_token, pieces), token_text(d.lane_token, pieces), d.exact_margin, d.exact_gap,
            d.bound, d.bound_head, d.bound_drift]
        t.add([s.name, Cell(s.verdict, s.verdict), *cells], s.verdict)
    return t


def stream_table(run: GenerationRun, pieces: Pieces = None) -> Table:
    t = Table(["step", "exact", *(s.name for s in run.streams)], title="token streams ('=': exact's token)")
    for i, tok in enumerate(run.exact_tokens):
        cells = []
        for s in run.streams:
            u = s.tokens[i] if i < len(s.tokens) else None
            cells.append(Cell("") if u is None else Cell("=") if u == tok else Cell(token_text(u, pieces), DIFF))
        t.add([i, token_text(tok, pieces), *cells])
    return t


def teacher_table(run: GenerationRun) -> Table:
    t = Table(["stream", "steps", "same top-1", "KL mean", "KL p99", "KL max", "RMS dp", "max logit error",
               "budget use", "median step: error / bound", "bound / error: min, median"],
              title="teacher-forced (every stream fed the exact lane's tokens)")
    for s in run.streams:
        x = s.teacher
        # the observed error and the bound side by side: the median step's largest logit error / the bound of
        # that token, then the ratio bound / error over the steps
        t.add([s.name, x.steps, percent(x.top1_agreement), x.kl_mean, x.kl_p99, x.kl_max, x.rms_delta_p,
               x.max_logit_error, x.budget_usage, f"{fmt(x.median_step_error)} / {fmt(x.median_step_bound)}",
               f"{fmt(x.bound_over_error_min)}, {fmt(x.bound_over_error_median)}"], s.verdict)
    return t


def hidden_table(run: GenerationRun) -> Table:
    t = Table(["layer", *(s.name for s in run.lanes)])
    for li in range(run.config.n_layer):
        t.add([li, *(s.hidden_error[li] for s in run.lanes)])
    return t


def router_text(run: GenerationRun) -> str:
    r = run.router
    if not r.available:
        return f"not available: {r.reason}"
    return (f"{r.steps} teacher-forced steps of the exact lane with the float router: routing flips per layer "
            f"{r.flips_per_layer}; max logit difference {fmt(r.max_logit_diff)}; same top-1 "
            f"{percent(r.top1_agreement)}")


def external_note(s: StreamResult) -> str:
    if s.verdict == UNCHECKED:
        return f"{s.name}: unchecked: {s.teacher.fault}"
    return (f"{s.name} is judged with the `{s.bound_lane}` lane's bound; its first {s.agrees_with_lane} of "
            f"{len(s.tokens)} tokens equal that lane's free-running stream.")


def external_notes(run: GenerationRun) -> list[Block]:
    return [Text(external_note(s)) for s in run.external]


def margin_charts(run: GenerationRun) -> list[Block]:
    out: list[Block] = []
    for s in run.lanes:
        series = [("exact margin", [r.margin for r in s.per_step], COLORS[0]),
                  (f"bound {s.name}", [r.bound for r in s.per_step], COLORS[1]),
                  (f"bound {s.name} (head only)", [r.bound_head for r in s.per_step], COLORS[2])]
        marks = [(s.divergence.index, "first divergence")] if s.divergence else []
        out += [Heading(f"{s.name}: {s.verdict}", 3),
                Chart(svg_lines(series, f"{s.name}: margin and bound per generated step", "generated step",
                                marks=marks))]
    return out


# -- the document ----------------------------------------------------------------------------------------------------
def blocks(run: GenerationRun, pieces: Pieces = None) -> list[Block]:
    layers = [(s.name, s.hidden_error or [], COLORS[(i + 1) % len(COLORS)]) for i, s in enumerate(run.lanes)]
    out: list[Block] = [
        Heading(f"qconform generate: {run.model}", 1),
        Text(f"prompt {run.prompt}, {run.n_tokens} tokens, {run.elapsed_s:.1f} s"
             + (f"; kernels on `{run.backend}`" if run.backend else "")),
        Heading("Verdicts (free-running, against the exact lane)"), verdict_table(run, pieces),
        Heading("Token streams"), stream_table(run, pieces),
        Heading("Teacher-forced (every stream fed the exact lane's tokens)"), teacher_table(run),
        *external_notes(run),
        Heading("F32-router effect (exact lane, float router instead of the Q8_0 one)"), Text(router_text(run)),
        Heading("Margin and bound per step"),
        Text("Exact lane's top-1/top-2 margin (solid) and each lane's derived bound on that margin's change "
             "(dashed); a lane can flip a token only where its bound reaches the margin. Red line: first "
             "divergence."),
        *margin_charts(run),
        Heading("Hidden-state error per layer (teacher-forced, max over steps, relative)"),
        Text("max over teacher-forced steps of max|x_lane - x_exact| / max|x_exact|, residual after each layer."),
        Chart(svg_lines(layers, "relative hidden-state error per layer", "layer")), hidden_table(run),
        Text("A lane's bound at a step is derived in docs/NUMERICS.md (\"Logit bound\"): the LM head's own "
             "arithmetic in the lane's mode plus the measured drift of its input, propagated through the head as "
             f"independent errors (Hoeffding), holding at each step except with probability {LOGIT_BOUND_FAILURE:g}."),
    ]
    if run.backend is not None:
        out += kernel_blocks(run, pieces)
    return out


def print_summary(run: GenerationRun, pieces: Pieces = None) -> None:
    """The console summary: the same tables as the reports."""
    tables = [verdict_table(run, pieces), teacher_table(run)]
    if run.backend is not None:
        tables.append(kernel_table(run))
        if run.locks:
            tables.append(lock_table(run))
    console(tables)
    for s in run.external:
        if s.verdict == UNCHECKED:
            print(external_note(s))
    shown = " ".join(f"{t}{'' if pieces is None else '[' + piece_of(pieces, t) + ']'}" for t in run.exact_tokens)
    print(f"exact tokens: {shown}")


def write_generation_report(out_dir: "str | Path", run: GenerationRun, pieces: Pieces = None) -> list[Path]:
    out = Path(out_dir)
    paths = [out / "report.json", out / "report.md", out / "report.html"]
    doc = blocks(run, pieces)
    atomic_write(paths[0], json.dumps(finite_json(run_dict(run, pieces)), indent=1, allow_nan=False) + "\n")
    atomic_write(paths[1], render_markdown(doc))
    atomic_write(paths[2], html_page("qconform generate", doc))
    return paths


__all__ = ["blocks", "print_summary", "run_dict", "stream_dict", "write_generation_report"]
