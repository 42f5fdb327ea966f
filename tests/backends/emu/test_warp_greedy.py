"""The warp-greedy schedule: each warp runs ahead to the next block barrier before the next warp starts.

It exposes a race that forward, reverse and random interleavings hide when every thread is released from a
barrier in one batch: a warp that reuses a shared slot (after its own warp shuffles) that another warp has yet
to read in the same barrier interval. The seed's `gk_attn` has exactly this shape (the block max is read from
red[0], then warp 0 overwrites red[0] with its partial sum, with no barrier between).
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import RaceDetected
from harness.backends.emu.backend import EmuBackend

SOURCE = r"""
__global__ void reuse_slot(const float* x, float* y, int fence) {
  __shared__ float red[32];
  int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
  if (threadIdx.x == 0) red[0] = 100.0f;
  __syncthreads();
  float mx = red[0];                                   // every warp reads the slot ...
  if (fence) __syncthreads();                          // ... the correct twin waits for all reads
  float s = x[threadIdx.x];
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  if (lane == 0) red[wp] = s;                          // ... and warp 0 reuses it for its sum
  __syncthreads();
  y[threadIdx.x] = mx + red[wp];
}
"""


@pytest.fixture(scope="module")
def module():
    backend = EmuBackend(timeout_s=60, race_check=False)    # the schedule alone (the detector finds it on run 1)
    yield backend.load(SOURCE)
    backend.close()


def test_warp_greedy_schedule_catches_a_slot_reused_before_all_warps_read_it(module):
    x = np.ones(128, np.float32)
    with pytest.raises(RaceDetected, match=r"'y' differs .*warp-greedy"):
        module.launch("reuse_slot", (1,), (128,), 0, [x, np.zeros(128, np.float32), np.int32(0)], outputs=(1,))


def test_the_fenced_twin_passes(module):
    x = np.ones(128, np.float32)
    y = np.zeros(128, np.float32)
    module.launch("reuse_slot", (1,), (128,), 0, [x, y, np.int32(1)], outputs=(1,))
    assert np.all(y == 132.0)


def test_without_the_warp_greedy_run_the_race_goes_unseen():
    # Negative control for the schedule itself: forward x2 and reverse alone miss this race.
    backend = EmuBackend(schedules=3, timeout_s=60, race_check=False)
    try:
        x = np.ones(128, np.float32)
        y = np.zeros(128, np.float32)
        backend.load(SOURCE).launch("reuse_slot", (1,), (128,), 0, [x, y, np.int32(0)], outputs=(1,))
        assert np.all(y == 132.0)
    finally:
        backend.close()
