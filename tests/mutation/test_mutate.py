"""`qconform mutate`: classification (killed / survived / equivalent / no-compile) and the score floor of
qconform's own moe kernels in int8act.

The moe test is kept small for the default suite (one family, one mode, the tiny shape set, a seeded sample,
a time limit). Its floor is the score the sample reaches with the cases as they are; the full analysis
(tiny and tails, every mutant) is in docs/KERNELS.md with the survivors explained.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from emitters.registry import emit
from harness.cli import main
from harness.mutation.engine import EQUIVALENT, KILLED, NO_COMPILE, NOT_RUN, SURVIVED, run_mutation, worse
from harness.mutation.operators import Mutant, mutants_of
from reference.modes import Mode

LEDGER = Path(__file__).parent / "ledgers" / "moe_int8act.json"
MOE_SAMPLE, MOE_SEED, MOE_FLOOR = 16, 7, 0.9


def test_verdict_order():
    assert worse("pass", "fail") and worse("pass", "tie") and worse("tie", "fail")
    assert not worse("fail", "fail") and not worse("tie", "pass")
    # the tool's own limit is never a kill, and a case it could not judge cannot be made worse
    assert not worse("pass", "unchecked") and not worse("unchecked", "fail")


def _elem(tmp_path):
    code = emit("elementwise", None, "tiny").code
    from harness.cli.mutate import cases_by_kernel
    from reference.shapes import parse_shape_list
    by, _, _ = cases_by_kernel(code, str(tmp_path / "e.cu"), parse_shape_list("tiny"), None, 3, ["k0_elem"])
    return code, by


def test_killed_survived_equivalent_and_no_compile_are_told_apart(tmp_path):
    code, by = _elem(tmp_path)
    ms = mutants_of(code, "k0_elem")
    store = next(m for m in ms if m.operator == "delete-store")
    plus = next(m for m in ms if m.description == "`+` -> `-`" and "a[idx]" in code[m.start - 8:m.start])
    at = code.index("c[idx] = a[idx]")
    broken = Mutant("broken", "k0_elem", "arithmetic", 0, "not C", at, at + 1, "c @@")
    # an edit that changes nothing a case can see: an extra empty statement
    semi = code.index(";", at)
    noop = Mutant("noop", "k0_elem", "constant", 0, "extra ;", semi, semi + 1, ";;")
    noop2 = Mutant("noop2", "k0_elem", "constant", 0, "extra ; ;", semi, semi + 1, "; ;")
    run = run_mutation(code, "e.cu", by, 3, ["tiny"], jobs=1, progress=False,
                       mutants=[store, plus, broken, noop, noop2], ledger={"noop2": "an empty statement"})
    status = {r.mutant.id: r for r in run.results}
    assert status[store.id].status == KILLED and "UnwrittenOutput" in status[store.id].detail
    assert status[plus.id].status == KILLED and "pass -> fail" in status[plus.id].detail
    assert status["broken"].status == NO_COMPILE
    assert status["noop"].status == SURVIVED and "c[idx] = a[idx] + b[idx];;" in status["noop"].diff
    assert status["noop2"].status == EQUIVALENT and status["noop2"].detail == "an empty statement"
    # no-compile and equivalent mutants are outside the score
    assert run.score == pytest.approx(2 / 3)


def test_ledger_entries_are_checked(tmp_path):
    bad = tmp_path / "l.json"
    bad.write_text(json.dumps({"equivalent": [{"id": "x"}]}))
    assert main(["mutate", "--source", str(bad), "--equivalent", str(bad)]) == 2      # bad ledger: reason needed
    src = tmp_path / "e.cu"
    src.write_text(emit("elementwise", None, "tiny").code)
    assert main(["mutate", "--source", str(src), "--kernels", "no_such_kernel"]) == 2


def test_nothing_to_mutate_is_nothing_checked_not_a_usage_error(tmp_path, capsys):
    """As in `check`: valid input whose kernels no contract matches is judged by nobody (exit 3, the run
    folder written with the reasons); a file with no kernel at all, or a --kernels name it lacks, is bad
    input (exit 2)."""
    src = tmp_path / "e.cu"
    src.write_text(emit("elementwise", None, "tiny").code + "\n__global__ void scale2(float* y) { y[0] *= 2.0f; }\n")
    out = tmp_path / "mut"
    assert main(["mutate", "--source", str(src), "--kernels", "scale2", "--seed", "3", "--out", str(out)]) == 3
    doc = json.loads((out / "mutation.json").read_text())
    assert doc["score"] is None and doc["mutants"] == [] and doc["kernels"] == []
    assert [u["kernel"] for u in doc["unchecked_kernels"]] == ["scale2"]
    assert json.loads((out / "run.json").read_text())["exit_status"] == 3
    assert "`scale2`" in (out / "mutation.md").read_text()
    err = capsys.readouterr()
    assert "UNCHECKED kernel scale2: " in err.out and "nothing was checked" in err.err
    alone = tmp_path / "alone.cu"
    alone.write_text("__global__ void scale2(float* y) { y[0] *= 2.0f; }\n")
    assert main(["mutate", "--source", str(alone), "--out", str(tmp_path / "mut2")]) == 3
    empty = tmp_path / "empty.cu"
    empty.write_text("__device__ float twice(float x) { return 2.0f * x; }\n")
    assert main(["mutate", "--source", str(empty), "--out", str(tmp_path / "mut3")]) == 2
    assert "no __global__ kernel found" in capsys.readouterr().err
    assert not (tmp_path / "mut3").exists()


def test_moe_int8act_mutation_score_floor(tmp_path):
    """A seeded sample of the moe int8act mutants at tiny: the cases must kill at least MOE_FLOOR of the
    non-equivalent ones. Each survivor is printed as a diff."""
    src = tmp_path / "moe_int8act.cu"
    src.write_text(emit("moe", Mode.INT8_ACT, "tiny").code)
    out = tmp_path / "mut"
    rc = main(["mutate", "--source", str(src), "--mode", "int8act", "--shapes", "tiny", "--seed", str(MOE_SEED),
               "--sample", str(MOE_SAMPLE), "-j", "2", "--time-limit", "420", "--equivalent", str(LEDGER),
               "--out", str(out), "--min-score", str(MOE_FLOOR)])
    doc = json.loads((out / "mutation.json").read_text())
    c = doc["counts"]
    survivors = "\n".join(m["diff"] or "" for m in doc["mutants"] if m["status"] == "survived")
    assert c["not-run"] == 0, f"the time limit cut the sample short: {c}"
    assert c["killed"] + c["survived"] + c["equivalent"] + c["no-compile"] == MOE_SAMPLE
    assert rc == 0 and doc["score"] >= MOE_FLOOR, f"score {doc['score']} ({c}); survivors:\n{survivors}"
    assert not doc["stale_ledger_ids"], f"ledger entries that match no mutant: {doc['stale_ledger_ids']}"
    md = (out / "mutation.md").read_text()
    assert "mutation score" in md and "| `moe_" in md


def test_summary_of_a_run_with_unrun_mutants_and_no_time_limit():
    """A mutant the tool failed on is `not-run`; without a time limit the summary says so instead of crashing
    on the missing limit."""
    from harness.mutation.engine import NOT_RUN, MutantResult, MutationRun
    from harness.mutation.summary import markdown
    m = Mutant("abc", "k", "constant", 1, "`1` -> `0`", 0, 1, "0")
    run = MutationRun("x.cu", 1, ["tiny"], ["k"], {}, [MutantResult(m, NOT_RUN, detail="the tool failed twice")])
    md = markdown(run)
    assert "**Partial:** the tool failed on some mutants" in md


def test_a_launch_stopped_by_the_mutation_timeout_kills_the_mutant():
    """The CPU backend leaves a timed-out case unchecked (its own limit); in a mutation run the timeout is a
    multiple of the unmutated launch, so a mutant that hangs there (`off >>= 0` in a shuffle loop) is killed."""
    from types import SimpleNamespace
    from harness.judging.registry import PASS, UNCHECKED
    from harness.mutation.engine import kills
    hang = SimpleNamespace(verdict=UNCHECKED, fault="KernelTimeout")
    assert kills(PASS, hang)
    assert not kills(UNCHECKED, hang)                             # unchecked before: nothing to compare
    assert not kills(PASS, SimpleNamespace(verdict=UNCHECKED, fault=None))
    assert kills(PASS, SimpleNamespace(verdict="fail", fault=None))


def test_a_survivor_reading_out_of_bounds_is_killed_on_the_sanitizer_build(tmp_path):
    """moe_topk_idx's max loop running to `e <= E` reads logits[E]: no output changes (fmaxf with whatever lies
    past the end), every schedule keeps every verdict, and the AddressSanitizer pass kills it."""
    from harness.cli.mutate import cases_by_kernel
    from reference.shapes import parse_shape_list
    code = emit("moe", Mode.INT8_ACT, "tiny").code
    by, _, _ = cases_by_kernel(code, str(tmp_path / "m.cu"), parse_shape_list("tiny"), None, 19, ["moe_topk_idx"])
    m = next(m for m in mutants_of(code, "moe_topk_idx") if m.id == "fa96ce9d11")
    run = run_mutation(code, "m.cu", by, 19, ["tiny"], jobs=1, progress=False, mutants=[m])
    (r,) = run.results
    assert r.status == KILLED and "on the AddressSanitizer build" in r.detail and "OutOfBounds" in r.detail, r.detail


def test_a_mutant_the_backend_cannot_run_is_not_run_never_survived(tmp_path):
    """An edit that puts a construct the CPU backend does not run into the kernel (a cluster barrier) leaves every
    case unchecked: the mutant was not judged, so it is `not-run` with the case's reason, outside the score."""
    code, by = _elem(tmp_path)
    at = code.index("c[idx] = a[idx]")
    cluster = Mutant("cluster", "k0_elem", "constant", 0, "a cluster barrier", at, at,
                     'asm volatile("barrier.cluster.arrive;"); ')
    run = run_mutation(code, "e.cu", by, 3, ["tiny"], jobs=1, progress=False, mutants=[cluster])
    (r,) = run.results
    assert r.status == NOT_RUN and "UnsupportedConstruct" in r.detail and "barrier.cluster.arrive" in r.detail
    assert run.count(SURVIVED) == 0
