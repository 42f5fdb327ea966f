"""Sweeps over the domain of scalar parameters (harness.racescan.sweep): the points, the specs that declare a
domain, and a race that only one value of a parameter shows."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.racescan import make_args, parse_args, read_entry, scan, sweep, sweep_points

CORPUS = Path(__file__).resolve().parents[1] / "race_corpus"


def test_small_domains_are_swept_whole_in_order():
    points, exhaustive = sweep_points({"b": range(2), "a": range(3, 6)}, seed=0, limit=6)
    assert exhaustive and points == [{"a": a, "b": b} for a in (3, 4, 5) for b in (0, 1)]
    assert sweep_points({}, seed=0) == ([{}], True)


def test_large_domains_get_corners_then_seeded_distinct_points():
    domains = {"n": range(0, 10_000), "k": range(1, 5)}
    points, exhaustive = sweep_points(domains, seed=3, limit=50)
    assert not exhaustive and len(points) == 50
    assert points[:4] == [{"k": 1, "n": 0}, {"k": 1, "n": 9999}, {"k": 4, "n": 0}, {"k": 4, "n": 9999}]
    assert len({tuple(sorted(p.items())) for p in points}) == 50
    assert all(p["n"] in domains["n"] and p["k"] in domains["k"] for p in points)
    assert sweep_points(domains, seed=3, limit=50)[0] == points            # replayable from the seed
    assert sweep_points(domains, seed=4, limit=50)[0] != points


@pytest.mark.parametrize("bad, match", [({"n": range(0)}, "non-empty range"), ({"n": [1, 2]}, "non-empty range")])
def test_bad_domains_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        sweep_points(bad, seed=0)
    with pytest.raises(ValueError, match="limit"):
        sweep_points({"n": range(3)}, seed=0, limit=0)


def test_a_swept_scalar_takes_its_point_and_draws_nothing():
    specs = parse_args("x:float32[8]=random(-1,1) n:int32=range(4,9) y:int32[4]!out")
    assert specs[1].domain == range(4, 9) and specs[0].domain is None
    lo, _ = make_args(specs, 5)
    at7, outs = make_args(specs, 5, {"n": 7})
    assert lo[1] == 4 and at7[1] == 7 and at7[1].dtype.name == "int32" and outs == (2,)
    assert (lo[0] == at7[0]).all()                  # the same arrays at every point of a sweep
    with pytest.raises(ValueError, match=r"n=9 is outside its domain \[4, 9\)"):
        make_args(specs, 5, {"n": 9})
    with pytest.raises(ValueError, match="x is not a swept scalar"):
        make_args(specs, 5, {"x": 1})


@pytest.mark.parametrize("bad, match", [("x:float32[4]=range(0,4)", "not of an array"),
                                        ("f:float32=range(0,4)", "not of float32"),
                                        ("n:int32=range(5,5)", "is empty"),
                                        ("n:uint8=range(0,300)", r"does not fit uint8 \[0, 255\]")])
def test_bad_ranges_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        parse_args(bad)


def test_a_race_at_one_value_is_found_by_the_sweep_only(detector):
    entry = read_entry(CORPUS / "scalar_value_race.cu")
    args, outputs = make_args(entry.args, 17)         # one launch at the domain's first value: no race to see
    assert scan(detector, entry.source, entry.kernel, entry.grid, entry.block, 0, args, outputs).kind == "clean"
    verdict = sweep(detector, entry.source, entry.kernel, entry.grid, entry.block, 0, entry.args, 17)
    assert verdict.kind == "race" and verdict.fault == "DataRace"
    assert verdict.at == (("header_at", 63),) and verdict.points == 63      # stops at the first race
    twin = read_entry(CORPUS / "scalar_value_race_fixed.cu")
    ticks = []
    clean = sweep(detector, twin.source, twin.kernel, twin.grid, twin.block, 0, twin.args, 17, tick=lambda: ticks.append(1))
    assert clean.kind == "clean" and clean.points == 127 and clean.at == () and len(ticks) == 127


MODES = """// qconform-race: racy
// class: a same-value race at mode=1, a race of differing values at mode=2
// launch: k grid=1 block=64
// args: y:int32[64]!out flag:int32[1] mode:int32=range(0,{stop})
__global__ void k(int* y, int* flag, int mode) {{
  y[threadIdx.x] = threadIdx.x;
  if (mode == 1) flag[0] = 1;                // every thread stores one value: benign to GPUVerify
  if (mode == 2) flag[0] = threadIdx.x;      // values that differ: a race under any reading
}}
"""


@pytest.fixture(scope="module")
def schedules():
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=60, race_check=False)
    yield backend
    backend.close()


def test_a_reading_sweeps_past_the_races_it_leaves_out(tmp_path, detector, schedules):
    from harness.racescan.reading import GPUVERIFY
    entry_of = lambda stop: read_entry(_written(tmp_path / f"modes{stop}.cu", MODES.format(stop=stop)))
    e = entry_of(3)
    run = lambda **kw: sweep(detector, e.source, e.kernel, e.grid, e.block, 0, e.args, 5, **kw)
    model = run()
    assert model.kind == "race" and model.at == (("mode", 1),) and model.same_value and model.excused is None
    read = run(reading=GPUVERIFY, schedules=schedules)
    assert read.kind == "race" and read.at == (("mode", 2),) and not read.same_value
    assert read.excused.at == (("mode", 1),) and read.excused.same_value and read.excused_points == 1
    # negative control: without the differing stores nothing counts; the excused point ran again, clean
    e = entry_of(2)
    calls = []
    clean = sweep(detector, e.source, e.kernel, e.grid, e.block, 0, e.args, 5, reading=GPUVERIFY,
                  schedules=schedules, ran=calls.append)
    assert clean.kind == "clean" and clean.points == 2 and clean.excused.at == (("mode", 1),)
    assert len(calls) == 2 and calls[-1][1][0] == 1      # the schedules' launch at mode=1 wrote the flag back


def test_a_reading_does_not_sort_the_schedules_races(tmp_path, schedules):
    from harness.racescan.reading import GPUVERIFY
    e = read_entry(_written(tmp_path / "modes3.cu", MODES.format(stop=3)))
    # without the detector only the schedules see a race (the differing stores at mode=2); it has no kinds to
    # read, so it counts
    verdict = sweep(schedules, e.source, e.kernel, e.grid, e.block, 0, e.args, 5, reading=GPUVERIFY)
    assert verdict.kind == "race" and verdict.fault == "RaceDetected" and verdict.at == (("mode", 2),)
    assert verdict.excused is None


def _written(path, text):
    path.write_text(text)
    return path


def test_without_lock_step_a_warp_reading_cannot_judge_what_the_interleaved_lanes_show(detector, schedules):
    from harness.backends.emu.backend import EmuBackend
    from harness.racescan.reading import GPUVERIFY_WARP_SYNC
    e = read_entry(CORPUS / "warp_no_syncwarp.cu")
    run = lambda be: sweep(detector, e.source, e.kernel, e.grid, e.block, 0, e.args, 17, reading=GPUVERIFY_WARP_SYNC,
                           schedules=be)
    interleaved = run(schedules)           # the lanes interleaved: the tool's limit, not the kernel's fault
    assert interleaved.kind == "unchecked" and "takes a warp's lanes as running in lock step" in interleaved.detail
    assert interleaved.excused.scope == "warp"
    lock_step = EmuBackend(timeout_s=60, race_check=False, lock_step=True)
    try:
        assert run(lock_step).kind == "clean"
    finally:
        lock_step.close()
