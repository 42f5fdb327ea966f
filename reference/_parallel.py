"""Split row-chunked NumPy work across the CPU cores (NumPy releases the GIL inside its loops and BLAS)."""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

# Below this many elements a thread pool costs more than it saves.
_MIN_PARALLEL_ELEMS = 1 << 21
_pool: "ThreadPoolExecutor | None" = None
_pool_lock = threading.Lock()


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _shared_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(cpu_count(), thread_name_prefix="qconform-ref")
        return _pool


def over_rows(rows: int, cols: int, work: Callable[[int, int], None]) -> None:
    """Call ``work(r0, r1)`` on disjoint contiguous row ranges covering [0, rows), in parallel when large.

    `work` must write only its own rows' outputs; results are identical to a single call (each row's
    arithmetic does not depend on the split). Called from a pool thread, it runs serially (no nested waits).
    """
    workers = min(cpu_count(), max(1, rows))
    if workers == 1 or rows * cols < _MIN_PARALLEL_ELEMS or threading.current_thread().name.startswith("qconform-ref"):
        work(0, rows)
        return
    bounds = [rows * i // workers for i in range(workers + 1)]
    pool = _shared_pool()
    futures = [pool.submit(work, bounds[i], bounds[i + 1]) for i in range(1, workers)]
    work(bounds[0], bounds[1])          # the caller takes the first range itself
    for f in futures:
        f.result()


def map_chunks(count: int, job: Callable[[int], None]) -> None:
    """Run ``job(i)`` for i in range(count) across the cores (each job writes only its own outputs)."""
    if count <= 1 or cpu_count() == 1 or threading.current_thread().name.startswith("qconform-ref"):
        for i in range(count):
            job(i)
        return
    pool = _shared_pool()
    for f in [pool.submit(job, i) for i in range(count)]:
        f.result()
