"""The adapters sweep a verifier's labelled file under its own reading: a race that the verifier calls benign
(here GPUVerify's same-value stores) does not end the sweep, so a race it counts at a later value of a swept
parameter is still found; the memory model's record stays the first race."""
from __future__ import annotations


from ci import score_race_suite


KERNEL = """__global__ void k(int* y, int* flag, int mode) {
  __requires(mode >= 1); __requires(mode <= %d);
  y[threadIdx.x] = threadIdx.x;
  if (mode == 64) flag[0] = threadIdx.x;     // values that differ: the race GPUVerify counts
  else flag[0] = 1;                          // one value: benign to GPUVerify
}
"""
HEAD = "//pass\n//--blockDim=64 --gridDim=1\n\n"
CASES = {"later": HEAD + KERNEL % 64, "benign_only": HEAD + KERNEL % 63}


def test_a_race_the_verifier_counts_after_one_it_calls_benign_is_found(verdicts):
    rec = verdicts["later"]
    assert rec["data_race"] and rec["same_value"], rec                   # the memory model: the first race
    assert rec["kernels"]["k"]["at"] != {"mode": 64}
    assert rec["read_as_race"] and score_race_suite._counted_by_its_reading(rec)


def test_a_sweep_with_only_benign_races_is_not_counted(verdicts):
    rec = verdicts["benign_only"]          # the negative control: no value makes the stores differ
    assert rec["data_race"] and rec["same_value"] and not rec["read_as_race"], rec
    assert not score_race_suite._counted_by_its_reading(rec)
