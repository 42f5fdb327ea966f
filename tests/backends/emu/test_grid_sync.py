"""Cooperative groups' grid-wide barrier on emu, which runs blocks one after another: a block whose live threads all
wait at grid.sync is parked (its threads' stacks, shared memory and state saved) and the next block runs; when every
block waits, each is restored in turn. The values after each barrier, shared memory and locals kept across it, the race
detector's ordering (a read of another block's write after grid.sync is ordered, the same read with the barrier left
out is a DataRace across blocks), and the faults: a block that ends without reaching the barrier others wait at, a
thread that exits while its block waits, and a sampled grid (the tool's limit, never a verdict)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace, KernelFault

SOURCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Each block sums its slice into partial[block]; after the barrier, every block reads all partials (rounds times,
// each round scaling the data). A per-thread local and a shared array live across each barrier.
__global__ void rounds(const float* x, float* partial, float* out, int n_rounds, int fix) {
  cg::grid_group grid = cg::this_grid();
  cg::thread_block block = cg::this_thread_block();
  __shared__ float s[64];
  __shared__ float keep[64];
  int t = threadIdx.x, b = blockIdx.x, nb = gridDim.x;
  float mine = x[b * 64 + t];
  keep[t] = float(b * 1000 + t);
  float total = 0.0f;
  for (int r = 0; r < n_rounds; ++r) {
    s[t] = mine;
    block.sync();
    if (t == 0) {
      float v = 0.0f;
      for (int i = 0; i < 64; ++i) v += s[i];
      partial[r * nb + b] = v;
    }
    if (fix || r > 0) grid.sync();
    float all = 0.0f;
    for (int i = 0; i < nb; ++i) all += partial[r * nb + i];
    total += all;
    mine = mine * 2.0f;
    block.sync();
  }
  // keep[] as this block left it before the first barrier (0), and the grid rank (1)
  out[b * 64 + t] = total + (keep[63 - t] - float(b * 1000 + 63 - t)) + float(grid.thread_rank() == unsigned(b * 64 + t));
}

// Block 1 returns before the barrier the others wait at; or one thread of each block returns early.
__global__ void broken(float* out, int which) {
  if (which == 0 && blockIdx.x == 1) return;
  if (which == 1 && threadIdx.x == 5) return;
  cg::this_grid().sync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}
"""


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def _expected(x: np.ndarray, nb: int, n_rounds: int) -> np.ndarray:
    sums = x.reshape(nb, 64).astype(np.float64).sum()
    total = sum(sums * 2.0 ** r for r in range(n_rounds))
    return np.full(nb * 64, total, np.float32) + 1.0


@pytest.mark.parametrize("nb, n_rounds", [(1, 2), (4, 3), (7, 1)])
def test_grid_sync_parks_every_block_and_resumes_each_with_its_state(module, nb, n_rounds):
    x = (np.arange(nb * 64, dtype=np.float32) % 13) - 6.0
    partial = np.zeros(nb * n_rounds, np.float32)
    out = np.zeros(nb * 64, np.float32)
    module.launch("rounds", (nb,), (64,), 0, [x, partial, out, np.int32(n_rounds), np.int32(1)], outputs=(1, 2))
    assert np.allclose(out, _expected(x, nb, n_rounds), rtol=1e-6)


def test_a_read_of_another_blocks_write_without_grid_sync_races(module):
    x = np.ones(4 * 64, np.float32)
    partial = np.zeros(4 * 2, np.float32)
    out = np.zeros(4 * 64, np.float32)
    with pytest.raises(DataRace, match=r"data race on 'partial' .*across blocks"):
        module.launch("rounds", (4,), (64,), 0, [x, partial, out, np.int32(2), np.int32(0)], outputs=(1, 2))


def test_a_block_that_never_reaches_the_barrier_is_a_deadlock(module):
    out = np.zeros(3 * 32, np.float32)
    with pytest.raises(KernelFault, match=r"2 block\(s\) wait at grid\.sync \(line \d+, first block \(0,0,0\)\) while 1 "
                                          r"block\(s\) of the launch finished without reaching it"):
        module.launch("broken", (3,), (32,), 0, [out, np.int32(0)], outputs=(0,))
    with pytest.raises(KernelFault, match=r"1 thread\(s\) exited while the others wait at grid\.sync"):
        module.launch("broken", (3,), (32,), 0, [out, np.int32(1)], outputs=(0,))
    module.launch("broken", (3,), (32,), 0, [out, np.int32(2)], outputs=(0,))      # the control
    assert np.all(out == 1.0)


def test_every_schedule_runs_every_block_of_a_grid_sync_kernel(load):
    """The extra schedules run a block sample (16 blocks: 6 of them) except where the source has a grid-wide barrier,
    which would wait for the blocks left out."""
    mod = load(SOURCE)
    nb = 16
    x = (np.arange(nb * 64, dtype=np.float32) % 5) - 2.0
    partial = np.zeros(nb * 2, np.float32)
    out = np.zeros(nb * 64, np.float32)
    result = mod.launch("rounds", (nb,), (64,), 0, [x, partial, out, np.int32(2), np.int32(1)], outputs=(1, 2))
    assert np.allclose(out, _expected(x, nb, 2), rtol=1e-6)
    coverage = result.coverage
    assert coverage["sample"] is None and coverage["summary"].endswith(f"on all {nb} blocks")
