"""Which host compiler and fiber library the emu backend builds with (also reported by `qconform doctor`)."""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.cache import scratch_folder, tool_env

RUNTIME_DIR = Path(__file__).resolve().parent
FIBER_ENV = "QCONFORM_EMU_FIBER"      # auto | asm | boost | ucontext
FIBERS = ("auto", "asm", "boost", "ucontext")
# What `auto` prefers, fastest first (tests/bench/test_bench_emu.py measures all three; README has the
# figures): the built-in x86-64 switch needs no package and costs no more than Boost.Context's fcontext;
# Boost.Context covers the other architectures; ucontext (a system call per switch) is the last resort.
AUTO_ORDER = ("asm", "boost", "ucontext")

# Device code is compiled without floating-point contraction (see docs/NUMERICS.md, section 14): results then
# equal a GPU build with -fmad=false for + - * / sqrt. -fno-strict-aliasing because CUDA kernels routinely
# read int8 buffers through int/int4 pointers; -fno-gnu-unique keeps two loaded modules from sharing state;
# -fno-finite-loops / -fno-delete-null-pointer-checks keep a spinning or crashing kernel spinning or crashing
# (a hang then shows up as KernelTimeout, a bad pointer as KernelCrash) instead of being optimised away.
BASE_FLAGS = ("-std=gnu++17", "-fPIC", "-fno-gnu-unique", "-fvisibility=hidden", "-ffp-contract=off",
              "-fno-fast-math", "-fno-math-errno", "-fno-strict-aliasing", "-fno-finite-loops",
              "-fno-delete-null-pointer-checks", "-w")
OPT_FLAGS = ("-O2",)
# Every build: each source line keeps code of its own, so that the return address of an access names the access's
# line (a race's two sites, a fault's line). -O2 merges the identical tails of two lines (cross-jumping, tail
# merging) and identical functions (ICF): one store instruction then stood for two lines, and a race report named
# a line whose guard the racing thread never passed (found by tests/backends/emu/test_race_oracle.py).
SITE_FLAGS = ("-fno-crossjumping", "-fno-tree-tail-merge", "-fno-ipa-icf")
# Which accesses device code makes, as the race detector and the bounds checks see them. compiled: those of the
# optimised build (-O2), which a GPU build makes too: a load whose value nothing uses is dropped, as nvcc drops it.
# source (the default with g++; no cost the benchmarks resolve, tests/bench/test_bench_race.py): -O2 without the
# passes that delete an access or move it off a path, so that each load and store of the source is made where the
# source makes it, as the CUDA C++ abstract machine does (a race no GPU tool sees: compute-sanitizer checks the
# compiled code): dead code and dead stores (which also drop dead loads), sinking, and the value numbering and
# dominator passes, which drop a store of the value the location already holds; nor the hoisting of adjacent loads,
# which loads a field on the path where the source loads its neighbour only.
# Not -O0: g++'s thread instrumentation leaves a struct passed by value straight from memory (a half2 argument)
# unchecked there. tests/backends/emu/test_race_detector.py has a kernel for each. The runtime: OPT_FLAGS always.
ACCESS_FLAGS = {"compiled": OPT_FLAGS,
                "source": OPT_FLAGS + ("-fno-tree-dce", "-fno-tree-dse", "-fno-tree-sink", "-fno-tree-fre",
                                       "-fno-tree-pre", "-fno-code-hoisting", "-fno-tree-dominator-opts",
                                       "-fno-hoist-adjacent-loads")}
SANITIZE_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")
# A frame larger than a page is probed page by page, so that a stack overflow touches the fiber's guard page
# first instead of leaping over it into a neighbour's stack or a buffer's guard pages (used where accepted).
STACK_PROBE_FLAGS = ("-fstack-clash-protection",)
# The race detector's build of device code: every load and store calls a __tsan_* entry point of the emu
# runtime (emu_race.hpp); libtsan itself is never linked. Line tables (-g1) resolve access sites in reports, in
# DWARF 4: binutils' addr2line misnames the file of inlined frames in GCC's DWARF 5 line tables (a line of an inlined
# device function of kernel.cu came back as the compiled unit's, and was then dropped for the call site's line).
# Volatile accesses get entry points of their own, so that a thread spinning on a volatile load can yield.
RACE_FLAGS = ("-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0", "--param=tsan-distinguish-volatile=1")
# Every build: -fsanitize=alignment checks each typed load and store against its type's alignment (the runtime's
# handler, emu_race.hpp): a float4 that g++ copies as four floats is still a 16-byte access for the GPU, which stops
# on a misaligned one. Line tables name the fault's line (the AddressSanitizer build keeps its full -g).
ALIGN_FLAGS = ("-fsanitize=alignment",)
LINE_FLAGS = ("-g1", "-gdwarf-4")

_BOOST_PROBE = r"""
#include <boost/context/detail/fcontext.hpp>
using namespace boost::context::detail;
static fcontext_t main_ctx; static char stack[65536];
static void entry(transfer_t t) { main_ctx = t.fctx; jump_fcontext(main_ctx, nullptr); }
int main() { fcontext_t f = make_fcontext(stack + sizeof stack, sizeof stack, entry); jump_fcontext(f, nullptr); return 0; }
"""


@dataclass(frozen=True)
class Toolchain:
    cxx: str            # compiler command
    cxx_version: str    # first line of `--version`
    fiber: str          # "asm", "boost" or "ucontext"

    def fiber_flags(self) -> tuple[str, ...]:
        return (f"-DEMU_FIBER_{self.fiber.upper()}",)

    def link_flags(self) -> tuple[str, ...]:
        return ("-lboost_context",) if self.fiber == "boost" else ()

    def default_accesses(self) -> str:
        """"source" where the compiler takes its switches (g++), else "compiled"."""
        return "compiled" if "clang" in self.cxx_version.lower() else "source"

    def access_flags(self, accesses: str, what: str = "accesses") -> tuple[str, ...]:
        """The optimisation flags of device code for `accesses` (ACCESS_FLAGS); a clear error naming `what` (the
        argument or variable that gave it) where they do not apply."""
        if accesses not in ACCESS_FLAGS:
            raise ValueError(f"{what}: expected one of {', '.join(ACCESS_FLAGS)}, got {accesses!r}")
        if accesses != "compiled" and self.default_accesses() == "compiled":
            raise ValueError(f"{what}: {accesses!r} turns off g++'s optimisation passes by name, and {self.cxx} is "
                             f"{self.cxx_version!r}; build with g++ (cxx=, $CXX) or keep accesses='compiled'")
        return ACCESS_FLAGS[accesses]

    def device_flags(self) -> tuple[str, ...]:
        """Flags for device code that not every compiler accepts."""
        return STACK_PROBE_FLAGS if accepts_flags(self.cxx, STACK_PROBE_FLAGS) else ()


def cxx_candidates() -> list[str]:
    """The compiler commands tried in order when none is given: $CXX, then g++ / c++ / clang++."""
    return [c for c in (os.environ.get("CXX"), "g++", "c++", "clang++") if c]


def find_cxx(explicit: "str | None" = None) -> str:
    """The host C++ compiler: the argument, else $CXX, else g++ / c++ / clang++ on PATH."""
    candidates = [explicit] if explicit else cxx_candidates()
    for c in candidates:
        if c and shutil.which(c):
            return shutil.which(c)  # type: ignore[return-value]
    if explicit:
        raise ValueError(f"cxx: compiler {explicit!r} not found on PATH")
    raise FileNotFoundError("emu: no host C++ compiler found (set CXX, or install g++)")


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str) -> str:
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


@functools.lru_cache(maxsize=None)
def boost_context_usable(cxx: str) -> bool:
    """True when a program using Boost.Context's fcontext compiles, links and runs here."""
    with scratch_folder("emu") as tmp:
        src, exe = tmp / "probe.cpp", tmp / "probe"
        src.write_text(_BOOST_PROBE)
        try:
            r = subprocess.run([cxx, "-std=c++17", str(src), "-o", str(exe), "-lboost_context"],
                               capture_output=True, timeout=120, env=tool_env(tmp))
            return r.returncode == 0 and subprocess.run([str(exe)], timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


@functools.lru_cache(maxsize=None)
def accepts_flags(cxx: str, flags: tuple[str, ...]) -> bool:
    """True when the compiler compiles a trivial unit with `flags` and no warning (clang only warns about an
    option its target lacks)."""
    with scratch_folder("emu") as tmp:
        src = tmp / "probe.cpp"
        src.write_text("int probe(int x) { volatile char a[65536]; a[x] = 1; return a[0]; }\n")
        try:
            r = subprocess.run([cxx, *flags, "-Werror", "-c", str(src), "-o", str(tmp / "probe.o")],
                               capture_output=True, timeout=120, env=tool_env(tmp))
        except (OSError, subprocess.TimeoutExpired):
            return False
        return r.returncode == 0


@functools.lru_cache(maxsize=None)
def asm_switch_usable(cxx: str) -> bool:
    """True when the compiler targets x86-64, the architecture the runtime's own context switch is written for."""
    try:
        target = subprocess.run([cxx, "-dumpmachine"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return False
    return target.startswith(("x86_64-", "amd64-"))


def fiber_usable(fiber: str, cxx: str) -> bool:
    if fiber == "asm":
        return asm_switch_usable(cxx)
    if fiber == "boost":
        return boost_context_usable(cxx)
    return fiber == "ucontext"


_WHY_NOT = {"asm": "the built-in context switch is written for x86-64 only and this compiler targets another "
                   "architecture",
            "boost": "Boost.Context (libboost-context-dev) is not usable here"}


def resolve_fiber(choice: "str | None" = None, cxx: "str | None" = None) -> str:
    """'asm', 'boost' or 'ucontext' for an option value (None: $QCONFORM_EMU_FIBER, default auto)."""
    choice = (choice or os.environ.get(FIBER_ENV) or "auto").lower()
    if choice not in FIBERS:
        raise ValueError(f"fiber: expected one of {', '.join(FIBERS)}, got {choice!r} (option or ${FIBER_ENV})")
    exe = find_cxx(cxx)
    if choice != "auto":
        if not fiber_usable(choice, exe):
            raise ValueError(f"fiber: {choice!r} requested but {_WHY_NOT[choice]}")
        return choice
    return next(f for f in AUTO_ORDER if fiber_usable(f, exe))


def toolchain(fiber: "str | None" = None, cxx: "str | None" = None) -> Toolchain:
    exe = find_cxx(cxx)
    return Toolchain(exe, compiler_version(exe), resolve_fiber(fiber, exe))


@functools.lru_cache(maxsize=None)
def runtime_files() -> list[Path]:
    """The files a compiled module depends on besides its source: every file of emu's folder that is not Python (the
    runtime, the headers a kernel includes: cuda/, cub/, cooperative_groups/...), the rewriter and this file."""
    own = [p for p in sorted(RUNTIME_DIR.rglob("*")) if p.is_file() and p.suffix not in (".py", ".pyc")]
    return own + [RUNTIME_DIR / "rewrite.py", RUNTIME_DIR / "toolchain.py"]


def runtime_sha256() -> str:
    """Hash of runtime_files(): part of every compiled module's cache key."""
    h = hashlib.sha256()
    for p in runtime_files():
        h.update(str(p.relative_to(RUNTIME_DIR)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()


# The runtime's own helpers (namespace emu) are not CUDA's device API.
_EMU_NAMESPACE = re.compile(r"^namespace emu \{\n.*?^\}  // namespace emu", re.S | re.M)


def _header_api(name: str) -> str:
    """A runtime header's text at file scope: its `namespace emu` blocks left out."""
    return _EMU_NAMESPACE.sub("", (RUNTIME_DIR / name).read_text())


@functools.lru_cache(maxsize=None)
def _device_api() -> str:
    # The FP6/FP4 conversions are written once in a macro (`__nv_cvt_double_to_##NAME`): spelled out for both
    # families, one declaration per line as at file scope.
    mx = _header_api("emu_float_mx.hpp")
    spelled = "".join(re.sub(r"^[ \t]+", "", _pasted(mx, "NAME", family).replace("##", ""), flags=re.M)
                      for family in ("fp6", "fp4"))
    return _header_api("emu_device.hpp") + _header_api("emu_rounding.hpp") + _header_api("emu_float8.hpp") + spelled


# C's <math.h> functions (C99 7.12) in double and float, which CUDA's math API has in device code and emu's
# device header brings in with <cmath>
_C_MATH = frozenset(base + suffix for suffix in ("", "f") for base in (
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "copysign", "cos", "cosh", "erf",
    "erfc", "exp", "exp2", "expm1", "fabs", "fdim", "floor", "fma", "fmax", "fmin", "fmod", "frexp", "hypot",
    "ilogb", "ldexp", "lgamma", "llrint", "llround", "log", "log10", "log1p", "log2", "logb", "lrint", "lround",
    "modf", "nan", "nearbyint", "nextafter", "pow", "remainder", "remquo", "rint", "round", "scalbln", "scalbn",
    "sin", "sinh", "sqrt", "tan", "tanh", "tgamma", "trunc"))


# What the 16-bit float header's token pasting (`__float2##NAME`) puts for its macro parameters: per format, its
# scalar and pair names together; the integer abbreviations; the compared relations.
_FLOAT16_FORMATS = ({"NAME": "half", "NAME2": "half2"}, {"NAME": "bfloat16", "NAME2": "bfloat162"})
_FLOAT16_PASTES = {"ABBR": ("int", "uint", "short", "ushort", "ll", "ull"),
                   "OP": tuple(f"__h{rel}{u}" for rel in ("eq", "ne", "lt", "le", "gt", "ge") for u in ("", "u"))}


def _pasted(text: str, token: str, value: str) -> str:
    return re.sub(rf"(?<![\w#]){token}(?![\w#])|(?<=##){token}\b|\b{token}(?=##)", value, text)


@functools.lru_cache(maxsize=None)
def _float16_api() -> frozenset[str]:
    """The functions emu_float16.hpp defines, their token-pasted names spelled out for both formats."""
    names = set()
    for raw in re.findall(r"\binline\s+[\w:<>, ]+?\s([\w#]+)\s*\(", _header_api("emu_float16.hpp")):
        spellings = [raw]
        if "NAME" in raw:
            spellings = [_pasted(_pasted(raw, "NAME2", f["NAME2"]), "NAME", f["NAME"]) for f in _FLOAT16_FORMATS]
        for token, values in _FLOAT16_PASTES.items():
            if re.search(rf"(?<![\w#]){token}(?![\w#])|##{token}\b|\b{token}##", raw):
                spellings = [_pasted(sp, token, v) for sp in spellings for v in values]
        names.update(sp.replace("##", "") for sp in spellings)
    return frozenset(n for n in names if re.fullmatch(r"\w+", n))


def device_api_has(name: str) -> bool:
    """Whether the CUDA device API that emu provides (emu_device.hpp and the headers it includes for 16-, 8-, 6- and
    4-bit floats and rounded intrinsics, and C's math functions through its <cmath>) has a function or
    function-like macro `name` at file scope (`__saturatef`, `fabs`): a source may declare one
    again, and then must not define it. Members of a class (cooperative groups' `any`) are not such functions."""
    if name in _C_MATH or name in _float16_api():
        return True
    n = re.escape(name)
    # a declaration names it unqualified; `emu::to_mx(` on a continuation line is a call
    return re.search(rf"^(?:[A-Za-z_][^;{{}}()\n]*(?<!::)\b{n}|#define {n})\s*\(", _device_api(), re.M) is not None


def asan_runtime(cxx: str) -> "str | None":
    """Path of the AddressSanitizer runtime (preloaded into the worker for --sanitize builds)."""
    try:
        out = subprocess.run([cxx, "-print-file-name=libasan.so"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out if out and os.path.isabs(out) and os.path.exists(out) else None
