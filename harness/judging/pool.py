"""Judge cases in several processes (`-j N`). Each process builds its own backend from the parent's
configuration (for emu: its own fiber worker) and loads each source once; results come back in submission
order, so the report is the one a serial run writes."""
from __future__ import annotations

import multiprocessing
from typing import Callable, Iterator, Optional, Sequence

# Set in the parent before the processes fork; read by them (nothing large is pickled per case).
_JOBS: Sequence = ()
_CONFIG: Optional[tuple[str, dict]] = None
_JUDGE: Optional[Callable] = None      # judge(backend, modules, jobs, j, k) -> CaseResult
_STATE: dict = {}


def spawn_config(backend) -> Optional[tuple[str, dict]]:
    """(backend name, options) that rebuild `backend` in another process, or None where it cannot be."""
    get = getattr(backend, "spawn_config", None)
    return get() if callable(get) else None


def _init() -> None:
    from multiprocessing.util import Finalize

    from harness.backends import get_backend
    name, options = _CONFIG
    be = get_backend(name, **options)
    _STATE["backend"] = be
    _STATE["modules"] = {}
    # stop this process's backend (the emu worker) when the pool ends, so it is reaped, not orphaned
    Finalize(be, be.close, exitpriority=10)


def _run(task: tuple[int, int]):
    j, k = task
    return _JUDGE(_STATE["backend"], _STATE["modules"], _JOBS, j, k)


class ParallelJudge:
    """`with ParallelJudge(config, jobs, workers, judge) as pj: for res in pj.results(on_start): ...` judges
    every (job, case) with `judge(backend, modules, jobs, j, k)` in `workers` processes and yields the results
    in order. The processes fork when the context
    is entered: do that before starting threads (a progress ticker), so no lock is copied held."""

    def __init__(self, config: tuple[str, dict], jobs: Sequence, workers: int, judge: Callable):
        self.config, self.jobs, self.workers, self.judge = config, jobs, workers, judge
        self.tasks = [(j, k) for j, job in enumerate(jobs) for k in range(len(job.cases))]
        self.pool = None

    def __enter__(self) -> "ParallelJudge":
        global _JOBS, _CONFIG, _JUDGE
        _JOBS, _CONFIG, _JUDGE = self.jobs, self.config, self.judge
        self.pool = multiprocessing.get_context("fork").Pool(self.workers, initializer=_init)
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.pool.close()          # the workers finish and close their backends
        else:
            self.pool.terminate()
        self.pool.join()

    def results(self, on_start: Callable[[int, int], None]) -> Iterator:
        for (j, k), res in zip(self.tasks, self.pool.imap(_run, self.tasks, chunksize=1)):
            on_start(j, k)
            yield res
