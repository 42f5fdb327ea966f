"""Find the CUDA tools qconform uses without a GPU: nvcc (with its ptxas), cuobjdump and nvdisasm.

Where to look, in order (each source can be switched off, see ``QCONFORM_TOOLCHAIN_SOURCES``):
  env        QCONFORM_NVCC / QCONFORM_CUOBJDUMP / QCONFORM_NVDISASM: explicit paths to the tools;
  wheel      the NVIDIA wheels of qconform's ``toolchain`` extra installed in this Python environment
             (nvidia-cuda-nvcc, nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), located through their
             installed file lists, so the wheels' folder layout is not guessed;
  cuda_home  $CUDA_HOME/bin (then $CUDA_PATH/bin);
  system     /usr/local/cuda/bin;
  path       $PATH.
nvcc calls the ptxas that sits next to it, so ptxas is always taken from nvcc's folder. The SASS readers are
looked up on their own (the system toolkit may lack them while the wheels have them).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Mapping, Optional, Sequence

SOURCES = ("env", "wheel", "cuda_home", "system", "path")
SYSTEM_DIRS = ("/usr/local/cuda/bin",)

# tool -> (override env var, wheel distributions that ship it)
_TOOLS = {
    "nvcc": ("QCONFORM_NVCC", ("nvidia-cuda-nvcc", "nvidia-cuda-nvcc-cu12")),
    "cuobjdump": ("QCONFORM_CUOBJDUMP", ("nvidia-cuda-cuobjdump", "nvidia-cuda-cuobjdump-cu12")),
    "nvdisasm": ("QCONFORM_NVDISASM", ("nvidia-cuda-nvdisasm", "nvidia-cuda-nvdisasm-cu12")),
}


class ToolchainNotFound(RuntimeError):
    """No usable nvcc here; the message says where qconform looked and how to get one."""


@dataclass(frozen=True)
class Toolchain:
    nvcc: Path
    ptxas: Path
    cuobjdump: Optional[Path]
    nvdisasm: Optional[Path]
    origin: Mapping[str, str] = field(default_factory=dict)   # tool -> source it was found in

    @property
    def version(self) -> str:
        """`nvcc --version`'s release line, e.g. 'Cuda compilation tools, release 13.0, V13.0.88'."""
        return nvcc_version(str(self.nvcc))

    @property
    def can_read_sass(self) -> bool:
        return self.cuobjdump is not None or self.nvdisasm is not None

    def describe(self) -> dict:
        return {"nvcc": str(self.nvcc), "ptxas": str(self.ptxas), "cuobjdump": str(self.cuobjdump or ""),
                "nvdisasm": str(self.nvdisasm or ""), "version": self.version, "origin": dict(self.origin)}


@functools.lru_cache(maxsize=16)
def nvcc_version(nvcc: str) -> str:
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise ToolchainNotFound(f"{nvcc} --version failed: {out.stderr.strip() or out.stdout.strip()}")
    lines = [ln for ln in out.stdout.splitlines() if "release" in ln or ln.startswith("Build")]
    return " | ".join(lines) or out.stdout.strip()


def _executable(path: "str | Path | None") -> Optional[Path]:
    if not path:
        return None
    p = Path(path)
    return p if p.is_file() and os.access(p, os.X_OK) else None


def _from_wheel(tool: str, dists: Sequence[str]) -> Optional[Path]:
    for dist_name in dists:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        for f in dist.files or ():
            if f.name == tool and f.parent.name == "bin":
                found = _executable(dist.locate_file(f))
                if found:
                    return found.resolve()
    return None


def _candidates(tool: str, source: str, env: Mapping[str, str]) -> list[Path]:
    var, dists = _TOOLS[tool]
    if source == "env":
        return [Path(env[var])] if env.get(var) else []
    if source == "wheel":
        found = _from_wheel(tool, dists)
        return [found] if found else []
    if source == "cuda_home":
        return [Path(env[v]) / "bin" / tool for v in ("CUDA_HOME", "CUDA_PATH") if env.get(v)]
    if source == "system":
        return [Path(d) / tool for d in SYSTEM_DIRS]
    if source == "path":
        hit = shutil.which(tool, path=env.get("PATH", ""))
        return [Path(hit)] if hit else []
    raise ValueError(f"source: unknown toolchain source {source!r}; expected one of {', '.join(SOURCES)}")


def parse_sources(text: Optional[str]) -> tuple[str, ...]:
    if text is None or not text.strip():
        return SOURCES
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in items if s not in SOURCES]
    if bad:
        raise ValueError(f"QCONFORM_TOOLCHAIN_SOURCES: unknown source(s) {', '.join(bad)}; "
                         f"expected a comma-separated subset of {', '.join(SOURCES)}")
    return items


def locate(tool: str, sources: Sequence[str], env: Mapping[str, str]) -> tuple[Optional[Path], str]:
    """(path, source) of the first usable `tool`, or (None, '')."""
    if tool not in _TOOLS:
        raise ValueError(f"tool: unknown tool {tool!r}; expected one of {', '.join(_TOOLS)}")
    var = _TOOLS[tool][0]
    for source in sources:
        for cand in _candidates(tool, source, env):
            found = _executable(cand)
            if found:
                return found, source
            if source == "env":   # an explicit override that does not work is an error, not a fallthrough
                raise ToolchainNotFound(f"{var}={cand} is not an executable file")
    return None, ""


def find_toolchain(env: Optional[Mapping[str, str]] = None, sources: Optional[Sequence[str]] = None) -> Toolchain:
    """The toolchain to use; raise ToolchainNotFound (saying where it looked) when there is no nvcc."""
    env = os.environ if env is None else env
    sources = tuple(sources) if sources is not None else parse_sources(env.get("QCONFORM_TOOLCHAIN_SOURCES"))
    nvcc, nvcc_src = locate("nvcc", sources, env)
    if nvcc is None:
        raise ToolchainNotFound(
            "no nvcc found (looked in: " + ", ".join(sources) + "); install one with "
            "`pip install 'qconform[toolchain]'` or point QCONFORM_NVCC / CUDA_HOME at a CUDA toolkit")
    ptxas = _executable(nvcc.parent / "ptxas")
    if ptxas is None:
        raise ToolchainNotFound(f"{nvcc} has no ptxas beside it ({nvcc.parent / 'ptxas'})")
    cuobjdump, cu_src = locate("cuobjdump", sources, env)
    nvdisasm, nd_src = locate("nvdisasm", sources, env)
    origin = {"nvcc": nvcc_src, "ptxas": nvcc_src, "cuobjdump": cu_src, "nvdisasm": nd_src}
    return Toolchain(nvcc, ptxas, cuobjdump, nvdisasm, origin)


def toolchain_or_reason() -> tuple[Optional[Toolchain], str]:
    """(toolchain, '') or (None, why not): for callers that skip instead of failing."""
    try:
        return find_toolchain(), ""
    except ToolchainNotFound as exc:
        return None, str(exc)


def release(version_text: str) -> Optional[tuple[int, int]]:
    m = re.search(r"release (\d+)\.(\d+)", version_text)
    return (int(m.group(1)), int(m.group(2))) if m else None
