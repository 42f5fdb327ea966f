#!/usr/bin/env python3
"""Score the CPU backend's race verdicts on the Indigo suites (labelled CUDA graph codes written by others).

    python ci/score_race_suite.py SUITE [--per-label N] [--seed S] [--race-check on|off] [--out results.json]

SUITE is a checkout of github.com/burtscher/Indigo3Suite in which `python3 generate_all_codes.py cuda` ran with
`bug: {all}` in codeGen/configure.txt (generatedCodes/CUDA/*/*.cu, lib/*.h), or of
github.com/burtscher/Indigo2Suite (codes/cuda/*/*.cu, include/*.h; every code there is bug-free). Nothing of
the suites is copied into this repository: the script reads them where they lie.

Labels come from the file names: a tag `XBug` plants bug X, `NoXBug` does not. Racy: the planted bugs are
RaceBug and/or SyncBug (a missing __syncthreads) and nothing else. Race-free: no planted bug at all. Other
files are not scored (their other bugs, out-of-bounds and livelock, would decide the verdict).

Per file: the device code is extracted (local includes inlined, host functions dropped), every __global__ kernel
runs once on emu with inputs synthesised from a seeded random graph in CSR form and from the parameter names
(dist, label, worklists, ...), and the file counts as reported when any kernel's verdict is a race
(harness.racescan.RACE_FAULTS). A file that does not build or a kernel that hits the tool's limits cannot be
scored; the reason is kept. Prints progress to stderr and a summary table; --out writes every verdict as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudasrc.signatures import kernel_signatures, strip_comments  # noqa: E402
from cudasrc.types import SCALAR_DTYPES  # noqa: E402
from harness.backends.base import Struct  # noqa: E402
from harness.racescan.scan import classify  # noqa: E402

RACE_TAGS = {"RaceBug", "SyncBug"}
RESTART_EVERY = 8
LAYOUTS = (("generatedCodes/CUDA", "lib"), ("codes/cuda", "include"))     # (codes, headers): Indigo3, Indigo2
GRAPH_FIELDS = np.dtype([("nodes", "<i4"), ("edges", "<i4"), ("nindex", "<u8"), ("nlist", "<u8"),
                         ("eweight", "<u8")])      # ECLgraph: the suite's CSR graph struct, passed by value


def planted_bugs(name: str) -> set[str]:
    return {t for t in Path(name).stem.split("_") if re.fullmatch(r"[A-Za-z]+Bug\d*", t) and not t.startswith("No")}


def label_of(path: Path) -> "str | None":
    bugs = planted_bugs(path.name)
    if not bugs:
        return "race-free"
    return "racy" if bugs <= RACE_TAGS else None


# ---- device code -------------------------------------------------------------------------------------------
def inline_includes(path: Path, lib: Path, seen: "set[Path] | None" = None) -> str:
    """The file with its `#include "local.h"` lines replaced by the files (from its folder or lib/), once each."""
    seen = set() if seen is None else seen
    out = []
    for line in path.read_text().splitlines():
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if m:
            inc = next((d / m.group(1) for d in (path.parent, lib) if (d / m.group(1)).is_file()), None)
            if inc is None:
                raise FileNotFoundError(f"{path.name}: include {m.group(1)!r} not found")
            if inc not in seen:
                seen.add(inc)
                out.append(inline_includes(inc, lib, seen))
            out.append("")
            continue
        out.append(line)
    return "\n".join(out)


def _matching_brace(text: str, i: int) -> int:
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c in "\"'":
            j += 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ValueError("unbalanced braces")


def device_code(source: str) -> str:
    """Drop every top-level function definition that is not __global__ or __device__ (host code), keeping line
    count; keep declarations, structs, typedefs, constants and preprocessor lines."""
    text = strip_comments(source)
    out, pos, j = [], 0, 0
    while True:
        k = text.find("{", j)
        if k < 0:
            break
        head_start = max(text.rfind(";", 0, k), text.rfind("}", 0, k), text.rfind("\n#", 0, k)) + 1
        if text[head_start:].startswith("#"):
            head_start = text.find("\n", head_start) + 1
        head = text[head_start:k]
        end = _matching_brace(text, k)
        is_function = re.search(r"\)\s*(?:const\s*)?$", head) and not re.search(r"=\s*$", head)
        if is_function and "__global__" not in head and "__device__" not in head:
            out.append(text[pos:head_start])
            out.append("\n" * text.count("\n", head_start, end + 1))
            pos = end + 1
        j = end + 1
    out.append(text[pos:])
    return "".join(out)


# ---- inputs ------------------------------------------------------------------------------------------------
def random_graph(rng: np.random.Generator, nodes: int, degree: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An undirected simple graph (both directions stored, neighbours sorted) in CSR: nindex, nlist, eweight."""
    pairs = set()
    while len(pairs) < nodes * degree // 2:
        a, b = rng.integers(0, nodes, 2)
        if a != b:
            pairs.add((int(min(a, b)), int(max(a, b))))
    adj = defaultdict(list)
    for a, b in pairs:
        adj[a].append(b)
        adj[b].append(a)
    nindex = np.zeros(nodes + 1, np.int32)
    nlist = []
    for v in range(nodes):
        nlist.extend(sorted(adj[v]))
        nindex[v + 1] = len(nlist)
    return nindex, np.array(nlist, np.int32), rng.integers(1, 10, len(nlist)).astype(np.int32)


class Inputs:
    """Arguments for a kernel of the suite, by parameter name, from one seeded graph."""

    def __init__(self, seed: int, nodes: int = 16, degree: int = 3):
        self.rng = np.random.default_rng(seed)
        self.nindex, self.nlist, self.eweight = random_graph(self.rng, nodes, degree)
        self.nodes, self.edges = nodes, len(self.nlist)
        self.length = max(self.nodes, self.edges) + 1
        self.sp = np.repeat(np.arange(nodes, dtype=np.int32), np.diff(self.nindex))

    def array(self, name: str, dtype: np.dtype, edge_based: bool) -> np.ndarray:
        n, rng = self.length, self.rng
        items = self.edges if edge_based else self.nodes
        if name == "nindex":
            return self.nindex.astype(dtype)
        if name == "nlist":
            return self.nlist.astype(dtype)
        if name == "eweight":
            return np.resize(self.eweight, n).astype(dtype)
        if name == "sp":
            return np.resize(self.sp, n).astype(dtype)
        if name == "degree":
            return np.resize(np.diff(self.nindex), n).astype(dtype)
        if name == "wl1":
            return np.resize(rng.permutation(items), n).astype(dtype)
        if name in ("dist", "dist_n"):
            # Small distances around the iteration number (1) plus unreached vertices: a frontier to expand.
            return rng.choice(np.array([0, 1, 1, 2, 3, 1 << 20]), n).astype(dtype)
        if name in ("label", "label_n", "parent"):
            return rng.integers(0, self.nodes, n).astype(dtype)
        if name in ("status", "status_n"):
            return np.zeros(n, dtype)      # every vertex undecided: the state the suites' init kernels leave
        if name in ("priority", "minv"):
            return (rng.permutation(n) + 1).astype(dtype)
        if name in ("scores", "outgoing_contrib", "diff", "incoming_total"):
            return rng.uniform(0.0, 1.0, n).astype(dtype) if dtype.kind == "f" else rng.integers(0, 100, n).astype(dtype)
        return np.zeros(n, dtype)          # worklists to fill, sizes, flags, counters, time stamps

    def scalar(self, name: str, dtype: np.dtype, edge_based: bool) -> np.generic:
        items = self.edges if edge_based else self.nodes
        value = {"size": self.nodes, "nodes": self.nodes, "edges": self.edges, "src": 0, "iter": 1,
                 "wl1size": items, "base_score": 0.15 / self.nodes}.get(name, 0)
        return dtype.type(value)


def launch_geometry(source: str, path: Path, items: int) -> tuple[int, int]:
    m = re.search(r"\bThreadsPerBlock\s*=\s*(\d+)", source)
    tpb = int(m.group(1)) if m else 256
    tags = set(path.stem.split("_"))
    per_item = tpb if "Block" in tags else 32 if "Warp" in tags else 1
    return max(1, math.ceil(items * per_item / tpb)), tpb


def kernel_args(sig, inputs: Inputs, module, edge_based: bool, graph_buffers: dict):
    args = []
    for ctype, name in sig.params:
        base = re.sub(r"^const |\*$", "", ctype).strip()
        atomic = re.fullmatch(r"cuda::(?:std::)?atomic<\s*(.+?)\s*>", base)
        elem = atomic.group(1) if atomic else base
        if ctype.replace("const ", "") == "ECLgraph":
            if not graph_buffers:
                graph_buffers["nindex"] = module.alloc("nindex", inputs.nindex.shape, np.int32, inputs.nindex)
                graph_buffers["nlist"] = module.alloc("nlist", inputs.nlist.shape, np.int32, inputs.nlist)
                graph_buffers["eweight"] = module.alloc("eweight", inputs.eweight.shape, np.int32, inputs.eweight)
            g = np.zeros((), GRAPH_FIELDS)[()]
            g["nodes"], g["edges"] = inputs.nodes, inputs.edges
            args.append(Struct(g, ((8, graph_buffers["nindex"]), (16, graph_buffers["nlist"]),
                                   (24, graph_buffers["eweight"]))))
        elif ctype.endswith("*"):
            dtype = SCALAR_DTYPES.get(elem.replace("const ", ""))
            if dtype is None:
                raise LookupError(f"parameter {name}: no dtype for pointee {elem!r}")
            args.append(inputs.array(name, dtype, edge_based))
        else:
            dtype = SCALAR_DTYPES.get(elem.replace("const ", ""))
            if dtype is None:
                raise LookupError(f"parameter {name}: no dtype for by-value type {ctype!r}")
            args.append(inputs.scalar(name, dtype, edge_based))
    return args


def score_file(backend, path: Path, lib: Path, seed: int) -> dict:
    """The verdict of every kernel of one file, and the file's verdict."""
    from harness.backends.base import BuildError, KernelFault
    rec = {"file": path.name, "algorithm": path.parent.name, "label": label_of(path), "kernels": {}}
    try:
        source = device_code(inline_includes(path, lib))
        module = backend.load(source, name=path.name)
    except (KernelFault, BuildError) as exc:
        v = classify(exc)
        rec.update(verdict=v.kind, fault=v.fault, detail=v.detail)
        return rec
    inputs = Inputs(seed)
    edge_based = "_E_" in path.name
    graph_buffers: dict = {}
    kinds = []
    for sig in kernel_signatures(source):
        items = inputs.edges if edge_based else inputs.nodes
        grid, tpb = launch_geometry(source, path, items)
        try:
            args = kernel_args(sig, inputs, module, edge_based, graph_buffers)
            module.launch(sig.name, (grid,), (tpb,), 0, args)
            v_kind, v_fault, v_detail, v_races = "clean", None, "", 0
        except (KernelFault, BuildError) as exc:
            v = classify(exc)
            v_kind, v_fault, v_detail, v_races = v.kind, v.fault, v.detail, v.races
        except (LookupError, ValueError) as exc:
            v_kind, v_fault, v_detail, v_races = "unsupported", type(exc).__name__, str(exc)[:300], 0
        rec["kernels"][sig.name] = {"verdict": v_kind, "fault": v_fault, "detail": v_detail, "races": v_races,
                                    "grid": grid, "block": tpb}
        kinds.append(v_kind)
    order = ("race", "unsupported", "unchecked", "fault", "clean")
    rec["verdict"] = min(kinds, key=order.index) if kinds else "unsupported"
    first = next((k for k in rec["kernels"].values() if k["verdict"] == rec["verdict"]), None)
    rec["fault"], rec["detail"], rec["races"] = (first["fault"], first["detail"], first["races"]) if first \
        else (None, "no kernel", 0)
    # The memory-model verdict: any kernel's DataRace (another kernel's differential report may come first).
    rec["data_race"] = any(k["fault"] == "DataRace" for k in rec["kernels"].values())
    return rec


def select(files: list[Path], per_label: int, seed: int) -> list[Path]:
    """Up to `per_label` racy and race-free files, spread evenly over the algorithms (seeded)."""
    rng = np.random.default_rng(seed)
    chosen = []
    for label in ("racy", "race-free"):
        by_alg = defaultdict(list)
        for f in files:
            if label_of(f) == label:
                by_alg[f.parent.name].append(f)
        pools = {a: [fs[i] for i in rng.permutation(len(fs))] for a, fs in sorted(by_alg.items())}
        picked = []
        while len(picked) < per_label and any(pools.values()):
            for a in sorted(pools):
                if pools[a] and len(picked) < per_label:
                    picked.append(pools[a].pop())
        chosen.extend(picked)
    return chosen


def _fault_label(rec: dict) -> str:
    """The fault class, with the number of distinct races where the detector reported several: 'DataRace x3'."""
    races = rec.get("races", 0)
    return f"{rec['fault'] or '-'}" + (f" x{races}" if races > 1 else "")


def summarize(records: list[dict]) -> str:
    lines = []
    detector = [r for r in records if r.get("data_race")]
    if detector:      # the happens-before detector was on: its verdicts alone, then the backend's
        for label in ("racy", "race-free"):
            recs = [r for r in records if r["label"] == label and r["verdict"] in ("race", "fault", "clean")]
            hits = [r for r in recs if r in detector]
            share = f"{len(hits) / len(recs):.1%}" if recs else "n/a"
            lines.append(f"DataRace only, {label}: {len(hits)} of {len(recs)} that ran ({share})")
    for label in ("racy", "race-free"):
        recs = [r for r in records if r["label"] == label]
        ran = [r for r in recs if r["verdict"] in ("race", "fault", "clean")]
        reported = [r for r in ran if r["verdict"] == "race"]
        other = [r for r in ran if r["verdict"] == "fault"]
        cannot = Counter(r["verdict"] for r in recs if r not in ran)
        what = "recall" if label == "racy" else "false alarms"
        share = f"{len(reported) / len(ran):.1%}" if ran else "n/a"
        lines.append(f"{label}: {len(recs)} selected, {len(ran)} ran, race reported on {len(reported)} "
                     f"({what} {share}), other faults {len(other)}, could not run: "
                     f"{dict(cannot) or 0}")
        for r in reported + other if label == "race-free" else [r for r in ran if r["verdict"] != "race"]:
            lines.append(f"  {r['verdict']:6s} {_fault_label(r):18s} {r['file']}: {r['detail'][:160]}")
    reasons = Counter(re.sub(r"\(line \d+\)|line \d+|\d+", "N", r["detail"])[:120] for r in records
                      if r["verdict"] in ("unsupported", "unchecked"))
    for reason, n in reasons.most_common():
        lines.append(f"  cannot run x{n}: {reason}")
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="Indigo3Suite checkout with generatedCodes/CUDA generated")
    ap.add_argument("--per-label", type=int, default=60, help="files per label (racy, race-free); default 60")
    ap.add_argument("--seed", type=int, default=0, help="seed of the selection and of every input (default 0)")
    ap.add_argument("--race-check", choices=("on", "off", "default"), default="default",
                    help="the emu happens-before detector, where the backend has one")
    ap.add_argument("--timeout", type=float, default=30.0, help="emu time limit per block, seconds")
    ap.add_argument("--block-sampling", default="all",
                    help="emu block sampling (default all: these kernels' blocks cooperate through atomics on "
                         "shared elements, so a run on a block sample legitimately differs from the full run)")
    ap.add_argument("--out", type=Path, help="write every verdict here as JSON (refuses to overwrite)")
    args = ap.parse_args(argv)
    layout = next(((args.suite / c, args.suite / h) for c, h in LAYOUTS
                   if (args.suite / c).is_dir() and (args.suite / h).is_dir()), None)
    if layout is None:
        ap.error(f"suite: {args.suite} has neither generatedCodes/CUDA + lib/ (Indigo3: run generate_all_codes.py "
                 "cuda first) nor codes/cuda + include/ (Indigo2)")
    gen, lib = layout
    if args.out and args.out.exists():
        ap.error(f"--out: {args.out} exists; choose another path")
    if args.per_label < 1:
        ap.error("--per-label: expected a positive integer")
    from harness.backends.emu.backend import EmuBackend
    options = {"timeout_s": args.timeout, "block_sampling": args.block_sampling}
    if args.race_check != "default":
        options["race_check"] = args.race_check == "on"
    files = sorted(gen.glob("*/*.cu"))
    chosen = select(files, args.per_label, args.seed)
    records, t0 = [], time.time()
    backend = None
    try:
        for n, path in enumerate(chosen, 1):
            # The worker process keeps every module it loaded: a fresh one every few files bounds its memory.
            if backend is None or n % RESTART_EVERY == 1:
                if backend is not None:
                    backend.close()
                backend = EmuBackend(**options)
            try:
                rec = score_file(backend, path, lib, args.seed)
            except RuntimeError as exc:         # the harness's own failure: not a verdict on the kernel
                rec = {"file": path.name, "algorithm": path.parent.name, "label": label_of(path), "kernels": {},
                       "verdict": "unchecked", "fault": "HarnessError", "detail": str(exc).splitlines()[-1][:300]}
                backend.close()
                backend = EmuBackend(**options)
            records.append(rec)
            print(f"[{n}/{len(chosen)} {time.time() - t0:.0f}s] {rec['label']:9s} {rec['verdict']:11s} "
                  f"{_fault_label(rec):18s} {path.name}", file=sys.stderr, flush=True)
    finally:
        if backend is not None:
            backend.close()
    print(f"backend: {backend.describe()}; seed {args.seed}; {len(files)} files in the suite")
    print(summarize(records))
    if args.out:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"seed": args.seed, "backend": backend.describe(), "records": records}, indent=1))
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
