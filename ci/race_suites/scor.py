"""ScoR's adapter for ci/score_race_suite.py.

ScoR (github.com/csl-iisc/ScoR, "Scoped Racey"): the microbenchmarks of the ScoRD paper (Kamath, George, Basu,
ISCA 2020), small programs that synchronise with scoped atomics, fences and locks (`atomicExch_block`,
`__threadfence_block`, `atomicCAS` spin locks). SUITE is a checkout; its microbenchmarks/src/*.cu are scored,
every one (no sample unless --per-label; its benchmarks/ are whole applications, labelled by their build flag
and scored as their own suite by ci/race_suites/scor_apps.py). Labels come from the file names:
  racy       = `race_...`: the authors planted a race (a scope too narrow for the threads it orders, a missing
               fence, an access outside the lock);
  race-free  = `norace_...`;
  not scored = any other file, which none is today.
ScoRD's notion of a race is the scoped memory model's: conflicting accesses of threads that no synchronisation
of a wide enough scope orders, at every scope (within a warp too), whatever the values written (reading
MEMORY_MODEL); the file name's second word says the scope of its conflict (intrawarp, interwarp, interblock),
which groups a sample.
The launch is the file's: grid (NBLOCKS,1,1), block (TPERBLK,1,1), from its `#define`s, which its host main()
launches the one __global__ kernel with (`kmain<<<NBLOCKS,TPERBLK>>>(...)`; another launch is the adapter's
error). The device code is the file with host functions dropped (main, errCheck: the Indigo adapter's
device_code, line numbers kept); its file-scope `__device__ int flag/lock/dummy` keep their initializers, and a
file-scope `__device__ T* p;` is pointed at a seeded buffer of SCOR_FALLBACK_ELEMENTS (GPUVerify's
device_pointers; ScoR has none). Inputs: each pointer parameter gets the buffer the host program allocates for
the argument it passes there, read from `cudaMalloc(&d_x, N * sizeof(T))` (N a literal or a `#define`d constant;
`sizeof(T)` alone: one element, which is what every ScoR file allocates); where that cannot be read, a buffer
of SCOR_FALLBACK_ELEMENTS elements (the JSON lists such parameters in `buffers_not_read`). The host program
never writes its buffers, so their contents are seeded random values (GPUVerify's make_args: integers in
[0, 64), floats in [0, 1)) from the recorded seed and the file's name; scalar parameters, which ScoR has none
of, get GPUVerify's seeded draws. An access past a buffer's end stands as the kernel's fault (the host's size
is known: no growing).
Many kernels spin on a flag or lock that another warp or block sets: a thread spinning on an atomic yields to
the other threads of its block, and a block order in which a block waits for one that emu runs after it is left
out of the schedules' comparison (LaterBlockWait; docs/KERNELS.md, "Spinning threads").
"""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np

from cudasrc.signatures import closing_bracket, kernel_signatures, strip_comments
from cudasrc.types import SCALAR_DTYPES, element_ctype
from harness.racescan import MEMORY_MODEL, has_detector

from . import gpuverify, indigo
from .run import Launch, build_failed, run_kernels

SCOR_CODES = "microbenchmarks/src"
SCOR_LAUNCH = ("NBLOCKS", "TPERBLK")         # the `#define`s of the grid's and the block's x size
SCOR_FALLBACK_ELEMENTS = 256                 # a buffer whose cudaMalloc size the adapter cannot read
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(.+?)[ \t]*$", re.M)
# a host program's `cudaMalloc(&d_x, ...)` (the pointer it fills), and a `sizeof(T)` in its sizes
CUDA_MALLOC = re.compile(r"\bcudaMalloc\s*\(\s*(?:\(\s*void\s*\*\s*\*\s*\)\s*)?&\s*(\w+)\s*,")
SIZEOF = re.compile(r"sizeof\s*\(\s*([^()]+?)\s*\)")


def suite_files(root: Path) -> "list[Path] | None":
    """The labelled microbenchmarks of a ScoR checkout, or None."""
    src = root / SCOR_CODES
    if not src.is_dir():
        return None
    return sorted(f for f in src.glob("*.cu") if label_of(f) is not None) or None


def label_of(path: Path) -> "str | None":
    """`race_...` racy, `norace_...` race-free, else None."""
    prefix = path.name.split("_")[0]
    return {"race": "racy", "norace": "race-free"}.get(prefix)


def scope_of(path: Path) -> str:
    """The scope of the file's conflict, its name's second word (intrawarp, interwarp, interblock, ...)."""
    words = path.stem.split("_")
    return words[1] if len(words) > 1 else path.stem


def defines(code: str) -> dict[str, int]:
    """The integer value of each `#define NAME expression` whose expression is integer arithmetic on literals
    and earlier such names (`#define NTHREADS (NBLOCKS * TPERBLK)`)."""
    values: dict[str, int] = {}
    for name, text in _DEFINE.findall(code):
        value = gpuverify.integer_expression(_substituted(text, values), {})
        if value is not None:
            values[name] = value
    return values


def _substituted(text: str, consts: dict[str, int]) -> str:
    """`text` with each name of `consts` replaced by its value and integer literals' suffixes (`16u`) dropped."""
    text = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: str(consts.get(m.group(0), m.group(0))), text)
    return re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text)


def launch_of(code: str, kernel: str, consts: dict[str, int]) -> tuple[tuple, tuple, list[str]]:
    """(grid, block, the host arguments by position) of the host program's launch of `kernel`, which must be
    `kernel<<<NBLOCKS, TPERBLK>>>(...)`. An argument that is not a plain name (after a cast) is ''."""
    m = re.search(r"\b" + re.escape(kernel) + r"\s*<<<(.*?)>>>\s*\(", code, re.S)
    if m is None:
        raise ValueError(f"no launch of {kernel} (`{kernel}<<<...>>>(...)`) in the host program")
    config = [w.strip() for w in m.group(1).split(",")]
    if config != list(SCOR_LAUNCH):
        raise ValueError(f"launch of {kernel}: <<<{m.group(1).strip()}>>>, expected <<<{', '.join(SCOR_LAUNCH)}>>>")
    missing = [n for n in SCOR_LAUNCH if n not in consts]
    if missing:
        raise ValueError(f"no integer `#define` of {' or '.join(missing)}")
    close = closing_bracket(code, m.end() - 1)
    args = [a.strip() for a in code[m.end():close].split(",")] if code[m.end():close].strip() else []
    names = []
    for arg in args:
        plain = re.fullmatch(r"(?:\([^()]*\)\s*)?([A-Za-z_]\w*)", arg)
        names.append(plain.group(1) if plain else "")
    return (consts["NBLOCKS"], 1, 1), (consts["TPERBLK"], 1, 1), names


def allocations(code: str, consts: dict[str, int]) -> dict[str, int]:
    """Host name -> bytes, of each `cudaMalloc(&d_x, N * sizeof(T))` (or `sizeof(T) * N`, or `sizeof(T)`: one
    element) whose size is arithmetic on literals, `#define`d constants and sizes of scalar types."""
    out = {}
    for m in CUDA_MALLOC.finditer(code):
        size = _bytes(code[m.end():closing_bracket(code, code.index("(", m.start()))], consts)
        if size is not None:
            out[m.group(1)] = size
    return out


def _bytes(size: str, consts: dict[str, int]) -> "int | None":
    """The value of a cudaMalloc size: integer arithmetic on literals, `#define`d constants and `sizeof(T)` of
    a scalar type; None for anything else."""
    unknown = []

    def sizeof(m):
        dtype = SCALAR_DTYPES.get(re.sub(r"\s+", " ", m.group(1)))
        if dtype is None:
            unknown.append(m.group(1))
            return "0"
        return str(dtype.itemsize)
    n = None if unknown else gpuverify.integer_expression(_substituted(SIZEOF.sub(sizeof, size), consts), {})
    return n if n is not None and n > 0 else None


def buffer_sizes(sig, host_args: list[str], allocated: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """(parameter -> elements of its buffer, the pointer parameters given SCOR_FALLBACK_ELEMENTS)."""
    sizes, fallback = {}, []
    for (ctype, name), host in zip(sig.params, host_args + [""] * len(sig.params)):
        if not ctype.endswith("*"):
            continue
        base = element_ctype(ctype).replace("volatile ", "").replace("__restrict", "").strip()
        dtype = SCALAR_DTYPES.get(base)
        if dtype is not None and host in allocated and allocated[host] >= dtype.itemsize:
            sizes[name] = allocated[host] // dtype.itemsize
        else:
            sizes[name] = SCOR_FALLBACK_ELEMENTS
            fallback.append(name)
    return sizes, fallback


def score_file(backend, path: Path, seed: int) -> dict:
    """The verdict of one ScoR microbenchmark: its __global__ kernel once at the host program's launch."""
    from harness.backends.base import BuildError, KernelFault
    rec = {"file": path.name, "algorithm": scope_of(path), "label": label_of(path), "kernels": {},
           "reading": MEMORY_MODEL.name}
    if rec["label"] is None:
        rec.update(verdict="not scored", fault=None, races=0, data_race=False,
                   detail="neither race_ nor norace_: no label")
        return rec
    text = path.read_text(errors="replace")
    host = strip_comments(text)
    consts = defines(host)
    code = indigo.device_code(text)
    sigs = kernel_signatures(code)
    if not sigs:
        raise ValueError(f"{path.name}: no __global__ kernel")
    allocated = allocations(host, consts)
    rng = np.random.default_rng([seed, zlib.crc32(path.name.encode())])     # per file: order-independent
    chosen, sizes, fallback = [], {}, []
    for sig in sigs:
        grid, block, host_args = launch_of(host, sig.name, consts)
        header = {"block": block, "grid": grid, "defines": {}}
        values, _, _ = gpuverify.scalar_values(sig, host, block, rng, grid)
        sizes[sig.name], unread = buffer_sizes(sig, host_args, allocated)
        fallback += [f"{sig.name}.{n}" for n in unread]
        chosen.append((sig, header, values))
    rec.update(grid=list(chosen[0][1]["grid"]), block=list(chosen[0][1]["block"]), buffers=sizes,
               buffers_not_read=fallback, scalars={sig.name: values for sig, _, values in chosen})
    try:
        module = backend.load(code, name=path.name)
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    rec["device_pointers"] = gpuverify.device_pointers(module, code, SCOR_FALLBACK_ELEMENTS, rng)
    launches = [Launch(sig.name, header["grid"], header["block"],
                       lambda point, sig=sig, header=header, values=values:
                       gpuverify.make_args(sig, header, {**values, **point}, rng, sizes=sizes[sig.name]))
                for sig, header, values in chosen]
    return run_kernels(rec, module, launches)
