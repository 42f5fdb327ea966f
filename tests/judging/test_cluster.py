"""`--cluster`: cases and mutants judged on a Dask cluster give the `-j` run's report row for row; a unit whose
worker dies is retried once on another worker, then reported as not judged with the reason; without the
`cluster` extra the option is a clear error and `-j` still works."""
from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from harness.cli import main
from harness.judging import executors
from harness.judging.executors import Lost, Work, make_executor

from .test_parallel import _comparable, _die_on_some, _jobs, _setup

needs_dask = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("distributed") is None,
    reason="Dask distributed (the `cluster` extra: pip install '.[cluster]') is not installed")


@needs_dask
def test_a_unit_whose_worker_dies_is_retried_once_then_reported_lost(tmp_path):
    units = ["a", "once", "b", "always", "c"]
    with make_executor(cluster="local:2").open(Work(_setup, _die_on_some, str(tmp_path))) as session:
        got = dict(session.results(units))
        retried = session.retried
    assert got[0] == "done a" and got[2] == "done b" and got[4] == "done c"
    assert got[1] == "done once"                      # died once, finished on the retry
    assert isinstance(got[3], Lost) and "died 2 times" in got[3].reason and "retried 1 time" in got[3].reason
    assert retried == 2                               # 'once' and 'always', once each; no unit died in a queue


@needs_dask
def test_report_on_a_local_cluster_equals_the_parallel_one(tmp_path, capsys):
    common = ["report", "--backend", "emu", "--families", "argmax,rope", "--modes", "int8act", "--shapes", "tiny",
              "--seed", "3", "--no-generation"]
    assert main(common + ["-j", "2", "--out", str(tmp_path / "j2")]) == 0
    assert main(common + ["--cluster", "local:2", "--out", str(tmp_path / "cl")]) == 0
    j2 = json.loads((tmp_path / "j2" / "report.json").read_text())
    cl = json.loads((tmp_path / "cl" / "report.json").read_text())
    assert cl["meta"]["executor"] == "a local Dask cluster of 2 worker processes" and cl["meta"]["retried"] == 0
    assert len(cl["rows"]) == len(j2["rows"]) >= 5
    assert _comparable(cl["rows"]) == _comparable(j2["rows"])


@needs_dask
def test_mutate_on_a_local_cluster_equals_the_parallel_one(tmp_path):
    from emitters.registry import emit
    src = tmp_path / "elem.cu"
    src.write_text(emit("elementwise", None, "tiny").code)
    common = ["mutate", "--source", str(src), "--kernels", "k0_elem", "--seed", "3", "--sample", "6"]
    assert main(common + ["-j", "2", "--out", str(tmp_path / "j2")]) == 0
    assert main(common + ["--cluster", "local:2", "--out", str(tmp_path / "cl")]) == 0
    j2 = json.loads((tmp_path / "j2" / "mutation.json").read_text())
    cl = json.loads((tmp_path / "cl" / "mutation.json").read_text())
    keep = ("id", "kernel", "operator", "line", "mutation", "status", "killed_by", "cases_run", "diff")
    assert [{k: m[k] for k in keep} for m in cl["mutants"]] == [{k: m[k] for k in keep} for m in j2["mutants"]]
    assert len(cl["mutants"]) == 6 and cl["counts"] == j2["counts"] and cl["baseline"] == j2["baseline"]
    assert cl["executor"].startswith("a local Dask cluster") and j2["executor"].startswith("2 local processes")


def _judge_dying_once(marker_dir, target, worker, jobs, unit):
    """Judge a case, except that the first try of `target` kills its cluster worker mid-case (SIGKILL, as the OOM
    killer would): the kill lands on a running case every time, whatever the machine's load."""
    if tuple(unit) == target:
        marker = os.path.join(marker_dir, "died")
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    from harness.judging.runner import judge_in_job
    return judge_in_job(worker.be, worker.modules, jobs, *unit)


@needs_dask
def test_killing_a_worker_mid_run_retries_its_case_and_keeps_the_report(emu, capsys, tmp_path, monkeypatch):
    """A cluster worker dies while it judges a case: the case is judged again elsewhere, the report equals
    the serial one, and the progress line counts the retry."""
    import functools
    from harness.judging import runner
    jobs = _jobs()
    serial = runner.run_cases(emu, jobs, progress=False)
    target = (0, 2)
    assert len(jobs[0].cases) > 2
    monkeypatch.setattr(runner, "_judge_unit", functools.partial(_judge_dying_once, str(tmp_path), target))
    run = runner.run_cases(emu, jobs, progress=True, cluster="local:2")
    assert (tmp_path / "died").exists(), "the case that kills its worker never ran"
    assert run.meta["retried"] == 1
    assert _comparable(run.rows) == _comparable(serial.rows)
    err = capsys.readouterr().err
    assert "1 retried after a worker died" in err and "finished" in err


@needs_dask
def test_a_unit_queued_behind_a_dying_one_loses_no_try(tmp_path):
    """Dask fails every unit a dying worker holds, also one only queued there. With one worker and 'always'
    submitted first, 'x' would sit behind it and die with it twice (Lost); units are handed to workers only as
    threads free up, so 'x' runs after 'always' is given up and is judged."""
    with make_executor(cluster="local:1").open(Work(_setup, _die_on_some, str(tmp_path))) as session:
        got = dict(session.results(["always", "x"]))
        retried = session.retried
    assert isinstance(got[0], Lost) and "died 2 times" in got[0].reason
    assert got[1] == "done x"
    assert retried == 1


def test_without_the_extra_cluster_is_a_clear_error_and_j_still_works(monkeypatch, tmp_path, capsys):
    for name in ("dask", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)             # import dask -> ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "harness.judging.cluster", raising=False)
    with pytest.raises(ValueError, match=r"--cluster needs Dask distributed, the optional `cluster` extra: "
                                         r"pip install 'qconform\[cluster\]'"):
        make_executor(cluster="local:2")
    assert main(["report", "--backend", "emu", "--families", "argmax", "--modes", "int8act", "--shapes", "tiny",
                 "--seed", "3", "--no-generation", "--cluster", "local:2", "--out", str(tmp_path / "a")]) == 2
    assert "the optional `cluster` extra" in capsys.readouterr().err
    assert main(["report", "--backend", "emu", "--families", "argmax", "--modes", "int8act", "--shapes", "tiny",
                 "--seed", "3", "--no-generation", "-j", "2", "--out", str(tmp_path / "b")]) == 0


@pytest.mark.parametrize("bad, why", [("local:0", "local:N needs a positive number"),
                                      ("local:x", "local:N needs a positive number"),
                                      ("somehost", "expected local:N or a scheduler address")])
def test_bad_cluster_addresses_are_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        executors.parse_cluster(bad)


def test_cluster_and_jobs_together_are_refused():
    with pytest.raises(ValueError, match="--cluster and -j: choose one"):
        make_executor(2, "local:2")


@needs_dask
def test_free_threads_leave_out_the_busy_ones_and_a_cluster_without_workers_is_a_clear_error(monkeypatch):
    from harness.judging import cluster
    session = cluster._ClusterSession(client=None, token="t")
    monkeypatch.setattr(session, "_running_threads", lambda fresh=False: {"tcp://b": 1, "tcp://a": 2})
    assert session._free_threads(["tcp://a"]) == ["tcp://a", "tcp://b"]
    assert session._free_threads(["tcp://a", "tcp://a", "tcp://b"]) == []
    monkeypatch.setattr(session, "_running_threads", lambda fresh=False: {})
    monkeypatch.setattr(session, "WORKER_WAIT_S", 0.2)
    with pytest.raises(ValueError, match=r"--cluster: no worker left on the cluster for 0.2 s"):
        session._free_threads([])


@needs_dask
def test_a_result_lost_with_its_worker_is_computed_again_without_costing_a_try(tmp_path, monkeypatch):
    """A finished unit's result is held by its worker; when that worker dies before the result is fetched, the
    fetch waits on Dask's recomputation (once seen to hang). After FETCH_S the unit is submitted again under a
    key of its own. Here the first fetch of unit 1 is made to time out."""
    import distributed
    fetch = distributed.Future.result
    timed_out = []

    def first_fetch_of_b_times_out(self, timeout=None):
        if "-1-try0-" in str(self.key) and not timed_out:
            timed_out.append(self.key)
            raise TimeoutError("stand-in: the result did not arrive")
        return fetch(self, timeout=timeout)

    monkeypatch.setattr(distributed.Future, "result", first_fetch_of_b_times_out)
    with make_executor(cluster="local:1").open(Work(_setup, _die_on_some, str(tmp_path))) as session:
        got = dict(session.results(["a", "b", "c"]))
        retried = session.retried
    assert timed_out and got == {0: "done a", 1: "done b", 2: "done c"}
    assert retried == 0


@needs_dask
@pytest.mark.parametrize("allowed", [0, 3])
def test_a_running_clusters_own_retries_are_said(allowed):
    """A cluster found at an address keeps its scheduler's allowed-failures: the description says what it does."""
    import dask
    from distributed import LocalCluster
    from harness.judging.cluster import Cluster
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed}):
        local = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0")
    try:
        cluster = Cluster(None, local.scheduler_address)
        with cluster.open(Work(_setup, _jobs, None)):
            pass
        said = "resubmits a unit whose worker dies 3 time(s) itself" in cluster.description
        assert said == (allowed == 3), cluster.description
        assert cluster.description.startswith(f"the Dask cluster at {local.scheduler_address}")
    finally:
        local.close()
