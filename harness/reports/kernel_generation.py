"""The kernels' part of a generation report: per kernel lane, the kernels against the reference lane (verdict,
per-step logit error against the budget as a chart, teacher-forced statistics), the blame section and the
token-lock checks. Row builders and blocks only; harness.reports.generation puts them into the report and the
console summary."""
from __future__ import annotations

from typing import Optional, Sequence

from harness.judging.registry import PASS
from harness.model.blame import BlameReport
from harness.model.generation import GenerationRun
from harness.model.kernel_lane import KernelLaneResult

from .charts import COLORS, svg_lines
from .document import Block, Cell, Chart, Heading, Items, Pre, Table, Text, fmt, percent, token_text

Pieces = Optional[Sequence[str]]     # each token id's printable piece

BLAME_HELP = ("Blame reruns the first step where the kernels left the lane's budget, launch by launch, each launch "
              "fed the reference lane's values of its inputs (weights, the earlier positions' KV rows, the buffers "
              "the step's earlier launches wrote). Each launch is judged by its own conformance judge under its "
              "per-case budget; the first one out of budget is the kernel to blame, and the command reruns that "
              "launch alone. 'Every launch within budget' means the per-kernel budgets compose worse than they "
              "claim.")
KERNELS_HELP = ("The kernels run as the generation program runs them; the reference lane is fed the kernels' own "
                "tokens so every step compares. A different token is a tie only where the reference's gap is within "
                "the two tokens' budgets (docs/NUMERICS.md, \"Kernels against their lane\").")


def kernel_dicts(run: GenerationRun) -> dict:
    return {"kernels": [r.as_dict() for r in run.kernels], "locks": [c.as_dict() for c in run.locks]}


def first_bad_text(r: KernelLaneResult) -> str:
    if r.fault:
        return f"fault: {r.fault.splitlines()[0][:200]}"
    return "none" if r.bad_step is None else str(r.bad_step)


# -- row builders ----------------------------------------------------------------------------------------------------
def kernel_table(run: GenerationRun) -> Table:
    t = Table(["lane", "backend", "verdict", "first bad step", "max budget use", "tokens = lane's", "s/step", "source",
               "blame"], title="kernels against their reference lane")
    for r in run.kernels:
        blame = "" if r.blame is None else r.blame.finding + (f"\n{r.blame.replay}" if r.blame.replay else "")
        t.add([r.lane, r.backend, Cell(r.verdict, r.verdict), first_bad_text(r), r.max_usage,
               "yes" if r.tokens == r.ref_tokens else "no", f"{r.seconds_per_step:.3f}", r.source, blame], r.verdict)
    return t


def bad_step_table(r: KernelLaneResult, limit: int = 20) -> Table:
    t = Table(["step", "position", "kernel token", "lane token", "verdict", "reason"])
    for s in [s for s in r.steps if s.verdict != PASS][:limit]:
        t.add([s.step, s.position, s.kernel_token, s.ref_token, Cell(s.verdict, s.verdict), s.reason], s.verdict)
    return t


def blamed_table(b: BlameReport) -> Table:
    t = Table(["kernel", "layer", "step", "output", "largest-error element", "budget use", "budget there", "reason"])
    bl = b.blamed
    t.add([Cell(bl.kernel, code=True), bl.layer, b.step, bl.output or bl.fault or "", bl.worst_index, bl.usage,
           bl.budget, (bl.reason or "").splitlines()[0][:300] if bl.reason else ""], bl.verdict)
    return t


def worst_launch_table(b: BlameReport, limit: int = 5) -> Table:
    t = Table(["launch", "verdict", "output", "usage"])
    for lv in sorted((lv for lv in b.launches if lv.usage is not None), key=lambda lv: -lv.usage)[:limit]:
        t.add([lv.where, Cell(lv.verdict, lv.verdict), lv.output, lv.usage], lv.verdict)
    return t


def lock_table(run: GenerationRun) -> Table:
    t = Table(["lane", "backend", "status", "first changed step", "locked", "now", "message"], title="token locks")
    for c in run.locks:
        t.add([c.stream.lane, c.stream.backend, c.status, c.first_changed, c.locked_token, c.new_token, c.message],
              "fail" if c.failed else None)
    return t


# -- blocks ----------------------------------------------------------------------------------------------------------
def teacher_text(r: KernelLaneResult) -> Optional[str]:
    x = r.teacher
    if not x.steps:
        return None
    return (f"Teacher-forced on the lane's stream: {x.steps} steps, same top-1 {percent(x.top1_agreement)}, KL mean "
            f"{fmt(x.kl_mean)}, KL max {fmt(x.kl_max)}, max logit error {fmt(x.max_logit_error)}, budget use "
            f"{fmt(x.budget_usage)}.")


def blame_blocks(b: BlameReport) -> list[Block]:
    out: list[Block] = [Text(f"**Blame (step {b.step})**: {b.finding}")]
    if b.replay:
        out.append(Pre(b.replay))
    if b.blamed:
        out.append(blamed_table(b))
    worst = worst_launch_table(b)
    if worst.rows:
        out += [Text("Largest budget use of the rerun launches:"), worst]
    if b.notes:
        out.append(Items([f"note: {n}" for n in b.notes]))
    return out


def error_chart(r: KernelLaneResult) -> Chart:
    series = [(f"error {r.lane}", [s.err_at_worst for s in r.steps], COLORS[1]),
              (f"bound {r.lane} (budget at worst)", [s.budget_at_worst for s in r.steps], COLORS[2])]
    marks = [(r.bad_step, "first bad step")] if r.bad_step is not None else []
    return Chart(svg_lines(series, f"{r.lane} kernels: logit error and budget per step", "decode step", marks=marks))


def lane_blocks(r: KernelLaneResult, pieces: Pieces) -> list[Block]:
    out: list[Block] = [Heading(f"{r.lane} ({r.backend}): {r.verdict}", 3),
                        Text("kernels: " + " ".join(token_text(t, pieces) for t in r.tokens)),
                        Text("lane: " + " ".join(token_text(t, pieces) for t in r.ref_tokens)),
                        error_chart(r)]
    bad = bad_step_table(r)
    if bad.rows:
        out.append(bad)
    text = teacher_text(r)
    if text:
        out.append(Text(text))
    if r.blame:
        out += blame_blocks(r.blame)
    if r.notes:
        out.append(Items(list(r.notes)))
    return out


def kernel_blocks(run: GenerationRun, pieces: Pieces = None) -> list[Block]:
    out: list[Block] = [Heading("Kernels against their reference lane"), Text(KERNELS_HELP), kernel_table(run),
                        Text("Per-step error of the kernels: max |kernel logit - lane logit| (solid) and the budget "
                             "at that token (dashed), per decode step (prefill included); red line: first bad "
                             "step.")]
    for r in run.kernels:
        out += lane_blocks(r, pieces)
    if run.locks:
        out += [Heading("Token locks"), lock_table(run)]
    out.append(Text(BLAME_HELP))
    return out


__all__ = ["BLAME_HELP", "kernel_blocks", "kernel_dicts", "kernel_table", "lock_table"]
