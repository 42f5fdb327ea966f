"""Races at particular scalar values: launch one kernel over the domain of its swept scalar parameters.

A race that happens at one value of a parameter (an index `t + offset` that meets another thread's only when
offset is exactly right) is invisible at every other value, to the detector as to the schedules: no run shows
a race it does not perform. A spec `name:int32=range(lo,hi)` declares the domain; the sweep launches every
point of it when the domain has at most `limit` points (exhaustive), else its corners and then points drawn
from the seed, and stops at the first race. The verdict names the point (`Verdict.at`) to replay it with."""
from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Callable, Mapping, Optional, Sequence

import numpy as np

from harness.backends.base import Backend, BuildError, KernelFault, Module

from .reading import Reading
from .scan import Verdict, classify, has_detector, launch
from .spec import ArgSpec, make_args

# Points per kernel. One point is one launch with the detector and the five schedules: 1.6 ms for a 64-thread
# kernel with small buffers (tests/bench/test_bench_race.py), about 17 ms with 2^17-element buffers, so a full
# sweep stays under 20 s.
SWEEP_LIMIT = 1024


def sweep_points(domains: Mapping[str, range], seed: int, limit: int = SWEEP_LIMIT) -> tuple[list[dict], bool]:
    """The points of a sweep over `domains` (name -> range) and whether they are all of them. Every
    combination, in order, when there are at most `limit`; else the corners (each domain's first and last
    value, in every combination) and then distinct points drawn from `seed`, `limit` in all."""
    if not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit: expected an integer >= 1, got {limit!r}")
    names = sorted(domains)
    for name in names:
        if not isinstance(domains[name], range) or len(domains[name]) == 0:
            raise ValueError(f"domains: {name} needs a non-empty range, got {domains[name]!r}")
    if not names:
        return [{}], True
    total = math.prod(len(domains[n]) for n in names)
    if total <= limit:
        return [dict(zip(names, values)) for values in itertools.product(*(domains[n] for n in names))], True
    corners = itertools.product(*(sorted({domains[n][0], domains[n][-1]}) for n in names))
    seen = set(itertools.islice(corners, limit))
    points = [dict(zip(names, c)) for c in sorted(seen)]
    rng = np.random.default_rng(seed)
    while len(points) < limit:
        c = tuple(int(domains[n][int(rng.integers(len(domains[n])))]) for n in names)
        if c not in seen:
            seen.add(c)
            points.append(dict(zip(names, c)))
    return points, False


def scan_points(module: Module, kernel: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
                points: Sequence[dict], args_at: Callable[[dict], tuple[list, tuple[int, ...]]],
                tick: Optional[Callable[[], None]] = None,
                ran: Optional[Callable[[list], None]] = None, reading: Optional[Reading] = None,
                recheck: Optional[Callable[[dict], Verdict]] = None, recheck_lock_step: bool = False) -> Verdict:
    """Launch `kernel` of the loaded `module` at each point (`args_at(point)` gives the arguments and output
    indices) until one races; `tick()` after each launch (progress); `ran(args)` after each launch that ended
    without a fault, its outputs written back into `args`. The verdict: the first race, else the first other
    non-clean verdict, else clean; `at` is the point it was found at, `points` how many launches ran.
    `reading`: only a race it counts ends the sweep; the first it does not count is kept (Verdict.excused), and
    `recheck(point)`, where given, judges that point without the detector (a verdict as `classify` gives with the
    detector on: schedules that disagree are order-dependent), the verdict of a point that did not race.
    `recheck_lock_step`: its schedules run a warp's lanes in lock step (EmuBackend(lock_step=True)); where they do
    not and the reading takes lanes as in lock step, a disagreement at a point with races within one warp is the
    tool's limit (unchecked): the interleaved lanes may be what makes the results differ."""
    detector = has_detector(module)
    first_other = None
    excused, excused_points = None, 0
    caveats: dict[str, None] = {}      # what qualifies a clean launch (an undefined barrier), each said once
    for i, point in enumerate(points, 1):
        args, outputs = args_at(point)
        at = tuple(sorted(point.items()))
        try:
            result = launch(module, kernel, grid, block, shared_bytes, args, outputs)
            caveats.update(dict.fromkeys(getattr(result, "caveats", ())))
            if ran is not None:
                ran(args)
            continue
        except (KernelFault, BuildError) as exc:
            verdict = replace(classify(exc, detector), at=at, points=i)
        finally:
            if tick is not None:
                tick()
        if verdict.kind == "race":
            # a race without kinds (the schedules' own, with the detector off) is not the reading's to sort
            if reading is None or not verdict.kinds or reading.counts(verdict.kinds):
                return replace(verdict, excused=excused, excused_points=excused_points)
            excused, excused_points, race = excused or verdict, excused_points + 1, verdict
            if recheck is None:
                continue
            verdict = replace(recheck(point), at=at, points=i)
            if (verdict.kind != "clean" and reading.lock_step and not recheck_lock_step
                    and any(s == "warp" for s, _ in race.kinds)):
                # the reading runs a warp's lanes in lock step; these schedules interleave them, so what they show
                # may be the very races it left out: the tool cannot judge this launch under it
                verdict = replace(verdict, kind="unchecked", detail=(
                    f"not judged under the reading {reading.name}, which takes a warp's lanes as running in lock "
                    f"step: the CPU backend's schedules interleave them, and their {verdict.kind} result may come "
                    f"from the races within one warp that the reading leaves out. The schedules said: "
                    + verdict.detail))
            caveats.update(dict.fromkeys(verdict.caveats))
            if verdict.kind == "clean":
                continue
        first_other = first_other or verdict
    return replace(first_other or Verdict("clean", None, ""), points=len(points), caveats=tuple(caveats),
                   excused=excused, excused_points=excused_points)


def sweep(backend: Backend, source: str, kernel: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
          specs: Sequence[ArgSpec], seed: int, limit: int = SWEEP_LIMIT, name: str = "kernel.cu",
          tick: Optional[Callable[[], None]] = None, points: Optional[Sequence[dict]] = None,
          flags: Sequence[str] = (), ran: Optional[Callable[[list], None]] = None,
          reading: Optional[Reading] = None, schedules: Optional[Backend] = None) -> Verdict:
    """Load `source` on `backend` and launch `kernel` over the domain of the specs' swept scalars
    (`range(lo,hi)`; see sweep_points), every other argument generated from `seed` as make_args does. Without
    a swept scalar this is one launch, as harness.racescan.scan. `name`: the source's file name in messages;
    `tick()` after each launch (progress); `points`: launch at these instead (a replay's one point, or the
    sweep_points the caller already has); `flags`: the build's (`-I` folders of the source's own headers);
    `ran(args)`: see scan_points. `reading`: see scan_points; `schedules`: a backend without the detector that
    judges again each point whose races the reading did not count (the source is loaded on it when first needed);
    for a reading that takes a warp's lanes as in lock step, one with `lock_step=True` judges what it means."""
    if points is None:
        points, _ = sweep_points({s.name: s.domain for s in specs if s.domain is not None}, seed, limit)
    try:
        module = backend.load(source, flags, name=name)
    except (KernelFault, BuildError) as exc:
        return classify(exc, has_detector(backend))
    loaded: list[Module] = []

    def recheck(point: dict) -> Verdict:
        args, outputs = make_args(list(specs), seed, point)
        try:
            if not loaded:
                loaded.append(schedules.load(source, flags, name=name))
            result = launch(loaded[0], kernel, grid, block, shared_bytes, args, outputs)
        except (KernelFault, BuildError) as exc:
            return classify(exc, detector=True)      # its races excused: disagreeing schedules are order-dependent
        if ran is not None:
            ran(args)
        return Verdict("clean", None, "", caveats=tuple(getattr(result, "caveats", ())))

    # Fresh arrays at every point: a launch writes its outputs back into the arrays it was given.
    return scan_points(module, kernel, grid, block, shared_bytes, points,
                       lambda point: make_args(list(specs), seed, point), tick, ran, reading,
                       recheck if schedules is not None else None, bool(getattr(schedules, "lock_step", False)))
