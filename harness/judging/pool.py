"""Units (cases, mutants) judged in several processes forked from this one (`-j N`, the `Processes` executor
of harness.judging.executors). Each process builds its own state once (`work.setup()`: for emu its own fiber
worker) and keeps it for every unit it judges; results come back in submission order.

Each judge process has its own pair of pipes and the parent waits on the pipes and the processes' sentinels
together, so nothing is shared between processes that a dying one could leave locked: multiprocessing.Pool's shared
task queue can be left locked by a worker killed while reading it, and its terminate() then waits forever (an
interrupted `report -j 2` once hung that way). An interrupt, or leaving the context with an error, kills the judge
processes (SIGKILL; their emu workers and compilers die with them, PR_SET_PDEATHSIG, and the command line ends what
those start: harness.lifetimes) and reaps them, so it ends within a second. A judge process that dies on its own
(killed, a crashed interpreter) is replaced by a fresh one, which judges its unit once more; when that one dies on
the unit too, the unit is `Lost` (the caller reports it as not judged, with the reason: the tool's limit, never the
kernel's fault)."""
from __future__ import annotations

import multiprocessing
import signal
from collections import deque
from multiprocessing.connection import wait
from typing import Iterator, Optional, Sequence

from .work import Lost, Session, Work

# Set in the parent before the processes fork; read by them (the context is not pickled per unit).
_WORK: Optional[Work] = None

JOIN_S = 5.0          # a judge process told to stop gets this long to close its backend before it is killed
RETRIES = 1           # a unit whose judge process died is judged this many more times, each in a fresh process


def _ignore(_signum, _frame) -> None:
    pass


def _serve(conn) -> None:
    """A judge process: judge the units the parent sends until it sends None."""
    # The parent decides what an interrupt means (it kills this process); a terminal's Ctrl-C reaches the
    # whole process group, and a KeyboardInterrupt here would only print a traceback. A handler that does
    # nothing, not SIG_IGN: an ignored signal stays ignored across exec, and the compilers this process starts
    # must end on a Ctrl-C (harness.lifetimes).
    signal.signal(signal.SIGINT, _ignore)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    state = _WORK.setup()
    try:
        while True:
            task = conn.recv()
            if task is None:
                return
            conn.send(_WORK.run(state, _WORK.context, task))
    except (EOFError, OSError):
        return           # the parent is gone
    finally:
        state.close()


class _Judge:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="qconform-judge")
        self.proc.start()
        child.close()
        self.task: Optional[int] = None      # index of the unit being judged


class ParallelJudge(Session):
    """`with ParallelJudge(work, workers) as pj: for i, res in pj.results(units): ...` judges every unit with
    `work.run(state, work.context, unit)` in `workers` processes and yields (index, result) in order. The
    processes fork when the context is entered: do that before starting threads (a progress ticker), so no
    lock is copied held."""

    def __init__(self, work: Work, workers: int):
        self.work, self.workers = work, workers
        self.tasks: Sequence = ()
        self.ctx = multiprocessing.get_context("fork")
        self.judges: list[_Judge] = []

    def __enter__(self) -> "ParallelJudge":
        global _WORK
        _WORK = self.work
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

    @staticmethod
    def _how(jd: _Judge) -> str:
        code = jd.proc.exitcode
        return f"signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit status {code}"

    @staticmethod
    def _lost(deaths: list[str]) -> Lost:
        return Lost(f"the judge process died while judging it {len(deaths)} times ({', then '.join(deaths)}; "
                    f"retried {len(deaths) - 1} time(s) in a fresh process): a limit of the machine (memory?) or of "
                    "qconform, not a verdict on the kernel")

    def results(self, units: Sequence) -> Iterator:
        self.tasks = list(units)
        todo = deque(range(len(self.tasks)))
        done: dict[int, object] = {}
        deaths: dict[int, list[str]] = {}      # unit -> how each judge process that had it died
        following = 0

        def give(jd: _Judge) -> None:
            jd.task = todo.popleft() if todo else None
            if jd.task is not None:
                try:
                    jd.conn.send(self.tasks[jd.task])
                except OSError:
                    pass         # the process is dead already: its sentinel says so, and the unit is retried

        for jd in self.judges:
            give(jd)
        while following < len(self.tasks):
            while following in done:
                yield following, done.pop(following)
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
                    tried = deaths.setdefault(jd.task, [])
                    tried.append(self._how(jd))
                    if len(tried) <= RETRIES:
                        self.retried += 1
                        todo.appendleft(jd.task)      # next, in the fresh process started below
                    else:
                        done[jd.task] = self._lost(tried)
                    jd.conn.close()
                    self.judges.remove(jd)
                    if todo:
                        fresh = _Judge(self.ctx)
                        self.judges.append(fresh)
                        give(fresh)
