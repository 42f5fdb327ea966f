"""Compile CUDA source with nvcc (no GPU needed), read ptxas resource usage and SASS, and judge them.

* `compile_source` runs `nvcc -cubin -arch=<arch> -Xptxas -v` and caches the result under
  harness.cache.cache_dir("nvcc") keyed by sha256(source, flags, nvcc version): a second run recompiles
  nothing. An entry is built in a private temp folder and renamed into place, so parallel workers (xdist,
  threads) never see half an entry; a loser of the race keeps the winner's entry.
* `parse_ptxas` turns `ptxas -v` output into per-kernel `KernelResources`.
* `CompileResult.sass` / `parse_sass` read SASS with cuobjdump -sass (nvdisasm as a fallback) and
  `sass_properties` names the instruction properties a mode promises (IDP4A, IMMA, 128-bit loads, f64 math).
* `sass_expectations` derives what a kernel must issue from its mode, its parameter types and its source;
  `resource_problems` says what in a resource row breaks the rules (spills, unjustified stack, smem > 48 KiB).
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from reference.modes import Mode

from harness import confine, lifetimes
from harness.cache import atomic_write, cache_dir, cache_entry, content_key, scratch_folder, tool_env
from harness.interrupts import helper_pool
from cudasrc.signatures import kernel_signatures, strip_comments
from .finder import Toolchain, find_toolchain

DEFAULT_ARCHS = ("sm_80", "sm_90")

# Stack frames the kernel family's design justifies: kernel -> (most bytes allowed, why). Any other stack
# frame, or a larger one, fails the resource check. The same design is in the seed and in qconform's emitters.
STACK_ALLOWANCES: dict[str, tuple[int, str]] = {
    "moe_topk": (2048, "single-thread top-K keeps per-thread float p[256] and pm[256] (2 x 1 KiB) indexed by "
                       "a runtime expert index"),
    "gk_attn_part": (64, "per-lane float qreg[8] and acc[8] indexed by a runtime head_dim/32 loop bound"),
    "gk_attn_online": (64, "per-lane float qreg[8] and acc[8] indexed by a runtime head_dim/32 loop bound"),
    "gk_qk_norm_rope": (32, "sinf/cosf of an unbounded angle: the slow-path range reduction keeps a small "
                            "local array"),
    "gk_qk_norm_rope2": (32, "sinf/cosf of an unbounded angle: the slow-path range reduction keeps a small "
                             "local array"),
    "gk_fused_attn": (32, "sinf/cosf of an unbounded angle: the slow-path range reduction keeps a small "
                          "local array"),
}
STATIC_SMEM_LIMIT = 48 * 1024      # bytes of static __shared__ a kernel may declare
_ARCH = re.compile(r"^sm_\d{2,3}a?$")
_ENTRY_VERSION = "1"               # bump when the cached entry layout changes


# ------------------------------------------------------------------------------------------------------------
# ptxas resources
@dataclass(frozen=True)
class KernelResources:
    registers: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    smem_static: int
    barriers: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def demangle_kernel(symbol: str) -> str:
    """The source name of a kernel symbol: '_Z8moe_topkPKfPfii' -> 'moe_topk'; extern "C" names stay."""
    m = re.match(r"^_Z(\d+)", symbol)
    if m:
        n = int(m.group(1))
        return symbol[m.end():m.end() + n]
    return symbol


_NUM = r"(\d+)"


def parse_ptxas(log: str) -> dict[str, KernelResources]:
    """Per entry kernel (source name) resources from `ptxas -v` output."""
    props: dict[str, tuple[int, int, int]] = {}
    used: dict[str, tuple[int, int, int]] = {}
    entry: Optional[str] = None
    current_props: Optional[str] = None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            entry = m.group(1)
            continue
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            current_props = m.group(1)
            continue
        m = re.search(rf"{_NUM} bytes stack frame, {_NUM} bytes spill stores, {_NUM} bytes spill loads", line)
        if m and current_props:
            props[current_props] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
            continue
        m = re.search(rf"Used {_NUM} registers", line)
        if m and entry:
            smem = re.search(rf"{_NUM} bytes smem", line)
            bars = re.search(rf"used {_NUM} barriers", line)
            used[entry] = (int(m.group(1)), int(smem.group(1)) if smem else 0, int(bars.group(1)) if bars else 0)
    out = {}
    for sym, (regs, smem, bars) in used.items():
        stack, st, ld = props.get(sym, (0, 0, 0))
        out[demangle_kernel(sym)] = KernelResources(regs, stack, st, ld, smem, bars)
    return out


# ------------------------------------------------------------------------------------------------------------
# SASS
SASS_PROPERTIES: dict[str, tuple[str, str]] = {
    # name: (regex on the opcode, what it shows)
    "idp4a": (r"^IDP\.4A\.S8\.S8$", "signed int8 x int8 4-way dot (IDP.4A.S8.S8, from __dp4a)"),
    "imma": (r"^IMMA\.16832\.S8\.S8(\.|$)", "int8 tensor-core MMA m16n8k32 (IMMA.16832.S8.S8)"),
    "ldg128": (r"^LDG(\.[A-Z0-9_]+)*\.128(\.|$)", "128-bit global loads (LDG.E.128*)"),
    "f64": (r"^D(FMA|ADD|MUL)(\.|$)", "double-precision arithmetic (DFMA/DADD/DMUL)"),
}


def opcode(instruction: str) -> str:
    """'@!P0 LDG.E.128.CONSTANT R4, [R2.64]' -> 'LDG.E.128.CONSTANT'."""
    text = re.sub(r"^@!?U?P\w+\s+", "", instruction.strip())
    return text.split(None, 1)[0] if text else ""


def parse_sass(text: str) -> dict[str, list[str]]:
    """Per kernel (source name) instruction texts from `cuobjdump -sass` or `nvdisasm` output."""
    out: dict[str, list[str]] = {}
    current: Optional[list[str]] = None
    for line in text.splitlines():
        m = re.search(r"Function\s*:\s*(\S+)", line) or re.match(r"^\s*\.text\.(\S+):\s*$", line)
        if m:
            current = out.setdefault(demangle_kernel(m.group(1)), [])
            continue
        m = re.match(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m and current is not None:
            current.append(m.group(1))
    return out


def sass_properties(instructions: Iterable[str]) -> dict[str, list[str]]:
    """property -> the distinct opcodes that show it (empty list: not issued)."""
    ops = sorted({opcode(i) for i in instructions})
    return {name: [op for op in ops if re.search(rx, op)] for name, (rx, _) in SASS_PROPERTIES.items()}


# ------------------------------------------------------------------------------------------------------------
# expectations derived from a kernel's mode, signature and source
_WIDE_LOAD = re.compile(r"\bconst\s+(?:int4|uint4|float4)\s*\*"                           # const int4* w = ...
                        r"|\b(?:__ldg|__ldcs|__ldca)\s*\(\s*\(?\s*const\s+(?:int4|uint4|float4)")  # __ldg((const int4*)p)
_MMA_S8 = re.compile(r"mma\.sync\.aligned\.m16n8k32[\w.]*\.s8")


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index just past the bracket that closes the one opened before `start`."""
    depth = 1
    for m in re.compile(re.escape(open_ch) + "|" + re.escape(close_ch)).finditer(text, start):
        depth += 1 if m.group(0) == open_ch else -1
        if depth == 0:
            return m.end()
    return len(text)


@functools.lru_cache(maxsize=64)
def function_bodies(code: str) -> dict[str, str]:
    """name -> body text for every __global__ / __device__ function defined in the source."""
    clean = strip_comments(code)
    out: dict[str, str] = {}
    for m in re.finditer(r"__(?:global|device)__[^;{}()]*?\b([A-Za-z_]\w*)\s*\(", clean):
        close = _matching(clean, m.end(), "(", ")")
        brace = re.compile(r"\s*\{").match(clean, close)
        if not brace:
            continue   # a declaration, not a definition
        out.setdefault(m.group(1), clean[brace.end() - 1:_matching(clean, brace.end(), "{", "}")])
    return out


def reachable_source(code: str, kernel: str) -> str:
    """The kernel's body plus the bodies of the __device__ functions it calls (transitively)."""
    bodies = function_bodies(code)
    if kernel not in bodies:
        raise ValueError(f"kernel: no definition of {kernel!r} in the source")
    seen, todo = {kernel}, [kernel]
    while todo:
        body = bodies[todo.pop()]
        for name in bodies:
            if name not in seen and re.search(rf"\b{re.escape(name)}\s*\(", body):
                seen.add(name)
                todo.append(name)
    return "\n".join(bodies[n] for n in sorted(seen))


@dataclass(frozen=True)
class SassExpectation:
    required: Mapping[str, str] = field(default_factory=dict)    # property -> why the kernel must issue it
    forbidden: Mapping[str, str] = field(default_factory=dict)   # property -> why it must not


def sass_expectations(mode: Optional[Mode], int8_inputs: int, source: str,
                      attrs: Optional[Mapping[str, object]] = None) -> SassExpectation:
    """What a kernel's SASS must (not) show, from what it promises.

    Contract attrs come first: act "int8"/"int8x2" -> an integer dot (IMMA when the source issues the s8
    tensor-core mma, else IDP4A); act "f32" -> no int8 dot at all; accumulate "f64" -> double-precision math;
    tiers starting at 512 (32 lanes x 16 bytes) -> 128-bit loads. Without attrs (external source such as the
    seed) the mode and signature stand in: an int8act/twopass kernel with two or more `const signed char*`
    inputs multiplies int8 by int8; a dequant kernel has no int8 activation. A source that reads global memory
    through `const int4*`-style pointers asks for 128-bit loads either way.
    """
    attrs = attrs or {}
    req: dict[str, str] = {}
    forb: dict[str, str] = {}
    act = attrs.get("act")
    int_dot = ""
    if act is not None:
        if str(act).startswith("int8"):
            int_dot = f"contract attrs act={act}: an int8 activation meets an int8 weight"
        elif act == "f32":
            forb["idp4a"] = forb["imma"] = "contract attrs act=f32: the activation is never int8"
    elif mode in (Mode.INT8_ACT, Mode.TWO_PASS_INT8) and int8_inputs >= 2:
        int_dot = f"{mode.value} kernel with {int8_inputs} int8 inputs: an int8 x int8 dot"
    elif mode is Mode.DEQUANT:
        forb["idp4a"] = forb["imma"] = "dequant mode: f32 activation x int8 weight, no int8 activation dot"
    if int_dot:
        if _MMA_S8.search(source):
            req["imma"] = int_dot + ", through mma.sync m16n8k32 s8 (tensor cores)"
        else:
            req["idp4a"] = int_dot
    elif "__dp4a" in source and "idp4a" not in forb:
        req["idp4a"] = "the source calls __dp4a"
    if attrs.get("accumulate") == "f64":
        req["f64"] = "contract attrs accumulate=f64"
    elif act is None and mode is Mode.DEQUANT and int8_inputs >= 1 and re.search(r"\bdouble\b", source):
        req["f64"] = "dequant kernel that accumulates the int8-weight product in double"
    if str(attrs.get("tiers", "")).startswith("512"):
        req["ldg128"] = f"contract attrs tiers={attrs['tiers']}: the 512-wide tier reads 16 bytes per lane"
    elif _WIDE_LOAD.search(source):
        req["ldg128"] = "the source reads global memory through 16-byte vector pointers"
    return SassExpectation(req, forb)


def int8_input_count(ctypes: Sequence[str]) -> int:
    return sum(1 for t in ctypes if t in ("const signed char*", "const int8_t*", "const char*"))


def sass_problems(kernel: str, props: Mapping[str, list[str]], exp: SassExpectation) -> list[str]:
    out = []
    for name, why in exp.required.items():
        if not props.get(name):
            out.append(f"{kernel}: expected {SASS_PROPERTIES[name][1]} because {why}; none issued")
    for name, why in exp.forbidden.items():
        if props.get(name):
            out.append(f"{kernel}: issues {', '.join(props[name])} but {why}")
    return out


def resource_problems(kernel: str, res: KernelResources,
                      stack_allowed: Optional[Mapping[str, tuple[int, str]]] = None) -> list[str]:
    """Rule breaks in one resource row: any spill, a stack frame not on the allow-list (default:
    STACK_ALLOWANCES) or over its allowance, static shared memory over 48 KiB."""
    out = []
    if res.spill_stores or res.spill_loads:
        out.append(f"{kernel}: spills ({res.spill_stores} bytes stored, {res.spill_loads} bytes loaded)")
    if res.stack_frame:
        allowed = (STACK_ALLOWANCES if stack_allowed is None else stack_allowed).get(kernel)
        if allowed is None:
            out.append(f"{kernel}: {res.stack_frame} bytes stack frame, not on the allow-list")
        elif res.stack_frame > allowed[0]:
            out.append(f"{kernel}: {res.stack_frame} bytes stack frame exceeds its allowance of {allowed[0]} "
                       f"({allowed[1]})")
    if res.smem_static > STATIC_SMEM_LIMIT:
        out.append(f"{kernel}: {res.smem_static} bytes static shared memory > {STATIC_SMEM_LIMIT}")
    return out


# ------------------------------------------------------------------------------------------------------------
# compiling, cached
@dataclass
class CompileResult:
    arch: str
    ok: bool
    key: str
    log: str                                   # nvcc/ptxas stderr+stdout
    resources: dict[str, KernelResources]
    entry: Path                                # cache folder of this result
    cached: bool                               # True when read from the cache, False when compiled now

    @property
    def cubin(self) -> Optional[Path]:
        p = self.entry / "kernel.cubin"
        return p if p.is_file() else None

    def sass_text(self, toolchain: Optional[Toolchain] = None) -> str:
        """SASS listing of the cubin (cached beside it once read)."""
        if not self.ok or self.cubin is None:
            raise ValueError(f"compile ({self.arch}) failed; no SASS to read:\n{self.log}")
        cached = self.entry / "sass.txt"
        if cached.is_file():
            return cached.read_text()
        tc = toolchain or find_toolchain()
        if tc.cuobjdump is not None:
            cmd = [str(tc.cuobjdump), "-sass", str(self.cubin)]
        elif tc.nvdisasm is not None:
            cmd = [str(tc.nvdisasm), "-c", str(self.cubin)]
        else:
            raise FileNotFoundError("no cuobjdump or nvdisasm found; install qconform's toolchain extra")
        out = _run_tool(cmd, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
        atomic_write(cached, out.stdout)
        return out.stdout

    def sass(self, toolchain: Optional[Toolchain] = None) -> dict[str, list[str]]:
        return parse_sass(self.sass_text(toolchain))


def _run_tool(cmd: Sequence[str], timeout: float, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """Run nvcc or cuobjdump (both write temporaries: tmpxft_*) with their temporaries in a scratch folder
    (tool_env), not in a compile's cache entry, whose folder may be a caller's `cache` that nothing sweeps:
    removed after the run, or by the next run's sweep if this one is killed."""
    with scratch_folder("nvcc") as temps:
        writable = [temps, *([cwd] if cwd is not None else [])]
        with confine.confined(cmd, writable=writable, cwd=cwd,       # the source is untrusted
                              then=lifetimes.dies_with_caller()) as preexec:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=tool_env(temps),
                                  preexec_fn=preexec)


def _nvcc_cubin(code: str, nvcc: str, options: Sequence[str], work: Path, timeout: float = 900) -> tuple[bool, str]:
    """`nvcc -cubin <options>` of `code` as `work`/kernel.cu into `work`/kernel.cubin, confined (harness.confine:
    the source is untrusted): (whether the cubin was made; nvcc's output, with a line where confinement refused a
    file)."""
    (work / "kernel.cu").write_text(code)
    cmd = [nvcc, *(["-cubin"] if "-cubin" not in options else []), *options, "-o", "kernel.cubin", "kernel.cu"]
    proc = _run_tool(cmd, timeout=timeout, cwd=work)
    log = (proc.stdout + proc.stderr).replace(str(work) + os.sep, "")
    return proc.returncode == 0 and (work / "kernel.cubin").is_file(), log + confine.explain(log)


def cubin_of(code: str, nvcc: str, options: Sequence[str], timeout: float = 900) -> tuple[Optional[bytes], str]:
    """`nvcc -cubin <options>` of `code`, confined, in a scratch folder: (the cubin, or None when nvcc failed;
    nvcc's output)."""
    with scratch_folder("nvcc") as work:
        ok, log = _nvcc_cubin(code, nvcc, options, work, timeout)
        return ((work / "kernel.cubin").read_bytes() if ok else None), log


def nvcc_flags(arch: str, extra: Sequence[str] = ()) -> list[str]:
    if not _ARCH.match(arch):
        raise ValueError(f"arch: expected a real architecture such as sm_80 or sm_90, got {arch!r}")
    return ["-cubin", f"-arch={arch}", "-Xptxas", "-v", *extra]


def cache_key(code: str, flags: Sequence[str], version: str) -> str:
    # a failed compile's log is cached: one made unconfined (it may quote any file) is never served confined
    return content_key(_ENTRY_VERSION, code, "\0".join(flags), version, confine.cache_part())


def _load(entry: Path, arch: str, key: str) -> Optional[CompileResult]:
    meta = entry / "result.json"
    if not meta.is_file():
        return None
    data = json.loads(meta.read_text())
    res = {k: KernelResources(**v) for k, v in data["resources"].items()}
    return CompileResult(arch, data["ok"], key, data["log"], res, entry, True)


def compile_source(code: str, arch: str, toolchain: Optional[Toolchain] = None,
                   extra_flags: Sequence[str] = (), cache: Optional[Path] = None) -> CompileResult:
    """Compile `code` to a cubin for `arch` (cached). A failed compile is a result with ok=False and the log."""
    tc = toolchain or find_toolchain()
    flags = nvcc_flags(arch, extra_flags)
    key = cache_key(code, flags, tc.version)
    root = Path(cache) if cache is not None else cache_dir("nvcc")
    root.mkdir(parents=True, exist_ok=True)
    entry = root / key
    hit = _load(entry, arch, key)
    if hit is not None:
        return hit
    made: list[CompileResult] = []

    def make(work: Path) -> None:
        work.mkdir()
        t0 = time.perf_counter()
        ok, log = _nvcc_cubin(code, str(tc.nvcc), flags, work)     # kernel.cu stays beside its cubin
        seconds = time.perf_counter() - t0
        resources = parse_ptxas(log) if ok else {}
        (work / "result.json").write_text(json.dumps(
            {"ok": ok, "arch": arch, "flags": flags, "nvcc": tc.version, "log": log, "seconds": round(seconds, 3),
             "resources": {k: v.as_dict() for k, v in resources.items()}}, indent=1, sort_keys=True))
        made.append(CompileResult(arch, ok, key, log, resources, entry, False))

    _, made_now = cache_entry(entry, make)
    if made_now:
        return made[0]
    hit = _load(entry, arch, key)        # another worker stored the same entry first: keep theirs
    if hit is None:
        raise RuntimeError(f"compile cache: {entry} holds no result.json")
    return CompileResult(arch, hit.ok, key, hit.log, hit.resources, entry, False)


def compile_many(jobs: Sequence[tuple[str, str]], archs: Sequence[str] = DEFAULT_ARCHS,
                 toolchain: Optional[Toolchain] = None, workers: Optional[int] = None,
                 cache: Optional[Path] = None) -> dict[tuple[str, str], CompileResult]:
    """Compile every (label, code) for every arch in parallel threads; {(label, arch): result}."""
    tc = toolchain or find_toolchain()
    items = [(label, code, arch) for label, code in jobs for arch in archs]
    n = workers or max(1, min(len(items), os.cpu_count() or 1))
    with helper_pool(n) as pool:
        results = pool.map(lambda it: compile_source(it[1], it[2], tc, cache=cache), items)
        return {(label, arch): r for (label, _, arch), r in zip(items, results)}


def kernel_int8_inputs(code: str) -> dict[str, int]:
    """kernel name -> number of `const signed char*`-style inputs in its signature."""
    return {s.name: int8_input_count(s.ctypes) for s in kernel_signatures(code)}


# ------------------------------------------------------------------------------------------------------------
# one call for a whole compiled file
@dataclass(frozen=True)
class KernelPromise:
    """What one kernel promises, as the checks need it (from a contract, or stated for external source)."""
    name: str
    mode: Optional[Mode]
    int8_inputs: int
    attrs: Mapping[str, object] = field(default_factory=dict)


def promises_from_contracts(described: Iterable[Mapping]) -> list[KernelPromise]:
    """From KernelContract.describe() dicts (as kept in golden/MANIFEST.json)."""
    out = []
    for d in described:
        mode = Mode.parse(d["mode"]) if d.get("mode") else None
        n8 = sum(1 for p in d["params"] if p["role"] == "input" and int8_input_count([p["ctype"]]))
        out.append(KernelPromise(d["name"], mode, n8, dict(d.get("attrs") or {})))
    return out


def check_compiled(code: str, result: CompileResult, promises: Sequence[KernelPromise],
                   toolchain: Optional[Toolchain] = None,
                   stack_allowed: Optional[Mapping[str, tuple[int, str]]] = None,
                   read_sass: bool = True) -> list[str]:
    """Every rule break of one compiled file: compile failure, missing kernels, resources, SASS promises."""
    if not result.ok:
        return [f"nvcc ({result.arch}) failed:\n{result.log}"]
    problems = []
    sass = result.sass(toolchain) if read_sass else {}
    for p in promises:
        res = result.resources.get(p.name)
        if res is None:
            problems.append(f"{p.name}: no ptxas entry for this kernel ({result.arch})")
            continue
        problems += [f"{result.arch} {x}" for x in resource_problems(p.name, res, stack_allowed)]
        if read_sass:
            if p.name not in sass:
                problems.append(f"{p.name}: not found in the SASS listing ({result.arch})")
                continue
            exp = sass_expectations(p.mode, p.int8_inputs, reachable_source(code, p.name), p.attrs)
            problems += [f"{result.arch} {x}" for x in sass_problems(p.name, sass_properties(sass[p.name]), exp)]
    return problems
