"""Compile CUDA source into an emu shared object, cached by content hash (harness.cache.cache_entry)."""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from harness import confine, lifetimes
from harness.backends.base import BuildError, UnsupportedConstruct, build_error, check_flags
from harness.backends.device_code import copies_first, device_headers, write_header_copies
from harness.cache import cache_dir, cache_entry, content_key, scratch_folder, tool_env
from harness.toolchain import host_libraries
from cudasrc.host_code import program_of
from cudasrc.preprocess import defines_of
from cudasrc.signatures import KernelSignature

from . import gate, toolkit_headers
from . import toolchain as tc
from .rewrite import rewrite, rewrite_header
from .sites import HEADER_COPIES_FOLDER, MODULE_UNIT

_UNDECLARED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: error: ['\u2018](?P<name>[\w:]+)['\u2019] "
                         r"(?:was not declared in this scope|has not been declared|does not name a type|"
                         r"is not a member of)", re.M)
# What the source takes from CUB that emu's CUB (cub/cub.cuh) does not have: a class or function of the namespace, or a
# member of one of its classes.
_CUB_MISSING = re.compile(r"'(?P<name>\w+)' in namespace 'cub' does not name|'(?P<member>\w+)' is not a member of "
                          r"'cub'|\{aka '(?:class|struct) (?P<cls>cub::[\w:]+)[^']*'\} has no member named '(?P<of>\w+)'")
_MISSING_HEADER = re.compile(r"fatal error: (?P<header>[^:\n]+): No such file or directory")


# What the compiled module's headers are: copies of the source's own headers with their host functions dropped.
HEADER_COPIES = "host-dropped-headers-3"   # v3: in HEADER_COPIES_FOLDER, __shared__ and inline PTX rewritten


@dataclass(frozen=True)
class Built:
    path: Path                       # the shared object
    kernels: tuple[KernelSignature, ...]
    grid_sync: bool = False          # a grid-wide barrier: every schedule runs every block (no sampling)


def _compile(cmd: Sequence[str], work: Path, cwd: "Path | None" = None) -> subprocess.CompletedProcess:
    """One compiler run, confined (harness.confine: it reads the system's, the toolchain's and the source's
    folders and writes only in the scratch folder `work`, where its temporaries go too: tool_env); the compiler
    dies with the thread that started it (a judge process killed mid-build leaves none behind, nor its
    temporaries outside the cache). LC_ALL=C: plain ASCII quotes in compiler messages."""
    toolkit = toolkit_headers.toolkit_include()          # cuRAND's headers, linked from a folder of the cache
    with confine.confined(cmd, writable=[work], cwd=cwd, reads=[toolkit] if toolkit else [],
                          then=lifetimes.dies_with_caller()) as preexec:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=preexec,
                              env=tool_env(work, dict(os.environ, LC_ALL="C")), cwd=cwd)


def runtime_object(toolchain: tc.Toolchain, sanitize: bool) -> Path:
    """emu_runtime.cpp compiled once per toolchain, fiber library and sanitizer setting (cached)."""
    flags = tc.BASE_FLAGS + tc.OPT_FLAGS + toolchain.fiber_flags() + (tc.SANITIZE_FLAGS if sanitize else ())
    key = content_key(*flags, toolchain.cxx, toolchain.cxx_version, tc.runtime_sha256())[:40]

    def make(tmp: Path) -> None:
        with scratch_folder("emu") as work:
            cmd = [toolchain.cxx, *flags, f"-I{tc.RUNTIME_DIR}", "-c", str(tc.RUNTIME_DIR / "emu_runtime.cpp"),
                   "-o", str(work / "runtime.o")]
            r = _compile(cmd, work)
            if r.returncode != 0:
                raise BuildError(f"emu: the runtime did not compile with {toolchain.cxx}:\n{r.stderr[-4000:]}")
            os.replace(work / "runtime.o", tmp)

    return cache_entry(cache_dir("emu") / f"runtime-{key}.o", make)[0]


def build(source: str, flags: Sequence[str] = (), *, toolchain: tc.Toolchain, sanitize: bool = False,
          race: bool = False, name: str = "kernel.cu", accesses: "str | None" = None) -> Built:
    """Rewrite and compile `source`; reuse the cached object when source, flags and runtime are unchanged.
    race: instrument every access of device code for the race detector (not with `sanitize`).
    accesses: "compiled" (the optimised build's) or "source" (every access the source makes: tc.ACCESS_FLAGS); None:
    the toolchain's default."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("source: expected non-empty CUDA C source text")
    flags = check_flags(flags)
    headers = confine.own_headers(source, flags)      # the module depends on them as on the source
    program = program_of([source, *headers.values()])
    rw = rewrite(source, name, defines_of(flags), program, {h.name: t for h, t in headers.items()})
    if race and sanitize:
        raise ValueError("race: the race detector's instrumentation cannot be combined with sanitize (AddressSanitizer)")
    host_flags = tuple(f for f in flags if f not in gate.NVCC_ONLY_FLAGS)     # those are the device compile's
    cmd_flags = (tc.BASE_FLAGS + tc.SITE_FLAGS + toolchain.access_flags(accesses or toolchain.default_accesses()) +
                 toolchain.fiber_flags() + toolchain.device_flags() + toolkit_headers.include_flags() +
                 host_libraries.host_compiler_flags() + tc.ALIGN_FLAGS +
                 (tc.SANITIZE_FLAGS if sanitize else tc.LINE_FLAGS) + (tc.RACE_FLAGS if race else ()) + host_flags)
    texts = device_headers(headers, program)
    slots = _SharedSlots(len(rw.shared_vars), dict(program.memory_spaces), rw.member_templates)
    host_copies = {path: slots(path, text) for path, text in sorted(texts.items())}
    # the gate is part of the key: a module built without nvcc's check is not reused once nvcc is found; the
    # headers' copies as rewritten are too: a header's inline PTX translated anew is another module
    key = content_key(rw.source, source, *cmd_flags, *gate.device_compile_flags(flags),
                      *confine.header_digests(headers), *host_copies.values(), *toolchain.link_flags(), toolchain.cxx,
                      toolchain.cxx_version, tc.runtime_sha256(), gate.cache_part(), MODULE_UNIT, HEADER_COPIES,
                      host_libraries.digest())[:40]

    def make(tmp_so: Path) -> None:
        runtime = runtime_object(toolchain, sanitize)
        with scratch_folder("emu") as work:
            # nvcc checks the device code this build compiles, host functions dropped from the source and its
            # headers alike: a program's host code (a torch binding, a cuBLAS call) is not the kernel's to answer for.
            # Its copies are CUDA still; the host compiler's have their __shared__ declarations rewritten too.
            device_copies, copies = work / "device-headers", work / HEADER_COPIES_FOLDER
            write_header_copies(texts, device_copies)
            device_check = gate.start_device_compile(rw.device_code, name, work,
                                                     copies_first(flags, flags, headers, device_copies))
            write_header_copies(host_copies, copies)
            cpp = work / MODULE_UNIT
            cpp.write_text(rw.source)
            obj = work / "module.o"
            # Compile and link apart: the race build's -fsanitize=thread must not link libtsan (the runtime
            # defines the entry points), and an entry point it lacks must fail here, not at load time.
            # -save-temps keeps the assembly listing (module.s), read by the gate's inline-asm check.
            compile_flags = copies_first(cmd_flags, flags, headers, copies)
            compile_cmd = [toolchain.cxx, *compile_flags, f"-I{tc.RUNTIME_DIR}", "-include", "emu_device.hpp", "-c",
                           "-save-temps=obj", str(cpp), "-o", str(obj)]
            link_cmd = [toolchain.cxx, *tc.BASE_FLAGS, *(tc.SANITIZE_FLAGS if sanitize else ()), *host_flags, "-shared",
                        *(("-Wl,--no-undefined",) if race else ()), str(obj), str(runtime),
                        "-o", str(work / "module.so"), *toolchain.link_flags()]
            try:
                r = _compile(compile_cmd, work, cwd=work)
            finally:     # nvcc's message first: a GPU build's verdict
                gate.finish_device_compile(device_check, name, copies=str(device_copies))
            if r.returncode != 0:      # the headers named by their own paths, not their copies'
                _raise_build_error(r.stderr.replace(str(copies), ""), name, nvcc_accepted=device_check is not None)
            gate.check_object(obj, (work / "module.s").read_text(errors="replace"), name, sanitize or race)
            r = _compile(link_cmd, work)
            if r.returncode != 0:
                _raise_build_error(r.stderr, name)
            os.replace(work / "module.so", tmp_so)      # the compilers write in the scratch folder alone

    out, _ = cache_entry(cache_dir("emu") / f"{key}.so", make)
    return Built(out, tuple(rw.kernels), rw.grid_sync)


class _SharedSlots:
    """The host compiler's copies of the headers, rewritten as the source is (rewrite.rewrite_header): their
    `__shared__` declarations take the block's slots after the source's, numbered on from one header to the next,
    and reports name them by the header's file; their inline PTX is translated."""

    def __init__(self, first: int, memory_spaces: "dict[str, str]", member_templates: frozenset):
        self.next = first
        self.memory_spaces = memory_spaces       # the program's memory-space macros (Program.memory_spaces)
        self.member_templates = member_templates     # the program's member templates (Rewritten.member_templates)

    def __call__(self, path: Path, text: str) -> str:
        text, self.next = rewrite_header(text, self.next, path.name, self.memory_spaces, self.member_templates)
        return text


def _raise_build_error(stderr: str, name: str, nvcc_accepted: bool = False) -> None:
    """The error of emu's failed host compile or link. `nvcc_accepted`: nvcc's device-side check passed the same
    device code, so what g++ refuses is emu's limit (UnsupportedConstruct), not the source's fault."""
    safe = re.sub(r'[^A-Za-z0-9_.-]', "_", name)
    missing = re.search(r"undefined reference to [`'](__tsan_\w+)", stderr)
    if missing:     # an instrumentation entry point the race detector does not implement (g++ __atomic builtins)
        raise UnsupportedConstruct(None, f"the race detector's build needs {missing.group(1)}, which the emu runtime "
                                         "does not provide (g++ __atomic builtins in device code); run with "
                                         "race_check=False (QCONFORM_EMU_RACE_CHECK=0)")
    own = re.search(r'#error "qconform-emu: ([^"]+)"', stderr)
    if own:              # one of emu's headers says what this build lacks
        raise UnsupportedConstruct(None, own.group(1))
    for m in _MISSING_HEADER.finditer(stderr):
        where = toolkit_headers.toolkit_header(m.group("header"))
        if where is not None:     # the kernel is right on a CUDA build; emu only runs against its own copies
            raise UnsupportedConstruct(None, f"#include <{m.group('header')}> ({where}): emu does not provide this "
                                             "header of the CUDA toolkit; judge the kernel on a GPU (--backend gpu)")
    cub = _CUB_MISSING.search(stderr)
    if cub:
        what = f"cub::{cub['name'] or cub['member']}" if cub["cls"] is None else f"{cub['cls']}::{cub['of']}"
        raise UnsupportedConstruct(None, f"{what} is not in emu's CUB, which has BlockReduce, BlockScan, BlockLoad, "
                                         "BlockStore, BlockExchange, BlockRadixSort, BlockAdjacentDifference, WarpReduce "
                                         "and their operators (harness/backends/emu/cub/cub.cuh); judge the kernel "
                                         "on a GPU (--backend gpu)")
    for m in _UNDECLARED.finditer(stderr):
        if os.path.basename(m.group("file")) == safe:
            raise UnsupportedConstruct(None, f"'{m.group('name')}' (line {m.group('line')}) is not provided by the "
                                             "emu runtime")
    errors = [ln for ln in stderr.splitlines() if ": error:" in ln or "fatal error:" in ln]
    excerpt = "\n".join(errors[:20]) if errors else stderr[-4000:]
    error = build_error(f"emu: the host compiler rejected {name}:", excerpt, stderr)
    if nvcc_accepted and type(error) is BuildError:
        raise UnsupportedConstruct(None, f"nvcc's device-side check accepts {name}, but emu's host compile of its "
                                         f"device code rejected it (a construct emu does not provide):\n{excerpt}")
    raise error
