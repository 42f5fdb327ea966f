"""`-j N`: cases judged in several processes give the serial run's report, row for row and in order; the
rows say how many blocks ran under how many schedules and replay with the same block sampling; a unit whose
judge process dies is judged once more in a fresh process, then reported as not judged with the reason; a run
whose output is not a terminal prints plain progress lines."""
from __future__ import annotations

import io
import os
import re
import signal

from harness.judging.progress import Progress
from harness.judging.runner import emitted_jobs, run_cases
from reference.modes import Mode
from reference.shapes import get_shape

SEED = 77


def _jobs():
    jobs = emitted_jobs([get_shape("tiny")], [Mode.INT8_ACT], SEED, ["matmul", "rope", "argmax"],
                        first_instance_only=True)
    assert sum(len(j.cases) for j in jobs) >= 10
    return jobs


def _comparable(rows):
    """Rows without their timings (wall time, and the emu's per-run milliseconds in the notes)."""
    def untimed(row):
        row = {k: v for k, v in row.items() if k != "wall_s"}
        row["notes"] = [re.sub(r"[0-9.]+ ms\b", "<ms>", n) for n in row.get("notes", [])]
        return row
    return [untimed(r) for r in rows]


class _Nothing:
    def close(self):
        pass


def _setup():
    return _Nothing()


def _die_on_some(state, marker_dir, unit):
    """Unit 'once' kills its worker the first time it runs (a marker file says it ran), 'always' every time:
    the worker process dies mid-unit, as one killed by the OOM killer would."""
    if unit in ("once", "always"):
        marker = os.path.join(marker_dir, unit)
        if unit == "always" or not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    return f"done {unit}"


def test_a_unit_whose_judge_process_dies_is_retried_once_in_a_fresh_one_then_lost(tmp_path):
    from harness.judging.executors import Lost, Work, make_executor
    units = ["a", "once", "b", "always", "c", "d"]
    with make_executor(2).open(Work(_setup, _die_on_some, str(tmp_path))) as session:
        got = dict(session.results(units))
        retried = session.retried
    assert [got[i] for i in (0, 1, 2, 4, 5)] == ["done a", "done once", "done b", "done c", "done d"]
    assert isinstance(got[3], Lost)
    assert got[3].reason.startswith("the judge process died while judging it 2 times (signal SIGKILL, then signal "
                                    "SIGKILL; retried 1 time(s) in a fresh process)")
    assert "not a verdict on the kernel" in got[3].reason
    assert retried == 2                     # 'once' and 'always', each resubmitted once


def _die_at_setup():
    os.kill(os.getpid(), signal.SIGKILL)


def test_judge_processes_that_die_before_reading_their_unit_lose_it_after_one_retry(tmp_path):
    """A judge process may be dead before its unit is sent (the pipe then refuses it) or after: the same
    outcome either way."""
    from harness.judging.executors import Lost, Work, make_executor
    with make_executor(2).open(Work(_die_at_setup, _die_on_some, str(tmp_path))) as session:
        got = dict(session.results(["a", "b", "c"]))
        retried = session.retried
    assert sorted(got) == [0, 1, 2] and all(isinstance(r, Lost) and "2 times" in r.reason for r in got.values())
    assert retried == 3


def test_a_case_whose_judge_process_dies_is_unchecked_and_the_rest_of_the_report_stands(emu, tmp_path, monkeypatch):
    """End to end through run_cases -j 2: the judge processes fork from this one, so a patched unit function
    kills the process judging case 1 every time and case 3 the first time (deterministic: no timing)."""
    from harness.judging import runner
    jobs = _jobs()[:1]
    assert len(jobs[0].cases) >= 4
    serial = run_cases(emu, jobs, progress=False)
    judge = runner._judge_unit

    def dying(worker, jobs_, unit):
        if unit in ((0, 1), (0, 3)):
            marker = tmp_path / f"case{unit[1]}"
            if unit == (0, 1) or not marker.exists():
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)
        return judge(worker, jobs_, unit)

    monkeypatch.setattr(runner, "_judge_unit", dying)
    run = run_cases(emu, jobs, progress=False, workers=2)
    assert run.meta["retried"] == 2
    lost = run.rows[1]
    assert lost["verdict"] == "unchecked" and lost["reason"].startswith(
        "not judged: the judge process died while judging it 2 times (signal SIGKILL, then signal SIGKILL")
    keep = [i for i in range(len(serial.rows)) if i != 1]
    assert _comparable([run.rows[i] for i in keep]) == _comparable([serial.rows[i] for i in keep])


def test_parallel_report_equals_the_serial_one(emu):
    jobs = _jobs()
    serial = run_cases(emu, jobs, progress=False)
    parallel = run_cases(emu, jobs, progress=False, workers=2)
    assert parallel.meta["processes"] == 2 and serial.meta["processes"] == 1
    assert [r["case"] for r in parallel.rows] == [r["case"] for r in serial.rows]
    assert _comparable(parallel.rows) == _comparable(serial.rows)


def test_rows_carry_block_coverage_and_a_replay_with_the_same_sampling(emu):
    run = run_cases(emu, _jobs()[:1], progress=False)
    launched = [r for r in run.rows if not r["reason"].startswith("undefined:")]   # w-overflow: never launched
    assert launched
    for r in launched:
        cov = r["coverage"]
        assert cov["block_sampling"] == str(emu.block_sampling)
        assert len(cov["runs"]) == emu.schedules and cov["runs"][0]["blocks"] == cov["grid_blocks"]
        assert re.match(r"\d+ schedule\(s\) on all \d+ blocks", cov["summary"])
        assert r["replay"].endswith(f"--backend emu --schedules {emu.block_sampling}")


def test_progress_lines_without_a_terminal():
    out = io.StringIO()
    with Progress(4, stream=out, tty=False, interval_s=3600, heartbeat=True) as p:
        for label in ("moe/int8act/tiny", "moe/int8act/tiny", "norm/dequant/tiny", "norm/dequant/tiny"):
            p.case(label, "case")
            p.advance()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("qconform: 0/4 cases done, 4 left, 0:00:00 elapsed; now moe/int8act/tiny")
    assert lines[1].startswith("qconform: 2/4 cases done, 2 left") and lines[1].endswith("now norm/dequant/tiny")
    assert lines[2].startswith("qconform: 4/4 cases done, 0 left") and lines[2].endswith("finished")
    assert len(lines) == 3          # one line per family, not per case


def test_a_long_case_still_prints_a_line_per_interval():
    import time
    out = io.StringIO()
    with Progress(2, stream=out, tty=False, interval_s=0.2, heartbeat=True) as p:
        p.case("moe/int8act/qwen3-30b-a3b", "case")
        time.sleep(0.7)                      # one slow case, no advance meanwhile
        p.advance()
        p.case("moe/int8act/qwen3-30b-a3b", "case")
        p.advance()
    lines = out.getvalue().splitlines()
    ticks = [ln for ln in lines if ln.startswith("qconform: 0/2 cases done") and ln.endswith("in moe/int8act/qwen3-30b-a3b")]
    assert len(ticks) >= 2, lines


def test_cli_rejects_a_bad_schedules_value_and_jobs(capsys, tmp_path):
    from harness.cli import main
    assert main(["report", "--backend", "emu", "--schedules", "most", "--families", "argmax", "--shapes", "tiny",
                 "--out", str(tmp_path)]) == 2
    assert "--schedules: expected 'all', 'sampled' or 'sampled:N'" in capsys.readouterr().err
    assert main(["report", "--backend", "reference", "--schedules", "all", "--out", str(tmp_path)]) == 2
    assert "--schedules: the reference backend runs no kernels" in capsys.readouterr().err
    assert main(["report", "--backend", "emu", "-j", "0", "--out", str(tmp_path)]) == 2
    assert "expected a positive integer, got 0" in capsys.readouterr().err


def test_cli_report_with_jobs_and_schedules_all(capsys, tmp_path):
    import json
    from harness.cli import main
    rc = main(["report", "--backend", "emu", "--families", "argmax,rope", "--modes", "int8act", "--shapes", "tiny",
               "--seed", "3", "-j", "2", "--schedules", "all", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert re.search(r"qconform: \d+/\d+ cases done, 0 left, \d:\d\d:\d\d elapsed; finished", err)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["meta"]["processes"] == 2 and doc["meta"]["backend_info"]["block_sampling"] == "all"
    for r in doc["rows"]:
        assert all(run["blocks"] == r["coverage"]["grid_blocks"] for run in r["coverage"]["runs"])
        assert r["replay"].endswith("--backend emu --schedules all")
