"""A worker process never outlives its parent: killed in the middle of a hung kernel, the parent takes its
worker with it (a stuck worker would otherwise keep a core busy after a cancelled test run)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

PARENT = r"""
import faulthandler, signal, sys, threading, time
faulthandler.register(signal.SIGUSR1, all_threads=True)     # the test asks for the stacks if the parent hangs
signal.signal(signal.SIGINT, signal.default_int_handler)   # Ctrl-C raises even if started from a background job (SIG_IGN inherited)
import numpy as np
from harness.backends.emu.backend import EmuBackend
be = EmuBackend(timeout_s=600, schedules=1)
mod = be.load('extern "C" __global__ void spin(float* y){ while (true) { } }')
def launch():
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})   # as qconform's own helper threads do
    mod.launch("spin", (1,), (32,), 0, [np.zeros(32, np.float32)], outputs=(0,))
threading.Thread(target=launch, daemon=True).start()
while be._worker.proc is None:     # the launch starts the worker (slow on a loaded machine)
    time.sleep(0.05)
time.sleep(2.0)           # the launch is running in the worker by now
print(be._worker.proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])     # killed, or a Ctrl-C
def test_a_worker_stuck_in_a_kernel_dies_with_its_parent(how):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              cwd=REPO, env=env, text=True)
    try:
        worker = int(parent.stdout.readline())
        assert _alive(worker)
        time.sleep(1.0)
        assert _alive(worker), "the worker should still be spinning in the hung kernel"
        parent.send_signal(how)
        try:
            parent.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            parent.send_signal(signal.SIGUSR1)          # every thread's stack, to say where it hangs
            time.sleep(2.0)
            parent.kill()
            _, err = parent.communicate()
            pytest.fail(f"the parent did not end within 30 s of {how.name}; its threads:\n{err[-8000:]}")
        deadline = time.monotonic() + 20
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), f"worker {worker} outlived its killed parent"
    finally:
        parent.kill()
