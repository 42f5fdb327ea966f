"""EmuBackend(schedule=NAME): every launch runs once, under that one interleaving, and its results are what the
caller gets (what `qconform generate --emu-schedule NAME` feeds down the chain). On the warp-greedy schedule the
slot-reuse race of test_warp_greedy.py changes the output instead of being reported."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import KernelFault
from harness.backends.emu.backend import EmuBackend

from .test_warp_greedy import SOURCE


def run(backend, fence: int = 0) -> np.ndarray:
    y = np.zeros(128, np.float32)
    try:
        backend.load(SOURCE).launch("reuse_slot", (1,), (128,), 0, [np.ones(128, np.float32), y, np.int32(fence)],
                                    outputs=(1,))
    finally:
        backend.close()
    return y


def test_warp_greedy_alone_shows_what_the_race_does():
    y = run(EmuBackend(timeout_s=60, schedule="warp-greedy"))
    # warp 0 ran ahead and overwrote red[0] (100) with its sum (32) before warps 1..3 read it
    assert np.all(y[:32] == 132.0) and np.all(y[32:] == 64.0)


def test_negative_controls_forward_alone_and_the_checked_schedules():
    assert np.all(run(EmuBackend(timeout_s=60, schedule="forward")) == 132.0)
    assert np.all(run(EmuBackend(timeout_s=60, schedule="warp-greedy"), fence=1) == 132.0)
    with pytest.raises(KernelFault):                   # the default backend reports the race instead
        run(EmuBackend(timeout_s=60))


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="schedule: expected one of forward, reverse, warp-greedy, random"):
        EmuBackend(schedule="greedy")
