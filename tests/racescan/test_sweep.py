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
