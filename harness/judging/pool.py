"""Judge cases in several processes (`-j N`). Each process builds its own backend from the parent's
configuration (for emu: its own fiber worker) and loads each source once; results come back in submission
order, so the report is the one a serial run writes.

Each judge process has its own pair of pipes and the parent waits on the pipes and the processes' sentinels
together, so nothing is shared between processes that a dying one could leave locked: multiprocessing.Pool's
shared task queue can be left locked by a worker killed while reading it, and its terminate() then waits
forever (an interrupted `report -j 2` once hung that way). An interrupt, or leaving the context with an error,
kills the judge processes (SIGKILL; their emu workers die with them, PR_SET_PDEATHSIG) and reaps them, so
it ends within a second. A judge process that dies on its own makes its case `unchecked` with the reason and
is replaced."""
from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from multiprocessing.connection import wait
from typing import Callable, Iterator, Optional, Sequence

# Set in the parent before the processes fork; read by them (nothing large is pickled per case).
_JOBS: Sequence = ()
_CONFIG: Optional[tuple[str, dict]] = None
_JUDGE: Optional[Callable] = None      # judge(backend, modules, jobs, j, k) -> CaseResult

JOIN_S = 5.0          # a judge process told to stop gets this long to close its backend before it is killed


def spawn_config(backend) -> Optional[tuple[str, dict]]:
    """(backend name, options) that rebuild `backend` in another process, or None where it cannot be."""
    get = getattr(backend, "spawn_config", None)
    return get() if callable(get) else None


def _serve(conn) -> None:
    """A judge process: judge the (job, case) pairs the parent sends until it sends None."""
    # The parent decides what an interrupt means (it kills this process); a terminal's Ctrl-C reaches the
    # whole process group, and a KeyboardInterrupt here would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from harness.backends import get_backend
    name, options = _CONFIG
    backend = get_backend(name, **options)
    modules: dict = {}
    try:
        while True:
            task = conn.recv()
            if task is None:
                return
            j, k = task
            conn.send(_JUDGE(backend, modules, _JOBS, j, k))
    except (EOFError, OSError):
        return           # the parent is gone
    finally:
        backend.close()


class _Judge:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="qconform-judge")
        self.proc.start()
        child.close()
        self.task: Optional[int] = None      # index into ParallelJudge.tasks being judged


class ParallelJudge:
    """`with ParallelJudge(config, jobs, workers, judge) as pj: for res in pj.results(on_start): ...` judges
    every (job, case) with `judge(backend, modules, jobs, j, k)` in `workers` processes and yields the results
    in order. The processes fork when the context is entered: do that before starting threads (a progress
    ticker), so no lock is copied held."""

    def __init__(self, config: tuple[str, dict], jobs: Sequence, workers: int, judge: Callable):
        self.config, self.jobs, self.workers, self.judge = config, jobs, workers, judge
        self.tasks = [(j, k) for j, job in enumerate(jobs) for k in range(len(job.cases))]
        self.ctx = multiprocessing.get_context("fork")
        self.judges: list[_Judge] = []

    def __enter__(self) -> "ParallelJudge":
        global _JOBS, _CONFIG, _JUDGE
        _JOBS, _CONFIG, _JUDGE = self.jobs, self.config, self.judge
        self.judges = [_Judge(self.ctx) for _ in range(self.workers)]
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            for jd in self.judges:          # finish: each closes its backend (its emu worker is reaped)
                try:
                    jd.conn.send(None)
                except OSError:
                    pass
            for jd in self.judges:
                jd.proc.join(JOIN_S)
        self.kill()

    def kill(self) -> None:
        """Kill and reap every judge process (idempotent)."""
        for jd in self.judges:
            if jd.proc.is_alive():
                jd.proc.kill()
        for jd in self.judges:
            jd.proc.join()
            jd.conn.close()
        self.judges = []

    def _died(self, jd: _Judge):
        from .core import UNCHECKED, CaseResult
        j, k = self.tasks[jd.task]
        code = jd.proc.exitcode
        how = f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"
        return CaseResult(self.jobs[j].cases[k][0], UNCHECKED,
                          f"the judge process died while judging this case ({how}): a limit of the machine "
                          f"(memory?) or of qconform, not a verdict on the kernel", [], {})

    def results(self, on_start: Callable[[int, int], None]) -> Iterator:
        todo = deque(range(len(self.tasks)))
        done: dict[int, object] = {}
        following = 0

        def give(jd: _Judge) -> None:
            jd.task = todo.popleft() if todo else None
            if jd.task is not None:
                jd.conn.send(self.tasks[jd.task])

        for jd in self.judges:
            give(jd)
        while following < len(self.tasks):
            while following in done:
                on_start(*self.tasks[following])
                yield done.pop(following)
                following += 1
            if following >= len(self.tasks):
                break
            busy = [jd for jd in self.judges if jd.task is not None]
            if not busy:
                raise RuntimeError(f"judge pool: case {following} was never judged")
            ready = wait([jd.conn for jd in busy] + [jd.proc.sentinel for jd in busy])
            for jd in busy:
                if jd.conn in ready or jd.conn.poll():
                    try:
                        done[jd.task] = jd.conn.recv()
                        give(jd)
                        continue
                    except (EOFError, OSError):
                        pass
                if jd.proc.sentinel in ready or not jd.proc.is_alive():
                    jd.proc.join()
                    done[jd.task] = self._died(jd)
                    jd.conn.close()
                    self.judges.remove(jd)
                    if todo:
                        fresh = _Judge(self.ctx)
                        self.judges.append(fresh)
                        give(fresh)
