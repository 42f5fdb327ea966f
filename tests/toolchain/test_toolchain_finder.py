"""harness.toolchain.finder: where nvcc/ptxas/cuobjdump/nvdisasm are found, in which order, and that the NVIDIA wheels
of the `toolchain` extra alone (no system CUDA) give a working compiler, headers and SASS reader."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from harness.toolchain import finder as tcm
from harness.toolchain.finder import ToolchainNotFound, find_toolchain

REPO = Path(__file__).resolve().parents[2]


def _fake_tool(folder: Path, name: str, release: str = "99.9") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.0'\n")
    path.chmod(0o755)
    return path


def _wheel_installed() -> bool:
    try:
        metadata.distribution("nvidia-cuda-nvcc")
        return True
    except metadata.PackageNotFoundError:
        return False


def test_path_lookup_finds_nvcc_with_its_ptxas(tmp_path):
    bin_dir = tmp_path / "bin"
    nvcc = _fake_tool(bin_dir, "nvcc")
    _fake_tool(bin_dir, "ptxas")
    tc = find_toolchain(env={"PATH": str(bin_dir)}, sources=("path",))
    assert tc.nvcc == nvcc and tc.ptxas == bin_dir / "ptxas" and tc.origin["nvcc"] == "path"
    assert tc.cuobjdump is None and not tc.can_read_sass
    assert tcm.release(tc.version) == (99, 9)


def test_nvcc_without_ptxas_is_refused(tmp_path):
    _fake_tool(tmp_path / "bin", "nvcc")
    with pytest.raises(ToolchainNotFound, match="no ptxas beside it"):
        find_toolchain(env={"PATH": str(tmp_path / "bin")}, sources=("path",))


def test_order_env_then_cuda_home_then_path(tmp_path):
    env_dir, home, path_dir = tmp_path / "env", tmp_path / "home", tmp_path / "path"
    for d in (env_dir, home / "bin", path_dir):
        _fake_tool(d, "nvcc")
        _fake_tool(d, "ptxas")
    _fake_tool(path_dir, "cuobjdump")
    env = {"QCONFORM_NVCC": str(env_dir / "nvcc"), "CUDA_HOME": str(home), "PATH": str(path_dir)}
    sources = ("env", "cuda_home", "path")
    tc = find_toolchain(env=env, sources=sources)
    assert tc.nvcc == env_dir / "nvcc" and tc.origin["nvcc"] == "env"
    assert tc.cuobjdump == path_dir / "cuobjdump" and tc.origin["cuobjdump"] == "path"   # readers looked up alone
    tc = find_toolchain(env={k: v for k, v in env.items() if k != "QCONFORM_NVCC"}, sources=sources)
    assert tc.nvcc == home / "bin" / "nvcc" and tc.origin["nvcc"] == "cuda_home"


def test_broken_override_is_an_error_not_a_fallthrough(tmp_path):
    with pytest.raises(ToolchainNotFound, match="QCONFORM_NVCC"):
        find_toolchain(env={"QCONFORM_NVCC": str(tmp_path / "missing")}, sources=("env", "system"))


def test_nothing_found_says_where_it_looked_and_how_to_install(tmp_path):
    with pytest.raises(ToolchainNotFound, match=r"looked in: cuda_home, path.*toolchain"):
        find_toolchain(env={"PATH": str(tmp_path)}, sources=("cuda_home", "path"))


def test_sources_from_the_environment_are_validated():
    assert tcm.parse_sources("wheel, path") == ("wheel", "path")
    assert tcm.parse_sources(None) == tcm.SOURCES
    with pytest.raises(ValueError, match="QCONFORM_TOOLCHAIN_SOURCES.*bogus"):
        tcm.parse_sources("wheel,bogus")


@pytest.mark.skipif(not _wheel_installed(), reason="the toolchain extra (nvidia-cuda-nvcc wheel) is not installed")
def test_wheels_alone_compile_and_disassemble(tmp_path):
    """With the system toolkit hidden (no CUDA_HOME, PATH without it, sources limited to wheel+path), the wheels
    give nvcc + ptxas + cuda_runtime.h/cuda_fp16.h + cuobjdump, and a dp4a kernel shows IDP4A and 128-bit loads."""
    script = r"""
import json, sys
from harness.toolchain.finder import find_toolchain
from harness.toolchain import compile as cc
tc = find_toolchain()
code = ('#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n'
        '__global__ void k(const int4* __restrict__ a, const __half* s, float* y) {\n'
        '  int4 v = a[threadIdx.x]; int r = __dp4a(v.x, v.y, 0); r = __dp4a(v.z, v.w, r);\n'
        '  y[threadIdx.x] = r * __half2float(s[0]); }\n')
r = cc.compile_source(code, "sm_90", tc, cache=__import__("pathlib").Path(sys.argv[1]))
props = cc.sass_properties(r.sass(tc)["k"]) if r.ok else {}
print(json.dumps({"tc": tc.describe(), "ok": r.ok, "log": r.log, "props": props}))
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)),
           "QCONFORM_TOOLCHAIN_SOURCES": "wheel,path", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["tc"]["origin"] == {"nvcc": "wheel", "ptxas": "wheel", "cuobjdump": "wheel", "nvdisasm": "wheel"}
    assert all("/usr/local/cuda" not in data["tc"][t] for t in ("nvcc", "ptxas", "cuobjdump", "nvdisasm"))
    assert data["ok"], data["log"]
    assert data["props"]["idp4a"] == ["IDP.4A.S8.S8"] and data["props"]["ldg128"], data["props"]
