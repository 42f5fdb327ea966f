"""`qconform doctor` reports the fiber library, compilers and toolkits."""
from __future__ import annotations

import json

from harness.cli import main
from harness.emu import toolchain as tc


def test_doctor_json_names_fiber_library_and_compiler(capsys):
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["emu"]["usable"] is True
    want = "boost" if tc.boost_context_usable(tc.find_cxx()) else "ucontext"
    assert info["emu"]["fiber"] == want
    assert any(c["path"] == tc.find_cxx() for c in info["compilers"])
    assert isinstance(info["cuda_toolkits"], list) and "usable" in info["gpu"]


def test_doctor_reports_forced_ucontext(capsys, monkeypatch):
    monkeypatch.setenv(tc.FIBER_ENV, "ucontext")
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"emu backend: fibers = ucontext (forced by {tc.FIBER_ENV}=ucontext)" in out
    assert "host C++ compilers:" in out and "CUDA toolkits:" in out


def test_doctor_names_the_toolchain_the_compile_checks_use(capsys):
    from harness.toolchain import toolchain_or_reason
    assert main(["doctor", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["compile_toolchain"]
    found, why = toolchain_or_reason()
    assert info["found"] is (found is not None)
    if found is not None:
        assert info["nvcc"] == str(found.nvcc) and info["origin"]["nvcc"] == found.origin["nvcc"]
    else:
        assert info["reason"] == why
