"""`--sanitize` on the CLI: the CPU backend's AddressSanitizer build finds out-of-bounds reads, which the guard
bands (they see writes) cannot."""
from __future__ import annotations

import json

from harness.cli import main

# gk_add's contract, with a read one element past the end of y whose value cannot change the result.
OVERREAD = r"""
__global__ void gk_add(float* x, const float* y, int n){
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float past = ((volatile const float*)y)[i + 1]; x[i] += y[i] + 0.0f * past; }
}
"""


def test_sanitize_finds_a_read_past_the_end_that_the_default_checks_pass(tmp_path):
    src = tmp_path / "overread.cu"
    src.write_text(OVERREAD)
    common = ["check", "--source", str(src), "--backend", "emu", "--shapes", "tiny", "--seed", "5"]
    assert main(common + ["--out", str(tmp_path / "plain")]) == 0
    assert main(common + ["--sanitize", "--out", str(tmp_path / "asan")]) == 1
    rows = json.loads((tmp_path / "asan" / "report.json").read_text())["rows"]
    assert rows and all(r["verdict"] == "fail" and "OutOfBounds" in r["reason"] and "READ" in r["reason"]
                        for r in rows)


def test_sanitize_is_refused_where_no_kernel_runs_on_the_cpu(capsys):
    assert main(["report", "--backend", "reference", "--sanitize", "--shapes", "tiny"]) == 2
    assert "--sanitize" in capsys.readouterr().err
