"""Split row-chunked NumPy work across the CPU cores (NumPy releases the GIL inside its loops and BLAS)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

# Below this many elements a thread pool costs more than it saves.
_MIN_PARALLEL_ELEMS = 1 << 21


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def over_rows(rows: int, cols: int, work: Callable[[int, int], None]) -> None:
    """Call ``work(r0, r1)`` on disjoint contiguous row ranges covering [0, rows), in parallel when large.

    `work` must write only its own rows' outputs; results are identical to a single call (each row's
    arithmetic does not depend on the split).
    """
    workers = min(cpu_count(), max(1, rows))
    if workers == 1 or rows * cols < _MIN_PARALLEL_ELEMS:
        work(0, rows)
        return
    bounds = [rows * i // workers for i in range(workers + 1)]
    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(work, bounds[i], bounds[i + 1]) for i in range(workers)]
        for f in futures:
            f.result()
