"""qconform's helper threads block SIGINT/SIGTERM, so that the kernel delivers an interrupt to the main thread
(CPython answers it only there; taken by another thread it would wait until the main thread next wakes)."""
from __future__ import annotations

import signal
import threading
from concurrent.futures import ThreadPoolExecutor

from harness.interrupts import INTERRUPTS, helper_pool, start_helper


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
    old = signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)   # as qconform's main (a CI job may block them)
    try:
        _check_pool_masks()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _check_pool_masks():
    assert set(INTERRUPTS) <= _mask_in(helper_pool(1))
    assert not set(INTERRUPTS) & _mask_in(ThreadPoolExecutor(1))       # negative control: a plain pool's thread
    assert not set(INTERRUPTS) & set(signal.pthread_sigmask(signal.SIG_BLOCK, []))   # the main thread is untouched
