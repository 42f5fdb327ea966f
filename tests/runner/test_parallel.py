"""`-j N`: cases judged in several processes give the serial run's report, row for row and in order; the
rows say how many blocks ran under how many schedules and replay with the same block sampling; a run whose
output is not a terminal prints plain progress lines."""
from __future__ import annotations

import io
import re

from harness.judging.progress import CaseProgress
from harness.runner import emitted_jobs, run_cases
from reference.modes import Mode
from reference.shapes import get_shape

SEED = 77


def _jobs():
    jobs = emitted_jobs([get_shape("tiny")], [Mode.INT8_ACT], SEED, ["matmul", "rope", "argmax"],
                        first_instance_only=True)
    assert sum(len(j.cases) for j in jobs) >= 10
    return jobs


def _comparable(rows):
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def test_parallel_report_equals_the_serial_one(emu):
    jobs = _jobs()
    serial = run_cases(emu, jobs, progress=False)
    parallel = run_cases(emu, jobs, progress=False, workers=2)
    assert parallel.meta["processes"] == 2 and serial.meta["processes"] == 1
    assert [r["case"] for r in parallel.rows] == [r["case"] for r in serial.rows]
    assert _comparable(parallel.rows) == _comparable(serial.rows)


def test_rows_carry_block_coverage_and_a_replay_with_the_same_sampling(emu):
    run = run_cases(emu, _jobs()[:1], progress=False)
    for r in run.rows:
        cov = r["coverage"]
        assert cov["block_sampling"] == str(emu.block_sampling)
        assert len(cov["runs"]) == emu.schedules and cov["runs"][0]["blocks"] == cov["grid_blocks"]
        assert re.match(r"\d+ schedule\(s\) on all \d+ blocks", cov["summary"])
        assert r["replay"].endswith(f"--backend emu --schedules {emu.block_sampling}")


def test_progress_lines_without_a_terminal():
    out = io.StringIO()
    with CaseProgress(4, stream=out, tty=False, interval_s=3600) as p:
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
    with CaseProgress(2, stream=out, tty=False, interval_s=0.2) as p:
        p.case("moe/int8act/qwen3-30b-a3b", "case")
        time.sleep(0.7)                      # one slow case, no advance meanwhile
        p.advance()
        p.case("moe/int8act/qwen3-30b-a3b", "case")
        p.advance()
    lines = out.getvalue().splitlines()
    ticks = [ln for ln in lines if ln.startswith("qconform: 0/2 cases done") and ln.endswith("in moe/int8act/qwen3-30b-a3b")]
    assert len(ticks) >= 2, lines
