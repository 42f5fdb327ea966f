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


_THREAD_MASKS = """
import os, signal, sys
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])   # as a terminal starts a command
{setup}
masks = []
for t in sorted(os.listdir('/proc/self/task')):
    if int(t) != os.getpid():
        status = open(f'/proc/self/task/{{t}}/status').read()
        masks.append(int(next(l for l in status.splitlines() if l.startswith('SigBlk')).split()[1], 16))
print(masks)
"""


def _other_threads_masks(setup: str) -> list:
    import ast
    import os
    import subprocess
    import sys
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")   # NumPy's BLAS starts a thread
    out = subprocess.run([sys.executable, "-c", _THREAD_MASKS.format(setup=setup)], env=env, capture_output=True,
                         text=True, check=True).stdout
    return ast.literal_eval(out.strip().splitlines()[-1])


def test_threads_that_libraries_start_as_the_commands_load_leave_the_interrupts_to_the_main_thread():
    bits = sum(1 << (s - 1) for s in INTERRUPTS)
    masks = _other_threads_masks("from harness.cli import main\nmain(['--help'])")
    assert masks and all(m & bits == bits for m in masks), [hex(m) for m in masks]
    plain = _other_threads_masks("import numpy")        # negative control: imported without the block
    assert plain and all(m & bits == 0 for m in plain), [hex(m) for m in plain]
