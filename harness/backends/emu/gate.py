"""Only device code runs on the CPU backend: the checks a source passes before its library is built.

The emu backend compiles the whole .cu file with the host compiler, so, unlike a GPU build, host code in it
could run. Three checks refuse it before anything runs (each failure is a BuildError naming what was found):
  1. nvcc's device-side compile (`nvcc --ptx`, the first half of any GPU build): a __global__, __device__ or
     __host__ __device__ function that calls a host function (system, fopen, getenv, syscall, fork...) is
     refused with nvcc's own message. It runs beside the host compiler, and is skipped where no nvcc is found
     (`nvcc_gate()` says so; `qconform doctor` and the backend's description show it).
  2. The kernel's object file, whatever nvcc said: no inline assembly (the compiler's `#APP` markers in its
     assembly output: after preprocessing, so no macro hides it); no code that runs when the library is
     loaded or unloaded (.init_array/.ctors/.fini_array/.dtors/.preinit_array sections: file-scope
     initializers such as `static int x = system(...)`, constructor attributes) and no IFUNC resolver;
  3. and no call to a C library function outside DEVICE_LIBC (the math, memory and allocation functions
     device code has): without nvcc this is what refuses host calls before they run.
What still slips through is contained by the worker's sandbox (sandbox.py).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Optional

from harness import confine, lifetimes
from harness.backends.base import BuildError, UnsupportedConstruct, build_error
from harness.cache import tool_env
from harness.toolchain import host_libraries

GATE_ARCH = "sm_90"
# 20011/20014: a __host__ __device__ function calling a host function is only a warning by default; an error here
# The emu backend force-includes its device header (half types, fixed-width integers, the C library's device
# functions): the gate pre-includes what a CUDA source would include for the same names.
NVCC_GATE_FLAGS = ("--ptx", f"-arch={GATE_ARCH}", "-diag-error", "20011,20014", "--pre-include", "cuda_fp16.h",
                   "--pre-include", "stdint.h")

_LOAD_TIME_SECTIONS = re.compile(r"^\.(?:init_array|ctors|fini_array|dtors|preinit_array|init|fini)(?:\.|$)")

# C library / compiler support symbols the object of device code may reference: libm (CUDA's device math),
# the memory functions, device-side malloc/free/new/delete, assert, device printf's formatting, and the
# support calls g++ emits for function-local statics and exceptions. Anything else (system, fopen, getenv,
# syscall, fork, dlopen, socket...) is a host function.
_MATH = r"(?:a?sinh?|a?cosh?|a?tanh?|atan2|exp(?:2|10|m1)?|log(?:2|10|1p|b)?|pow|sqrt|cbrt|hypot|fabs|floor|ceil|" \
        r"trunc|round|lround|llround|rint|lrint|llrint|nearbyint|fmod|remainder|remquo|modf|frexp|ldexp|scalbl?n|" \
        r"ilogb|fma|fmax|fmin|fdim|copysign|nextafter|erfc?|[lt]gamma|j[01n]|y[01n]|sincos|exp10|nan|" \
        r"__finite|__isnan|__isinf|__fpclassify|__signbit)[fl]?"
DEVICE_LIBC = re.compile(
    rf"^(?:{_MATH}|mem(?:cpy|move|set|cmp)|str(?:len|cmp|ncmp)|malloc|calloc|realloc|free|aligned_alloc|"
    r"abs|labs|llabs|v?s?n?printf|__v?s?n?printf_chk|__assert_fail|abort|__stack_chk_fail|__cxa_guard_\w+|"
    r"__cxa_atexit|__dso_handle|__cxa_pure_virtual|__cxa_throw|__cxa_begin_catch|__cxa_end_catch|"
    r"__cxa_rethrow|__cxa_allocate_exception|__cxa_free_exception|__gxx_personality_v0|_Unwind_Resume|"
    r"_ZSt9terminatev|_Zn[wa]m\w*|_Zd[la]Pv\w*|_ZTV\w+|_ZTI\w+|_ZTS\w+|__memcpy_chk|__memset_chk|"
    r"__memmove_chk|_GLOBAL_OFFSET_TABLE_|__tls_get_addr|__asan_\w+|__tsan_\w+|__ubsan_handle_type_mismatch_v1|"
    r"__[a-z]+(?:hf|bf|sf|df|xf|tf|si|di|ti|hc|sc|dc|xc|tc)\d)$")      # libgcc's arithmetic helpers


@functools.lru_cache(maxsize=None)
def nvcc_gate() -> tuple[Optional[str], str]:
    """(nvcc path, its release) for the device-side gate, or (None, why there is none)."""
    from harness.toolchain.finder import toolchain_or_reason
    tc, why = toolchain_or_reason()
    if tc is None:
        return None, why
    try:
        return str(tc.nvcc), tc.version
    except Exception as exc:     # an nvcc that cannot say its version cannot be trusted as a gate either
        return None, f"{tc.nvcc} --version failed: {exc}"


def describe() -> str:
    nvcc, info = nvcc_gate()
    if nvcc is None:
        return ("object checks only (no nvcc: host calls are refused by the C-library allow-list, not by nvcc; "
                f"{info})")
    m = re.search(r"release [\d.]+, V[\d.]+", info)
    return f"nvcc device-side compile ({nvcc}, {m.group(0) if m else info}) + object checks"


def cache_part() -> str:
    """What of the gate decides whether a built module may exist (part of the build cache key)."""
    nvcc, info = nvcc_gate()
    return "gate:none" if nvcc is None else f"gate:{info}:{' '.join(NVCC_GATE_FLAGS)}"


# nvcc's language relaxations a CUDA build may need (Marlin's constexpr host helpers called in device code): the
# device-side compile takes them; the host compiler has no such rule to relax and never sees them.
NVCC_ONLY_FLAGS = frozenset({"--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "--extended-lambda",
                             "-extended-lambda", "--expt-extended-lambda", "-expt-extended-lambda"})


def device_compile_flags(flags) -> tuple[str, ...]:
    """The build flags the device-side compile takes: those that define or undefine macros (-DNAME, -DNAME=VALUE,
    -UNAME) and the folders of the source's headers (-IDIR), for the source's meaning depends on them, and nvcc's
    language relaxations (NVCC_ONLY_FLAGS); the others are the host compiler's own."""
    return tuple(f for f in flags if f.startswith(("-D", "-U", "-I")) or f in NVCC_ONLY_FLAGS)


def start_device_compile(source: str, name: str, work: Path, flags=()) -> Optional[subprocess.Popen]:
    """Start nvcc's device-side compile of `source` in `work` (the build's scratch folder, which also holds
    nvcc's own temporaries: tool_env) with the macro definitions among `flags` (None without nvcc);
    finish_device_compile collects it. The file keeps the source's name, so nvcc's messages name it."""
    nvcc, _ = nvcc_gate()
    if nvcc is None:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(name).name) or "kernel.cu"
    if not safe.endswith(".cu"):
        safe += ".cu"
    (work / "gate").mkdir()
    (work / "gate" / safe).write_text(source)
    cmd = [nvcc, *NVCC_GATE_FLAGS, *device_compile_flags(flags), *host_libraries.nvcc_flags(), "-o", "device.ptx", safe]
    with confine.confined(cmd, writable=[work], cwd=work / "gate", then=lifetimes.dies_with_caller()) as preexec:
        return subprocess.Popen(cmd, cwd=work / "gate", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=tool_env(work), preexec_fn=preexec)


def finish_device_compile(proc: Optional[subprocess.Popen], name: str, copies: str = "") -> None:
    """Wait for nvcc's check; BuildError with its errors when it refused the source. `copies`: the folder of the
    build's copies of the source's headers, which the message leaves out so that each header is named by its path."""
    if proc is None:
        return
    try:
        out, _ = proc.communicate(timeout=600)
        out = out.replace(copies, "") if copies else out
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise BuildError(f"emu: nvcc's device-side check of {name} did not finish in 600 s") from None
    if proc.returncode != 0:
        errors = [ln for ln in out.splitlines() if "error" in ln]
        raise build_error(f"emu: {name} is not device code that a GPU build accepts; nvcc's device-side "
                          f"compile refused it (nothing was run):", "\n".join(errors[:20] or out.splitlines()[-20:]),
                          out)


def _readelf(obj: Path, *what: str) -> str:
    exe = shutil.which("readelf")
    if exe is None:
        raise BuildError("emu: readelf (binutils, installed with the host compiler) is needed to check the "
                         "kernel's object file and was not found on PATH")
    r = subprocess.run([exe, "-W", *(what or ("-S", "-s")), str(obj)], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, LC_ALL="C"))
    if r.returncode != 0:
        raise BuildError(f"emu: readelf could not read the kernel's object file: {r.stderr.strip()}")
    return r.stdout


# AddressSanitizer and ThreadSanitizer (the race detector's instrumentation, whose entry points the runtime
# implements) register each instrumented object with one constructor (and maybe one destructor) of priority
# 99: allowed in an instrumented build when it is alone in its section.
_SANITIZER_SECTIONS = (".init_array.00099", ".fini_array.00099")


def _entries(relocs: str, section: str) -> int:
    m = re.search(rf"^Relocation section '\.rela?{re.escape(section)}' .* contains (\d+) entr", relocs, re.M)
    return int(m.group(1)) if m else 0


def check_object(obj: Path, asm_text: str, name: str, instrumented: bool = False) -> None:
    """Refuse inline assembly, load-time code and host calls in the kernel's object file (checks 2 and 3)."""
    asm_lines = [ln.strip() for ln in _asm_blocks(asm_text)]
    if asm_lines:
        raise BuildError(f"emu: {name} contains inline assembly the emu backend does not run (after "
                         f"preprocessing): {asm_lines[0][:120]!r}; emu runs only the inline PTX that its rewrite finds "
                         "in the kernel's own source (docs/KERNELS.md lists the instructions)")
    text = _readelf(obj)
    sections = re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", text, re.M)
    load_time = [s for s in sections if _LOAD_TIME_SECTIONS.match(s)]
    if instrumented and load_time:
        relocs = _readelf(obj, "-r")
        load_time = [s for s in load_time if s not in _SANITIZER_SECTIONS or _entries(relocs, s) > 1]
    if load_time:
        raise BuildError(f"emu: {name} has file-scope host code that would run when its library is loaded "
                         f"(sections {', '.join(sorted(set(load_time)))}: a dynamic initializer such as "
                         "`static int x = f();`, or a constructor/destructor attribute); device code has none, "
                         "and a GPU build never runs it")
    symbols = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d+:", ln)]
    ifuncs = [s[7] for s in symbols if len(s) >= 8 and s[3] == "IFUNC"]
    if ifuncs:
        raise BuildError(f"emu: {name} defines an IFUNC resolver ({ifuncs[0]}), host code run by the dynamic loader")
    host = sorted({s[7].split("@")[0] for s in symbols if len(s) >= 8 and s[6] == "UND" and s[7]
                   and not s[7].startswith("_ZN3emu") and not DEVICE_LIBC.match(s[7].split("@")[0])})
    runtime = [s for s in map(_function_name, host) if re.match(r"cuda[A-Z]", s)]
    if runtime:          # a device-runtime call nvcc accepts (dynamic parallelism): emu's limit, as the rewrite says
        raise UnsupportedConstruct(None, f"CUDA runtime API calls in device code ({', '.join(sorted(set(runtime))[:5])}: "
                                         "the device runtime of dynamic parallelism) are not supported by emu")
    if host:
        raise BuildError(f"emu: {name} calls host function(s) that device code cannot call: {', '.join(host[:10])} "
                         "(nothing was run)")


def _function_name(symbol: str) -> str:
    """A symbol's function name: a C name as it is, a mangled one's first name (`_Z10cudaMallocIfE...` ->
    cudaMalloc)."""
    m = re.match(r"_Z(\d+)", symbol)
    return symbol[m.end():m.end() + int(m.group(1))] if m else symbol


def _asm_blocks(asm_text: str) -> list[str]:
    """The instructions between the compiler's #APP / #NO_APP markers (inline asm) in an assembly listing."""
    out, inside = [], False
    for ln in asm_text.splitlines():
        s = ln.strip()
        if s == "#APP":
            inside = True
        elif s == "#NO_APP":
            inside = False
        elif inside and s and not s.startswith("#"):
            out.append(s)
    return out
