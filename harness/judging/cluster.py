"""The `--cluster` executor (see harness.judging.executors): units on a Dask distributed cluster. Imported only
when --cluster is given; Dask is the optional `cluster` extra.

The session's work (its setup, run function and context: the jobs, the prepared mutants) reaches every
worker through a worker plugin, which the scheduler also hands to a worker that joins or restarts mid-run, so
a dead worker loses nothing but the unit it was running. That unit is submitted once more; if its worker dies
too, it comes back as `Lost(reason)`. On the local clusters started here, Dask's own resubmission after a
worker death is turned off (`distributed.scheduler.allowed-failures: 0`) so every retry is this one, counted
and bounded; a running cluster keeps its own setting (its retries come first), and the run's description says how
many it makes.

A unit is submitted only to an idle worker thread, named for it. When a worker dies, Dask fails every unit
assigned to it, also the ones only queued behind the running one; a queued unit would lose a try through no
fault of its own, and after two such deaths an innocent unit was `Lost`. With no queue on any worker, the unit
a death fails is the unit that was running there. A finished unit's result stays on its worker until it is
fetched; if that worker dies first, Dask recomputes it, and a fetch that waits longer than FETCH_S (one such
wait was seen never to end) submits the unit again under a key of its own, which costs it no try.
"""
from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections import Counter, deque
from typing import Any, Iterable, Iterator, Optional

import dask
import distributed
from distributed import Client, KilledWorker, LocalCluster, WorkerPlugin

from .work import Lost, Session, Work

RETRIES = 1
# In a cluster worker process: the work and the state of each open session (by the session's token).
_WORK: dict[str, Work] = {}
_STATE: dict[str, Any] = {}


class _SessionPlugin(WorkerPlugin):
    def __init__(self, token: str, work: Work):
        self.token, self.work, self.name = token, work, f"qconform-{token}"

    def setup(self, worker) -> None:
        _WORK[self.token] = self.work

    def teardown(self, worker) -> None:
        _WORK.pop(self.token, None)
        state = _STATE.pop(self.token, None)
        if state is not None:
            state.close()                 # stop this worker's backends (emu worker processes)


def _run_unit(token: str, unit: Any):
    work = _WORK[token]
    state = _STATE.get(token)
    if state is None:
        state = _STATE[token] = work.setup()
    return work.run(state, work.context, unit)


class _ClusterSession(Session):
    WORKER_WAIT_S = 300        # how long a cluster with no worker left (all dead, restarting) is waited for
    VIEW_S = 1.0               # how long the scheduler's list of running workers is reused
    FETCH_S = 30.0             # how long the result of a finished unit may take to arrive (it is held by a worker)

    def __init__(self, client: Client, token: str):
        self.client, self.token = client, token
        self._view: Optional[tuple[float, dict[str, int]]] = None
        self.submitted = 0

    def _running_threads(self, fresh: bool = False) -> dict[str, int]:
        """Threads per worker that is running, asked of the scheduler (a worker still starting is left out: the
        scheduler would send its unit elsewhere, perhaps behind a busy one). The answer is kept for VIEW_S, or
        until a worker dies (`fresh`): a unit's end does not change the workers."""
        now = time.monotonic()
        if fresh or self._view is None or now - self._view[0] > self.VIEW_S:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
            self._view = (now, {addr: int(w["nthreads"]) for addr, w in workers.items()
                                if w.get("status") == "running" and w.get("nthreads")})
        return self._view[1]

    def _free_threads(self, busy: Iterable[str], fresh: bool = False) -> list[str]:
        """One entry per idle worker thread, by worker address, as the scheduler sees the workers now (a dead
        worker is gone from it, a restarted one back once it runs); `busy`: the worker of each unit in flight.
        Waits for a running worker while the cluster has none."""
        threads = self._running_threads(fresh)
        deadline = time.monotonic() + self.WORKER_WAIT_S
        while not threads:
            if time.monotonic() > deadline:
                raise ValueError(f"--cluster: no worker left on the cluster for {self.WORKER_WAIT_S} s")
            time.sleep(0.1)
            threads = self._running_threads(fresh=True)
        taken = Counter(busy)
        return [addr for addr, n in sorted(threads.items()) for _ in range(n - taken[addr])]

    def results(self, units) -> Iterator[tuple[int, Any]]:
        waiting = deque((i, u, 0) for i, u in enumerate(units))     # retries go to the front
        flight: dict[Any, tuple[Any, int, Any, int, str]] = {}     # key: (future, index, unit, attempt, worker)
        pending = distributed.as_completed()

        def fill(fresh: bool = False) -> None:
            # each unit goes to an idle thread of its own: the scheduler, left to choose, may queue two units
            # on one worker when it takes them for instant; a worker gone meanwhile lets the unit go elsewhere
            free = self._free_threads((x[4] for x in flight.values()), fresh) if waiting else []
            for addr in free[:len(waiting)]:
                i, u, attempt = waiting.popleft()
                self.submitted += 1
                f = self.client.submit(_run_unit, self.token, u, pure=False, workers=[addr], allow_other_workers=True,
                                       key=f"qconform-{self.token}-{i}-try{attempt}-{self.submitted}")
                flight[f.key] = (f, i, u, attempt, addr)
                pending.add(f)

        try:
            fill()
            while flight:
                f = next(pending)
                _, i, u, attempt, _ = flight.pop(f.key)
                died, again, result = False, None, None
                if f.status == "error":
                    exc = f.exception()
                    if not isinstance(exc, KilledWorker):
                        f.result()                   # the unit's own error: raised here, as in a serial run
                    died = True
                    if attempt < RETRIES:
                        self.retried += 1
                        again = attempt + 1
                    else:
                        result = Lost(f"the cluster worker running it died {attempt + 1} times "
                                      f"(retried {attempt} time(s) on another worker): {exc}")
                else:
                    try:
                        result = f.result(timeout=self.FETCH_S)
                        f.release()
                    except TimeoutError:
                        # its result was lost with the worker that held it, and Dask's recomputation has not come
                        # back: the unit runs again under a key of its own (not a try: it did not die on the unit)
                        self.client.cancel([f])
                        again = attempt
                if again is not None:
                    waiting.appendleft((i, u, again))
                fill(fresh=died)                     # the next unit starts before the caller looks at this one
                if again is None:
                    yield i, result
        finally:
            if flight:                               # stopped early (an error, an interrupt): drop the rest
                self.client.cancel([x[0] for x in flight.values()])
            pending.clear()


def _scheduler_allowed_failures(dask_scheduler) -> int:
    return int(dask_scheduler.allowed_failures)


def _own_retries(client: Client) -> str:
    """What a running cluster's scheduler does itself when a unit's worker dies, said in the run's description: it
    resubmits the unit `allowed-failures` times before qconform sees the death and counts a try."""
    try:
        n = client.run_on_scheduler(_scheduler_allowed_failures)
    except Exception as exc:         # a scheduler that runs no client functions: say it is not known
        return f" (its scheduler's own retries after a worker death are not known: {type(exc).__name__})"
    if n == 0:
        return ""
    killed = (RETRIES + 1) * (n + 1)
    return (f" (its scheduler resubmits a unit whose worker dies {n} time(s) itself, before qconform's own retry: "
            f"distributed.scheduler.allowed-failures = {n}; a unit that kills its worker can kill {killed})")


class Cluster:
    """`local_workers` worker processes started here (one thread each, stopped at the end), or the running
    scheduler at `address`."""

    def __init__(self, local_workers: Optional[int], address: Optional[str]):
        self.local_workers, self.address = local_workers, address
        self.workers = local_workers
        self.description = (f"a local Dask cluster of {local_workers} worker processes" if local_workers
                            else f"the Dask cluster at {address}")

    @contextlib.contextmanager
    def open(self, work: Work) -> Iterator[Session]:
        token = uuid.uuid4().hex[:12]
        with contextlib.ExitStack() as stack:
            if self.local_workers:
                with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                                      "distributed.scheduler.worker-saturation": 1.0}):
                    cluster = stack.enter_context(LocalCluster(
                        n_workers=self.local_workers, threads_per_worker=1, processes=True,
                        dashboard_address=":0", silence_logs=logging.ERROR))   # any free port: never a clash
                client = stack.enter_context(Client(cluster))
            else:
                try:
                    client = stack.enter_context(Client(self.address, timeout="30s"))
                except (OSError, TimeoutError) as exc:
                    raise ValueError(f"--cluster: no Dask scheduler answers at {self.address}: {exc}") from None
                self.workers = len(client.scheduler_info().get("workers", {})) or None
                self.description += _own_retries(client)
            plugin = _SessionPlugin(token, work)
            client.register_plugin(plugin)
            try:
                yield _ClusterSession(client, token)
            finally:
                with contextlib.suppress(Exception):
                    client.unregister_worker_plugin(plugin.name)     # teardown: the workers close their state
