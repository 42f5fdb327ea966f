"""The `distinct(lo,hi,k)` fill: a top-k routing table, k different experts per token, drawn from the seed. A
kernel that scatters by expert may assume no token names an expert twice; random(lo,hi) breaks that assumption
and shows a race of the input, not of the kernel."""
from __future__ import annotations

import numpy as np
import pytest

from harness.racescan import make_args, parse_args, scan


def test_each_run_of_k_holds_k_different_values_in_range_from_the_seed():
    specs = parse_args("ids:int32[4096]=distinct(0,128,8)")
    ids = make_args(specs, seed=5)[0][0]
    assert ids.dtype == np.int32 and ids.shape == (4096,)
    rows = ids.reshape(512, 8)
    assert all(len(set(r)) == 8 for r in rows.tolist()) and rows.min() >= 0 and rows.max() < 128
    assert len(np.unique(ids)) == 128                        # every expert drawn somewhere: not a fixed pattern
    assert np.array_equal(make_args(specs, seed=5)[0][0], ids)        # replayable from the seed
    assert not np.array_equal(make_args(specs, seed=6)[0][0], ids)
    whole = make_args(parse_args("p:int16[6]=distinct(-3,3,6)"), seed=1)[0][0]
    assert sorted(whole.tolist()) == [-3, -2, -1, 0, 1, 2]          # k = hi - lo: a permutation
    big = make_args(parse_args("ids:int64[65536]=distinct(0,1024,4)"), seed=2)[0][0].reshape(-1, 4)   # row by row
    assert (np.sort(big, axis=1)[:, 1:] != np.sort(big, axis=1)[:, :-1]).all()


@pytest.mark.parametrize("bad, match", [
    ("ids:int32[10]=distinct(0,128,8)", "10 elements are not whole runs of k=8"),
    ("ids:int32[8]=distinct(0,4,8)", r"needs 1 <= k <= hi - lo: \[0, 4\) has 4 values"),
    ("ids:int32[8]=distinct(0,4,0)", "needs 1 <= k"),
    ("ids:float32[8]=distinct(0,8,8)", "fills an integer array, not float32"),
    ("ids:int32=distinct(0,8,1)", "fills an integer array, not a scalar"),
    ("ids:int8[8]=distinct(0,300,8)", r"does not fit int8"),
    ("ids:int32[8]=distinct(0,8)", "is not distinct\\(lo,hi,k\\)"),
])
def test_bad_distinct_fills_are_named(bad, match):
    with pytest.raises(ValueError, match=match):
        parse_args(bad)


SCATTER = r"""
__global__ void scatter(const int* ids, int* slot_of, int k, int n_experts) {
    // a token per block, a slot per thread: each thread marks its expert's cell of the token's row
    slot_of[blockIdx.x * n_experts + ids[blockIdx.x * k + threadIdx.x]] = threadIdx.x;
}
"""


def test_a_routing_table_with_a_repeated_expert_races_where_a_distinct_one_does_not(detector):
    def verdict(fill):
        args, outputs = make_args(parse_args(f"ids:int32[64]={fill} slot_of:int32[512]=zeros k:int32=8 "
                                             "n_experts:int32=64"), seed=3)
        return scan(detector, SCATTER, "scatter", (8,), (8,), 0, args, outputs)
    assert verdict("distinct(0,64,8)").kind == "clean"
    raced = verdict("random(0,4)")               # 8 draws from 4 experts: every row repeats one
    assert raced.kind == "race" and raced.fault == "DataRace"
