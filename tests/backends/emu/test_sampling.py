"""Block sampling of the extra schedules: which blocks, what the report says, and that a race confined to
one tail block of a large grid is still found."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import RaceDetected
from harness.backends.emu.sampling import BlockSampling

SRC = r"""
// Each block copies its 64 elements; the last (partial) block alone also publishes a value through one
// shared slot that every thread writes: a race only that block has.
__global__ void tail_race(const float* x, float* y, int n){
  __shared__ float slot;
  int i = blockIdx.x*blockDim.x + threadIdx.x;
  if (blockIdx.x == gridDim.x - 1) { slot = (float)threadIdx.x; __syncthreads(); if (i < n) y[i] = x[i] + slot; }
  else if (i < n) y[i] = x[i]; }
// The same race in block 500 of 1000 only (not a tail): found only when every block runs every schedule.
__global__ void middle_race(const float* x, float* y, int n){
  __shared__ float slot;
  int i = blockIdx.x*blockDim.x + threadIdx.x;
  if (blockIdx.x == 500) { slot = (float)threadIdx.x; __syncthreads(); y[i] = x[i] + slot; }
  else if (i < n) y[i] = x[i]; }
// Block 500 skips one element (an unwritten output in a block the sample leaves out).
__global__ void middle_hole(float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if (i < n && i != 500*64 + 7) y[i] = 1.0f; }
// An int8 output that legitimately holds the poison byte 0xA5 (-91) in a middle block.
__global__ void poison_valued(signed char* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if (i < n) y[i] = (i == 500*64 + 7) ? (signed char)-91 : 1; }
// The last block reads a shared slot no thread wrote: its result depends on the poison.
__global__ void tail_uninit(float* y, int n){
  __shared__ float slot[2];
  int i = blockIdx.x*blockDim.x + threadIdx.x;
  if (threadIdx.x == 0) slot[0] = 1.0f;
  __syncthreads();
  if (i < n) y[i] = (blockIdx.x == gridDim.x - 1) ? slot[1] : slot[0]; }
// In/out accumulation over the whole grid: blocks a sampled run leaves alone keep their input values.
__global__ void accumulate(const float* a, float* acc, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if (i < n) acc[i] += a[i]; }
"""
N = 999 * 64 + 10          # 1000 blocks of 64 threads, the last one partial


def test_parse_and_describe():
    assert BlockSampling.parse(None).interior == 2
    assert BlockSampling.parse("all").interior is None
    assert BlockSampling.parse("sampled:5").interior == 5
    assert str(BlockSampling.parse("sampled:0")) == "sampled:0"
    with pytest.raises(ValueError, match=r"--schedules: expected 'all', 'sampled' or 'sampled:N'"):
        BlockSampling.parse("some")


def test_the_sample_keeps_first_and_last_coordinates_of_every_dimension():
    grid = (1000, 8, 3)
    s = BlockSampling.parse("sampled:2")
    ids = s.blocks(grid)
    assert ids == s.blocks(grid)                           # deterministic
    coords = {(i % 1000, i // 1000 % 8, i // 8000) for i in ids}
    for x in (0, 1, 998, 999):
        for y in (0, 1, 6, 7):
            for z in (0, 1, 2):
                assert (x, y, z) in coords
    assert len({c[0] for c in coords}) == 6 and len({c[1] for c in coords}) == 6
    assert len(ids) == 6 * 6 * 3 and all(0 <= i < 1000 * 8 * 3 for i in ids)
    assert s.blocks((5, 1, 1)) is None                      # small grids run whole
    assert s.blocks((11, 1, 1)) is None                     # 6 of 11 blocks is over half the grid: whole
    thirteen = s.blocks((13, 1, 1))
    assert len(thirteen) == 6 and {0, 1, 11, 12} <= set(thirteen)
    assert BlockSampling.parse("all").blocks(grid) is None


@pytest.fixture(scope="module")
def sampled():
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(schedules=5, timeout_s=60, race_check=False)     # the schedules' own sampling
    yield be
    be.close()


def _args(n=N):
    return [np.arange(n, dtype=np.float32), np.zeros(n, np.float32), np.int32(n)]


def test_a_race_in_the_last_partial_block_is_found_with_sampling(sampled):
    mod = sampled.load(SRC)
    with pytest.raises(RaceDetected, match=r"'y' differs at \d+ element\(s\); first at index 63936.*"
                                           r"\(on 6 sampled blocks\)") as err:
        mod.launch("tail_race", (1000,), (64,), 0, _args(), outputs=(1,))
    # the fault carries the coverage, so the failing row's replay names the same sampling
    assert [r["blocks"] for r in err.value.coverage["runs"]] == [1000, 6, 6, 6, 6]
    assert err.value.coverage["block_sampling"] == "sampled:2" and 999 in err.value.coverage["sample"]


def test_a_race_in_an_unsampled_middle_block_needs_schedules_all(sampled):
    from harness.backends.emu.backend import EmuBackend
    mod = sampled.load(SRC)
    res = mod.launch("middle_race", (1000,), (64,), 0, _args(), outputs=(1,))   # block 500 is not sampled
    assert res.coverage["summary"].startswith("1 schedule(s) on all 1000 blocks, 4 on 6 of 1000 blocks: (0,0,0)")
    assert 500 not in res.coverage["sample"]
    full = EmuBackend(schedules=5, timeout_s=60, block_sampling="all", race_check=False)
    try:
        with pytest.raises(RaceDetected, match=r"first at index 32000"):
            full.load(SRC).launch("middle_race", (1000,), (64,), 0, _args(), outputs=(1,))
    finally:
        full.close()


def test_the_race_detector_needs_no_sampling_for_the_middle_block():
    # run 1, the one the detector watches, covers every block: block 500's race is found on one schedule
    from harness.backends.base import DataRace
    from harness.backends.emu.backend import EmuBackend
    one = EmuBackend(schedules=1, timeout_s=60)
    try:
        with pytest.raises(DataRace, match=r"__shared__ 'slot' .*block \(500,0,0\) thread \(0,0,0\)"):
            one.load(SRC).launch("middle_race", (1000,), (64,), 0, _args(), outputs=(1,))
    finally:
        one.close()


def test_sampled_runs_of_an_in_out_buffer_raise_no_false_race(sampled):
    mod = sampled.load(SRC)
    a = np.arange(N, dtype=np.float32)
    acc = np.ones(N, np.float32)
    res = mod.launch("accumulate", (1000,), (64,), 0, [a, acc, np.int32(N)])
    assert np.array_equal(acc, a + 1)
    assert [r["blocks"] for r in res.coverage["runs"]] == [1000, 6, 6, 6, 6]
    assert "emu: 1 schedule(s) on all 1000 blocks, 4 on 6 of 1000 blocks" in res.notes[0]


def test_an_unwritten_element_of_an_unsampled_block_is_found(sampled):
    """Run 1 left a poisoned element, so run 2 (the other pattern) covers every block to confirm it."""
    from harness.backends.base import UnwrittenOutput
    mod = sampled.load(SRC)
    with pytest.raises(UnwrittenOutput, match=r"1 of 63946 elements of output 'y' were not written.*index 32007"):
        mod.launch("middle_hole", (1000,), (64,), 0, [np.zeros(N, np.float32), np.int32(N)], outputs=(0,))


def test_a_written_value_equal_to_the_poison_is_not_unwritten(sampled):
    mod = sampled.load(SRC)
    y = np.zeros(N, np.int8)
    res = mod.launch("poison_valued", (1000,), (64,), 0, [y, np.int32(N)], outputs=(0,))
    assert y[500 * 64 + 7] == -91
    assert [r["blocks"] for r in res.coverage["runs"]] == [1000, 1000, 6, 6, 6]


def test_a_poison_dependent_tail_block_is_found_with_sampling(sampled):
    from harness.backends.base import UninitializedRead
    mod = sampled.load(SRC)
    with pytest.raises(UninitializedRead, match=r"'y' differs at 10 element\(s\); first at index 63936.*"
                                                r"\(on 6 sampled blocks\)"):
        mod.launch("tail_uninit", (1000,), (64,), 0, [np.zeros(N, np.float32), np.int32(N)], outputs=(0,))
