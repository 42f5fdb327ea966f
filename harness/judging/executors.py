"""Where the independent units of a run are judged (a case of `report` / `check`, a mutant of `mutate`): in
this process, in N forked processes on this machine (`-j N`), or on a Dask distributed cluster (`--cluster
local:N` starts one here and stops it at the end; `--cluster tcp://HOST:PORT` joins a running one).

One interface for every caller: `with executor.open(work) as session: for index, result in
session.results(units)`. `work.setup()` builds one worker's state once per worker process (its backend and
loaded modules; the state has `.close()`), `work.run(state, work.context, unit)` judges one unit, and the
results come back as units finish (callers put them back in unit order, so a report is the serial one). A unit
whose worker died (a judge process of -j, a cluster worker) is submitted once more (to a fresh process, or
anywhere on the cluster); when that one dies too the unit comes back as `Lost(reason)`, which the caller
reports as not judged, never as a verdict. `session.retried` counts the resubmissions for the progress line.

Dask is the optional `cluster` extra, imported only when --cluster is given.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from .work import Lost, Session, Work

__all__ = ["InProcess", "Lost", "Processes", "Session", "Work", "make_executor", "parse_cluster"]

CLUSTER_EXTRA = "cluster"


# -- in this process ------------------------------------------------------------------------------------------

class _InProcessSession(Session):
    def __init__(self, work: Work):
        self.work = work
        self.state = work.setup()

    def results(self, units):
        for i, u in enumerate(units):
            yield i, self.work.run(self.state, self.work.context, u)


class InProcess:
    """Units one after the other in this process (no -j, no --cluster)."""
    workers, description = 1, "this process"

    @contextlib.contextmanager
    def open(self, work: Work) -> Iterator[Session]:
        session = _InProcessSession(work)
        try:
            yield session
        finally:
            session.state.close()


# -- forked processes on this machine (-j N): harness.judging.pool -------------------------------------------

class Processes:
    """Units in `workers` processes forked from this one (harness.judging.pool). The processes fork when the
    session opens: open it before starting threads (a progress ticker), so no lock is copied held."""

    def __init__(self, workers: int):
        self.workers = workers
        self.description = f"{workers} local processes (-j {workers})"

    def open(self, work: Work):
        from .pool import ParallelJudge
        return ParallelJudge(work, self.workers)


# -- a Dask distributed cluster (--cluster): harness.judging.cluster, imported only then --------------------

def parse_cluster(address: str) -> tuple[Optional[int], Optional[str]]:
    """(N, None) for 'local:N', (None, address) for 'tcp://host:port' (or another Dask scheme)."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError("--cluster: expected local:N or a scheduler address such as tcp://host:8786")
    address = address.strip()
    if address.startswith("local:"):
        n = address[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"--cluster: local:N needs a positive number of workers, got {address!r}")
        return int(n), None
    if "://" not in address:
        raise ValueError(f"--cluster: expected local:N or a scheduler address such as tcp://host:8786, "
                         f"got {address!r}")
    return None, address


def make_executor(workers: int = 1, cluster: Optional[str] = None):
    """The executor for `-j workers` / `--cluster ADDRESS` (bad values are ValueErrors naming the option)."""
    if cluster is not None:
        if workers != 1:
            raise ValueError("--cluster and -j: choose one (-j N runs N processes here; --cluster local:N "
                             "starts N cluster workers here)")
        local_workers, address = parse_cluster(cluster)
        try:
            from .cluster import Cluster
        except ModuleNotFoundError as exc:
            if exc.name not in ("dask", "distributed"):
                raise
            raise ValueError(f"--cluster needs Dask distributed, the optional `{CLUSTER_EXTRA}` extra: "
                             f"pip install 'qconform[{CLUSTER_EXTRA}]' (or use -j N on this machine)") from None
        return Cluster(local_workers, address)
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"-j/--jobs: expected a positive number of processes, got {workers!r}")
    return InProcess() if workers == 1 else Processes(workers)
