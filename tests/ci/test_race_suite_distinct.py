"""A GPUVerify precondition on a buffer's contents: `__requires(ids[e] != ids[__other_int(e)])` says that the
values threads read at e are distinct (vertex IDs, in GPUVerifyBenchmarks' segmentationTree). The adapter honours
it with a seeded permutation (gpuverify.distinct_values), so a scatter through those IDs is race-free as the
verifier proved; without the precondition the same scatter, on seeded values in [0, 64), races."""
from __future__ import annotations

import numpy as np
import pytest

from ci.race_suites import gpuverify

from cudasrc.signatures import kernel_signatures

HEAD = "//pass\n//--blockDim=128 --gridDim=4\n\n"
SCATTER = HEAD + r"""
__global__ void scatter(const unsigned* ids, const unsigned* value, unsigned* mapping) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  %s
  mapping[ids[tid]] = value[tid];
}
"""
CASES = {"honoured": SCATTER % "__requires(ids[tid] != ids[__other_int(tid)]);", "without": SCATTER % ""}



def test_distinct_ids_make_the_scatter_race_free(verdicts):
    rec = verdicts["honoured"]
    assert rec["verdict"] == "clean" and rec["requires_not_honoured"] == [], rec
    assert rec["scalars"]["scatter"]["ids"] == gpuverify.DISTINCT      # recorded for the replay


def test_without_the_precondition_the_scatter_races(verdicts):
    rec = verdicts["without"]          # the negative control: seeded IDs in [0, 64) collide
    assert rec["verdict"] == "race" and "'mapping'" in rec["kernels"]["scatter"]["detail"], rec


def test_only_the_same_index_on_both_sides_is_read_as_distinct_ids():
    src = SCATTER.replace("%s", "__requires(ids[tid] != ids[__other_int(tid + 1)]);")
    sig, = kernel_signatures(gpuverify.device_source(src))
    values, ignored, _ = gpuverify.scalar_values(sig, src, (128, 1, 1), np.random.default_rng(0))
    assert "ids" not in values and ignored == ["ids[tid] != ids[__other_int(tid + 1)]"]


def test_distinct_values_are_a_permutation_and_a_narrow_type_is_refused():
    got = gpuverify.distinct_values(np.dtype(np.uint32), 1000, np.random.default_rng(3), "ids")
    assert got.dtype == np.uint32 and sorted(got) == list(range(1000))
    with pytest.raises(LookupError, match="parameter ids: its precondition asks 1000 distinct values, more than uint8"):
        gpuverify.distinct_values(np.dtype(np.uint8), 1000, np.random.default_rng(3), "ids")
