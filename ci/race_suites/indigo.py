"""The Indigo suites' adapter for ci/score_race_suite.py.

Indigo. SUITE is a checkout of github.com/burtscher/Indigo3Suite in which `python3 generate_all_codes.py cuda`
ran with `bug: {all}` in codeGen/configure.txt (generatedCodes/CUDA/*/*.cu, lib/*.h), or of
github.com/burtscher/Indigo2Suite (codes/cuda/*/*.cu, include/*.h; every code there is bug-free). Labels come
from the file names: a tag `XBug` plants bug X, `NoXBug` does not. Racy: the planted bugs are RaceBug and/or
SyncBug (a missing __syncthreads) and nothing else. Race-free: no planted bug at all. Other files are not scored
(their other bugs, out-of-bounds and livelock, would decide the verdict). Per file: the device code is extracted
(local includes inlined, host functions dropped), every __global__ kernel runs once on emu with inputs
synthesised from a seeded random graph in CSR form and from the parameter names (dist, label, worklists, ...).
A seeded sample of --per-label files per label (default 60), spread over the algorithms.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from cudasrc.host_code import without_host_functions
from cudasrc.signatures import kernel_signatures
from cudasrc.types import SCALAR_DTYPES
from harness.backends.base import Struct

from harness.racescan.scan import has_detector

from .run import Launch, build_failed, inline_includes, run_kernels

RACE_TAGS = {"RaceBug", "SyncBug"}
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
def device_code(source: str) -> str:
    """The source's device code: comments stripped, host function definitions blanked (line count kept), as emu
    itself loads a whole program (cudasrc/host_code.py)."""
    return without_host_functions(source)[0]


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


MIN_NODES, DEGREE = 16, 3


class Inputs:
    """Arguments for a kernel of the suite, by parameter name, from one seeded graph."""

    def __init__(self, seed: int, nodes: int = MIN_NODES, degree: int = DEGREE):
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


def threads_per_block(source: str) -> int:
    m = re.search(r"\bThreadsPerBlock\s*=\s*(\d+)", source)
    return int(m.group(1)) if m else 256


def threads_per_item(path: Path, tpb: int) -> int:
    """A vertex (or edge) gets a block, a warp or a thread, as the file's style says."""
    tags = set(path.stem.split("_"))
    return tpb if "Block" in tags else 32 if "Warp" in tags else 1


def launch_geometry(source: str, path: Path, items: int) -> tuple[int, int]:
    tpb = threads_per_block(source)
    return max(1, math.ceil(items * threads_per_item(path, tpb) / tpb)), tpb


def graph_nodes(source: str, path: Path, degree: int = DEGREE) -> int:
    """Vertices of the file's graph: MIN_NODES, or more where a launch over them would fit in one block, for a
    race between blocks needs two (a vertex per thread with 512 threads per block: 513 vertices; an edge per
    thread: 171 vertices of degree 3, an even count so that the graph has exactly nodes x degree edges)."""
    tpb = threads_per_block(source)
    items = tpb // threads_per_item(path, tpb) + 1          # one item more than a block holds
    nodes = -(-items // degree) if "_E_" in path.name else items
    return max(MIN_NODES, nodes + nodes % 2)


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
        source = device_code(inline_includes(path, (lib,)))
        module = backend.load(source, name=path.name)
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    inputs = Inputs(seed, graph_nodes(source, path))
    edge_based = "_E_" in path.name
    graph_buffers: dict = {}
    items = inputs.edges if edge_based else inputs.nodes
    grid, tpb = launch_geometry(source, path, items)
    launches = [Launch(sig.name, (grid,), (tpb,), lambda point, sig=sig: kernel_args(sig, inputs, module, edge_based,
                                                                             graph_buffers))
                for sig in kernel_signatures(source)]
    return run_kernels(rec, module, launches)
