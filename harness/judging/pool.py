"""Judge cases in several processes (`-j N`). Each process builds its own backend from the parent's
configuration (for emu: its own fiber worker) and loads each source once; results come back in submission
order, so the report is the one a serial run writes."""
from __future__ import annotations

import multiprocessing
from typing import Callable, Iterator, Optional, Sequence

# Set in the parent before the processes fork; read by them (nothing large is pickled per case).
_JOBS: Sequence = ()
_CONFIG: Optional[tuple[str, dict]] = None
_STATE: dict = {}


def spawn_config(backend) -> Optional[tuple[str, dict]]:
    """(backend name, options) that rebuild `backend` in another process, or None where it cannot be."""
    get = getattr(backend, "spawn_config", None)
    return get() if callable(get) else None


def _init() -> None:
    from harness.backends import get_backend
    name, options = _CONFIG
    _STATE["backend"] = get_backend(name, **options)
    _STATE["modules"] = {}


def _run(task: tuple[int, int]):
    from harness.runner import judge_in_job
    j, k = task
    return judge_in_job(_STATE["backend"], _STATE["modules"], _JOBS, j, k)


def judge_parallel(config: tuple[str, dict], jobs: Sequence, workers: int,
                   on_start: Callable[[int, int], None]) -> Iterator:
    """Yield the CaseResult of every (job, case) in order, judged by `workers` processes."""
    global _JOBS, _CONFIG
    tasks = [(j, k) for j, job in enumerate(jobs) for k in range(len(job.cases))]
    _JOBS, _CONFIG = jobs, config
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, initializer=_init) as pool:
        for (j, k), res in zip(tasks, pool.imap(_run, tasks, chunksize=1)):
            on_start(j, k)
            yield res
