"""What every suite adapter of ci/score_race_suite.py shares: running a file's kernels and turning what the
backend says into one verdict per kernel and per file."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

from cudasrc.includes import find_include
from harness.racescan import Verdict, classify, scan_points
from harness.racescan.reading import BY_NAME

RAN = ("race", "order-dependent", "fault", "clean")     # verdicts of a file that ran
SYMBOL_PREFIX = "__qconform_gv_"      # of every name the adapters add to a file (functions, types, variables)
# splitmix64's finalizer on an `unsigned long long z`: the adapters' seeded values in device code
SPLITMIX_FINISH = "z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL; z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL; z ^= z >> 31;"


def with_definitions(definitions: str, code: str, filename: str) -> str:
    """`definitions` the adapter adds, before `code`, which a `#line 1` marker keeps numbered as the file is (so that
    reports name the file's own lines)."""
    return f'{definitions}\n#line 1 "{filename}"\n{code}'


def inline_includes(path: Path, dirs: Sequence[Path] = (), seen: "set[Path] | None" = None, *,
                    required: bool = True, line_markers: bool = False) -> str:
    """The file with each `#include "local.h"` line replaced by the file it names (looked up in the including
    file's folder, then in `dirs`), once each, recursively: what the suite's own build found beside the file.
    `required`: an include found nowhere is a FileNotFoundError, else its line stays (the build then says so).
    `line_markers`: `#line` directives around each inlined file keep the including file's line numbers true."""
    seen = set() if seen is None else seen
    out = []
    for i, line in enumerate(path.read_text(errors="replace").splitlines()):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        inc = find_include(m.group(1), path.parent, dirs) if m else None
        if m and inc is None and required:
            raise FileNotFoundError(f"{path.name}: include {m.group(1)!r} not found")
        if inc is None:
            out.append(line)
            continue
        if inc in seen:              # included before: the line stays, empty
            out.append("")
            continue
        seen.add(inc)
        body = inline_includes(inc, dirs, seen, required=required, line_markers=line_markers)
        if line_markers:             # `#line N` numbers the line after it: the one after the include
            out.append(f'#line 1 "{inc.name}"\n{body}\n#line {i + 2} "{path.name}"')
        else:
            out += [body, ""]
    return "\n".join(out)


def build_failed(rec: dict, exc: BaseException, detector: bool) -> dict:
    v = classify(exc, detector)
    rec.update(verdict=v.kind, fault=v.fault, detail=v.detail[:500], races=0, data_race=False)
    return rec


class Launch(NamedTuple):
    """One kernel of a file to run: `make_args(point)` gives its arguments at each of `points` (the scalar values
    of a sweep; one launch by default)."""
    kernel: str
    grid: tuple
    block: tuple
    make_args: Callable[[dict], list]
    points: tuple = ({},)
    shared_bytes: int = 0          # dynamic shared memory (`extern __shared__`)


def run_kernels(rec: dict, module, launches: "list[Launch]") -> dict:
    """Launch each kernel and keep its verdict in rec["kernels"]; set the file's verdict: a race if any kernel
    reported one, else the first of order-dependent, unsupported, unchecked, fault, clean that any kernel had.
    A kernel with several points is swept (harness.racescan.scan_points: the first race ends the sweep; under the
    suite's reading, rec["reading"], the first race that reading counts, and the memory model's verdict is the
    first race all the same).
    With the detector on, a race is its DataRace alone (harness.racescan.classify): schedules that disagree
    without one are `order-dependent`, an UninitializedRead is a `fault`."""
    reading = BY_NAME.get(rec.get("reading"))       # the suite's verifier: a sweep goes on past races it excuses
    for launch in launches:
        try:
            read = scan_points(module, launch.kernel, launch.grid, launch.block, launch.shared_bytes, launch.points,
                               lambda point: (launch.make_args(point), ()), reading=reading)
        except (LookupError, ValueError) as exc:
            read = Verdict("unsupported", type(exc).__name__, str(exc)[:300])
        v = read.excused or read            # the memory model's verdict: the first race, whatever the reading says
        swept = len(launch.points) > 1
        rec["kernels"][launch.kernel] = {
            **kernel_record(v, read.kind == "race"), "grid": list(launch.grid), "block": list(launch.block),
            **({"shared_bytes": launch.shared_bytes} if launch.shared_bytes else {}),
            **({"at": dict(v.at), "points": v.points} if swept else {})}
    return file_verdict(rec)


def kernel_record(v: Verdict, read_as_race: bool) -> dict:
    """One kernel's entry in a record: the memory model's verdict `v`, and whether the suite's reading counts a
    race of it."""
    return {"read_as_race": read_as_race, "verdict": v.kind, "fault": v.fault, "detail": v.detail[:500],
            "races": v.races, "same_value": v.same_value, "scope": v.scope, "kinds": [list(k) for k in v.kinds]}


def file_verdict(rec: dict) -> dict:
    """The file's verdict and race fields from its kernels' entries (rec["kernels"], kernel_record's)."""
    kinds = [k["verdict"] for k in rec["kernels"].values()]
    order = ("race", "order-dependent", "unsupported", "unchecked", "fault", "clean")
    rec["verdict"] = min(kinds, key=order.index) if kinds else "unsupported"
    first = next((k for k in rec["kernels"].values() if k["verdict"] == rec["verdict"]), None)
    rec["fault"], rec["detail"], rec["races"] = (first["fault"], first["detail"], first["races"]) if first \
        else (None, "no kernel", 0)
    # The memory-model verdict: any kernel's DataRace (another kernel's differential report may come first).
    rec["data_race"] = any(k["fault"] == "DataRace" for k in rec["kernels"].values())
    # Whether the suite's verifier counts a race of some kernel at some point (the sweeps went past the races it
    # does not count).
    rec["read_as_race"] = any(k["read_as_race"] for k in rec["kernels"].values())
    # (scope, same value) of every race the detector reported, all kernels (harness.racescan.reading).
    rec["kinds"] = [k for kernel in rec["kernels"].values() if kernel["fault"] == "DataRace" for k in kernel["kinds"]]
    # Every race the detector reported was two plain stores of the same bytes (GPUVerify calls these benign).
    rec["same_value"] = rec["data_race"] and all(k["same_value"] for k in rec["kernels"].values()
                                                 if k["fault"] == "DataRace")
    # Every race was between lanes of one warp: ordered if warps ran in lock step (GPUVerify's --warp-sync).
    rec["warp_scope"] = rec["data_race"] and all(k["scope"] == "warp" for k in rec["kernels"].values()
                                                 if k["fault"] == "DataRace")
    return rec
