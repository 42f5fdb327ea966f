"""`qconform doctor` reports the fiber library, compilers and toolkits."""
from __future__ import annotations

import json
import os

import pytest

from harness.cli import main
from harness.backends.emu import toolchain as tc


def test_doctor_json_names_fiber_library_and_compiler(capsys):
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["emu"]["usable"] is True
    cxx = tc.find_cxx()
    want = next(f for f in tc.AUTO_ORDER if tc.fiber_usable(f, cxx))
    if os.environ.get(tc.FIBER_ENV, "auto") == "auto":
        assert info["emu"]["fiber"] == want
    assert info["emu"]["asm_switch"] is tc.asm_switch_usable(cxx)
    assert info["emu"]["boost_context"] is tc.boost_context_usable(cxx)
    assert any(c["path"] == tc.find_cxx() for c in info["compilers"])
    assert "usable" in info["gpu"]
    assert info["emu"]["accesses"] == tc.toolchain().default_accesses()
    _check_toolkit_entries(info["cuda_toolkits"])


def test_doctor_says_which_accesses_device_code_makes(capsys, monkeypatch):
    assert main(["doctor"]) == 0
    assert "device code built for: every access of the source" in capsys.readouterr().out     # g++ here
    monkeypatch.setattr(tc.Toolchain, "default_accesses", lambda self: "compiled")
    assert main(["doctor"]) == 0
    assert "device code built for: the optimised build's accesses" in capsys.readouterr().out


def _check_toolkit_entries(toolkits):
    from harness.toolchain.finder import SOURCES
    assert isinstance(toolkits, list)
    for t in toolkits:
        assert os.path.isfile(t["nvcc"]) and os.access(t["nvcc"], os.X_OK), t
        assert t["source"] in SOURCES and isinstance(t["ptxas"], bool) and isinstance(t["cuobjdump"], bool), t
    real = [os.path.realpath(t["nvcc"]) for t in toolkits]
    assert len(real) == len(set(real)), "each nvcc is listed once"


def test_doctor_reports_forced_ucontext(capsys, monkeypatch):
    monkeypatch.setenv(tc.FIBER_ENV, "ucontext")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"emu backend: fibers = ucontext (forced by {tc.FIBER_ENV}=ucontext)" in out
    assert "host C++ compilers:" in out and "CUDA toolkits:" in out


def test_doctor_names_the_toolchain_the_compile_checks_use(capsys):
    from harness.toolchain.finder import nvcc_version, toolchain_or_reason
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["compile_toolchain"]
    found, why = toolchain_or_reason()
    assert info["found"] is (found is not None)
    if found is not None:
        assert info["nvcc"] == str(found.nvcc) and info["origin"]["nvcc"] == found.origin["nvcc"]
        assert os.path.isfile(info["nvcc"]) and info["version"] == nvcc_version(info["nvcc"])
        assert info["ptxas"] == os.path.join(os.path.dirname(info["nvcc"]), "ptxas")
    else:
        assert info["reason"] == why and "no nvcc found" in why


def test_doctor_lists_the_compile_toolchains_nvcc_among_cuda_toolkits(capsys):
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    tc_info = info["compile_toolchain"]
    if not tc_info["found"]:
        pytest.skip(f"no CUDA toolchain here: {tc_info['reason']}")
    listed = {os.path.realpath(t["nvcc"]): t for t in info["cuda_toolkits"]}
    assert os.path.realpath(tc_info["nvcc"]) in listed, (tc_info["nvcc"], list(listed))
    entry = listed[os.path.realpath(tc_info["nvcc"])]
    assert entry["ptxas"] is True
    if tc_info["cuobjdump"]:
        assert entry["cuobjdump"] is True


def _fake_tool(folder, name, text=""):
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text("#!/bin/sh\n" + (f"echo '{text}'\n" if text else ""))
    p.chmod(0o755)
    return p


def test_doctor_lists_an_overridden_nvcc_and_credits_only_its_own_sass_reader(capsys, monkeypatch, tmp_path):
    nvcc = _fake_tool(tmp_path / "fake" / "bin", "nvcc", "Cuda compilation tools, release 99.1, V99.1.7")
    _fake_tool(nvcc.parent, "ptxas")
    monkeypatch.setenv("QCONFORM_NVCC", str(nvcc))
    monkeypatch.delenv("QCONFORM_CUOBJDUMP", raising=False)
    monkeypatch.delenv("QCONFORM_TOOLCHAIN_SOURCES", raising=False)
    # a cuobjdump on PATH belongs to the path source, not to the overridden toolkit
    _fake_tool(tmp_path / "other", "cuobjdump")
    monkeypatch.setenv("PATH", str(tmp_path / "other") + os.pathsep + os.environ.get("PATH", ""))
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    _check_toolkit_entries(info["cuda_toolkits"])
    entry = next(t for t in info["cuda_toolkits"] if t["nvcc"] == str(nvcc))
    assert entry == {"nvcc": str(nvcc), "source": "env", "version": "release 99.1, V99.1.7",
                     "ptxas": True, "cuobjdump": False}
    assert info["compile_toolchain"]["nvcc"] == str(nvcc)



def test_doctor_says_the_built_in_switch_needs_no_package(capsys, monkeypatch):
    if not tc.asm_switch_usable(tc.find_cxx()):
        pytest.skip("the compiler does not target x86-64: no built-in context switch")
    monkeypatch.delenv(tc.FIBER_ENV, raising=False)
    assert main(["doctor"]) == 0
    assert "emu backend: fibers = built-in (asm) (built-in x86-64 context switch, no package needed)" in \
        capsys.readouterr().out


def test_doctor_says_where_curands_headers_come_from(capsys, monkeypatch):
    from harness.backends.emu import toolkit_headers
    assert main(["doctor", "--json"]) == 0
    found = toolkit_headers.toolkit_include()
    said = json.loads(capsys.readouterr().out)["emu"]["curand"]
    assert (str(found) in said) if found else said.startswith("not found")
    monkeypatch.setattr(toolkit_headers, "toolkit_include", lambda: None)      # a toolkit without cuRAND
    assert main(["doctor"]) == 0
    assert "cuRAND device API (curand_kernel.h): not found (install the toolchain extra" in capsys.readouterr().out


def test_doctor_says_whether_the_compilers_are_confined(capsys, monkeypatch):
    from harness import confine, landlock
    assert main(["doctor"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("compilers of kernel sources:"))
    assert ("Landlock ABI" in line) == (landlock.abi() > 0)
    monkeypatch.setenv(confine.OFF_ENV, "off")
    assert main(["doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["compiler_confinement"].startswith("off:")


def test_doctor_says_which_cublas_header_a_kernel_file_finds(capsys, monkeypatch):
    from harness.backends.emu import toolkit_headers
    monkeypatch.setattr(toolkit_headers, "toolkit_header", lambda name: None)       # a toolkit without cuBLAS
    assert main(["doctor"]) == 0
    assert ("cuBLAS host API (cublas_v2.h): qconform's declarations of its host API "
            "(harness/toolchain/host_library_headers) for emu and nvcc (the toolkit has no cuBLAS)") in capsys.readouterr().out
    monkeypatch.setattr(toolkit_headers, "toolkit_header", lambda name: f"the CUDA toolkit's include/{name}")
    assert main(["doctor", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)["emu"]["cublas"]
    assert said.startswith("the CUDA toolkit's include/cublas_v2.h for nvcc; qconform's declarations")
