"""ScoR's applications for ci/score_race_suite.py (SUITE = a ScoR checkout's `benchmarks` folder).

ScoR (github.com/csl-iisc/ScoR) ships, beside its microbenchmarks (ci/race_suites/scor.py), seven applications that
synchronise with scoped atomics, fences and locks. Each is built twice by its Makefile: with `-D RACEY` the authors'
planted scoped races are in (a block-scope atomic or fence where threads of other blocks take part, a lock without
its fences), without it they are out. So each application is two labelled programs:
  racy       = the `-D RACEY` build;
  race-free  = the plain build.
Every program is its `*_kernel.cu` (with its folder's headers through -I), built with the Makefile's NBLOCKS and
NTHREADS, its kernels launched as the host program launches them, in its order, on the same buffers. The host
programs read their inputs from stdin (no input files are shipped), so each input below is the adapter's, chosen
so that the planted race has threads of two blocks meet (one block would hide a scope too narrow), with seeded
values (the recorded seed and the program's name):
  1dconv                  filterSize 5, arraySize 1000 (5000 products over 15 x 1024 threads: the products of
                          one output straddle a block boundary); initKernel, then convolveKernel.
  matrix-multiplication   rA 4, cA 256, cB 32 (each row of A spans two of the 120 blocks of 128 threads, so two
                          blocks add into each element of C); A and B integers in [0, 8); C zero (the host zeroes
                          it); the global locks zero (the host's cudaMemset); the per-warp locks zero too: the
                          kernel initialises only lane 0's lock of each block and a fresh allocation holds zeros.
  reduction               30714 integers in [0, 100): getNumBlocksAndThreads gives 30 blocks of 512 threads and
                          the host launches reduceSinglePass<512, false> (n not a power of two), which the adapter
                          instantiates explicitly (emu launches the instantiations a source makes).
  rule-110                20000 cells in {0, 1}, step 1, `comp` zero (the host's cudaMemset).
  graph-connectivity      6000 vertices, 12000 seeded random edges; initKernel over the vertices, linkKernel over
                          the edges, compressKernel over the vertices, each after the host's divideWork (block b's
                          range of the items in head[b], tail[b]), on the same buffers.
  graph-coloring          the same graph; the first pass of the host's loop (which repeats until no conflict is
                          left): assignColorsKernel, detectConflictsKernel (after the host sets `complete`),
                          forbidColorsKernel, each after divideWork; colours and forbidden sets zero (the host's
                          memsets).
  uts                     maxHeight 4, avgChildren 4 (the host reads both, and a seed, from stdin); the stacks'
                          statistics as the host fills them, each block's root on its local stack.
"""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from harness.racescan import MEMORY_MODEL, has_detector

from .run import Launch, build_failed, run_kernels

VARIANTS = ("racy", "race-free")         # the last part of suite_files' paths: the build, and its label


class App(NamedTuple):
    kernel_file: str
    nblocks: int                    # the Makefile's NBLOCKS and NTHREADS
    nthreads: int
    launches: Callable[[np.random.Generator, int, int], list]    # (rng, nblocks, nthreads) -> [Launch]
    extra: str = ""                 # appended to the source (an explicit instantiation)


def _conv(rng, nb, nt):
    fs, n = 5, 1000
    args = [rng.random(fs, dtype=np.float32), np.int32(fs), rng.random(n, dtype=np.float32), np.int32(n),
            rng.random(n, dtype=np.float32)]
    return [Launch(k, (nb, 1, 1), (nt, 1, 1), lambda point: args) for k in ("initKernel", "convolveKernel")]


def _mm(rng, nb, nt):
    ra, ca, cb = 4, 256, 32
    args = [rng.integers(0, 8, ra * ca, dtype=np.int32), rng.integers(0, 8, ca * cb, dtype=np.int32),
            np.zeros(ra * cb, np.int32), np.int32(ra), np.int32(ca), np.int32(cb), np.zeros(nb * 32, np.int32),
            rng.integers(0, 64, nb * 32, dtype=np.int32), np.zeros(1024, np.int32)]
    return [Launch("matMultKernel", (nb, 1, 1), (nt, 1, 1), lambda point: args)]


def _reduction(rng, nb, nt):
    n = nb * nt * 2 - 6
    data = rng.integers(0, 100, n, dtype=np.int32)
    args = [data, data[:nb].copy(), rng.integers(0, 64, nb * nt, dtype=np.int32),
            rng.integers(0, 64, nb * nt, dtype=np.int32), np.uint32(n)]
    return [Launch(f"reduceSinglePass<{nt},false>", (nb, 1, 1), (nt, 1, 1), lambda point: args)]


def _divide_work(head, tail, value):
    """The host's divideWork: blocks' ranges of `value` items, the last block to the end (value >= blocks)."""
    portion = value // len(head)
    head[:] = np.arange(len(head)) * portion
    tail[:] = head + portion
    tail[-1] = value


def _over(head, tail, items: int, *args, before: Callable[[], None] = lambda: None):
    """A launch's arguments `head, tail, *args`, made as the host makes them: divideWork over `items` first (and
    `before`, what else the host writes then)."""
    def make(point):
        _divide_work(head, tail, items)
        before()
        return [head, tail, *args]
    return make


def _connectivity(rng, nb, nt):
    v, e = 6000, 12000
    head, tail = np.zeros(nb, np.int32), np.zeros(nb, np.int32)
    u_list, v_list = rng.integers(0, v, e, dtype=np.int32), rng.integers(0, v, e, dtype=np.int32)
    comp = rng.integers(0, v, v, dtype=np.int32)
    bases, block_ids = rng.integers(0, 64, nb, dtype=np.int32), rng.integers(0, nb, nb, dtype=np.int32)
    return [Launch("initKernel", (nb, 1, 1), (nt, 1, 1), _over(head, tail, v, comp, bases, block_ids)),
            Launch("linkKernel", (nb, 1, 1), (nt, 1, 1), _over(head, tail, e, u_list, v_list, comp, bases, block_ids)),
            Launch("compressKernel", (nb, 1, 1), (nt, 1, 1), _over(head, tail, v, comp, bases, block_ids))]


def _coloring(rng, nb, nt):
    v, e = 6000, 12000
    head, tail = np.zeros(nb, np.int32), np.zeros(nb, np.int32)
    u_list, v_list = rng.integers(0, v, e, dtype=np.int32), rng.integers(0, v, e, dtype=np.int32)
    color_set, vertex_color, forbidden, t_forbidden = (np.zeros(v, np.int32) for _ in range(4))  # host's memsets
    complete = np.zeros(1, np.int32)
    bases, block_ids = rng.integers(0, 64, nb, dtype=np.int32), rng.integers(0, nb, nb, dtype=np.int32)

    def set_complete():              # the host sets `complete` before detectConflictsKernel
        complete[0] = 1
    return [Launch("assignColorsKernel", (nb, 1, 1), (nt, 1, 1),
                   _over(head, tail, v, color_set, vertex_color, forbidden, t_forbidden, bases, block_ids)),
            Launch("detectConflictsKernel", (nb, 1, 1), (nt, 1, 1),
                   _over(head, tail, e, u_list, v_list, color_set, vertex_color, complete, bases, block_ids,
                         before=set_complete)),
            Launch("forbidColorsKernel", (nb, 1, 1), (nt, 1, 1),
                   _over(head, tail, e, u_list, v_list, color_set, vertex_color, forbidden, bases, block_ids))]


STACK_STATS = np.dtype([("stackSize", "<i4"), ("workAvail", "<i4"), ("top", "<i4"), ("locked", "<i4"),
                        ("totalNodes", "<i4"), ("totalLeaves", "<i4")])
NODE = np.dtype([("param", "u1", (4,))])
UTS_LOCAL_DEPTH, UTS_MAX_STACK, UTS_MAX_CHAR = 4, 4000, 255      # LOCAL_DEPTH is NTHREADS * 4


def _uts(rng, nb, nt):
    local_depth = nt * UTS_LOCAL_DEPTH
    local = np.zeros(nb, STACK_STATS)
    local["stackSize"], local["workAvail"], local["top"], local["totalNodes"] = local_depth, 1, \
        np.arange(nb) * local_depth, 1
    steal = np.zeros(nb, STACK_STATS)
    steal["stackSize"], steal["top"] = UTS_MAX_STACK, np.arange(nb) * UTS_MAX_STACK
    local_nodes = np.zeros(nb * local_depth, NODE)
    seed = int(rng.integers(0, 1 << 16))
    for b in range(nb):                                  # each block's root, as the host writes it
        local_nodes["param"][b * local_depth] = (0, UTS_MAX_CHAR, seed % UTS_MAX_CHAR, (b + 1) % UTS_MAX_CHAR)
    steal_nodes = np.zeros(nb * UTS_MAX_STACK, NODE)
    config = np.array((4, 4), dtype=[("maxHeight", "<i4"), ("avgChildren", "<i4")])[()]     # by value
    args = [local, local_nodes, steal, steal_nodes, config]
    return [Launch("parTreeSearch", (nb, 1, 1), (nt, 1, 1), lambda point: args)]


def _rule110(rng, nb, nt):
    n = 20000
    args = [rng.integers(0, 2, n, dtype=np.int32), rng.integers(0, 2, n, dtype=np.int32),
            np.zeros(nb * nt, np.int32), np.int32(n), np.int32(1)]
    return [Launch("rule110Kernel", (nb, 1, 1), (nt, 1, 1), lambda point: args)]


APPS = {
    "1dconv": App("1dconv_kernel.cu", 15, 1024, _conv),
    "matrix-multiplication": App("mm_kernel.cu", 120, 128, _mm),
    "reduction": App("red_kernel.cu", 30, 512, _reduction,
                     "\ntemplate __global__ void reduceSinglePass<512, false>(const DATATYPE*, volatile DATATYPE*, "
                     "volatile DATATYPE*, int*, unsigned int);\n"),
    "rule-110": App("r110_kernel.cu", 15, 1024, _rule110),
    "graph-connectivity": App("gcon_kernel.cu", 15, 400, _connectivity),
    "graph-coloring": App("gcol_kernel.cu", 15, 256, _coloring),
    "uts": App("uts_kernel.cu", 60, 256, _uts),
}


def suite_files(root: Path) -> "list[Path] | None":
    """root/<application>/{racy,race-free}: the two builds of each application, or None where root is not ScoR's
    benchmarks folder."""
    if not all((root / app / spec.kernel_file).is_file() for app, spec in APPS.items()):
        return None
    return [root / app / variant for app in APPS for variant in VARIANTS]


def label_of(path: Path) -> "str | None":
    return path.name if path.name in VARIANTS else None


def record_name(path: Path) -> str:
    return f"{path.parent.name} ({path.name})"


def score_file(backend, path: Path, seed: int) -> dict:
    """The verdict of one build of one application: its kernels in the host program's order."""
    from harness.backends.base import BuildError, KernelFault
    app, variant = path.parent.name, path.name
    rec = {"file": record_name(path), "algorithm": app, "label": label_of(path), "kernels": {},
           "reading": MEMORY_MODEL.name}
    spec = APPS[app]
    folder = path.parent
    flags = [f"-I{folder}", f"-DNBLOCKS={spec.nblocks}", f"-DNTHREADS={spec.nthreads}",
             *(["-DRACEY"] if variant == "racy" else [])]
    rec.update(grid=[spec.nblocks, 1, 1], block=[spec.nthreads, 1, 1], flags=flags[1:])
    code = (folder / spec.kernel_file).read_text(errors="replace") + spec.extra
    try:
        module = backend.load(code, flags, name=spec.kernel_file)
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    rng = np.random.default_rng([seed, zlib.crc32(app.encode())])       # both builds get the same inputs
    return run_kernels(rec, module, spec.launches(rng, spec.nblocks, spec.nthreads))
