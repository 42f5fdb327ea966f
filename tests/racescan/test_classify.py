"""How a backend's fault becomes a race verdict (harness.racescan.classify). With the happens-before detector on,
only its DataRace is a race; schedules that disagree are an order-dependent result, and a read of memory nobody
wrote is another fault. Without the detector, the schedules' faults are the race signal."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import (BuildError, DataRace, KernelCrash, KernelTimeout, RaceDetected, UninitializedRead,
                                   UnsupportedConstruct)
from harness.racescan import classify, make_args, parse_args, scan


@pytest.mark.parametrize("fault, without, with_detector", [
    (DataRace(None, "x", races=("a",), distinct=1), "race", "race"),
    (RaceDetected(None, "x"), "race", "order-dependent"),
    (UninitializedRead(None, "x"), "race", "fault"),
    (KernelCrash(None, "x"), "fault", "fault"),
    (KernelTimeout(None, "x", tool_limit=True), "unchecked", "unchecked"),
    (UnsupportedConstruct(None, "x"), "unsupported", "unsupported"),
    (BuildError("x"), "unsupported", "unsupported"),
], ids=lambda v: type(v).__name__ if not isinstance(v, str) else v)
def test_the_verdict_of_each_fault_with_and_without_the_detector(fault, without, with_detector):
    assert classify(fault).kind == without
    assert classify(fault, detector=True).kind == with_detector


ATOMIC_ORDER = r"""
__global__ void take_slots(int* counter, int* order) {
  int slot = atomicAdd(counter, 1);      // race-free: the slots go to the threads in the order they come
  order[slot] = threadIdx.x;
}
"""


def test_a_race_free_kernel_whose_result_depends_on_the_order_is_not_a_race():
    from harness.backends.emu.backend import EmuBackend
    args, outputs = make_args(parse_args("counter:int32[1]=0 order:int32[64]!out"), seed=3)
    verdicts = {}
    for detector in (False, True):
        be = EmuBackend(timeout_s=60, race_check=detector)
        try:
            verdicts[detector] = scan(be, ATOMIC_ORDER, "take_slots", (1,), (64,), 0, [a.copy() if isinstance(
                a, np.ndarray) else a for a in args], outputs)
        finally:
            be.close()
    assert verdicts[False].kind == "race" and verdicts[False].fault == "RaceDetected", verdicts[False]
    assert verdicts[True].kind == "order-dependent" and verdicts[True].fault == "RaceDetected", verdicts[True]
