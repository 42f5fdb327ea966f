"""Indigo 1's adapter for ci/score_race_suite.py.

Indigo (version 1.3; Liu, Azami, Walters, Burtscher, ISPASS 2022) as generated in the artifact of HiRace (Jacobson,
Burtscher, Gopalakrishnan, SC24; github.com/JohnJacobsonIII/HiRace-Artifact-SC24): SUITE is a checkout of that
artifact (indigo/indigo_sources/PATTERN/*.cu, indigo/indigo_include/indigo_cuda.h, indigo/input/*.egr). Every file
is one `test_kernel(int* nindex, int* nlist, data_t* data1, data_t* data2, int numv)` and the same host main.
Labels come from the file names, as the artifact's own table counts them (scripts/gen_table1.py):
  racy       = a planted `atomicBug` (an atomic made a plain read-modify-write), `raceBug`, `syncBug` (a missing
               barrier) or `guardBug` (a plain read of a value other threads update atomically, as the guard of
               the atomic), and no `boundsBug`;
  race-free  = no planted bug;
  not scored = a `boundsBug` (an out-of-bounds access would decide the verdict; the artifact leaves them out too).
Inputs are the host main's: one of the suite's graphs (ECL binary CSR, read from indigo/input; INPUT_GRAPH unless
the script's --graph names another), data1 and data2
of max(nodes, edges) elements, element 0 zero and the others seeded draws in [0, nodes) and [0, edges) (main uses
rand()), numv = nodes. The launch is the artifact's: THREADS_PER_BLOCK x BLOCKS (hirace_experiments.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .run import Launch, build_failed, inline_includes, run_kernels
from .indigo import device_code

CODES, HEADERS, INPUTS = "indigo/indigo_sources", "indigo/indigo_include", "indigo/input"
INPUT_GRAPH = "power_law_200n_1000e.egr"       # 200 vertices, 1000 edges: every racy file's race reachable on it
THREADS_PER_BLOCK, BLOCKS = 256, 1024          # the artifact's launch of every file
RACE_TAGS = {"atomicBug", "raceBug", "syncBug", "guardBug"}
KERNEL = "test_kernel"


def suite_files(root: Path) -> "list[Path] | None":
    codes = root / CODES
    if not (codes.is_dir() and (root / HEADERS / "indigo_cuda.h").is_file()
            and (root / INPUTS / INPUT_GRAPH).is_file()):
        return None
    return sorted(codes.glob("*/*.cu"))


def planted_bugs(path: Path) -> set[str]:
    return {t for t in path.stem.split("_") if t.endswith("Bug")}


def label_of(path: Path) -> "str | None":
    bugs = planted_bugs(path)
    if not bugs:
        return "race-free"
    return "racy" if bugs <= RACE_TAGS else None


def read_graph(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """An ECL graph file: int32 nodes, int32 edges, nindex[nodes + 1], nlist[edges]."""
    raw = np.fromfile(path, dtype="<i4")
    if raw.size < 2:
        raise ValueError(f"{path.name}: not an ECL graph (fewer than 8 bytes)")
    nodes, edges = int(raw[0]), int(raw[1])
    if nodes < 1 or edges < 0 or raw.size != 2 + nodes + 1 + edges:
        raise ValueError(f"{path.name}: not an ECL graph ({nodes} nodes, {edges} edges, {raw.size * 4} bytes)")
    return raw[2:3 + nodes].copy(), raw[3 + nodes:].copy()


def kernel_args(nindex: np.ndarray, nlist: np.ndarray, seed: int) -> list:
    """The host main's arguments (module docstring), its rand() draws replaced by seeded ones."""
    rng = np.random.default_rng(seed)
    n, e = len(nindex) - 1, max(len(nlist), 1)
    s = max(n, e)
    data1, data2 = rng.integers(0, n, s).astype(np.int32), rng.integers(0, e, s).astype(np.int32)
    data1[0] = data2[0] = 0
    return [nindex.copy(), nlist.copy() if len(nlist) else np.zeros(1, np.int32), data1, data2, np.int32(n)]


def score_file(backend, path: Path, root: Path, seed: int, graph: str = INPUT_GRAPH) -> dict:
    from harness.backends.base import BuildError, KernelFault
    from harness.racescan import has_detector
    rec = {"file": path.name, "algorithm": path.parent.name, "label": label_of(path), "kernels": {}}
    if rec["label"] is None:
        rec.update(verdict="not scored", fault=None, races=0, data_race=False,
                   detail="a planted boundsBug: its out-of-bounds access, not a race, decides the verdict")
        return rec
    try:
        module = backend.load(device_code(inline_includes(path, (root / HEADERS,), line_markers=True)), name=path.name)
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    nindex, nlist = read_graph(root / INPUTS / graph)
    launch = Launch(KERNEL, (BLOCKS,), (THREADS_PER_BLOCK,), lambda point: kernel_args(nindex, nlist, seed))
    return run_kernels(rec, module, [launch])
