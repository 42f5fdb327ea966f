"""Cost of lock step (EmuBackend(lock_step=True)): every access to memory outside a thread's stack is a turn, one
fiber switch, so that a warp's lanes go together.

Run with `pytest tests/bench/test_bench_lock_step.py --benchmark-enable`. The warp-synchronous scan of
tests/backends/emu/test_lock_step.py over 1024 threads, all five schedules, race detector off, as a reading's
schedules judge a launch again: the plain build, whose lanes interleave (its schedules disagree), against the
race build with turns. extra_info records run 1's fiber switches and CPU time.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import RaceDetected
from harness.backends.emu.backend import EmuBackend
from tests.backends.emu.test_lock_step import SOURCE


@pytest.mark.parametrize("lock_step", [False, True], ids=["interleaved", "lock_step"])
def test_bench_warp_scan_in_lock_step(benchmark, lock_step):
    be = EmuBackend(race_check=False, lock_step=lock_step, timeout_s=300)
    try:
        mod = be.load(SOURCE)
        x = np.random.default_rng(3).integers(0, 100, 1024).astype(np.int32)

        def run():
            a = x.copy()
            try:
                mod.launch("warp_scan", (1,), (1024,), 0, [a])
            except RaceDetected as exc:    # the schedules' disagreement
                return type(exc).__name__
            return a
        out = benchmark(run)
        if lock_step:
            assert np.array_equal(out, np.concatenate([np.cumsum(x[i:i + 32]) for i in range(0, 1024, 32)]))
        else:
            assert out == RaceDetected.__name__
        stats = mod.last_stats or {}
        benchmark.extra_info.update({"lock_step": lock_step, "switches_run1": (stats.get("switches") or [None])[0],
                                     "run1_cpu_ms": round((stats.get("kernel_cpu_ms") or [0.0])[0], 2)})
    finally:
        be.close()
