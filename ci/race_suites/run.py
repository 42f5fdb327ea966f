"""What every suite adapter of ci/score_race_suite.py shares: running a file's kernels and turning what the
backend says into one verdict per kernel and per file."""
from __future__ import annotations

from harness.racescan import Verdict, classify, scan_points

RAN = ("race", "order-dependent", "fault", "clean")     # verdicts of a file that ran


def matching_brace(text: str, i: int) -> int:
    """The index of the brace closing the one at `i` (string and character literals skipped); ValueError if none."""
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c in "\"'":
            j += 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ValueError("unbalanced braces")


def build_failed(rec: dict, exc: BaseException, detector: bool) -> dict:
    v = classify(exc, detector)
    rec.update(verdict=v.kind, fault=v.fault, detail=v.detail, races=0, data_race=False)
    return rec


def run_kernels(rec: dict, module, launches) -> dict:
    """Launch each (kernel, grid, block, make_args[, points]) and keep every kernel's verdict in rec["kernels"];
    set the file's verdict: a race if any kernel reported one, else the first of order-dependent, unsupported,
    unchecked, fault, clean that any kernel had. `points` (default one, `{}`): the scalar values to launch at,
    `make_args(point)` giving the arguments (harness.racescan.scan_points: the first race ends the sweep).
    With the detector on, a race is its DataRace alone (harness.racescan.classify): schedules that disagree
    without one are `order-dependent`, an UninitializedRead is a `fault`."""
    kinds = []
    for name, grid, block, make_args, *sweep in launches:
        points = sweep[0] if sweep else [{}]
        try:
            v = scan_points(module, name, grid, block, 0, points, lambda point: (make_args(point), ()))
        except (LookupError, ValueError) as exc:
            v = Verdict("unsupported", type(exc).__name__, str(exc)[:300])
        rec["kernels"][name] = {"verdict": v.kind, "fault": v.fault, "detail": v.detail, "races": v.races,
                                "same_value": v.same_value, "scope": v.scope, "grid": list(grid), "block": list(block),
                                **({"at": dict(v.at), "points": v.points} if sweep else {})}
        kinds.append(v.kind)
    order = ("race", "order-dependent", "unsupported", "unchecked", "fault", "clean")
    rec["verdict"] = min(kinds, key=order.index) if kinds else "unsupported"
    first = next((k for k in rec["kernels"].values() if k["verdict"] == rec["verdict"]), None)
    rec["fault"], rec["detail"], rec["races"] = (first["fault"], first["detail"], first["races"]) if first \
        else (None, "no kernel", 0)
    # The memory-model verdict: any kernel's DataRace (another kernel's differential report may come first).
    rec["data_race"] = any(k["fault"] == "DataRace" for k in rec["kernels"].values())
    # Every race the detector reported was two plain stores of the same bytes (GPUVerify calls these benign).
    rec["same_value"] = rec["data_race"] and all(k["same_value"] for k in rec["kernels"].values()
                                                 if k["fault"] == "DataRace")
    # Every race was between lanes of one warp: ordered if warps ran in lock step (GPUVerify's --warp-sync).
    rec["warp_scope"] = rec["data_race"] and all(k["scope"] == "warp" for k in rec["kernels"].values()
                                                 if k["fault"] == "DataRace")
    return rec
