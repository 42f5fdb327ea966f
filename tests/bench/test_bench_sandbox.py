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
