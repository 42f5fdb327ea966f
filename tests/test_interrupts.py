"""qconform's helper threads block SIGINT/SIGTERM, so that the kernel delivers an interrupt to the main thread
(CPython answers it only there; taken by another thread it would wait until the main thread next wakes)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.interrupts import INTERRUPTS, helper_pool, start_helper

REPO = Path(__file__).resolve().parents[1]


def _mask_in(pool: ThreadPoolExecutor) -> set:
    with pool:
        return set(pool.submit(signal.pthread_sigmask, signal.SIG_BLOCK, []).result())


def test_helper_threads_leave_the_interrupts_to_the_main_thread():
    seen = []
    t = threading.Thread(target=lambda: seen.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, []))))
    start_helper(t)
    t.join()
    assert set(INTERRUPTS) <= seen[0]


def test_helper_pool_threads_leave_the_interrupts_to_the_main_thread():
    assert threading.current_thread() is threading.main_thread()
    assert set(INTERRUPTS) <= _mask_in(helper_pool(1))
    assert not set(INTERRUPTS) & _mask_in(ThreadPoolExecutor(1))       # negative control: a plain pool's thread
    assert not set(INTERRUPTS) & set(signal.pthread_sigmask(signal.SIG_BLOCK, []))   # the main thread is untouched


CHILD = r"""
import select, os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # as qconform's main does (a background job inherits SIG_IGN)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])    # and may inherit it blocked
from harness.interrupts import helper_pool
r, w = os.pipe()
pool = helper_pool(4)
for _ in range(4):
    pool.submit(select.select, [r], [], [])       # helpers asleep in a blocking call, as a worker's reader is
print("ready", flush=True)
try:
    time.sleep(600)
except KeyboardInterrupt:
    os._exit(42)
"""


def test_an_interrupt_wakes_the_sleeping_main_thread_while_helpers_block():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        try:
            assert proc.wait(timeout=20) == 42
        finally:
            proc.kill()
