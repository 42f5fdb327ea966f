"""Pre-Volta shuffles in GPUVerify's files (the SDK's shfl_scan): CUDA removed `__shfl_up` and its kind, and the
adapter reads each as the `_sync` shuffle over the lanes of the warp that exist (gpuverify.legacy_shuffles). A
scan over a block whose last warp is partial exchanges the right values and runs clean; a race on the shuffled
values is still found."""
from __future__ import annotations

import numpy as np

from ci.race_suites import gpuverify


HEAD = "//pass\n//--blockDim=120 --gridDim=2\n\n"
SCAN = r"""
__global__ void scan(const int* in, int* data) {
  int id = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32, value = in[id];
  for (int i = 1; i <= 16; i *= 2) {
    int n = __shfl_up(value, i, 32);
    if (lane >= i) value += n;
  }
  STORE
}
"""
CASES = {"scan": HEAD + SCAN.replace("STORE", "data[id] = value;"),
         "racy": HEAD + SCAN.replace("STORE", "data[blockIdx.x] = value;")}



def test_a_scan_with_legacy_shuffles_runs_clean_in_a_partial_warp(verdicts):
    assert verdicts["scan"]["verdict"] == "clean", verdicts["scan"]


def test_a_race_on_shuffled_values_is_still_found(verdicts):
    rec = verdicts["racy"]
    assert rec["verdict"] == "race" and "'data'" in rec["kernels"]["scan"]["detail"], rec


def test_the_shuffles_exchange_within_the_lanes_that_exist(emu):
    code = gpuverify.legacy_shuffles(SCAN.replace("STORE", "data[id] = value;"), "kernel.cu")
    assert "__shfl_up_sync(__qconform_gv_warp_lanes(), value, i, 32)" in code
    data = np.zeros(120, np.int32)
    emu.load(code).launch("scan", (1,), (120,), 0, [np.ones(120, np.int32), data], [1])
    assert (data == np.arange(120) % 32 + 1).all()          # an inclusive scan per warp; the last has 24 lanes
    assert gpuverify.legacy_shuffles("int x = 1;\n", "kernel.cu") == "int x = 1;\n"
