"""The conformance matrix: every emitted kernel, in every mode, at the tiny and tails shape sets, on the CPU
backend; every case must pass (or be an explained tie) and none may go unchecked. A failure names the case
and the command that replays it."""
from __future__ import annotations

import pytest

from emitters.registry import golden_matrix, mode_label
from harness.judging.core import FAIL, UNCHECKED
from harness.judging.runner import emitted_jobs, run_cases
from harness.cases.variants import UNDEFINED
from reference.shapes import get_shape

SEED = 20240601
MATRIX = golden_matrix(("tiny", "tails"))


def _fmt(rows) -> str:
    return "\n".join(f"{r['verdict'].upper()} {r['case']}: {r['reason'][:400]}\n  replay: {r['replay']}"
                     for r in rows)


@pytest.mark.parametrize("family,mode,shape", MATRIX, ids=[f"{f}-{mode_label(m)}-{s}" for f, m, s in MATRIX])
def test_emitted_kernels_conform_on_emu(emu, family, mode, shape):
    jobs = [j for j in emitted_jobs([get_shape(shape)], [mode] if mode else [], SEED, [family])
            if j.label == f"{family}/{mode_label(mode)}/{shape}"]
    assert len(jobs) == 1 and jobs[0].cases, f"no cases for {family}/{mode_label(mode)}/{shape}"
    assert getattr(emu, "race_check", True), "the matrix runs under the race detector (golden kernels are race-free)"
    run = run_cases(emu, jobs, progress=False)
    # a case whose result the reference itself leaves undefined (a weight scale overflowing half) is unchecked
    # with that reason, by design (harness.cases.variants); every other case must be judged and conform
    bad = [r for r in run.rows if r["verdict"] == FAIL or (r["verdict"] == UNCHECKED and
                                                            not r["reason"].startswith(UNDEFINED + ":"))]
    assert not bad, f"{len(bad)} of {len(run.rows)} cases did not conform (seed {SEED}):\n{_fmt(bad)}"
    undefined = [r for r in run.rows if r["verdict"] == UNCHECKED]
    assert all(r["variant"] == "w-overflow" for r in undefined), _fmt(undefined)
    # every float comparison (one that is not bit for bit) carries a budget formula and a margin, and so does
    # the row it speaks for
    unbudgeted = [f"{r['case']}: {c['output']} vs {c['against']}" for r in run.rows for c in r["comparisons"]
                  if _is_float(c) and (c["budget"] is None or c["margin"] is None)]
    unbudgeted += [f"{r['case']} (row)" for r in run.rows if any(_is_float(c) for c in r["comparisons"])
                   and (r["budget"] is None or r["margin"] is None)]
    assert not unbudgeted, "float comparisons without a budget formula or margin:\n" + "\n".join(unbudgeted)


def _is_float(c: dict) -> bool:
    """A float comparison against a budget (compare_float): max_abs measured, not a bit-for-bit count."""
    return c["against"] != "exact" and "mismatches" not in c["metrics"] and c["metrics"].get("max_abs") is not None
