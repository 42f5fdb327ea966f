"""mutation.json / mutation.md of a mutation run, the console summary, and the equivalence ledger's format.

The ledger is JSON: {"equivalent": [{"id": "...", "kernel": "...", "mutant": "what was changed",
"reason": "why no input can tell it from the original"}, ...]}. Only id and reason are read; kernel and
mutant keep the file reviewable.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from harness.cache import atomic_write
from harness.judging.records import EXIT_FAIL, EXIT_NOTHING_CHECKED, EXIT_PASS

from .engine import EQUIVALENT, KILLED, NO_COMPILE, NOT_RUN, STATUSES, SURVIVED, MutationRun

MUTATION_VERSION = 1


def load_ledger(path: "str | Path") -> dict[str, str]:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--equivalent: no such file {str(path)!r}")
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"--equivalent: {path} is not JSON: {exc}") from None
    entries = doc.get("equivalent") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"--equivalent: {path} must hold {{\"equivalent\": [{{\"id\": ..., \"reason\": ...}}, ...]}}")
    out = {}
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("id"), str) or not str(e.get("reason", "")).strip():
            raise ValueError(f"--equivalent: {path}: entry {i} needs a string 'id' and a non-empty 'reason'")
        out[e["id"]] = str(e["reason"]).strip()
    return out


def as_dict(run: MutationRun) -> dict:
    return {
        "version": MUTATION_VERSION, "source": run.source, "seed": run.seed, "shapes": run.shapes,
        "kernels": run.kernels, "score": run.score, "counts": {s: run.count(s) for s in STATUSES},
        "timeout_s": run.timeout_s, "time_limit_s": run.time_limit_s, "wall_s": round(run.wall_s, 2),
        "executor": run.executor, "resumed": run.resumed, "retried": run.retried,
        "unchecked_kernels": run.unchecked_kernels, "stale_ledger_ids": run.stale_ledger,
        "baseline": run.baseline,
        "mutants": [{"id": r.mutant.id, "kernel": r.mutant.kernel, "operator": r.mutant.operator,
                     "line": r.mutant.line, "mutation": r.mutant.description, "status": r.status,
                     "killed_by": r.case or None, "detail": r.detail, "cases_run": r.cases_run,
                     "wall_s": round(r.wall_s, 3), "diff": r.diff or None} for r in run.results],
    }


def _score(run: MutationRun) -> str:
    s = run.score
    return "n/a (no mutant was judged)" if s is None else f"{100 * s:.1f}%"


def headline(run: MutationRun) -> str:
    c = {s: run.count(s) for s in STATUSES}
    return (f"mutation score {_score(run)}: {c[KILLED]} killed, {c[SURVIVED]} survived, {c[EQUIVALENT]} equivalent, "
            f"{c[NO_COMPILE]} did not compile" + (f", {c[NOT_RUN]} not run (time limit, tool failure, or a case the tool cannot judge on the mutant: see each mutant)" if c[NOT_RUN] else ""))


def markdown(run: MutationRun) -> str:
    lines = ["# qconform mutation analysis", "",
             f"- source: `{run.source}`; seed `{run.seed}`; shapes {', '.join(run.shapes)}; kernels "
             f"{', '.join(f'`{k}`' for k in run.kernels)}",
             f"- {headline(run)}",
             "- score = killed / (killed + survived). A mutant is killed when some case's verdict is worse than in "
             "the unmutated run (pass < tie < fail); `equivalent` survivors are listed in the ledger with the "
             "reason no input can tell them apart; a mutant that does not compile is counted apart.",
             f"- a launch running past {run.timeout_s:g} s counts as a hang (killed); {len(run.baseline)} cases in "
             f"the unmutated run; wall time {run.wall_s:.0f} s on {run.executor or 'this process'}"
             + (f"; {run.resumed} mutants taken from the interrupted run's store" if run.resumed else "")
             + (f"; {run.retried} retried after their worker died" if run.retried else ""), ""]
    if run.unchecked_kernels:
        lines += ["## Unchecked kernels (no mutant made)", ""]
        lines += [f"- `{u['kernel']}`: {u['reason']}" for u in run.unchecked_kernels] + [""]
    if run.count(NOT_RUN):
        why = (f"the time limit ({run.time_limit_s:g} s) stopped the run or the tool failed on some mutants"
               if run.time_limit_s is not None else "the tool failed on some mutants (each one's detail says how)")
        lines += [f"**Partial:** {why}; the score covers the mutants that ran.", ""]
    by = defaultdict(Counter)
    for r in run.results:
        by[(r.mutant.kernel, r.mutant.operator)][r.status] += 1
    lines += ["## Per kernel and operator", "", "| kernel | operator | killed | survived | equivalent | no-compile |"
              " not run |", "|---|---|---|---|---|---|---|"]
    for (k, op), c in sorted(by.items()):
        lines.append(f"| `{k}` | {op} | {c[KILLED]} | {c[SURVIVED]} | {c[EQUIVALENT]} | {c[NO_COMPILE]} | "
                     f"{c[NOT_RUN]} |")
    for title, status in (("Surviving mutants", SURVIVED), ("Equivalent mutants", EQUIVALENT)):
        rs = [r for r in run.results if r.status == status]
        if not rs:
            continue
        lines += ["", f"## {title}", ""]
        for r in rs:
            lines += [f"### `{r.mutant.id}` {r.mutant.kernel}:{r.mutant.line} ({r.mutant.operator}) "
                      f"{r.mutant.description}", "", r.detail, "", "```diff", r.diff.rstrip(), "```", ""]
    flagged = [r for r in run.results if r.status == KILLED and "listed as equivalent" in r.detail]
    if flagged or run.stale_ledger:
        lines += ["", "## Ledger problems", ""]
        lines += [f"- `{r.mutant.id}`: {r.detail}" for r in flagged]
        lines += [f"- `{i}`: in the ledger but no such mutant in this file" for i in run.stale_ledger]
    return "\n".join(lines) + "\n"


def write(out_dir: "str | Path", run: MutationRun) -> list[Path]:
    out = Path(out_dir)
    paths = [out / "mutation.json", out / "mutation.md"]
    atomic_write(paths[0], json.dumps(as_dict(run), indent=1) + "\n")
    atomic_write(paths[1], markdown(run))
    return paths


def exit_status(run: MutationRun, min_score: "float | None") -> int:
    """3 when no mutant was judged (nothing was checked, as in `check`), 1 when the score is below
    `min_score`, else 0."""
    if run.score is None:
        return EXIT_NOTHING_CHECKED
    return EXIT_FAIL if min_score is not None and run.score < min_score else EXIT_PASS


def console(run: MutationRun, paths) -> str:
    lines = [f"qconform mutate: {headline(run)}"]
    lines += [f"UNCHECKED kernel {u['kernel']}: {u['reason']}" for u in run.unchecked_kernels]
    for r in run.results:
        if r.status == SURVIVED:
            lines += [f"SURVIVED {r.mutant.id} {r.mutant.kernel}:{r.mutant.line} ({r.mutant.operator}) "
                      f"{r.mutant.description}", r.diff.rstrip()]
    for r in run.results:
        if r.status == KILLED and "listed as equivalent" in r.detail:
            lines.append(f"LEDGER {r.mutant.id}: {r.detail[:300]}")
    for i in run.stale_ledger:
        lines.append(f"LEDGER {i}: no such mutant in this file (stale entry)")
    lines += [f"wrote {p}" for p in paths]
    return "\n".join(lines)
