"""`qconform doctor`: what this machine offers qconform -- host compilers, the fiber library the CPU backend
uses (Boost.Context or ucontext), AddressSanitizer, CUDA toolkits and whether a GPU backend is usable."""
from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys


def _version(cmd: list[str], pattern: str = r".+") -> "str | None":
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    m = re.search(pattern, text)
    return m.group(0).strip() if m else (text.splitlines()[0] if text else None)


def compilers() -> list[dict]:
    found, seen = [], set()
    for name in [os.environ.get("CXX"), "g++", "c++", "clang++"]:
        path = shutil.which(name) if name else None
        if path and os.path.realpath(path) not in seen:
            seen.add(os.path.realpath(path))
            found.append({"name": name, "path": path, "version": _version([path, "--version"])})
    return found


def cuda_toolkits() -> list[dict]:
    """nvcc on PATH, under CUDA_HOME/CUDA_PATH, /usr/local/cuda*, and from the nvidia-cuda-nvcc wheel."""
    candidates = [shutil.which("nvcc")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    candidates += sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))
    try:
        import nvidia.cuda_nvcc as wheel   # the `toolchain` extra
        candidates += [os.path.join(p, "bin", "nvcc") for p in getattr(wheel, "__path__", [])]
    except ImportError:
        pass
    out, seen = [], set()
    for c in candidates:
        if c and os.path.isfile(c) and os.path.realpath(c) not in seen:
            seen.add(os.path.realpath(c))
            bindir = os.path.dirname(c)
            out.append({"nvcc": c, "version": _version([c, "--version"], r"release [\d.]+, V[\d.]+"),
                        "ptxas": os.path.isfile(os.path.join(bindir, "ptxas")),
                        "cuobjdump": bool(shutil.which("cuobjdump") or os.path.isfile(os.path.join(bindir, "cuobjdump")))})
    return out


def emu_status() -> dict:
    from harness.emu import toolchain as tc
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
    return {"usable": True, "cxx": cxx, "fiber": fiber, "boost_context": boost,
            "fiber_env": f"{tc.FIBER_ENV}={forced}" if forced else None,
            "asan_runtime": tc.asan_runtime(cxx)}


def gpu_status() -> dict:
    try:
        from harness.backends import gpu_unavailable_reason
        reason = gpu_unavailable_reason()
    except ImportError as exc:
        reason = f"GPU backend not available ({exc})"
    return {"usable": reason is None, "reason": reason, "nvidia_smi": shutil.which("nvidia-smi")}


def compile_toolchain() -> dict:
    """The toolchain the compile, resource and SASS checks use (harness.toolchain's search order)."""
    from harness.toolchain import toolchain_or_reason
    tc, why = toolchain_or_reason()
    if tc is None:
        return {"found": False, "reason": why}
    return {"found": True, **tc.describe()}


def collect() -> dict:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "compilers": compilers(),
            "emu": emu_status(), "cuda_toolkits": cuda_toolkits(), "compile_toolchain": compile_toolchain(),
            "gpu": gpu_status()}


def render(info: dict) -> str:
    lines = [f"python {info['python']} on {info['platform']}", "host C++ compilers:"]
    lines += [f"  {c['path']}: {c['version']}" for c in info["compilers"]] or ["  none found (set CXX or install g++)"]
    emu = info["emu"]
    if emu.get("usable"):
        why = ("forced by " + emu["fiber_env"]) if emu.get("fiber_env") else (
            "Boost.Context found" if emu["fiber"] == "boost" else "Boost.Context not found: slower fallback")
        lines.append(f"emu backend: fibers = {'Boost.Context' if emu['fiber'] == 'boost' else 'ucontext'} ({why})")
        lines.append(f"  AddressSanitizer runtime (--sanitize): {emu['asan_runtime'] or 'not found'}")
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
