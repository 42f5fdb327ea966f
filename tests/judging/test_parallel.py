"""`-j N`: cases judged in several processes give the serial run's report, row for row and in order; the
rows say how many blocks ran under how many schedules and replay with the same block sampling; a run whose
output is not a terminal prints plain progress lines."""
from __future__ import annotations

import io
import re

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
