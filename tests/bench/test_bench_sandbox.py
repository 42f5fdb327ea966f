"""What the emu worker's sandbox costs a launch: the same small launch (a 1000-logit argmax, five checked
schedules, three array arguments between guard pages) with the seccomp filter and rlimits on, and with
$QCONFORM_EMU_SANDBOX=off. The guard pages are in both (they are not optional).

Run with `pytest tests/bench/test_bench_sandbox.py --benchmark-enable`; the default suite runs each once and
checks the result.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.emu import sandbox
from tests.backends.emu.test_sandbox import clean_source

# the clean gk_argmax_adv of the sandbox probes (tests/backends/emu/test_sandbox.py)
SRC = clean_source().replace("gk_argmax_adv", "argmax")


@pytest.mark.parametrize("mode", ["sandboxed", "off"])
def test_bench_launch_with_and_without_the_sandbox(benchmark, monkeypatch, mode):
    from harness.backends.emu.backend import EmuBackend
    if mode == "sandboxed" and sandbox.unavailable_reason():
        pytest.skip(f"no sandbox here: {sandbox.unavailable_reason()}")
    if mode == "off":
        monkeypatch.setenv(sandbox.OFF_ENV, "off")
    else:
        monkeypatch.delenv(sandbox.OFF_ENV, raising=False)
    be = EmuBackend(timeout_s=120)
    try:
        mod = be.load(SRC)
        logits = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
        tok, pos = np.zeros(1, np.int32), np.zeros(1, np.int32)

        def launch():
            mod.launch("argmax", (1,), (32,), 0, [logits, np.int32(1000), tok, pos], outputs=(2,))
        launch()                 # the worker starts (and sandboxes itself) outside the timed loop
        benchmark(launch)
        assert tok[0] == int(np.argmax(logits))
        benchmark.extra_info["sandbox"] = be.describe()["sandbox"]
    finally:
        be.close()


@pytest.mark.parametrize("mode", ["confined", "off"])
def test_bench_a_compile_with_and_without_confinement(benchmark, monkeypatch, tmp_path, mode):
    """One small host compile (g++ -c of a 20-line file) as emu runs its compilers, confined by Landlock
    (harness.confine: the ruleset is made for each run) or not."""
    import os
    import subprocess

    from harness import confine, landlock
    if mode == "confined" and landlock.abi() == 0:
        pytest.skip("this kernel has no Landlock")
    monkeypatch.setenv(confine.OFF_ENV, "on" if mode == "confined" else "off")
    src = tmp_path / "k.cpp"
    src.write_text("#include <cmath>\n" + "\n".join(f"float f{i}(float x) {{ return std::sqrt(x) + {i}; }}"
                                                   for i in range(20)) + "\n")
    cmd = ["g++", "-O2", "-c", str(src), "-o", str(tmp_path / "k.o")]

    def compile_once():
        with confine.confined(cmd, writable=[tmp_path], cwd=tmp_path) as preexec:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, preexec_fn=preexec,
                               env=dict(os.environ, TMPDIR=str(tmp_path)))
        assert r.returncode == 0, r.stderr
    benchmark(compile_once)
    benchmark.extra_info["confinement"] = confine.describe()
