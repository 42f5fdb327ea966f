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
