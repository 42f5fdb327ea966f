"""ci/gpu-check.sh end to end in its dry-run mode (the fake driver stands in for PyCUDA and the GPU), and
the seed file's lookup that lets the GPU tests run on a machine where ../shared does not travel."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.seed import SEED_ENV, seed_path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "gpu-check.sh"


@pytest.fixture
def nvcc():
    """The backend wants nvcc even on the fake (its version keys the cubin cache): the toolchain extra has one."""
    from harness.backends.gpu import find_nvcc
    if find_nvcc() is None:
        pytest.skip("no nvcc here (install the toolchain extra): the GPU backend needs one, even on the fake driver")


def _run(tmp_path, *args, **env):
    full = {**os.environ, "OUT": str(tmp_path / "out"), "PYTHON": sys.executable, "GPU_CHECK_WORKERS": "0",
            "GPU_CHECK_SHAPES": "tiny", "GPU_CHECK_LARGE_SHAPES": "tails", "QCONFORM_CACHE": str(tmp_path / "cache"),
            "QCONFORM_GPU_LOCK_DIR": str(tmp_path / "locks"), "GPU_CHECK_WORK": str(tmp_path / "work"), **env}
    full.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(["bash", str(SCRIPT), "--fake", *args], cwd=REPO, env=full, capture_output=True,
                          text=True, timeout=900)
    summary = (tmp_path / "out" / "gpu-check.log")
    return proc, summary.read_text() if summary.exists() else ""


def _step_seconds(summary: str) -> dict[str, int]:
    return {m.group(1): int(m.group(3)) for m in re.finditer(r"\] ([\w-]+): exit (\d+) after (\d+)s", summary)}


@pytest.mark.usefixtures("nvcc")
def test_dry_run_goes_end_to_end_within_the_step_limits(tmp_path):
    proc, summary = _run(tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = summary.splitlines()
    # The first lines say what runs, and how far each step may take, before anything slow starts.
    assert lines[0].startswith("# qconform GPU check") and "DRY RUN" in lines[2]
    assert lines[3] == ("# phases install(<=540s) probe(<=120s) test(<=420s) report(<=540s) report-large(<=570s) "
                        "model(<=420s) generate(<=570s)")
    times = _step_seconds(summary)
    assert set(times) == {"probe", "test", "report", "report-large", "model", "generate"}
    assert all(t < 600 for t in times.values())
    assert "install: dry run: nothing installed" in summary
    assert "gpu backend: available" in summary
    assert re.search(r"=+ \d+ passed.* in [0-9.]+s", summary)               # the device tests ran on the fake
    assert "report: dry run: exit 1 is expected" in summary and "report-large: dry run: exit 1" in summary
    # the fake driver runs none of the matrix's kernels: every case fails (or is unchecked where undefined)
    assert re.search(r"report: \['tiny'\] \{'pass': 0, 'tie': 0, 'fail': [1-9]\d*", summary)
    assert re.search(r"report-large: \['tails'\] \{'pass': 0, 'tie': 0, 'fail': [1-9]\d*", summary)
    assert "generate: dry run: exit 1 is expected" in summary
    assert (tmp_path / "out" / "generate" / "report.json").is_file()
    # The matrix runs once: each shape set in one report step, the device tests without the matrix.
    assert summary.count("] report: start") == 1 and summary.count("] report-large: start") == 1
    steps = (tmp_path / "out" / "steps.log").read_text()
    assert "-m gpu tests/backends/gpu " in steps and "test_gpu_matrix" not in steps
    assert (tmp_path / "out" / "report" / "report.json").is_file()
    assert (tmp_path / "out" / "report-large" / "report.json").is_file()
    assert lines[-1].endswith("done: all steps passed")


@pytest.mark.usefixtures("nvcc")
def test_a_step_over_its_limit_is_cut_reported_and_fails_the_check(tmp_path):
    # A driver whose initialisation takes 30 s keeps the probe from finishing within its 2 s.
    proc, summary = _run(tmp_path, "probe", "test", GPU_CHECK_PROBE_TIMEOUT="2", GPU_CHECK_TEST_TIMEOUT="2",
                         QCONFORM_GPU_FAKE_CONFIG='{"init_delay_s": 30}')
    assert proc.returncode == 1
    assert re.search(r"probe: exit 124 after \d+s \(timed out at 2s\)", summary)
    assert re.search(r"test: exit 124 after \d+s \(timed out at 2s\)", summary)     # the next step still ran
    assert summary.splitlines()[-1].endswith("SOME STEPS FAILED")


@pytest.mark.usefixtures("nvcc")
def test_limits_of_600_s_or_more_are_refused(tmp_path):
    proc, _ = _run(tmp_path, "probe", GPU_CHECK_REPORT_TIMEOUT="900")
    assert proc.returncode == 2 and "report limit must be a whole number of seconds in 1..599" in proc.stderr


def test_seed_is_found_through_the_environment(tmp_path):
    seed = tmp_path / "qwen_emit.rs"
    seed.write_text("// a seed")
    assert seed_path({SEED_ENV: str(seed)}) == seed
    with pytest.raises(ValueError, match="QCONFORM_SEED_RS.*not a file"):
        seed_path({SEED_ENV: str(tmp_path / "missing.rs")})
