"""`qconform mutate` resumes: every judged mutant is stored as it finishes (keyed by the source's hash, the
unmutated run's cases and verdicts, and the mutant id), so an interrupted campaign continues from what it
already judged and ends with the results of an uninterrupted run."""
from __future__ import annotations

import json

import pytest

from emitters.registry import emit
from harness.mutation.engine import EmuFactory, MutantStore, run_mutation

SEED, SAMPLE = 3, 6


def _elem(tmp_path):
    from harness.cli.mutate import cases_by_kernel
    from reference.shapes import parse_shape_list
    code = emit("elementwise", None, "tiny").code
    by, _, _ = cases_by_kernel(code, str(tmp_path / "e.cu"), parse_shape_list("tiny"), None, SEED, ["k0_elem"])
    return code, by


class _InterruptAfter:
    """The CPU backend, until `loads` mutants have been loaded: then Ctrl-C (KeyboardInterrupt) mid-mutant."""

    def __init__(self, loads: int):
        self.left = loads

    def __call__(self, timeout_s, schedules=None):
        be = EmuFactory()(timeout_s, schedules)
        outer = self

        class Interrupting:
            def load(self, code, flags=()):
                if timeout_s != 120.0:                 # a mutant's backend (120 s is the unmutated run's)
                    outer.left -= 1
                    if outer.left < 0:
                        raise KeyboardInterrupt
                return be.load(code, flags)

            def close(self):
                be.close()
        return Interrupting()


def _statuses(run):
    return [(r.mutant.id, r.status, r.case, r.cases_run) for r in run.results]


def test_an_interrupted_campaign_resumes_from_what_it_judged(tmp_path):
    code, by = _elem(tmp_path)
    store = tmp_path / "judged"
    with pytest.raises(KeyboardInterrupt):
        run_mutation(code, "e.cu", by, SEED, ["tiny"], sample=SAMPLE, progress=False, store_dir=store,
                     backend_factory=_InterruptAfter(3))
    stored = list(store.glob("*/*.json"))
    assert 1 <= len(stored) < SAMPLE           # some judged before the interrupt, not all
    first = {json.loads(p.read_text())["id"] for p in stored}
    resumed = run_mutation(code, "e.cu", by, SEED, ["tiny"], sample=SAMPLE, progress=False, store_dir=store)
    assert resumed.resumed == len(stored)
    assert {r.mutant.id for r in resumed.results} >= first
    assert len(list(store.glob("*/*.json"))) == SAMPLE
    fresh = run_mutation(code, "e.cu", by, SEED, ["tiny"], sample=SAMPLE, progress=False)
    assert fresh.resumed == 0
    assert _statuses(resumed) == _statuses(fresh)
    # a third run judges nothing again
    again = run_mutation(code, "e.cu", by, SEED, ["tiny"], sample=SAMPLE, progress=False, store_dir=store,
                         backend_factory=_InterruptAfter(0))
    assert again.resumed == SAMPLE and _statuses(again) == _statuses(fresh)


def test_stored_results_are_keyed_by_the_source_and_the_cases(tmp_path):
    code, by = _elem(tmp_path)
    base = {"k0_elem[tiny,seed=3]": "pass"}
    same = MutantStore(tmp_path, code, base).dir
    assert MutantStore(tmp_path, code, dict(base)).dir == same
    assert MutantStore(tmp_path, code + "\n// edited\n", base).dir != same          # another source
    assert MutantStore(tmp_path, code, {"k0_elem[tiny,seed=4]": "pass"}).dir != same  # other cases (seed)
    assert MutantStore(tmp_path, code, {"k0_elem[tiny,seed=3]": "tie"}).dir != same   # another verdict


def test_a_stored_result_for_another_edit_is_not_reused(tmp_path):
    code, by = _elem(tmp_path)
    store = tmp_path / "judged"
    run = run_mutation(code, "e.cu", by, SEED, ["tiny"], sample=2, progress=False, store_dir=store)
    p = next(store.glob("*/*.json"))
    d = json.loads(p.read_text())
    d["edit"][2] += " "                          # the same id now names a different edit: judged anew
    p.write_text(json.dumps(d))
    again = run_mutation(code, "e.cu", by, SEED, ["tiny"], sample=2, progress=False, store_dir=store)
    assert again.resumed == 1 and _statuses(again) == _statuses(run)


def test_a_mutant_that_hangs_is_killed_with_the_timeout_named(tmp_path, monkeypatch):
    """The backend reports a launch past its time limit as its own limit (unchecked); in a mutation run the
    unmutated kernel finished the same case, so the mutant's hang kills it (never a survivor)."""
    from harness.mutation import engine
    from harness.mutation.operators import Mutant
    monkeypatch.setattr(engine, "MIN_TIMEOUT_S", 1.0)
    code, by = _elem(tmp_path)
    at = code.index("c[idx] = a[idx]")
    hang = Mutant("hang", "k0_elem", "loop-bound", 0, "loops for ever", at, at, "for (;;) {} ")
    run = run_mutation(code, "e.cu", by, SEED, ["tiny"], progress=False, mutants=[hang])
    [r] = run.results
    assert r.status == engine.KILLED, (r.status, r.detail)
    assert f"pass -> hang (timeout: a launch ran past {run.timeout_s:g} s)" in r.detail
