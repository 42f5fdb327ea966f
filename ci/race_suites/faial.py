"""faial's labelled examples' adapter for ci/score_race_suite.py.

faial (gitlab.com/umb-svl/faial; a public copy on GitHub: elliotsayes/faial) is a verifier that proves CUDA
kernels free of data races by a static analysis of their access protocols. SUITE is a checkout; its
examples/drf/*.cu are scored as its own test driver, examples/drf/test.ml, labels them: each entry
`"file.cu", [options], status` says what faial answers on that file with those options: 0 proved free of data
races, 1 a data race (with a witness), 2 the file does not parse. Each entry is one case:
  racy       = status 1;
  race-free  = status 0: faial proved no two threads of one block (`--grid-level`: of the grid) race, for every
               value of the scalar parameters that the options do not fix and every input;
  not scored = status 2 (a parse error is what faial is tested for), and the kernels in test.ml's
               `unsupported` list (documented, checked by no test).
faial's reading of a race is the CUDA memory model's: threads of a warp are not in lock step (its
`racy-reduce.cu`, a warp-synchronous reduction, is expected racy), and a race is about accesses, not values.
By default faial checks races between threads of one block only: a race between blocks is outside a
block-level claim, so such a case's launch is its one block (the header's grid where it gives one).

The launch is faial's: the file's GPUVerify-style header (`//--blockDim=... --gridDim=...` on a leading comment
line) or the case's options (`--blockDim`, `--gridDim`), else faial's defaults, 1024 threads in one block.
`-p name=value` fixes a scalar parameter, and every other integer parameter is swept (FAIAL_SWEEP: faial's claim
covers every value); `assert` is an assumption, as faial reads it. `-DNAME=VALUE` is a build flag; the options
that only steer faial's
search (`--tid1`, `--tid2`, `--index`, `--logic`) change nothing here, so entries that differ only in them are
one case. The rest is GPUVerify's adapter: `__requires`/`__assume` dropped (simple preconditions on scalars
honoured), seeded inputs from the case's name, buffers grown after an overrun past their end, 48 KiB of
`extern __shared__` memory for a kernel that declares it, a seeded buffer behind each file-scope `__device__ T*`
variable (the host program's cudaMemcpyToSymbol).
"""
from __future__ import annotations

import re
import shlex
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from cudasrc.signatures import kernel_signatures, strip_comments
from harness.racescan import has_detector, sweep_points
from harness.racescan.reading import FAIAL_ALL_LEVELS, FAIAL_BLOCK, FAIAL_GRID

from . import gpuverify
from .run import build_failed

FAIAL_EXAMPLES = "examples/drf"
DEFAULT_BLOCK = (1024, 1, 1)          # faial's default launch (protocols/gv_parser.ml)
DEFAULT_GRID = (1, 1, 1)
# faial's claims hold for every value of a scalar parameter that nothing fixes (a race needs one): each integer
# parameter is swept over the draw's range, 1 to 64 (or its preconditions' bounds) after the drawn launch, at
# most this many points per kernel (harness.racescan.sweep_points: every value up to it, else the corners and
# seeded points). A sweep ends at the first race.
FAIAL_SWEEP = 64
# faial reads an `assert` as an assumption on the inputs (its --ignore-asserts turns that off), GPUVerify's
# __assume likewise: both are dropped, with GPUVerify's specification calls.
FAIAL_ASSUMED = gpuverify.GV_DROPPED + ("assert",)
READINGS = {"block": FAIAL_BLOCK, "grid": FAIAL_GRID, "all": FAIAL_ALL_LEVELS}     # faial's notion of a race
_SEARCH_ONLY = {"--tid1": 1, "--tid2": 1, "--thread-idx-1": 1, "--thread-idx-2": 1, "--logic": 1,
                "--index": 0, "--all-dims": 0}       # option -> how many values follow it as separate words
_ENTRY = re.compile(r'"(?P<file>[\w.-]+\.cu)"\s*,\s*\[(?P<args>[^\]]*(?:\[[^\]]*\][^\]]*)*)\]\s*,\s*(?P<status>\d+)\s*;')


class Case(NamedTuple):
    """One entry of faial's test.ml, as it runs here."""
    path: Path
    options: tuple          # the entry's options, as written
    status: "int | None"    # faial's expected exit status; None: in its `unsupported` list

    @property
    def label(self) -> "str | None":
        return {0: "race-free", 1: "racy"}.get(self.status)

    @property
    def name(self) -> str:
        return self.path.name + (" " + shlex.join(self.options) if self.options else "")


def _entries(text: str, name: str) -> list[tuple[str, tuple, int]]:
    """The `(file, options, status)` entries of test.ml's `tests` list."""
    start = text.find("let tests")
    if start < 0:
        raise ValueError(f"{name}: no `let tests` list")
    end = text.find("]\n", start)
    out = []
    for m in _ENTRY.finditer(text, start, end if end > 0 else len(text)):
        options = tuple(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group("args")))
        out.append((m.group("file"), options, int(m.group("status"))))
    if not out:
        raise ValueError(f"{name}: the `tests` list has no entry of the form \"file.cu\", [options], status;")
    return out


def _unsupported(text: str) -> list[str]:
    m = re.search(r"let unsupported[^=]*=\s*\[(.*?)\]", text, re.S)
    return re.findall(r'"([\w.-]+\.cu)"', strip_comments(m.group(1))) if m else []


def suite_cases(root: Path) -> "list[Case] | None":
    """The cases of a faial checkout, in test.ml's order (entries that run alike merged), or None."""
    test_ml = root / FAIAL_EXAMPLES / "test.ml"
    if not test_ml.is_file():
        return None
    text = test_ml.read_text(errors="replace")
    cases, seen = [], set()
    for file, options, status in _entries(text, str(test_ml.relative_to(root))):
        run = (file, repr(run_options(options)[1:]), status)
        if run not in seen:
            seen.add(run)
            cases.append(Case(root / FAIAL_EXAMPLES / file, options, status))
    cases += [Case(root / FAIAL_EXAMPLES / f, (), None) for f in _unsupported(text)]
    return cases


def _dim3(text: str) -> tuple:
    nums = [int(x) for x in re.findall(r"\d+", text)]
    if not 1 <= len(nums) <= 3:
        raise ValueError(f"dimension {text!r}: expected N or [X,Y] or [X,Y,Z]")
    return tuple(nums + [1] * (3 - len(nums)))


def run_options(options: tuple) -> tuple[str, dict, dict, dict, str]:
    """What a case's options change in a run: (the options this adapter does not know, joined; launch
    dimensions given, -D defines, -p parameter values, the level of faial's claim: block, grid or all)."""
    dims, defines, params, level, unknown = {}, {}, {}, "block", []
    words = list(options)
    while words:
        word = words.pop(0)
        key, eq, value = word.partition("=")
        if key in ("--blockDim", "--block-dim", "-b", "--gridDim", "--grid-dim", "-g"):
            value = value if eq else words.pop(0)
            dims["block" if key in ("--blockDim", "--block-dim", "-b") else "grid"] = _dim3(value)
        elif key.startswith("-D"):
            defines[key[2:]] = value if eq else "1"
        elif key == "-p":
            name, _, v = words.pop(0).partition("=")
            params[name] = int(v)
        elif key in ("--grid-level", "--all-levels"):
            level = "all" if key == "--all-levels" or level == "all" else "grid"
        elif key in _SEARCH_ONLY:
            del words[:0 if eq else _SEARCH_ONLY[key]]
        else:
            unknown.append(word)
    return " ".join(unknown), dims, defines, params, level


def header_dims(text: str) -> dict:
    """`--blockDim`/`--gridDim` on the file's leading comment lines (GPUVerify's header, which faial reads)."""
    dims = {}
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        for key, value in re.findall(r"--(blockDim|gridDim)=(\S+)", line):
            dims["block" if key == "blockDim" else "grid"] = _dim3(value)
    return dims


def score_case(backend, case: Case, root: Path, seed: int) -> dict:
    """The verdict of one case: every __global__ kernel of the file once at the case's launch."""
    from harness.backends.base import BuildError, KernelFault
    rec = {"file": case.name, "algorithm": FAIAL_EXAMPLES, "label": case.label, "kernels": {},
           "options": list(case.options)}
    if case.status is None:
        rec.update(verdict="not scored", fault=None, races=0, data_race=False,
                   detail="in test.ml's `unsupported` list: documented, checked by none of faial's tests")
        return rec
    if case.status not in (0, 1):
        rec.update(verdict="not scored", fault=None, races=0, data_race=False,
                   detail=f"faial's expected status {case.status}: a parse error, not a verdict on races")
        return rec
    unknown, dims, defines, params, level = run_options(case.options)
    if unknown:
        raise ValueError(f"{case.name}: options this adapter does not know: {unknown}")
    text = case.path.read_text(errors="replace")
    dims = {**header_dims(text), **dims}
    header = {"block": dims.get("block", DEFAULT_BLOCK), "grid": dims.get("grid", DEFAULT_GRID), "defines": defines}
    rec.update(block=list(header["block"]), grid=list(header["grid"]),
               reading=READINGS[level].name)
    why = gpuverify.unrunnable(header, text)
    if why:
        rec.update(verdict="unsupported", fault="Launch" if why.startswith("launch") else "VerifierOnly",
                   detail=why, races=0, data_race=False)
        return rec
    rng = np.random.default_rng([seed, zlib.crc32(case.name.encode())])
    code = gpuverify.device_source(text, FAIAL_ASSUMED)
    code += gpuverify.arbitrary_results(code, header, seed)
    chosen = []
    for sig in kernel_signatures(code):
        values, _, domains = gpuverify.scalar_values(sig, strip_comments(text), header["block"], rng, header["grid"],
                                                     sweep_all=True)
        missing = set(params) - {n for _, n in sig.params}
        if missing:
            raise ValueError(f"{case.name}: -p names no parameter of {sig.name}: {sorted(missing)}")
        domains = {n: r for n, r in domains.items() if n not in params}
        points = [{}] + sweep_points(domains, seed, FAIAL_SWEEP)[0] if domains else [{}]
        chosen.append((sig, {**values, **params}, points))
    flags = tuple(f"-D{k}={v}" for k, v in defines.items())
    try:
        module = backend.load(code, flags=flags, name=re.sub(r"\W", "_", case.name) + ".cu")
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    return gpuverify.run_growing(rec, module, code, header, chosen, rng)
