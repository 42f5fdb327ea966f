"""GPUVerify's `--only-intra-group`: the verifier checked the threads of one block only, so a race between
blocks is outside its label. The adapter records that reading, and the score counts such a race only under the
memory model; a race inside a block still counts."""
from __future__ import annotations


from ci import score_race_suite


KERNEL = "__global__ void k(int* y) {\n  %s = threadIdx.x;\n}\n"
CASES = {"across": "//pass\n//--blockDim=32 --gridDim=2 --only-intra-group\n\n" + KERNEL % "y[threadIdx.x]",
         "inside": "//pass\n//--blockDim=64 --gridDim=2 --only-intra-group\n\n" + KERNEL % "y[blockIdx.x]"}



def test_a_race_between_blocks_is_outside_an_intra_group_label(verdicts):
    rec = verdicts["across"]
    assert rec["data_race"] and rec["reading"] == "GPUVerify --only-intra-group", rec
    assert {scope for scope, _ in rec["kinds"]} == {"grid"}
    assert not score_race_suite._counted_by_its_reading(rec)


def test_a_race_inside_a_block_still_counts(verdicts):
    rec = verdicts["inside"]            # the negative control: lanes of one warp store different values to y[b]
    assert rec["data_race"] and score_race_suite._counted_by_its_reading(rec), rec
