"""The `--cluster` executor (see harness.judging.executors): units on a Dask distributed cluster. Imported only
when --cluster is given; Dask is the optional `cluster` extra.

The session's work (its setup, run function and context: the jobs, the prepared mutants) reaches every
worker through a worker plugin, which the scheduler also hands to a worker that joins or restarts mid-run, so
a dead worker loses nothing but the unit it was running. That unit is submitted once more; if its worker dies
too, it comes back as `Lost(reason)`. On the local clusters started here, Dask's own resubmission after a
worker death is turned off (`distributed.scheduler.allowed-failures: 0`) so every retry is this one, counted
and bounded; a running cluster keeps its own setting (its retries come first).
"""
from __future__ import annotations

import contextlib
import logging
import uuid
from typing import Any, Iterator, Optional

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
    def __init__(self, client: Client, token: str):
        self.client, self.token = client, token

    def _submit(self, i: int, unit, attempt: int):
        return self.client.submit(_run_unit, self.token, unit, key=f"qconform-{self.token}-{i}-try{attempt}",
                                  pure=False)

    def results(self, units) -> Iterator[tuple[int, Any]]:
        meta, live = {}, {}
        for i, u in enumerate(units):
            f = self._submit(i, u, 0)
            meta[f.key], live[f.key] = (i, u, 0), f
        pending = distributed.as_completed(list(live.values()))
        try:
            for f in pending:
                i, u, attempt = meta.pop(f.key)
                live.pop(f.key)
                if f.status == "error":
                    exc = f.exception()
                    if not isinstance(exc, KilledWorker):
                        f.result()                   # the unit's own error: raised here, as in a serial run
                    if attempt < RETRIES:
                        self.retried += 1
                        g = self._submit(i, u, attempt + 1)
                        meta[g.key], live[g.key] = (i, u, attempt + 1), g
                        pending.add(g)
                        continue
                    yield i, Lost(f"the cluster worker running it died {attempt + 1} times "
                                  f"(retried {attempt} time(s) on another worker): {exc}")
                    continue
                result = f.result()
                f.release()
                yield i, result
        finally:
            if live:                                 # stopped early (an error, an interrupt): drop the rest
                self.client.cancel(list(live.values()))
            pending.clear()


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
            plugin = _SessionPlugin(token, work)
            client.register_plugin(plugin)
            try:
                yield _ClusterSession(client, token)
            finally:
                with contextlib.suppress(Exception):
                    client.unregister_worker_plugin(plugin.name)     # teardown: the workers close their state
