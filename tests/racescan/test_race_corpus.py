"""The labelled race corpus (tests/race_corpus/*.cu): small racy kernels, one per class of race, each with a
race-free twin. Every entry runs on emu with inputs from a recorded seed (harness.racescan).

* Differential schedules alone: every race-free twin is clean, every racy kernel is reported except those
  labelled `differential: missed` (coinciding values, a slot that never reaches an output), which stay clean:
  the corpus pins down exactly what the schedules cannot see.
* With the happens-before detector (EmuBackend race_check): every racy kernel is reported and every twin is
  clean, in the build the entry names (`accesses: source`: a race on an access the optimised build drops, which
  that build must then miss) and under the rule of a warp's lanes it names (`warp-order: syncwarp`: a race that only
  a shuffle lies between, which the collectives' rule must then miss); every twin is clean under both rules. Skipped, with the reason, while the backend has no detector."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from harness.racescan import make_args, parse_args, read_entry, scan, sweep

CORPUS = sorted((Path(__file__).resolve().parents[1] / "race_corpus").glob("*.cu"))
SEED = 17


def _has_detector() -> bool:
    from harness.backends.emu.backend import EmuBackend
    return "race_check" in inspect.signature(EmuBackend.__init__).parameters


@pytest.fixture(scope="module")
def differential():
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=60, **({"race_check": False} if _has_detector() else {}))
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def detector():
    if not _has_detector():
        pytest.skip("the emu backend has no happens-before race detector (EmuBackend race_check) yet")
    from harness.backends.emu.backend import EmuBackend
    backends = {(accesses, order): EmuBackend(timeout_s=60, race_check=True, accesses=accesses, warp_order=order)
                for accesses in ("compiled", "source") for order in ("collectives", "syncwarp")}
    yield backends
    for backend in backends.values():
        backend.close()


def _run(backend, entry):
    """One launch, or a sweep over the domain of the entry's `range(lo,hi)` scalars."""
    return sweep(backend, entry.source, entry.kernel, entry.grid, entry.block, entry.shared_bytes, entry.args, SEED)


def test_corpus_has_racy_kernels_and_race_free_twins():
    entries = [read_entry(p) for p in CORPUS]
    racy = [e for e in entries if e.racy]
    assert len(racy) >= 8 and len(entries) - len(racy) >= 8
    assert any(not e.differential_sees for e in racy), "the corpus must hold races the schedules cannot show"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_differential_schedules_on_the_corpus(differential, path):
    entry = read_entry(path)
    verdict = _run(differential, entry)
    expect = "race" if entry.racy and entry.differential_sees else "clean"
    assert verdict.kind == expect, f"{path.name} ({entry.what}), seed {SEED}: {verdict}"


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_happens_before_detector_on_the_corpus(detector, path):
    entry = read_entry(path)
    verdict = _run(detector[entry.accesses, entry.warp_order], entry)
    assert verdict.kind == ("race" if entry.racy else "clean"), f"{path.name} ({entry.what}), seed {SEED}: {verdict}"
    # the same-value classes (every racing store writes what is there) are marked so; no other race is
    assert verdict.same_value == ("same_value" in path.stem and entry.racy), verdict
    if entry.racy and entry.accesses == "source":      # the entry's note is true: the optimised build misses it
        assert _run(detector["compiled", entry.warp_order], entry).kind == "clean", \
            f"{path.name}: the optimised build saw the race"
    if entry.racy and entry.warp_order == "syncwarp":  # and the collectives' rule, which a shuffle orders, misses it
        assert _run(detector[entry.accesses, "collectives"], entry).kind == "clean", \
            f"{path.name}: the collectives' rule saw the race"
    if not entry.racy:                                 # a twin is race-free under the stricter rule too
        assert _run(detector[entry.accesses, "syncwarp"], entry).kind == "clean", \
            f"{path.name}: a race with __syncwarp alone ordering a warp's lanes"


def test_broken_twin_is_reported():
    """Negative control of the runner itself: the race-free twin with its barrier removed must be reported."""
    from harness.backends.emu.backend import EmuBackend
    entry = read_entry(CORPUS[0].parent / "shared_rw_no_barrier_fixed.cu")
    broken = entry.source.replace("__syncthreads();", "")
    args, outputs = make_args(entry.args, SEED)
    backend = EmuBackend(timeout_s=60)
    try:
        assert scan(backend, broken, entry.kernel, entry.grid, entry.block, 0, args, outputs).kind == "race"
        assert scan(backend, entry.source, entry.kernel, entry.grid, entry.block, 0, args, outputs).kind == "clean"
    finally:
        backend.close()


def test_arg_specs_are_seeded_and_checked():
    specs = parse_args("x:float32[8]=random(-1,1) n:int32=8 y:int32[4]!out i:uint8[3]=iota")
    a1, outs = make_args(specs, 5)
    a2, _ = make_args(specs, 5)
    assert outs == (2,) and all((p == q).all() for p, q in zip(a1, a2))
    assert a1[1] == 8 and a1[1].dtype.name == "int32" and list(a1[3]) == [0, 1, 2]
    assert not (make_args(specs, 6)[0][0] == a1[0]).all()
    for bad, match in [("x:float32[8]=pi", "fill 'pi'"), ("n:int32", "scalar needs"), ("x:nope[2]", "unknown dtype"),
                       ("y:int32[4]=iota!out", "takes no fill"), ("x[2]", "is not")]:
        with pytest.raises(ValueError, match=match):
            parse_args(bad)


@pytest.mark.parametrize("stem, scope", [("warp_no_syncwarp", "warp"), ("shared_rw_no_barrier", "block"),
                                         ("global_interblock", "grid"), ("global_intrablock_passes", "block")])
def test_the_detector_says_the_scope_of_a_race(detector, stem, scope):
    """The widest conflict of the races: what would order them (__syncwarp, __syncthreads, atomics)."""
    verdict = _run(detector["compiled", "collectives"], read_entry(CORPUS[0].parent / f"{stem}.cu"))
    assert verdict.kind == "race" and verdict.scope == scope, verdict
