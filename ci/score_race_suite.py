#!/usr/bin/env python3
"""Score the CPU backend's race verdicts on public labelled suites of CUDA kernels written by others: the Indigo
suites (graph codes) and GPUVerify's CUDA test suite.

    python ci/score_race_suite.py SUITE [--per-label N] [--seed S] [--race-check on|off] [--out results.json]

One script, one adapter per suite (where the files are, how a file is labelled, launched and given inputs);
nothing of the suites is copied into this repository: the script reads them where they lie. A file counts as
reported when any of its kernels' verdict is a race (harness.racescan.RACE_FAULTS); a file that does not build
or a kernel that hits the tool's limits cannot be scored, and the reason is kept. Prints progress to stderr and
a summary table (could-not-run and not-scored reasons included); --out writes every verdict as JSON.

Indigo. SUITE is a checkout of github.com/burtscher/Indigo3Suite in which `python3 generate_all_codes.py cuda`
ran with `bug: {all}` in codeGen/configure.txt (generatedCodes/CUDA/*/*.cu, lib/*.h), or of
github.com/burtscher/Indigo2Suite (codes/cuda/*/*.cu, include/*.h; every code there is bug-free). Labels come
from the file names: a tag `XBug` plants bug X, `NoXBug` does not. Racy: the planted bugs are RaceBug and/or
SyncBug (a missing __syncthreads) and nothing else. Race-free: no planted bug at all. Other files are not scored
(their other bugs, out-of-bounds and livelock, would decide the verdict). Per file: the device code is extracted
(local includes inlined, host functions dropped), every __global__ kernel runs once on emu with inputs
synthesised from a seeded random graph in CSR form and from the parameter names (dist, label, worklists, ...).
A seeded sample of --per-label files per label (default 60), spread over the algorithms.

GPUVerify. SUITE is a checkout of github.com/mc-imperial/gpuverify; its testsuite/CUDA/**/kernel.cu are scored,
every one (no sample unless --per-label). Line 1 is the expected outcome, line 2 the verifier's command line,
then `//text` lines the text its output must contain (GPUVerify's tester), then the comment before the code.
  racy       = `//xfail:NOT_ALL_VERIFIED` whose expected text or leading comment names a race ("race", "racy",
               "Write by thread");
  race-free  = `//pass`: GPUVerify proved it free of races (and barrier divergence) for every input that
               satisfies its `__requires` preconditions, at the given launch. Not with `--only-divergence`
               (races not checked). GPUVerify tolerates write-write races in which both threads write the same
               value, and `--warp-sync=N` makes it assume warps run in lock step: a //pass kernel may rely on
               either, and the memory model does not (reports on such kernels are listed with their flags);
  not scored = every other xfail (assertions, null pointers, barrier divergence, the verifier's own tool errors,
               or no expected text at all), each with its reason.
The launch is the header's --blockDim/--gridDim (a block of more than 1024 threads, which the verifier accepts,
cannot run: not scored as run), -DNAME=VALUE become build flags. GPUVerify's specification calls have no
runtime meaning: __assert/__ensures/__invariant/... are replaced by `((void)0)` (line numbers kept); simple
`__requires` on the kernel's scalar parameters are honoured (`n == 1024`, `x < 100`, `sz == blockDim.x`,
`f == someDeviceFunction` for a function pointer), the rest are dropped and listed in the JSON. Constructs with
verifier-only meaning (`__axiom`, device functions declared but never defined, whose result the verifier takes
as arbitrary) make the file unrunnable with that reason. GPUVerify's front end force-includes its CUDA header:
a file that uses cooperative_groups without including it gets the include (in place of its line 1). Inputs: seeded random buffers (integers in [0, 64),
floats in [0, 1), random bytes for structs) of max(threads x span, 2^17) elements (span: the largest -D
value, at least 16); an access past them hits the guard pages (OutOfBounds: could not run as a race verdict).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import zlib
from typing import Callable, NamedTuple
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cudasrc.signatures import kernel_signatures, strip_comments  # noqa: E402
from cudasrc.types import SCALAR_DTYPES, VECTOR_BYTES, element_ctype  # noqa: E402
from harness.backends.base import Struct, Symbol  # noqa: E402
from harness.racescan.scan import Verdict, classify, has_detector  # noqa: E402

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
    """The verdict of every kernel of one Indigo file, and the file's verdict."""
    from harness.backends.base import BuildError, KernelFault
    rec = {"file": path.name, "algorithm": path.parent.name, "label": label_of(path), "kernels": {}}
    try:
        source = device_code(inline_includes(path, lib))
        module = backend.load(source, name=path.name)
    except (KernelFault, BuildError) as exc:
        return _build_failed(rec, exc, has_detector(backend))
    inputs = Inputs(seed)
    edge_based = "_E_" in path.name
    graph_buffers: dict = {}
    items = inputs.edges if edge_based else inputs.nodes
    grid, tpb = launch_geometry(source, path, items)
    launches = [(sig.name, (grid,), (tpb,), lambda sig=sig: kernel_args(sig, inputs, module, edge_based,
                                                                       graph_buffers))
                for sig in kernel_signatures(source)]
    return run_kernels(rec, module, launches)


def _build_failed(rec: dict, exc: BaseException, detector: bool) -> dict:
    v = classify(exc, detector)
    rec.update(verdict=v.kind, fault=v.fault, detail=v.detail, races=0, data_race=False)
    return rec


def run_kernels(rec: dict, module, launches) -> dict:
    """Launch each (kernel, grid, block, make_args) once, keep every kernel's verdict in rec["kernels"] and
    set the file's verdict: a race if any kernel reported one, else the first of order-dependent, unsupported,
    unchecked, fault, clean that any kernel had. With the detector on, a race is its DataRace alone
    (harness.racescan.classify): schedules that disagree without one are `order-dependent`, an
    UninitializedRead is a `fault`."""
    from harness.backends.base import BuildError, KernelFault
    detector = has_detector(module)
    kinds = []
    for name, grid, block, make_args in launches:
        try:
            module.launch(name, grid, block, 0, make_args())
            v = Verdict("clean", None, "")
        except (KernelFault, BuildError) as exc:
            v = classify(exc, detector)
        except (LookupError, ValueError) as exc:
            v = Verdict("unsupported", type(exc).__name__, str(exc)[:300])
        rec["kernels"][name] = {"verdict": v.kind, "fault": v.fault, "detail": v.detail, "races": v.races,
                                "same_value": v.same_value, "grid": list(grid), "block": list(block)}
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
    return rec


# ---- GPUVerify's CUDA test suite ---------------------------------------------------------------------------
# GPUVerify's specification functions have no runtime meaning. The checks (assert, ensures, invariants) are
# dropped; the preconditions (requires, assume) restrict inputs: simple ones on the kernel's scalar parameters
# are honoured when the arguments are chosen (gpuverify_scalars), the rest dropped. Each call becomes an
# expression that does nothing, for they also stand in for-loop conditions (`for (...; __invariant(p), i < n;
# ...)`); its arguments go with it (they use the verifier's own functions: __implies, __write, __enabled ...).
GV_DROPPED = ("__requires", "__ensures", "__assert", "__assume", "__invariant", "__global_invariant",
              "__global_requires", "__global_ensures", "__global_assert", "__candidate_invariant",
              "__candidate_global_invariant", "__function_wide_invariant", "__function_wide_candidate_invariant",
              "__requires_fresh_array", "__non_temporal_loads_begin", "__non_temporal_loads_end")
_GV_DROPPED_CALL = re.compile(r"\b(?:" + "|".join(GV_DROPPED) + r")\s*\(")


def _call_end(code: str, start: int) -> int:
    """The index just past the parenthesis that closes the call whose arguments begin at `start`."""
    depth, j = 1, start
    while depth:
        if j >= len(code):
            raise ValueError(f"source: unbalanced parentheses after {code[max(0, start - 20):start]!r}")
        depth += {"(": 1, ")": -1}.get(code[j], 0)
        j += 1
    return j


def gpuverify_source(text: str) -> str:
    """The file without comments and with every specification call replaced by `((void)0)` (newlines kept, so
    line numbers stay true)."""
    code = strip_comments(text)
    out, pos = [], 0
    for m in _GV_DROPPED_CALL.finditer(code):
        if m.start() < pos:          # nested in a call already dropped
            continue
        j = _call_end(code, m.end())
        out += [code[pos:m.start()], "((void)0)", "\n" * code.count("\n", m.start(), j)]
        pos = j
    out.append(code[pos:])
    return "".join(out)


# Constructs that change what the verifier proved in a way no run can honour: the file is not scored.
GV_VERIFIER_ONLY = ((r"\b__axiom\s*\(", "__axiom restricts the launch (block/thread ids) for the verifier only"),)
GV_CODES = "testsuite/CUDA"
GV_RACE_TEXT = re.compile(r"\brace\b|(?<!not-)\bracy\b|\b(?:Write|Read) by thread\b", re.IGNORECASE)
GV_LAUNCH_FLAGS = ("--blockDim", "--gridDim")
GV_MIN_ELEMENTS = 1 << 17
RAN = ("race", "order-dependent", "fault", "clean")     # verdicts of a file that ran
GV_STRUCT_BYTES = 64                  # bytes per element of a struct buffer (at least the struct's size)
GV_SYMBOL = "__qconform_gv_"          # prefix of the function-pointer variables the adapter appends


def gpuverify_header(text: str) -> dict:
    """The test header of a GPUVerify kernel.cu: line 1 the expected outcome (`//pass`, `//xfail:KIND`), line 2
    the command line (`//--blockDim=64 --gridDim=[2,2] -DN=4 ...`), then `//text` lines up to the first other
    line: the text the verifier's output must contain (expected); then the comment before the code (notes).
    Racy: an xfail:NOT_ALL_VERIFIED whose expected text or notes name a race ("race", "racy", "Write by
    thread"); race-free: //pass. Returns label (racy | race-free | None), reason (why not scored, for None),
    block, grid (3-tuples), defines (-D name -> value), flags (the other options), expected and notes."""
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith("//") or not lines[1].startswith("//"):
        raise ValueError("header: expected `//pass` or `//xfail:KIND` on line 1 and the options on line 2")
    outcome = lines[0][2:].strip().lower()
    expected, notes = [], []
    for line in lines[2:]:            # GPUVerify's tester: `//text` lines from line 3 on, up to any other line
        if not (line.startswith("//") and len(line) > 2):
            break
        expected.append(line[2:].strip())
    for line in lines[2 + len(expected):]:       # then the comment before the code, which may say "racy"
        if line.strip() and not line.startswith("//"):
            break
        notes.append(line[2:].strip())
    dims, defines, flags = {}, {}, []
    for opt in lines[1][2:].split():
        key, _, value = opt.partition("=")
        if key in GV_LAUNCH_FLAGS:
            nums = [int(x) for x in re.findall(r"\d+", value)]
            if not 1 <= len(nums) <= 3:
                raise ValueError(f"header: {opt!r}: expected N or [X,Y] or [X,Y,Z]")
            dims[key] = tuple(nums + [1] * (3 - len(nums)))
        elif key.startswith("-D"):
            defines[key[2:]] = value or "1"
        else:
            flags.append(opt)
    missing = [k for k in GV_LAUNCH_FLAGS if k not in dims]
    if missing:
        raise ValueError(f"header: line 2 names no {' or '.join(missing)}")
    label, reason = None, None
    if outcome == "pass":
        label = "race-free"
        if "--only-divergence" in flags:
            label, reason = None, "pass with --only-divergence: GPUVerify checked barrier divergence, not races"
    elif outcome == "xfail:not_all_verified":
        if any(GV_RACE_TEXT.search(e) for e in expected + notes):
            label = "racy"
        elif any(expected + notes):
            reason = "xfail:NOT_ALL_VERIFIED for another error than a race (assertion, null pointer, ...)"
        else:
            reason = "xfail:NOT_ALL_VERIFIED with no expected text (which error is not stated)"
    elif outcome.startswith("xfail:"):
        reason = f"xfail:{outcome[6:].upper()}: the verifier's own tool chain fails on it"
    else:
        raise ValueError(f"header: line 1 {lines[0]!r} is neither //pass nor //xfail:KIND")
    return {"label": label, "reason": reason, "block": dims["--blockDim"], "grid": dims["--gridDim"],
            "defines": defines, "flags": flags, "expected": expected, "notes": [n for n in notes if n]}


def gpuverify_unrunnable(header: dict, source: str) -> "str | None":
    """Why a labelled file cannot be run as the verifier saw it, or None."""
    from harness.backends.emu.backend import MAX_THREADS
    threads = math.prod(header["block"])
    if threads > MAX_THREADS:
        return (f"launch beyond CUDA's limits: {threads} threads per block (at most {MAX_THREADS}); the "
                "verifier reasons about any block size")
    code = strip_comments(source)
    for pattern, why in GV_VERIFIER_ONLY:
        if re.search(pattern, code):
            return f"verifier-only construct: {why}"
    for m in re.finditer(r"__device__[\w\s*]*?\b(\w+)\s*\([^;{)]*\)\s*;", code):
        if not re.search(r"__device__[\w\s*]*?\b" + m.group(1) + r"\s*\([^;{)]*\)\s*\{", code):
            return (f"verifier-only construct: __device__ {m.group(1)}() is declared, never defined (the verifier "
                    "takes any value it could return; a build needs its body)")
    if re.search(r"\bcurandStateMtgp32", code):
        return ("cuRAND's MTGP32 generator: its state points to parameter tables that only cuRAND's host API "
                "sets up (curandMakeMTGP32KernelState); the adapter makes none")
    return None


GV_IMPLICIT = (("cooperative_groups", "cooperative_groups.h"), ("curand", "curand_kernel.h"))


def gpuverify_implicit_includes(code: str) -> str:
    """GPUVerify's front end force-includes its CUDA header, which declares cooperative groups and cuRAND's
    device API: a file that uses them without the include gets it in place of a leading line (the label's
    comment, empty once comments are removed: line numbers stay)."""
    lines = code.split("\n")
    at = 0
    for word, header in GV_IMPLICIT:
        if word in code and not re.search(r"#\s*include\s*[<\"]" + re.escape(header), code):
            if at >= len(lines) or lines[at].strip():
                raise ValueError(f"source: line {at + 1} is not empty after removing comments")
            lines[at] = f"#include <{header}>"
            at += 1
    return "\n".join(lines)


def _requires_of(body: str) -> list[str]:
    """The conditions of the `__requires(...)` calls in a kernel body, `__implies(__enabled(), c)` unwrapped."""
    out = []
    for m in re.finditer(r"__requires\s*\(", body):
        cond = body[m.end():_call_end(body, m.end()) - 1].strip()
        wrapped = re.fullmatch(r"__implies\s*\(\s*__enabled\s*\(\s*\)\s*,(.*)\)", cond, re.S)
        out.append((wrapped.group(1) if wrapped else cond).strip())
    return out


def gpuverify_scalars(sig, source: str, block: tuple, rng: np.random.Generator) -> tuple[dict, list[str]]:
    """Values for the kernel's scalar parameters: those its simple `__requires` fix or bound (`n == 1024`,
    `x < 100`, `sz == blockDim.x`, `i == 1 | i == 2`: the first alternative), others a seeded draw from [1, 64]
    (inside the bounds); a function-pointer parameter the device function its `__requires(f == name)` names.
    Returns (name -> int value or function name, the preconditions left unhonoured)."""
    m = re.search(r"\b" + re.escape(sig.name) + r"\s*\(", source)
    body = source[m.end():] if m else source
    body = body[:_matching_brace(body, body.index("{")) + 1] if "{" in body else body
    names = {n for t, n in sig.params if not t.endswith("*")}
    opaque = {n for t, n in sig.params if not t.endswith("*") and t.replace("const ", "") not in SCALAR_DTYPES}
    dims = {"blockDim.x": block[0], "blockDim.y": block[1], "blockDim.z": block[2]}
    fixed, low, high, ignored = {}, {}, {}, []
    for cond in _requires_of(body):
        first = re.split(r"\|\|?", cond)[0].strip()
        c = re.fullmatch(r"(\w+)\s*(==|>=|<=|<|>|!=)\s*(-?\d+|blockDim\.[xyz]|[A-Za-z_]\w*)", first)
        if not c or c.group(1) not in names:
            ignored.append(cond)
            continue
        name, op, value = c.group(1), c.group(2), c.group(3)
        if re.fullmatch(r"[A-Za-z_]\w*", value) and value not in dims:
            if op != "==" or name not in opaque:
                ignored.append(cond)
            else:
                fixed[name] = value           # a function-pointer parameter fixed to a device function
            continue
        value = dims[value] if value in dims else int(value)
        if op == "==":
            fixed[name] = value
        elif op in (">=", ">"):
            low[name] = max(low.get(name, value), value + (op == ">"))
        elif op in ("<=", "<"):
            high[name] = min(high.get(name, value), value - (op == "<"))
        elif op == "!=" and value in (1, 64):
            low[name] = 2 if value == 1 else low.get(name, 1)
    values = {}
    for name in sorted(names - opaque):
        lo, hi = low.get(name, 1), high.get(name, max(64, low.get(name, 1)))
        values[name] = fixed.get(name, int(rng.integers(lo, hi + 1)))
    values.update({name: fixed[name] for name in opaque if name in fixed})
    return values, ignored


def function_pointer_symbols(sig, values: dict) -> str:
    """File-scope __device__ variables holding the device functions chosen for function-pointer parameters
    (a host program would read such a variable with cudaMemcpyFromSymbol), appended after the code."""
    return "".join(f"\n__device__ {t} {GV_SYMBOL}{sig.name}_{n} = {values[n]};" for t, n in sig.params
                   if isinstance(values.get(n), str))


def gpuverify_args(sig, module, header: dict, values: dict, rng: np.random.Generator) -> list:
    """Seeded random buffers for the pointer parameters, sized from the launch (every thread of the grid owns
    `span` elements: the largest -D constant, at least 16, so that `A[gid * WIDTH + i]` fits; and at least
    GV_MIN_ELEMENTS, for loops over `100 * blockDim.x` elements and fixed-size tables; guard pages catch what
    still overruns), and the scalar values chosen from the preconditions."""
    threads = math.prod(header["block"]) * math.prod(header["grid"])
    span = max([16] + [int(v) for v in header["defines"].values() if v.isdigit()])
    n = max(threads * span, GV_MIN_ELEMENTS)
    args = []
    for ctype, name in sig.params:
        base = element_ctype(ctype).replace("volatile ", "").replace("__restrict", "").strip()
        if ctype.endswith("*"):
            if ctype.count("*") > 1:
                raise LookupError(f"parameter {name}: pointer to pointer ({ctype}) has no synthesised input")
            if base in SCALAR_DTYPES:
                dtype = SCALAR_DTYPES[base]
                arr = rng.uniform(0.0, 1.0, n) if dtype.kind == "f" else rng.integers(0, 64, n)
                args.append(arr.astype(dtype))
            elif base in VECTOR_BYTES:
                args.append(rng.integers(0, 64, n * VECTOR_BYTES[base] // 4).astype(np.int32))
            else:       # a struct: random bytes (its fields are numbers here; a pointer field would be garbage)
                args.append(rng.integers(0, 64, n * GV_STRUCT_BYTES).astype(np.uint8))
        elif base in SCALAR_DTYPES:
            args.append(SCALAR_DTYPES[base].type(values[name]))
        elif isinstance(values.get(name), str):
            args.append(Symbol(f"{GV_SYMBOL}{sig.name}_{name}"))
        else:
            raise LookupError(f"parameter {name}: by-value {ctype!r} (a struct or function pointer) has no "
                              "synthesised input")
    return args


def gpuverify_score(backend, path: Path, root: Path, seed: int) -> dict:
    """The verdict of one GPUVerify kernel.cu: every __global__ kernel once at the header's launch."""
    from harness.backends.base import BuildError, KernelFault
    text = path.read_text()
    header = gpuverify_header(text)
    rel = str(path.parent.relative_to(root))
    rec = {"file": rel, "algorithm": rel.split("/")[0], "label": header["label"], "kernels": {},
           "flags": header["flags"]}
    if header["label"] is None:
        rec.update(verdict="not scored", fault=None, detail=header["reason"], races=0, data_race=False)
        return rec
    why = gpuverify_unrunnable(header, text)
    if why:
        fault = "Launch" if why.startswith("launch") else "VerifierOnly" if why.startswith("verifier") \
            else "UnsupportedConstruct"
        rec.update(verdict="unsupported", fault=fault, detail=why, races=0, data_race=False)
        return rec
    flags = tuple(f"-D{k}={v}" for k, v in header["defines"].items())
    rng = np.random.default_rng([seed, zlib.crc32(rel.encode())])     # per file: order-independent
    code = gpuverify_implicit_includes(gpuverify_source(text))
    chosen, ignored = [], []
    for sig in kernel_signatures(code):
        values, unhonoured = gpuverify_scalars(sig, text, header["block"], rng)
        ignored += unhonoured
        chosen.append((sig, values))
    code += "".join(function_pointer_symbols(sig, values) for sig, values in chosen)
    try:
        module = backend.load(code, flags=flags, name=rel.replace("/", "_") + ".cu")
    except (KernelFault, BuildError) as exc:
        return _build_failed(rec, exc)
    launches = [(sig.name, header["grid"], header["block"],
                 lambda sig=sig, values=values: gpuverify_args(sig, module, header, values, rng))
                for sig, values in chosen]
    rec["requires_not_honoured"] = ignored
    rec["scalars"] = {sig.name: values for sig, values in chosen}      # what to replay a verdict with
    return run_kernels(rec, module, launches)


def select(files: list[Path], per_label: int, seed: int, label=label_of, group=lambda f: f.parent.name) -> list[Path]:
    """Up to `per_label` racy and race-free files, spread evenly over the groups (Indigo: algorithms; seeded)."""
    rng = np.random.default_rng(seed)
    labels = {f: label(f) for f in files}
    chosen = []
    for wanted in ("racy", "race-free"):
        by_alg = defaultdict(list)
        for f in files:
            if labels[f] == wanted:
                by_alg[group(f)].append(f)
        pools = {a: [fs[i] for i in rng.permutation(len(fs))] for a, fs in sorted(by_alg.items())}
        picked = []
        while len(picked) < per_label and any(pools.values()):
            for a in sorted(pools):
                if pools[a] and len(picked) < per_label:
                    picked.append(pools[a].pop())
        chosen.extend(picked)
    return chosen


class Suite(NamedTuple):
    """One adapter per suite: where its files are, how a file is labelled, named and scored."""
    name: str
    files: list
    label: Callable[[Path], "str | None"]
    group: Callable[[Path], str]            # spread of a sample (Indigo: the algorithm)
    key: Callable[[Path], str]              # the record's file name
    score: Callable[[object, Path, int], dict]
    per_label: "int | None"                 # default sample size per label; None: every file, unscored ones too


def open_suite(root: Path) -> "Suite | None":
    for codes, headers in LAYOUTS:
        gen, lib = root / codes, root / headers
        if gen.is_dir() and lib.is_dir():
            return Suite("Indigo", sorted(gen.glob("*/*.cu")), label_of, lambda f: f.parent.name, lambda f: f.name,
                         lambda backend, f, seed: score_file(backend, f, lib, seed), 60)
    gv = root / GV_CODES
    if gv.is_dir():
        return Suite("GPUVerify", sorted(gv.rglob("kernel.cu")),
                     lambda f: gpuverify_header(f.read_text())["label"],
                     lambda f: str(f.parent.relative_to(gv)).split("/")[0], lambda f: str(f.parent.relative_to(gv)),
                     lambda backend, f, seed: gpuverify_score(backend, f, gv, seed), None)
    return None


def _fault_label(rec: dict) -> str:
    """The fault class, with the number of distinct races where the detector reported several: 'DataRace x3'."""
    races = rec.get("races", 0)
    return f"{rec['fault'] or '-'}" + (f" x{races}" if races > 1 else "")


def summarize(records: list[dict]) -> str:
    lines = []
    detector = [r for r in records if r.get("data_race")]
    if detector:      # the happens-before detector was on: its verdicts alone, then the backend's
        for label in ("racy", "race-free"):
            recs = [r for r in records if r["label"] == label and r["verdict"] in RAN]
            hits = [r for r in recs if r in detector]
            share = f"{len(hits) / len(recs):.1%}" if recs else "n/a"
            same = sum(1 for r in hits if r.get("same_value"))
            lines.append(f"DataRace only, {label}: {len(hits)} of {len(recs)} that ran ({share})"
                         + (f"; {same} of them only same-value stores" if same else ""))
    for label in ("racy", "race-free"):
        recs = [r for r in records if r["label"] == label]
        ran = [r for r in recs if r["verdict"] in RAN]
        reported = [r for r in ran if r["verdict"] == "race"]
        other = [r for r in ran if r["verdict"] in ("fault", "order-dependent")]
        cannot = Counter(r["verdict"] for r in recs if r not in ran)
        what = "recall" if label == "racy" else "false alarms"
        share = f"{len(reported) / len(ran):.1%}" if ran else "n/a"
        lines.append(f"{label}: {len(recs)} selected, {len(ran)} ran, race reported on {len(reported)} "
                     f"({what} {share}), other faults {len(other)}, could not run: "
                     f"{dict(cannot) or 0}")
        for r in reported + other if label == "race-free" else [r for r in ran if r["verdict"] != "race"]:
            flags = " ".join(f for f in r.get("flags", ()) if f.startswith("--warp-sync"))
            lines.append(f"  {r['verdict']:6s} {_fault_label(r):18s} {r['file']}{' [' + flags + ']' if flags else ''}: "
                         f"{r['detail'][:160]}")
    reasons = Counter(re.sub(r"\(line \d+\)|line \d+|\d+", "N", r["detail"])[:120] for r in records
                      if r["verdict"] in ("unsupported", "unchecked"))
    for reason, n in reasons.most_common():
        lines.append(f"  cannot run x{n}: {reason}")
    unscored = Counter(r["detail"] for r in records if r["verdict"] == "not scored")
    if unscored:
        lines.append(f"not scored: {sum(unscored.values())}")
        for reason, n in unscored.most_common():
            lines.append(f"  not scored x{n}: {reason}")
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="Indigo3Suite checkout with generatedCodes/CUDA generated, "
                    "Indigo2Suite checkout, or GPUVerify checkout (testsuite/CUDA)")
    ap.add_argument("--per-label", type=int, default=None,
                    help="files per label (racy, race-free); default 60 for Indigo, every file for GPUVerify")
    ap.add_argument("--seed", type=int, default=0, help="seed of the selection and of every input (default 0)")
    ap.add_argument("--race-check", choices=("on", "off", "default"), default="default",
                    help="the emu happens-before detector, where the backend has one")
    ap.add_argument("--timeout", type=float, default=30.0, help="emu time limit per block, seconds")
    ap.add_argument("--block-sampling", default="all",
                    help="emu block sampling (default all: these kernels' blocks cooperate through atomics on "
                         "shared elements, so a run on a block sample legitimately differs from the full run)")
    ap.add_argument("--out", type=Path, help="write every verdict here as JSON (refuses to overwrite)")
    args = ap.parse_args(argv)
    suite = open_suite(args.suite)
    if suite is None:
        ap.error(f"suite: {args.suite} has neither generatedCodes/CUDA + lib/ (Indigo3: run generate_all_codes.py "
                 f"cuda first) nor codes/cuda + include/ (Indigo2) nor {GV_CODES} (GPUVerify)")
    if args.out and args.out.exists():
        ap.error(f"--out: {args.out} exists; choose another path")
    if args.per_label is not None and args.per_label < 1:
        ap.error("--per-label: expected a positive integer")
    from harness.backends.emu.backend import EmuBackend
    options = {"timeout_s": args.timeout, "block_sampling": args.block_sampling}
    if args.race_check != "default":
        options["race_check"] = args.race_check == "on"
    files = suite.files
    per_label = args.per_label or suite.per_label
    chosen = files if per_label is None else select(files, per_label, args.seed, suite.label, suite.group)
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
                rec = suite.score(backend, path, args.seed)
            except RuntimeError as exc:         # the harness's own failure: not a verdict on the kernel
                rec = {"file": suite.key(path), "algorithm": suite.group(path), "label": suite.label(path),
                       "kernels": {},
                       "verdict": "unchecked", "fault": "HarnessError", "detail": str(exc).splitlines()[-1][:300]}
                backend.close()
                backend = EmuBackend(**options)
            records.append(rec)
            print(f"[{n}/{len(chosen)} {time.time() - t0:.0f}s] {rec['label'] or '-':9s} {rec['verdict']:11s} "
                  f"{_fault_label(rec):18s} {suite.key(path)}", file=sys.stderr, flush=True)
    finally:
        if backend is not None:
            backend.close()
    print(f"backend: {backend.describe()}; seed {args.seed}; {len(files)} files in the {suite.name} suite; "
          f"{time.time() - t0:.0f} s")
    print(summarize(records))
    if args.out:
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"seed": args.seed, "backend": backend.describe(), "records": records}, indent=1))
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
