"""`qconform doctor`: what this machine offers qconform -- host compilers, the fiber library the CPU backend
uses (Boost.Context or ucontext), AddressSanitizer, CUDA toolkits and whether a GPU backend is usable."""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path


def compilers() -> list[dict]:
    """Every distinct host compiler among the emu backend's candidates ($CXX, g++, c++, clang++)."""
    from harness.backends.emu import toolchain as tc
    found, seen = [], set()
    for name in tc.cxx_candidates():
        path = shutil.which(name)
        if path and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            found.append({"name": name, "path": path, "version": tc.compiler_version(path)})
    return found


def _nvcc_release(nvcc: Path) -> "str | None":
    from harness.toolchain.finder import ToolchainNotFound, nvcc_version
    try:
        text = nvcc_version(str(nvcc))
    except (ToolchainNotFound, OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"release [\d.]+, V[\d.]+", text)
    return m.group(0) if m else text


def cuda_toolkits() -> list[dict]:
    """The nvcc each of harness.toolchain.finder's sources offers (env, wheel, cuda_home, system, path), one entry per
    distinct nvcc; a SASS reader counts for a toolkit when it sits beside its nvcc or comes from the same source."""
    from harness.toolchain.finder import SOURCES, ToolchainNotFound, locate
    env = os.environ
    out, seen = [], set()
    for source in SOURCES:
        try:
            nvcc, _ = locate("nvcc", (source,), env)
        except ToolchainNotFound:   # a broken QCONFORM_NVCC: compile_toolchain reports it
            continue
        if nvcc is None or os.path.realpath(nvcc) in seen:
            continue
        seen.add(os.path.realpath(nvcc))
        try:
            cuobjdump, _ = locate("cuobjdump", (source,), env)
        except ToolchainNotFound:
            cuobjdump = None
        bindir = nvcc.parent
        out.append({"nvcc": str(nvcc), "source": source, "version": _nvcc_release(nvcc),
                    "ptxas": (bindir / "ptxas").is_file(),
                    "cuobjdump": (bindir / "cuobjdump").is_file() or cuobjdump is not None})
    return out


def emu_status() -> dict:
    from harness.backends.emu import toolchain as tc
    try:
        cxx = tc.find_cxx()
    except FileNotFoundError as exc:
        return {"usable": False, "reason": str(exc)}
    boost = tc.boost_context_usable(cxx)
    forced = os.environ.get(tc.FIBER_ENV)
    try:
        fiber = tc.resolve_fiber(None, cxx)
    except ValueError as exc:
        return {"usable": False, "reason": str(exc), "boost_context": boost}
    from harness.backends.emu import gate, sandbox, toolkit_headers
    why_not = sandbox.unavailable_reason()
    curand = toolkit_headers.toolkit_include()
    return {"usable": True, "cxx": cxx, "fiber": fiber, "boost_context": boost, "asm_switch": tc.asm_switch_usable(cxx),
            "fiber_env": f"{tc.FIBER_ENV}={forced}" if forced else None,
            "asan_runtime": tc.asan_runtime(cxx),
            "accesses": tc.toolchain(fiber, cxx).default_accesses(),
            "sandbox": ("off: $QCONFORM_EMU_SANDBOX=off (trusted sources only)" if sandbox.disabled_by_user() else
                        f"unavailable: {why_not}; the emu backend refuses to run kernels" if why_not else
                        f"seccomp-bpf + rlimits ({sandbox.Limits().describe()} by default)"
                        + (f" + Landlock ABI {sandbox.landlock_abi()} (reads: the system's, Python's and the "
                           "kernel cache's folders; no writes)" if sandbox.landlock_abi() else
                           " (no Landlock in this kernel)")),
            "device_gate": gate.describe(),
            "curand": (f"the toolkit's headers in {curand}" if curand else
                       "not found (install the toolchain extra: its nvidia-curand wheel); sources that include "
                       "curand_kernel.h are UnsupportedConstruct"),
            "cublas": _cublas()}


def _cublas() -> str:
    """Which cuBLAS header a kernel file's `#include <cublas_v2.h>` finds (its host code's, never its device code's)."""
    from harness.backends.emu import toolkit_headers
    where = toolkit_headers.toolkit_header("cublas_v2.h")
    ours = "qconform's declarations of its host API (harness/toolchain/host_library_headers) for emu"
    return (f"{where} for nvcc; {ours}" if where else
            f"{ours} and nvcc (the toolkit has no cuBLAS): files whose host code includes cublas_v2.h build")


def gpu_status() -> dict:
    try:
        from harness.backends import gpu_unavailable_reason
        reason = gpu_unavailable_reason()
    except ImportError as exc:
        reason = f"GPU backend not available ({exc})"
    return {"usable": reason is None, "reason": reason, "nvidia_smi": shutil.which("nvidia-smi")}


def compile_toolchain() -> dict:
    """The toolchain the compile, resource and SASS checks use (harness.toolchain.finder's search order)."""
    from harness.toolchain.finder import toolchain_or_reason
    tc, why = toolchain_or_reason()
    if tc is None:
        return {"found": False, "reason": why}
    return {"found": True, **tc.describe()}


def collect() -> dict:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "compilers": compilers(),
            "emu": emu_status(), "cuda_toolkits": cuda_toolkits(), "compile_toolchain": compile_toolchain(),
            "compiler_confinement": compiler_confinement(), "gpu": gpu_status()}


def compiler_confinement() -> str:
    """What a compiler run on a kernel source may read and write (harness.confine)."""
    from harness import confine
    return confine.describe()


def render(info: dict) -> str:
    lines = [f"python {info['python']} on {info['platform']}", "host C++ compilers:"]
    lines += [f"  {c['path']}: {c['version']}" for c in info["compilers"]] or ["  none found (set CXX or install g++)"]
    emu = info["emu"]
    if emu.get("usable"):
        why = ("forced by " + emu["fiber_env"]) if emu.get("fiber_env") else {
            "asm": "built-in x86-64 context switch, no package needed",
            "boost": "Boost.Context found; no built-in switch for this architecture",
            "ucontext": "no built-in switch for this architecture and Boost.Context not found: slower fallback, "
                        "a system call per switch"}[emu["fiber"]]
        label = {"asm": "built-in (asm)", "boost": "Boost.Context", "ucontext": "ucontext"}[emu["fiber"]]
        lines.append(f"emu backend: fibers = {label} ({why}); Boost.Context "
                     f"{'installed' if emu['boost_context'] else 'not installed'}")
        lines.append(f"  AddressSanitizer runtime (--sanitize): {emu['asan_runtime'] or 'not found'}")
        lines.append("  device code built for: " + (
            "every access of the source (the passes that drop or move accesses off; --accesses compiled: the "
            "optimised build)" if emu["accesses"] == "source" else
            "the optimised build's accesses (this compiler's passes cannot be named; a load nothing uses is dropped)"))
        lines.append(f"  worker sandbox: {emu['sandbox']}")
        lines.append(f"  device-code gate: {emu['device_gate']}")
        lines.append(f"  cuRAND device API (curand_kernel.h): {emu['curand']}")
        lines.append(f"  cuBLAS host API (cublas_v2.h): {emu['cublas']}")
    else:
        lines.append(f"emu backend: not usable: {emu.get('reason')}")
    lines.append("CUDA toolkits:")
    lines += [f"  {t['nvcc']}: {t['version']} (ptxas {'yes' if t['ptxas'] else 'no'}, "
              f"cuobjdump {'yes' if t['cuobjdump'] else 'no'})" for t in info["cuda_toolkits"]] or ["  none found"]
    tc = info["compile_toolchain"]
    if tc["found"]:
        lines.append(f"compile and SASS checks use: {tc['nvcc']} ({tc['version']}; from {tc['origin']['nvcc']}; "
                     f"SASS reader: {tc['cuobjdump'] or tc['nvdisasm'] or 'none'})")
    else:
        lines.append(f"compile and SASS checks: no toolchain ({tc['reason']})")
    lines.append(f"compilers of kernel sources: {info['compiler_confinement']}")
    gpu = info["gpu"]
    lines.append("gpu backend: " + ("usable" if gpu["usable"] else f"not usable: {gpu['reason']}"))
    return "\n".join(lines)


def register(sub) -> None:
    p = sub.add_parser("doctor", help="report compilers, fiber library, CUDA toolkits and GPU availability")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    info = collect()
    print(json.dumps(info, indent=2) if args.json else render(info))
    return 0 if info["emu"].get("usable") or info["gpu"]["usable"] else 1
