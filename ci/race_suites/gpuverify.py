"""GPUVerify's CUDA test suite's adapter for ci/score_race_suite.py.

GPUVerify. SUITE is a checkout of github.com/mc-imperial/gpuverify; its testsuite/CUDA/**/kernel.cu are scored,
every one (no sample unless --per-label). Or a checkout of github.com/mc-imperial/GPUVerifyBenchmarks: the CUDA
kernels of its CUDA20, CUDA50, C++AMP and gpgpu-sim_ispass2009 folders (NVIDIA's SDK and others; the OpenCL
ones are not CUDA), every .cu file with the same header. Line 1 is the expected outcome, line 2 the verifier's command line,
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
`f == someDeviceFunction` for a function pointer, `(n & (n - 1)) == 0` and `__is_pow2(n)`, `stride < N` between two
scalars), and so are `ids[e] != ids[__other_int(e)]` on a buffer (distinct values: a seeded permutation of its
indices), `p[e] == e` (its indices) and marching cubes' `s[t] + c[t] <= s[__other_int(t)]` for t before the other
(s the exclusive prefix sums of the seeded c: buffer_rules), the rest are dropped and listed in the JSON; a scalar that
preconditions bound on both sides is swept over that domain after the drawn launch (harness.racescan.sweep_points:
the verifier's proof covers every value, and a race may need one). Constructs with
verifier-only meaning (`__axiom`) make the file unrunnable with that reason. A device function declared but never
defined, whose result the verifier takes as arbitrary, gets a body (arbitrary_results: the k-th call of every
thread returns one seeded value; a void one does nothing; CUDA's own, declared again, keeps CUDA's body); one
returning other than a scalar is unrunnable. Texture references, which GPUVerify reads as arbitrary values and
CUDA 12 removed, become seeded read-only textures (textures.py); the element-wise arithmetic of vector types and
the SDK's helpers (`lerp`, `length`, ...), which GPUVerify's front end gave every file, get definitions of the same
meaning where a file uses them (vector_math.py). GPUVerify's front end force-includes its CUDA header: a file that
uses cooperative_groups, cuRAND or the math constants without including them gets the include (in place of its
line 1), and its cooperative groups' `synchronize(group)` is defined as `group.sync()`. A file written for its 32-bit front end that defines `size_t` or `clock_t` itself keeps its own type,
renamed (own_platform_types). Inputs: seeded random buffers (integers in [0, 64),
floats in [0, 1), random bytes for structs) of max(threads x span, 2^17) elements (span: the largest -D
value, at least 16); an access past them hits the guard pages (OutOfBounds), and the file runs again with buffers
grown to cover the element reached, up to 2^24 elements (the host program's sizes are not known here; the JSON
keeps `buffers_grown_to`); an OutOfBounds past that, or on __shared__ memory, stands as the kernel's fault.
A kernel that declares `extern __shared__` is launched with 48 KiB of it (the header does not give the size).
A file-scope `__device__ T* p;` is pointed at a seeded resident buffer of the same size (the host program would
set it with cudaMemcpyToSymbol).
"""
from __future__ import annotations

import ast
import math
import operator
import re
import zlib
from pathlib import Path
from typing import Iterable

import numpy as np

from cudasrc.preprocess import as_built, object_macros
from cudasrc.signatures import (closing_bracket, enumerations, is_function_pointer, kernel_signatures, split_top_level,
                                strip_comments, substituted, without_default)
from cudasrc.structs import struct_layout
from cudasrc.types import SCALAR_DTYPES, VECTOR_BYTES, VECTOR_ELEMENTS, element_ctype
from harness.backends.base import Struct, Symbol
from harness.backends.emu.toolchain import device_api_has

from harness.racescan import has_detector, sweep_points
from harness.racescan.reading import (GPUVERIFY, GPUVERIFY_INTRA_GROUP, GPUVERIFY_WARP_SYNC,
                                     GPUVERIFY_WARP_SYNC_INTRA_GROUP)

from .run import SPLITMIX_FINISH, SYMBOL_PREFIX, Launch, build_failed, inline_includes, run_kernels, with_definitions
from .surfaces import SIZES, STORES, SURFACE_BYTES, surface_stores, texels_raced
from .textures import seeded_textures
from .vector_math import with_vector_math

# ---- GPUVerify's CUDA test suite ---------------------------------------------------------------------------
# GPUVerify's specification functions have no runtime meaning. The checks (assert, ensures, invariants) are
# dropped; the preconditions (requires, assume) restrict inputs: simple ones on the kernel's scalar parameters
# are honoured when the arguments are chosen (scalar_values), the rest dropped. Each call becomes an
# expression that does nothing, for they also stand in for-loop conditions (`for (...; __invariant(p), i < n;
# ...)`); its arguments go with it (they use the verifier's own functions: __implies, __write, __enabled ...).
GV_DROPPED = ("__requires", "__ensures", "__assert", "__assume", "__invariant", "__global_invariant",
              "__global_requires", "__global_ensures", "__global_assert", "__candidate_invariant",
              "__candidate_global_invariant", "__function_wide_invariant", "__function_wide_candidate_invariant",
              "__requires_fresh_array", "__non_temporal_loads_begin", "__non_temporal_loads_end")


def device_source(text: str, dropped: tuple = GV_DROPPED) -> str:
    """The file without comments and with every call of the `dropped` specification functions replaced by
    `((void)0)` (newlines kept, so line numbers stay true)."""
    code = strip_comments(text)
    out, pos = [], 0
    for m in re.finditer(r"\b(?:" + "|".join(map(re.escape, dropped)) + r")\s*\(", code):
        if m.start() < pos:          # nested in a call already dropped
            continue
        j = closing_bracket(code, m.end() - 1) + 1
        out += [code[pos:m.start()], "((void)0)", "\n" * code.count("\n", m.start(), j)]
        pos = j
    out.append(code[pos:])
    return "".join(out)


# Constructs that change what the verifier proved in a way no run can honour: the file is not scored.
GV_VERIFIER_ONLY = ((r"\b__axiom\s*\(", "__axiom restricts the launch (block/thread ids) for the verifier only"),)
GV_CODES = "testsuite/CUDA"
BENCHMARK_FOLDERS = ("CUDA20", "CUDA50", "C++AMP", "gpgpu-sim_ispass2009")     # GPUVerifyBenchmarks' CUDA kernels


def suite_files(root: Path) -> "tuple[Path, list[Path]] | None":
    """(the folder records are named from, the labelled files) of a test suite or benchmarks checkout, or None."""
    if (root / GV_CODES).is_dir():
        return root / GV_CODES, sorted((root / GV_CODES).rglob("kernel.cu"))
    folders = [root / f for f in BENCHMARK_FOLDERS if (root / f).is_dir()]
    if folders:
        return root, sorted(p for f in folders for p in f.rglob("*.cu") if _labelled(p))
    return None


def _labelled(path: Path) -> bool:
    with open(path, errors="replace") as fh:
        return re.match(r"//\s*(pass|xfail:)", fh.readline(), re.IGNORECASE) is not None


def record_name(path: Path, root: Path) -> str:
    """A file's name in the records: its folder for a test suite's kernel.cu, else its path without .cu."""
    rel = path.relative_to(root)
    return str(rel.parent if path.name == "kernel.cu" else rel.with_suffix(""))


GV_RACE_TEXT = re.compile(r"\brace\b|(?<!not-)\bracy\b|\b(?:Write|Read) by thread\b", re.IGNORECASE)
GV_LAUNCH_FLAGS = ("--blockDim", "--gridDim")
GV_MIN_ELEMENTS = 1 << 17
# A kernel that reads or writes past the end of a global buffer sized so is given buffers grown to cover the
# element it reached (the host program would have allocated them; the script cannot know how much), up to this
# many elements, and run again; past it the OutOfBounds stands.
GV_MAX_ELEMENTS = 1 << 24
GV_DYNAMIC_SHARED = 48 * 1024        # bytes of `extern __shared__` per block: the default limit of a launch
_PAST_END = re.compile(r"\(arg \d+, (?P<size>\d+) x \w+\) \d+ byte\(s\) past its end \(element (?P<element>\d+) of \d+\)")
# the same beyond the guard pages (a KernelCrash): "the nearest is 'x' (arg 0, N x float32), D bytes after it"
_BEYOND_END = re.compile(r"the nearest is '[^']*' \(arg \d+, (?P<size>\d+) x (?P<dtype>\w+)\), (?P<distance>\d+) bytes "
                         r"after it")
GV_STRUCT_BYTES = 64                  # bytes per element of a struct buffer (at least the struct's size)
GV_MAX_ARBITRARY_THREADS = 1 << 24     # a call counter per thread for arbitrary results: at most 64 MiB of them


def read_header(text: str) -> dict:
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


def unrunnable(header: dict, source: str) -> "str | None":
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
    scalar_names = {m.group(2) for m in re.finditer(r"\btypedef\s+([\w ]+?)\s+(\w+)\s*;", code)
                    if re.sub(r"\s+", " ", m.group(1)) in SCALAR_DTYPES}
    functions = undefined_device_functions(code)
    for ret, name, _ in functions:
        if ret != "void" and ret not in SCALAR_DTYPES and ret not in scalar_names and ret not in VECTOR_BYTES:
            return (f"verifier-only construct: __device__ {name}() is declared, never defined, and returns "
                    f"{ret!r}, for which the adapter makes no arbitrary value (the verifier takes any value)")
    too_many = _too_many_callers(functions, header)
    if too_many:
        return f"verifier-only construct: {too_many}"
    if re.search(r"\bcurandStateMtgp32", code):
        return ("cuRAND's MTGP32 generator: its state points to parameter tables that only cuRAND's host API "
                "sets up (curandMakeMTGP32KernelState); the adapter makes none")
    return None


_DECLARED = re.compile(r"(?:\bextern\s+)?__device__\s+((?:[A-Za-z_]\w*\s+)*?[A-Za-z_]\w*\s*\**)\s*\b(\w+)\s*"
                       r"\(([^;{)]*)\)\s*;")


def _defines(code: str, name: str) -> bool:
    """Whether `code` defines `__device__` function `name` (a body follows its parameter list)."""
    return re.search(r"__device__[\w\s*]*?\b" + name + r"\s*\([^;{)]*\)\s*\{", code) is not None


def undefined_device_functions(code: str) -> list[tuple[str, str, str]]:
    """(return type, name, parameter list) of each `__device__` function the code declares and never defines. One
    that the CUDA device API has (`__saturatef`, which a file may declare again) is left out."""
    clean = re.sub(r"\b__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", strip_comments(code))
    out = []
    for m in _DECLARED.finditer(clean):
        name = m.group(2)
        if not _defines(clean, name) and not _api_redeclaration(m) and name not in {n for _, n, _ in out}:
            ret = re.sub(r"\b(?:static|inline|__forceinline__|__noinline__|const)\b", " ", m.group(1))
            # a default argument stays with the declaration: the definition may not repeat it
            params = ", ".join(without_default(p).strip() for p in split_top_level(m.group(3), ",") if p.strip())
            out.append((re.sub(r"\s+", " ", ret).strip(), name, params))
    return out


# The pre-Volta votes, which CUDA's headers still declare (`vote` without `.sync`: ptxas refuses it for sm_70 and
# later): a file's own body-less `any(unsigned int)` (GPUVerify's header had it) loses to CUDA's for a bool argument
_LEGACY_VOTES = ("any", "all")


def own_legacy_votes(code: str) -> str:
    """`code` with its body-less `any`/`all` (and their calls) under the adapters' prefix, so that each call is
    the file's own function, which arbitrary_results then gives its arbitrary result."""
    for _, name, _ in undefined_device_functions(code):
        if name in _LEGACY_VOTES:
            code = re.sub(rf"\b{name}(?=\s*\()", f"{SYMBOL_PREFIX}{name}", code)
    return code


def _api_redeclaration(m: re.Match) -> bool:
    """Whether a `_DECLARED` match declares again a function of CUDA's device API: its name, with scalar types
    only (`float fabs(float)`; the SDK's `float4 fminf(float4, float4)` is an overload of the file's own)."""
    if not device_api_has(m.group(2)):
        return False
    types = [re.sub(r"\b(?:static|inline|__forceinline__|__noinline__|const|volatile)\b", " ", m.group(1))]
    types += [re.sub(r"\b(?:const|volatile)\b|\b[A-Za-z_]\w*\s*$", " ", without_default(p)) if
              len(p.split()) > 1 else p for p in split_top_level(m.group(3), ",") if p.strip()]
    return all(re.sub(r"\s+", " ", t).strip() in SCALAR_DTYPES or re.sub(r"\s+", " ", t).strip() == "void"
               for t in types)


def without_api_redeclarations(code: str) -> str:
    """`code` without its body-less `__device__` declarations of functions CUDA's device API has
    (bilateralFilter's `__device__ float fabs(float);`, which GPUVerify's front end, without CUDA's headers, needed):
    nvcc's headers declare them, and a second `fabs(float)` makes each call ambiguous. Lines stay."""
    def drop(m: re.Match) -> str:
        return m.group(0) if _defines(code, m.group(2)) or not _api_redeclaration(m) else "\n" * m.group(0).count("\n")
    return _DECLARED.sub(drop, code)


def _too_many_callers(functions: list[tuple[str, str, str]], header: dict) -> "str | None":
    """Why the launch has more threads than arbitrary_results counts calls for (a function with a result needs
    a counter per thread), or None."""
    threads = math.prod(header["block"]) * math.prod(header["grid"])
    name = next((name for ret, name, _ in functions if ret != "void"), None)
    if name is None or threads <= GV_MAX_ARBITRARY_THREADS:
        return None
    return (f"__device__ {name}() is declared, never defined, and called by {threads} threads; the adapter counts "
            f"each thread's calls for at most {GV_MAX_ARBITRARY_THREADS} threads")


def arbitrary_results(code: str, header: dict, seed: int) -> str:
    """Bodies for the `__device__` functions the code declares and never defines, appended after it. The verifier
    takes a call's result as arbitrary (and a body-less function as touching no memory): here a void one does
    nothing, and the k-th call of every thread returns the same seeded value (0 half the time, so that
    `while (nondet())` ends; else in [1, 64), which fits any integer type and an offset into the buffers). One value
    per call index honours `__uniform_int` assumptions on it, and two calls differ, as the verifier allows. A CUDA
    vector type (`float4 fminf(float4, float4)`) gets such a value in each component."""
    functions = undefined_device_functions(code)
    if not functions:
        return ""
    calls, draw = f"{SYMBOL_PREFIX}calls", f"{SYMBOL_PREFIX}arbitrary"
    if all(ret == "void" for ret, _, _ in functions):
        return "\n" + "\n".join(f"__device__ void {name}({params}) {{}}" for _, name, params in functions) + "\n"
    too_many = _too_many_callers(functions, header)
    if too_many:
        raise LookupError(too_many)
    threads = math.prod(header["block"]) * math.prod(header["grid"])
    out = [f"\n__device__ unsigned {calls}[{threads}];",
           f"__device__ unsigned long long {draw}() {{",
           "  unsigned long long t = ((blockIdx.z * (unsigned long long)gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x)"
           " * (blockDim.x * blockDim.y * blockDim.z) + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x"
           " + threadIdx.x;",
           f"  unsigned long long z = ({calls}[t]++ + 1ULL) * 0x9E3779B97F4A7C15ULL + {seed & 0xFFFFFFFF}ULL;",
           f"  {SPLITMIX_FINISH}",
           "  return (z & 1) ? 0 : 1 + (z >> 1) % 63;",
           "}"]
    for ret, name, params in functions:
        body = ("{}" if ret == "void" else
                # a CUDA vector type: each component its own call's value
                f"{{ {ret} r; typedef decltype(r.x) E; E* c = reinterpret_cast<E*>(&r); "
                f"for (unsigned i = 0; i < sizeof(r) / sizeof(E); ++i) c[i] = (E){draw}(); return r; }}"
                if ret in VECTOR_BYTES else f"{{ return ({ret}){draw}(); }}")
        out.append(f"__device__ {ret} {name}({params}) {body}")
    return "\n".join(out) + "\n"


_WARP_LANES = f"""__device__ inline unsigned {SYMBOL_PREFIX}warp_lanes() {{
  unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  unsigned first = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & ~31u;
  unsigned n = threads - first < 32u ? threads - first : 32u;
  return n == 32u ? 0xffffffffu : (1u << n) - 1u;
}}"""


def legacy_shuffles(code: str, filename: str) -> str:
    """Pre-Volta shuffles (`__shfl_up(v, i, w)`), which CUDA 9 deprecated and later releases removed, as the
    `_sync` ones over every lane of the warp that exists (`__shfl_up_sync(lanes, v, i, w)`; the last warp of a
    120-thread block has 24): NVIDIA's replacement where the whole warp reaches the shuffle, as the samples that
    use them do (a warp that does not is then reported by emu, not read as exchanging). The helper goes before
    a `#line 1` marker, so line numbers stay."""
    renamed, n = re.subn(r"\b(__shfl(?:_up|_down|_xor)?)\s*\(", rf"\1_sync({SYMBOL_PREFIX}warp_lanes(), ", code)
    return with_definitions(_WARP_LANES, renamed, filename) if n else code


# GPUVerify's cooperative-groups header has `synchronize(group)`, which CUDA's spells `group.sync()`.
_GV_SYNCHRONIZE = ("namespace cooperative_groups { template <class G> __device__ inline void synchronize(const G& g) "
                   "{ g.sync(); } }")


def gv_synchronize(code: str, filename: str) -> str:
    """`code` with GPUVerify's `cooperative_groups::synchronize(group)` defined, where it calls it."""
    uses = "cooperative_groups" in code and re.search(r"\bsynchronize\s*\(", code)
    return with_definitions(_GV_SYNCHRONIZE, code, filename) if uses else code


GV_IMPLICIT = (("cooperative_groups", "cooperative_groups.h"), ("curand", "curand_kernel.h"),
               ("CUDART_", "math_constants.h"))
# Types the platform's headers define, which files written for GPUVerify's 32-bit front end define again
# (`typedef unsigned int size_t;`): nvcc refuses the second definition.
PLATFORM_TYPES = ("size_t", "clock_t", "ptrdiff_t")


def own_platform_types(code: str) -> str:
    """`code` with each PLATFORM_TYPES name it defines itself renamed, in every place it says it, to an adapter
    name: the file keeps its own type (its width) and the platform keeps its."""
    for name in PLATFORM_TYPES:
        if re.search(rf"\btypedef\b[^;{{}}]*\b{name}\s*;", code):
            code = re.sub(rf"\b{name}\b", f"{SYMBOL_PREFIX}{name}", code)
    return code


_EXPLICIT_SPECIALIZATION_STATIC = re.compile(r"(\btemplate\s*<\s*>[^;{}()]*?)\bstatic\b")


def single_storage_class(code: str) -> str:
    """`code` with the storage classes clang, GPUVerify's front end, warns about and nvcc refuses: a `static`
    repeated in one declaration (`static __attribute__((always_inline)) static void f`) said once, and a `static`
    on an explicit specialization (`template<> __device__ static float row<-1>(...)`) dropped, which gives it the
    primary template's linkage, as C++ does anyway. Columns and lines stay."""
    code = re.sub(r"\bstatic(\s+__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\))(\s+)static\b", r"static\1\2      ", code)
    return _EXPLICIT_SPECIALIZATION_STATIC.sub(lambda m: m.group(1) + "      ", code)


def implicit_includes(code: str) -> str:
    """GPUVerify's front end force-includes its CUDA header, which declares cooperative groups, cuRAND's device
    API and the math constants (CUDART_PI_F): a file that uses them without the include gets it in place of a
    leading line (the label's comment, empty once comments are removed: line numbers stay)."""
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
        cond = body[m.end():closing_bracket(body, m.end() - 1)].strip()
        wrapped = re.fullmatch(r"__implies\s*\(\s*__enabled\s*\(\s*\)\s*,(.*)\)", cond, re.S)
        out.append((wrapped.group(1) if wrapped else cond).strip())
    return out


_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
               ast.Div: operator.floordiv, ast.LShift: operator.lshift, ast.RShift: operator.rshift}


def integer_expression(text: str, dims: dict) -> "int | None":
    """The value of an integer expression of literals, blockDim/gridDim components and + - * / << >> (C's integer
    division), or None when it is anything else."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return None

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = value(node.operand)
            return None if inner is None else -inner
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return dims.get(f"{node.value.id}.{node.attr}")
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            a, b = value(node.left), value(node.right)
            if a is None or b is None or (isinstance(node.op, (ast.Div, ast.FloorDiv)) and b == 0):
                return None
            return _ARITHMETIC[type(node.op)](a, b)
        return None
    return value(tree)


def _kernel_body(kernel: str, source: str) -> str:
    """The body of the kernel's definition (its template's, for an instantiation `k<float>`); the whole source
    when it is not found. Prototypes and instantiations (`...);`) are passed over."""
    for m in re.finditer(r"\b" + re.escape(kernel.split("<")[0]) + r"\s*(?:<[^;{}()]*>)?\s*\(", source):
        close = closing_bracket(source, m.end() - 1)
        rest = source[close + 1:].lstrip()
        if rest.startswith("{"):
            start = len(source) - len(rest)
            return source[start:closing_bracket(source, start) + 1]
    return source


# `__requires(p[e] != p[__other_int(e)])`: the values threads read from buffer p at e are distinct (IDs).
_DISTINCT = re.compile(r"(\w+)\s*\[(.+)\]\s*!=\s*\1\s*\[\s*__other_int\s*\((.+)\)\s*\]", re.S)
DISTINCT = "distinct"                 # make_args' value of a buffer _DISTINCT asks for: a seeded permutation
IDENTITY = "identity"                 # ... of a buffer `p[e] == e` asks for: its own indices
PREFIX_SUM = "exclusive prefix sum of "   # + the counts' buffer: `s[e] + c[e] <= s[__other_int(e)]` for e < other


def _expanded(cond: str, macros: dict) -> str:
    """`cond` with the source's object-like macros replaced (`tid`, `other_tid`), whitespace removed."""
    return re.sub(r"\s", "", substituted(cond, macros))


def _implication(cond: str) -> tuple[str, str]:
    """(antecedent, consequent) of `__implies(a, c)`; ("", cond) for any other condition."""
    m = re.fullmatch(r"__implies\((.*)\)", cond, re.S)
    parts = split_top_level(m.group(1), ",") if m else []
    return (parts[0], parts[1]) if len(parts) == 2 else ("", cond)


def buffer_rules(conds: "list[str]", source: str, pointers: set) -> tuple[dict, list[str]]:
    """What the preconditions ask of whole buffers, as make_args' values (name -> IDENTITY, or PREFIX_SUM + the
    counts' name), and the conditions so honoured. `__implies(t < n, p[t] == t)`: p holds its indices (any
    antecedent: the identity satisfies every one). `__implies(t < __other_int(t), s[t] + c[t] <= s[__other_int(t)])`,
    marching cubes' "monotonic prefix sum specification": s is the exclusive prefix sum of the seeded counts c,
    and then its `__add_noovfl(s[t], c[t])` holds too (the sums fit the element type, or make_args says not)."""
    macros = object_macros(source)
    rules, honoured, overflow = {}, [], []
    for cond in conds:
        ante, cons = (_expanded(part, macros) for part in _implication(cond))
        same = re.fullmatch(r"(\w+)\[(.+)\]==(.+)", cons)
        if same and same.group(1) in pointers and same.group(2) == same.group(3):
            rules[same.group(1)] = IDENTITY
            honoured.append(cond)
            continue
        order = re.fullmatch(r"(.+)<__other_int\((.+)\)", ante)
        if not order or order.group(1) != order.group(2):
            continue
        e = re.escape(order.group(1))
        scan = re.fullmatch(rf"(\w+)\[{e}\]\+(\w+)\[{e}\]<=\1\[__other_int\({e}\)\]", cons)
        if scan and {scan.group(1), scan.group(2)} <= pointers and scan.group(1) != scan.group(2):
            rules[scan.group(1)] = PREFIX_SUM + scan.group(2)
            honoured.append(cond)
        fits = re.fullmatch(rf"__add_noovfl\((\w+)\[{e}\],(\w+)\[{e}\]\)", cons)
        if fits:
            overflow.append((cond, fits.group(1), fits.group(2)))
    honoured += [cond for cond, a, b in overflow if rules.get(a) == PREFIX_SUM + b]
    return rules, honoured
_POW2 = re.compile(r"__is_pow2\s*\(\s*(\w+)\s*\)|\(?\s*\(?\s*(\w+)\s*&\s*\(\s*\2\s*-\s*1\s*\)\s*\)\s*==\s*0\s*\)?")


def scalar_values(sig, source: str, block: tuple, rng: np.random.Generator,
                  grid: tuple = (1, 1, 1), sweep_all: bool = False) -> tuple[dict, list[str], dict]:
    """Values for the kernel's scalar parameters: those its simple `__requires` fix or bound (`n == 1024`,
    `x < 100`, `sz == blockDim.x * 2`, `w == 32*8`, `i == 1 | i == 2`: the first alternative), others a seeded
    draw from [1, 64] (inside the bounds), an enumeration's from its enumerators; a function-pointer parameter the device function its
    `__requires(f == name)` names; a power of two (`__is_pow2(n)`, `(n & (n - 1)) == 0`) is drawn among the
    powers of two inside the bounds; an order between two scalars (`stride < N`) is made to hold by moving the
    side that nothing fixes.
    Returns (name -> int value or function name, the preconditions left unhonoured, name -> range: the domain
    of each integer parameter that preconditions bound on both sides, every value of which the verifier
    considered, to sweep over; with `sweep_all`, of every integer parameter not fixed, a missing bound being
    the draw's). A pointer parameter whose elements a `__requires(p[e] != p[__other_int(e)])` makes distinct
    between threads gets the value DISTINCT (make_args fills it with a seeded permutation); one that buffer_rules
    reads a rule for, that rule.
    """
    body = _kernel_body(sig.name, source)
    names = {n for t, n in sig.params if not t.endswith("*")}
    pointers = {n for t, n in sig.params if t.endswith("*")}
    distinct = set()
    opaque = {n for t, n in sig.params if not t.endswith("*") and t.replace("const ", "") not in SCALAR_DTYPES}
    dims = {f"{d}.{a}": n for d, size in (("blockDim", block), ("gridDim", grid)) for a, n in zip("xyz", size)}
    fixed, low, high, ignored, later, orders = {}, {}, {}, [], [], []
    conds = _requires_of(body)
    buffers, by_buffer = buffer_rules(conds, source, pointers)
    for cond in conds:
        if cond in by_buffer:
            continue
        ids = _DISTINCT.fullmatch(cond)
        if ids and ids.group(1) in pointers and re.sub(r"\s", "", ids.group(2)) == re.sub(r"\s", "", ids.group(3)):
            distinct.add(ids.group(1))
            continue
        first = re.split(r"\|\|?", cond)[0].strip()
        pow2 = _POW2.fullmatch(first)
        if pow2 and (pow2.group(1) or pow2.group(2)) in names:
            later.append((cond, pow2.group(1) or pow2.group(2)))
            continue
        order = re.fullmatch(r"(\w+)\s*(>=|<=|<|>)\s*(\w+)", first)
        if order and order.group(1) in names and order.group(3) in names:
            orders.append((cond, *order.groups()))
            continue
        c = re.fullmatch(r"(\w+)\s*(==|>=|<=|<|>|!=)\s*(.+)", first)
        if not c or c.group(1) not in names:
            ignored.append(cond)
            continue
        name, op, text = c.group(1), c.group(2), c.group(3).strip()
        value = integer_expression(text, dims)
        if value is None:
            if op == "==" and name in opaque and re.fullmatch(r"[A-Za-z_]\w*", text):
                fixed[name] = text            # a function-pointer parameter fixed to a device function
            else:
                ignored.append(cond)
            continue
        if op == "==":
            fixed[name] = value
        elif op in (">=", ">"):
            low[name] = max(low.get(name, value), value + (op == ">"))
        elif op in ("<=", "<"):
            high[name] = min(high.get(name, value), value - (op == "<"))
        elif op == "!=" and value in (1, 64):
            low[name] = 2 if value == 1 else low.get(name, 1)
    values, pow2 = {}, {name for _, name in later}
    for name in sorted(names - opaque):
        lo, hi = low.get(name, 1), high.get(name, max(64, low.get(name, 1)))
        if name in pow2 and name not in fixed:
            powers = [1 << k for k in range(63) if lo <= 1 << k <= hi]
            values[name] = int(rng.choice(powers)) if powers else int(rng.integers(lo, hi + 1))
        else:
            values[name] = fixed.get(name, int(rng.integers(lo, hi + 1)))
    for cond, name in later:             # a power of two: drawn so, or fixed to one; else not honoured
        v = values.get(name)
        if not (isinstance(v, int) and v > 0 and v & (v - 1) == 0):
            ignored.append(cond)
    for cond, a, op, b in orders:        # `a < b`: move the side nothing fixes, keeping its other rules
        if a not in values or b not in values:       # a scalar of a type the adapter gives no value
            ignored.append(cond)
            continue
        if op in (">", ">="):
            a, op, b = b, "<" if op == ">" else "<=", a
        gap = 1 if op == "<" else 0
        if values[a] + gap <= values[b]:
            continue
        if b not in fixed:
            want = values[a] + gap
            values[b] = 1 << (want - 1).bit_length() if b in pow2 else want + int(rng.integers(0, 64))
        elif a not in fixed and values[b] - gap >= low.get(a, 1):
            values[a] = values[b] - gap
        if not values[a] + gap <= values[b] or values[b] > high.get(b, values[b]):
            ignored.append(cond)
    values.update({name: fixed[name] for name in opaque if name in fixed})
    # An enumeration holds one of its enumerators: drawn from them, and its domain (when they are consecutive).
    declared = next((s.params for s in kernel_signatures(source, resolve=False) if s.name == sig.name), ())
    enums = enumerations(source)
    enum_domains = {}
    for ctype, name in declared:
        enum = enums.get(re.sub(r"^(?:const\s+)?(?:enum\s+)?(?:class\s+|struct\s+)?", "", ctype).strip())
        if enum and name in values and name not in fixed:
            values[name] = int(rng.choice(enum))
            if sorted(enum) == list(range(min(enum), max(enum) + 1)):
                enum_domains[name] = range(min(enum), max(enum) + 1)
    integers = {n for t, n in sig.params if SCALAR_DTYPES.get(t.replace("const ", "").strip(), np.dtype("f4")).kind in "iu"}
    # a sweep would break a power of two or an order between scalars: those keep their drawn values
    kept = pow2 | {n for _, a, _, b in orders for n in (a, b)}
    domains = {name: range(low.get(name, 1), high.get(name, max(64, low.get(name, 1))) + 1)
               for name in sorted(names - opaque) if name not in fixed and name not in kept
               and (name in low and name in high or sweep_all and name in integers)}
    domains = {name: r for name, r in {**domains, **enum_domains}.items() if len(r)}
    values.update({name: DISTINCT for name in sorted(distinct)})
    values.update(buffers)
    return values, ignored, domains


def _ident(kernel: str) -> str:
    """A kernel's name as part of a C identifier (`k<float,4>` -> `k_float_4_`)."""
    return re.sub(r"\W", "_", kernel)


_TABLE_ENTRY = re.compile(r"(\w+)\s*\[\s*(\d+)\s*\]\s*==\s*([A-Za-z_]\w*)")


def function_tables(code: str, requires: "list[str]") -> tuple[str, list[str]]:
    """`code` with the file-scope `__device__` arrays of function pointers that preconditions fill
    (`__requires(blockFunction_table[0] == ComputeSobel)`, which the host program would set with
    cudaMemcpyToSymbol) given those entries as their initializer (the module's image at load, which every run
    starts from; the other entries null), and the preconditions so honoured. The declaration keeps its line."""
    entries: dict[str, dict[int, str]] = {}       # table -> index -> function
    stated = []                                    # (table, index, function, precondition)
    for cond in requires:
        m = _TABLE_ENTRY.fullmatch(cond.strip())
        if m and re.search(r"__device__[\w\s*]*?\b" + m.group(3) + r"\s*\(", code):
            entries.setdefault(m.group(1), {}).setdefault(int(m.group(2)), m.group(3))
            stated.append((m.group(1), int(m.group(2)), m.group(3), cond))
    filled = set()
    for name, by_index in entries.items():
        decl = re.search(r"(__device__\s+[A-Za-z_]\w*\s+" + name + r"\s*\[[^\]=;]+\]\s*);", code)
        if decl is None:
            continue
        init = ", ".join(by_index.get(i, "0") for i in range(max(by_index) + 1))
        code = f"{code[:decl.end(1)]} = {{{init}}};{code[decl.end():]}"
        filled.add(name)
    return code, [cond for name, i, func, cond in stated if name in filled and entries[name][i] == func]


def function_pointer_symbols(sig, values: dict) -> str:
    """File-scope __device__ variables holding the device functions chosen for function-pointer parameters
    (a host program would read such a variable with cudaMemcpyFromSymbol), appended after the code."""
    return "".join(f"\n__device__ {t} {SYMBOL_PREFIX}{_ident(sig.name)}_{n} = {values[n]};" for t, n in sig.params
                   if isinstance(values.get(n), str) and not t.endswith("*"))


def buffer_elements(header: dict, min_elements: int = GV_MIN_ELEMENTS) -> int:
    """Elements of each pointer parameter's buffer (see make_args)."""
    threads = math.prod(header["block"]) * math.prod(header["grid"])
    span = max([16] + [int(v) for v in header["defines"].values() if v.isdigit()])
    return max(threads * span, min_elements)


_DEVICE_POINTER = re.compile(r"^[ \t]*__device__\s+((?:const\s+)?[A-Za-z_][\w \t]*?)\s*\*\s*([A-Za-z_]\w*)\s*;", re.M)


def seeded(dtype: np.dtype, shape, rng: np.random.Generator) -> np.ndarray:
    """Seeded values of `dtype` and `shape`: floats in [0, 1), integers in [0, 64) (valid indices, small counts)."""
    values = rng.uniform(0.0, 1.0, shape) if dtype.kind == "f" else rng.integers(0, 64, shape)
    return values.astype(dtype)


def device_pointers(module, code: str, elements: int, rng: np.random.Generator) -> dict[str, str]:
    """Point each file-scope `__device__ T* name;` of the code at a resident buffer of `elements` seeded values
    (what the host program does with cudaMalloc and cudaMemcpyToSymbol; else the kernel dereferences null).
    Returns name -> its element type, for the record."""
    done = {}
    for m in _DEVICE_POINTER.finditer(code):
        ctype, name = re.sub(r"\s+", " ", m.group(1).replace("const", "")).strip(), m.group(2)
        dtype = SCALAR_DTYPES.get(ctype)
        if dtype is None:
            continue
        module.set_symbol(name, module.alloc(name, (elements,), dtype, seeded(dtype, elements, rng)))
        done[name] = ctype
    return done


def make_args(sig, header: dict, values: dict, rng: np.random.Generator,
              min_elements: int = GV_MIN_ELEMENTS, sizes: "dict[str, int] | None" = None,
              module=None, code: str = "", resident: "dict | None" = None) -> list:
    """Seeded random buffers for the pointer parameters, sized from the launch (every thread of the grid owns
    `span` elements: the largest -D constant, at least 16, so that `A[gid * WIDTH + i]` fits; and at least
    min_elements (GV_MIN_ELEMENTS), for loops over `100 * blockDim.x` elements and fixed-size tables; guard
    pages catch what still overruns) or, for a parameter `sizes` names, of that many elements (the host
    program's allocation, where an adapter reads it), and the scalar values chosen from the preconditions.
    A struct passed by value (given the `module` and its `code`) is laid out from its definition: seeded
    numbers in its scalar fields, a resident buffer of the same size behind each pointer field (by_value_struct;
    `resident` keeps those buffers from one call to the next, refilled, so that a sweep allocates them once)."""
    default = buffer_elements(header, min_elements)
    args = []
    for ctype, name in sig.params:
        base = element_ctype(ctype).replace("volatile ", "").replace("__restrict", "").strip()
        n = (sizes or {}).get(name, default)
        if ctype.endswith("*"):
            if ctype.count("*") > 1:
                raise LookupError(f"parameter {name}: pointer to pointer ({ctype}) has no synthesised input")
            if base in SCALAR_DTYPES and values.get(name) == DISTINCT:
                args.append(distinct_values(SCALAR_DTYPES[base], n, rng, name))
            elif base in SCALAR_DTYPES and values.get(name) == IDENTITY:
                args.append(within(np.arange(n), SCALAR_DTYPES[base], name, "its indices"))
            elif base in SCALAR_DTYPES:
                dtype = SCALAR_DTYPES[base]
                args.append(seeded(dtype, n, rng))
            elif base in VECTOR_BYTES:
                args.append(rng.integers(0, 64, n * VECTOR_BYTES[base] // 4).astype(np.int32))
            else:       # a struct: random bytes (its fields are numbers here; a pointer field would be garbage)
                args.append(rng.integers(0, 64, n * GV_STRUCT_BYTES).astype(np.uint8))
        elif base in SCALAR_DTYPES:
            args.append(SCALAR_DTYPES[base].type(values[name]))
        elif isinstance(values.get(name), str):
            args.append(Symbol(f"{SYMBOL_PREFIX}{_ident(sig.name)}_{name}"))
        elif base in VECTOR_BYTES:     # a CUDA vector type by value (`uchar4 color`): seeded elements
            args.append(vector_value(base, rng))
        elif module is not None and re.fullmatch(r"(?:struct\s+)?[A-Za-z_]\w*", base) and \
                not is_function_pointer(ctype):
            args.append(by_value_struct(module, struct_layout(code, re.sub(r"^struct\s+", "", base)), name, n, rng,
                                        resident))
        else:
            raise LookupError(f"parameter {name}: by-value {ctype!r} (a struct or function pointer) has no "
                              "synthesised input")
    return prefix_sums(sig, values, args)


def prefix_sums(sig, values: dict, args: list) -> list:
    """`args` with each buffer that values make a PREFIX_SUM of another buffer set to the exclusive prefix sum of
    that buffer's (seeded) elements; past the counts' end it stays at their total (still monotonic)."""
    names = [name for _, name in sig.params]
    for i, name in enumerate(names):
        rule = values.get(name)
        if not (isinstance(rule, str) and rule.startswith(PREFIX_SUM)):
            continue
        counts = np.asarray(args[names.index(rule[len(PREFIX_SUM):])]).astype(np.int64)
        sums = np.concatenate([[0], np.cumsum(counts)])
        out = np.full(len(args[i]), sums[-1])
        out[:min(len(out), len(sums))] = sums[:len(out)]
        args[i] = within(out, args[i].dtype, name, f"the prefix sums of {rule[len(PREFIX_SUM):]}")
    return args


def within(values: np.ndarray, dtype: np.dtype, name: str, what: str) -> np.ndarray:
    """`values` as `dtype`, or a LookupError naming the parameter when they do not fit."""
    if dtype.kind in "iu" and values.size and (values.max() > np.iinfo(dtype).max or values.min() < np.iinfo(dtype).min):
        raise LookupError(f"parameter {name}: {what} (up to {values.max()}) do not fit its {dtype}")
    return values.astype(dtype)


def distinct_values(dtype: np.dtype, n: int, rng: np.random.Generator, name: str) -> np.ndarray:
    """A seeded permutation of 0..n-1: every element distinct (what `p[e] != p[__other_int(e)]` asks of the
    elements threads read), and each a valid index into a buffer of n elements (they are IDs, in practice)."""
    if dtype.kind in "iu" and np.iinfo(dtype).max < n - 1:
        raise LookupError(f"parameter {name}: its precondition asks {n} distinct values, more than {dtype} holds")
    return rng.permutation(n).astype(dtype)


def vector_value(ctype: str, rng: np.random.Generator) -> np.void:
    """A CUDA vector type's value (`float4`, `uchar4`, `double4_16a`, `half2`) as a structured scalar of its size:
    seeded elements (integers in [0, 64), floats in [0, 1))."""
    m = re.fullmatch(r"(__half|half|[a-z]+?)([1-4])(?:_(?:16|32)a)?", ctype)
    element = VECTOR_ELEMENTS[m.group(1)]
    n = int(m.group(2))
    dtype = np.dtype({"names": ["v"], "formats": [(element, (n,))], "offsets": [0], "itemsize": VECTOR_BYTES[ctype]})
    value = np.zeros((), dtype)[()]
    value["v"] = seeded(element, n, rng)
    return value


def by_value_struct(module, layout, name: str, elements: int, rng: np.random.Generator,
                    resident: "dict | None" = None) -> Struct:
    """A by-value argument of struct `layout` for parameter `name`: seeded numbers in its scalar fields and, behind
    each pointer field, a resident buffer of `elements` seeded values (what a host program would cudaMalloc and
    fill); distinct buffers, so that fields never alias. A buffer found in `resident` (by parameter, field and
    size) is refilled with new values instead of allocated again."""
    resident = {} if resident is None else resident
    value = np.zeros((), layout.dtype)[()]
    pointers = []
    for f in layout.fields:
        if not f.pointer:
            value[f.path] = seeded(f.dtype, (f.count,) if f.count > 1 else (), rng)
            continue
        dtype = SCALAR_DTYPES.get(f.ctype)
        if dtype is None:
            raise LookupError(f"parameter {name}: field {f.path} points to {f.ctype!r}, which has no "
                              "synthesised buffer")
        init, key = seeded(dtype, elements, rng), (name, f.path, elements)
        if key in resident:
            module.write(resident[key], init)
        else:
            resident[key] = module.alloc(f"{name}.{f.path}", (elements,), dtype, init)
        pointers.append((f.offset, resident[key]))
    return Struct(value, tuple(pointers))


def score_file(backend, path: Path, root: Path, seed: int) -> dict:
    """The verdict of one GPUVerify kernel.cu: every __global__ kernel once at the header's launch."""
    from harness.backends.base import BuildError, KernelFault
    text = path.read_text(errors="replace")
    header = read_header(text)
    rel = record_name(path, root)
    lock_step = any(f.startswith("--warp-sync") for f in header["flags"])
    intra_group = "--only-intra-group" in header["flags"]
    verifier = {(False, False): GPUVERIFY, (True, False): GPUVERIFY_WARP_SYNC, (False, True): GPUVERIFY_INTRA_GROUP,
                (True, True): GPUVERIFY_WARP_SYNC_INTRA_GROUP}[lock_step, intra_group]
    rec = {"file": rel, "algorithm": rel.split("/")[0], "label": header["label"], "kernels": {},
           "flags": header["flags"], "reading": verifier.name}
    if header["label"] is None:
        rec.update(verdict="not scored", fault=None, detail=header["reason"], races=0, data_race=False)
        return rec
    # the headers beside the file, as GPUVerify's front end found them (`#line` keeps the file's own line numbers)
    full = inline_includes(path, required=False, line_markers=True)
    why = unrunnable(header, full)
    if why:
        fault = "Launch" if why.startswith("launch") else "VerifierOnly" if why.startswith("verifier") \
            else "UnsupportedConstruct"
        rec.update(verdict="unsupported", fault=fault, detail=why, races=0, data_race=False)
        return rec
    flags = tuple(f"-D{k}={v}" for k, v in header["defines"].items())
    rng = np.random.default_rng([seed, zlib.crc32(rel.encode())])     # per file: order-independent
    code = implicit_includes(single_storage_class(own_platform_types(without_api_redeclarations(device_source(full)))))
    code = with_vector_math(gv_synchronize(legacy_shuffles(code, path.name), path.name), path.name)
    code, textures = seeded_textures(code, seed, path.name)
    try:
        code, surfaces = surface_stores(code, path.name)
    except ValueError as exc:
        rec.update(verdict="unsupported", fault="UnsupportedConstruct", detail=str(exc), races=0, data_race=False)
        return rec
    code = own_legacy_votes(code)
    code += arbitrary_results(code, header, seed)
    # the file as its build reads it: a kernel body or a precondition inside a dropped branch is not there
    chosen, ignored, uncommented = [], [], as_built(strip_comments(full), header["defines"])
    code, tables = function_tables(code, _requires_of(uncommented))
    for sig in kernel_signatures(code, defines=header["defines"]):
        values, unhonoured, domains = scalar_values(sig, uncommented, header["block"], rng, header["grid"])
        ignored += [c for c in unhonoured if c not in tables]
        # the drawn values first, then the declared domain swept (a race at one value of a parameter)
        chosen.append((sig, values, [{}] + sweep_points(domains, seed)[0] if domains else [{}]))
    code += "".join(function_pointer_symbols(sig, values) for sig, values, _ in chosen)
    try:
        module = backend.load(code, flags=flags, name=rel.replace("/", "_") + ".cu")
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    rec["requires_not_honoured"] = ignored
    if textures:
        rec["seeded_textures"] = textures
    rec = run_growing(rec, module, code, header, chosen, rng, surfaces)
    for kernel in rec["kernels"].values():    # a race on a surface: its texel, as the calls name it
        texels = texels_raced(kernel["detail"], surfaces) if kernel["fault"] == "DataRace" else []
        if texels:
            kernel["surface_texels"] = texels
    return rec


def run_growing(rec: dict, module, code: str, header: dict, chosen: list, rng: np.random.Generator,
                surfaces: "Iterable[str]" = ()) -> dict:
    """Run each (signature, scalar values, sweep points) of `chosen` at the header's launch with seeded inputs
    (make_args), the file-scope pointer variables set (device_pointers) and the `surfaces`' stores too (see
    surfaces.py), and again with larger buffers while a kernel overruns their end (grown_size, grown_surfaces).
    Shared by the GPUVerify and faial adapters."""
    rec["scalars"] = {sig.name: values for sig, values, _ in chosen}      # what to replay a verdict with
    rec["device_pointers"] = device_pointers(module, code, buffer_elements(header), rng)
    surface_bytes, stores = dict.fromkeys(surfaces, SURFACE_BYTES), []
    # `extern __shared__`: its size is the host program's launch argument, which the header does not give; GPUVerify
    # takes it as unbounded. The most a block gets without opting in is the adapter's stand-in.
    dynamic_shared = GV_DYNAMIC_SHARED if re.search(r"\bextern\s+__shared__\b", code) else 0
    size, resident = GV_MIN_ELEMENTS, {}
    while True:
        if surfaces:
            stores = set_surface_stores(module, surface_bytes, rng, stores)
        launches = [Launch(sig.name, header["grid"], header["block"],
                           lambda point, sig=sig, values=values, size=size:
                           make_args(sig, header, {**values, **point}, rng, size, module=module, code=code,
                                     resident=resident),
                           points, dynamic_shared)
                    for sig, values, points in chosen]
        rec["kernels"] = {}
        run_kernels(rec, module, launches)
        if surfaces:
            rec["surface_bytes"] = dict(surface_bytes)
            if grown_surfaces(rec, surface_bytes):
                continue
        grown = grown_size(rec, buffer_elements(header, size))
        if grown is None:
            return rec
        rec["buffers_grown_to"] = size = grown


# An overrun of a surface store (surfaces.py makes every one a store into the guard pages, at most 516 KiB past the
# end): "'surface:s (through __device__ variable ...)' (resident ..., N x uint8) ... (element E of N)"
_SURFACE_PAST_END = re.compile(r"'surface:(?P<name>[^' ]+) \(through __device__ variable " + re.escape(STORES) +
                               r"\)' \(resident [^)]*\)?, (?P<size>\d+) x uint8\) \d+ byte\(s\) past its end "
                               r"\(element (?P<element>\d+) of \d+\)")
GV_MAX_SURFACE_BYTES = 1 << 28        # a surface store grows to at most 256 MiB


def set_surface_stores(module, surface_bytes: dict, rng: np.random.Generator, old: list) -> list:
    """Each surface's store: a resident buffer of its size, seeded (what the host's array held), behind STORES
    (the `old` stores freed first). Returns the stores."""
    for buf in old:
        module.free(buf)
    stores = [module.alloc(f"surface:{name}", (n,), np.uint8, seeded(np.dtype(np.uint8), n, rng))
              for name, n in surface_bytes.items()]
    module.set_symbol(STORES, Struct(np.void(bytes(8 * len(stores))), tuple((8 * i, b) for i, b in enumerate(stores))))
    module.set_symbol(SIZES, np.array(list(surface_bytes.values()), np.uint64))
    return stores


def grown_surfaces(rec: dict, surface_bytes: dict) -> bool:
    """Whether a kernel overran a surface store that may grow (then grown, in `surface_bytes`, by a power of two
    to cover the byte reached, at most GV_MAX_SURFACE_BYTES)."""
    times = dict.fromkeys(surface_bytes, 1)
    for k in rec["kernels"].values():
        m = _SURFACE_PAST_END.search(k["detail"]) if k["fault"] == "OutOfBounds" else None
        if m and m.group("name") in times:
            name = m.group("name")
            times[name] = max(times[name], times_to_hold(surface_bytes[name], int(m.group("element"))))
    grown = {name: surface_bytes[name] * t for name, t in times.items()
             if t > 1 and surface_bytes[name] * t <= GV_MAX_SURFACE_BYTES}
    surface_bytes.update(grown)
    return bool(grown)


def times_to_hold(size: int, element: int) -> int:
    """The power of two by which a buffer of `size` elements grows to hold element `element` (1: it does)."""
    return 1 << (-(-(element + 1) // size) - 1).bit_length()


def grown_size(rec: dict, size: int) -> "int | None":
    """The buffer size (make_args' elements) that covers the element a kernel's OutOfBounds past the end of a
    global buffer of `size` reached (or a crash beyond its guard pages, where that buffer is the nearest),
    rounded up by a power of two, when at most GV_MAX_ELEMENTS; else None."""
    times = 1
    for k in rec["kernels"].values():
        m = _PAST_END.search(k["detail"]) if k["fault"] == "OutOfBounds" else None
        if m:
            times = max(times, times_to_hold(int(m.group("size")), int(m.group("element"))))
        m = _BEYOND_END.search(k["detail"]) if k["fault"] == "KernelCrash" else None
        if m:
            element = int(m.group("size")) + int(m.group("distance")) // np.dtype(m.group("dtype")).itemsize
            times = max(times, times_to_hold(int(m.group("size")), element))
    return size * times if 1 < times and size * times <= GV_MAX_ELEMENTS else None
