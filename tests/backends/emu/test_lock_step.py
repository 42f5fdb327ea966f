"""Lock step (EmuBackend(lock_step=True)): the lanes of a warp take turns access by access, as lanes in lock step
do, so warp-synchronous code written for GPUs before Volta (a verifier's `--warp-sync` reading) computes what that
assumption gives in every schedule. Without it the schedules interleave the lanes and such code disagrees with
itself; races between warps stay order-dependent under lock step (the negative control)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import RaceDetected
from harness.backends.emu.backend import EmuBackend

SOURCE = r"""
// Each warp's inclusive scan, in the warp-synchronous style: no __syncwarp between the steps.
__global__ void warp_scan(int* a) {
  int t = threadIdx.x;
  unsigned lane = t & 31;
  if (lane >= 1) a[t] = a[t - 1] + a[t];
  if (lane >= 2) a[t] = a[t - 2] + a[t];
  if (lane >= 4) a[t] = a[t - 4] + a[t];
  if (lane >= 8) a[t] = a[t - 8] + a[t];
  if (lane >= 16) a[t] = a[t - 16] + a[t];
}
// Every lane reads its neighbour's slot after all have written theirs, if lanes go together.
__global__ void rotate(const int* x, int* y) {
  __shared__ int s[64];
  s[threadIdx.x] = x[threadIdx.x];
  y[threadIdx.x] = s[(threadIdx.x & ~31) | ((threadIdx.x + 1) & 31)];
}
// Lane 0 of each warp stores its warp's number into one word: warps are not ordered, in lock step or not.
__global__ void last_warp(int* y) {
  if ((threadIdx.x & 31) == 0) y[0] = threadIdx.x >> 5;
}
"""

X = np.random.default_rng(7).integers(0, 100, 128).astype(np.int32)


@pytest.fixture(scope="module", params=[False, True], ids=["interleaved", "lock_step"])
def backend(request):
    be = EmuBackend(race_check=False, lock_step=request.param, timeout_s=60)
    yield be
    be.close()


def test_warp_synchronous_code_computes_what_lock_step_gives(backend):
    module = backend.load(SOURCE)
    a = X.copy()
    scan = np.concatenate([np.cumsum(X[i:i + 32]) for i in range(0, 128, 32)]).astype(np.int32)
    if not backend.lock_step:        # the negative control: interleaved lanes read slots not yet updated
        with pytest.raises(RaceDetected, match="thread schedules gave different results"):
            module.launch("warp_scan", (1, 1, 1), (128, 1, 1), 0, [a])
        return
    module.launch("warp_scan", (1, 1, 1), (128, 1, 1), 0, [a])       # all five schedules agree
    assert (a == scan).all()
    y = np.zeros(64, np.int32)
    module.launch("rotate", (1, 1, 1), (64, 1, 1), 0, [X[:64].copy(), y], [1])
    lanes = np.arange(64)
    assert (y == X[(lanes & ~31) | ((lanes + 1) & 31)]).all()


def test_races_between_warps_stay_order_dependent_in_lock_step(backend):
    module = backend.load(SOURCE)
    with pytest.raises(RaceDetected, match="'y' differs"):
        module.launch("last_warp", (1, 1, 1), (128, 1, 1), 0, [np.zeros(1, np.int32)])


def test_lock_step_is_named_and_refused_with_the_sanitizer():
    with pytest.raises(ValueError, match="lock_step: expected True or False, got 'yes'"):
        EmuBackend(lock_step="yes")
    with pytest.raises(ValueError, match="lock_step: it takes the race detector's instrumentation"):
        EmuBackend(lock_step=True, sanitize=True, race_check=False)


def test_blocks_that_wait_for_later_blocks_are_held_in_lock_step_too():
    from tests.backends.emu.test_held_blocks import SOURCE as HELD      # block 0 spins until block 1 hands off
    be = EmuBackend(race_check=False, lock_step=True, timeout_s=60)
    try:
        out = np.zeros(64, np.float32)
        result = be.load(HELD).launch("handoff", (2,), (64,), 0, [np.zeros(1, np.int32), np.zeros(64, np.float32),
                                                                  out, np.int32(3)], [2])
        assert (out == np.arange(1, 65)).all()
        assert any("spun until blocks that ran after them made progress" in c for c in result.caveats)
    finally:
        be.close()
