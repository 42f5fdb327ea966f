"""sm_80's __reduce_*_sync and sm_70's __match_*_sync on emu: their values over full and partial masks (checked
against numpy), and the order they give the lanes of their mask, which the race detector must see as it sees a
shuffle's (with the negative control: the same exchange without the collective races)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace

SEED = 7      # the inputs' seed; failures print it

SOURCE = r"""
__global__ void reduce_match(const int* x, int* out, int half_mask) {
  int lane = threadIdx.x & 31;
  int v = x[threadIdx.x];
  unsigned mask = half_mask ? 0x0000ffffu : 0xffffffffu;
  if (half_mask && lane >= 16) return;               // the lanes outside the mask do not take part
  int* o = out + 10 * threadIdx.x;
  o[0] = __reduce_add_sync(mask, v);
  o[1] = __reduce_min_sync(mask, v);                  // int: signed
  o[2] = (int)__reduce_min_sync(mask, (unsigned)v);   // unsigned
  o[3] = __reduce_max_sync(mask, v);
  o[4] = (int)__reduce_and_sync(mask, (unsigned)v);
  o[5] = (int)__reduce_or_sync(mask, (unsigned)v);
  o[6] = (int)__reduce_xor_sync(mask, (unsigned)v);
  o[7] = (int)__match_any_sync(mask, v & 3);
  int pred = -1;
  o[8] = (int)__match_all_sync(mask, v & 0, &pred);
  int first = pred;
  unsigned all = __match_all_sync(mask, (long long)v, &pred);
  o[9] = first + 2 * (int)all + 4 * pred;
}

__global__ void ordered_by_reduce(const float* x, float* y, int fix) {
  __shared__ float s[32];
  int lane = threadIdx.x & 31;
  s[lane] = x[threadIdx.x];
  int n = fix ? __reduce_add_sync(0xffffffffu, 1) : 32;   // the collective orders every lane's store before the reads
  float v = s[(lane + 1) & 31];
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * v * n;
}

__global__ void ordered_by_match(const float* x, float* y, int fix) {
  __shared__ float s[32];
  int lane = threadIdx.x & 31;
  s[lane] = x[threadIdx.x];
  unsigned peers = fix ? __match_any_sync(0xffffffffu, 1) : 0xffffffffu;
  float v = s[(lane + 1) & 31];
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * v * (float)(peers & 1u);
}
"""


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


@pytest.mark.parametrize("half_mask", [0, 1], ids=["full-mask", "half-mask"])
def test_reduce_and_match_values(module, half_mask):
    rng = np.random.default_rng(SEED)
    x = rng.integers(-2 ** 31, 2 ** 31, 64, dtype=np.int64).astype(np.int32)
    x[5] = x[9]                                            # a value two lanes share
    out = np.full(10 * 64, -7, np.int32)
    module.launch("reduce_match", (1,), (64,), 0, [x, out, np.int32(half_mask)])
    for warp in range(2):
        lanes = np.arange(16 if half_mask else 32)
        v = x[warp * 32 + lanes]
        u = v.view(np.uint32)
        full = (1 << len(lanes)) - 1
        for lane in lanes:
            got = out[10 * (warp * 32 + lane):10 * (warp * 32 + lane) + 10].view(np.uint32).tolist()
            peers = sum(1 << int(j) for j in lanes if (v[j] & 3) == (v[lane] & 3))
            all_same = bool(np.all(v == v[0]))
            want = [int(u.sum(dtype=np.uint64) & 0xFFFFFFFF), int(np.uint32(v.min())), int(u.min()),
                    int(np.uint32(v.max())), int(np.bitwise_and.reduce(u)), int(np.bitwise_or.reduce(u)),
                    int(np.bitwise_xor.reduce(u)), peers, full, 1 + 2 * (full if all_same else 0) + 4 * all_same]
            assert got == want, f"warp {warp} lane {lane} (seed {SEED}): {got} != {want}"
        if half_mask:
            assert np.all(out[10 * (warp * 32 + 16):10 * (warp * 32 + 32)] == -7)


@pytest.mark.parametrize("kernel", ["ordered_by_reduce", "ordered_by_match"])
def test_a_reduce_or_match_orders_the_lanes_of_its_mask(module, kernel):
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    with pytest.raises(DataRace, match=r"__shared__ 's' .*lanes of one warp"):
        module.launch(kernel, (1,), (32,), 0, [x, y, np.int32(0)], outputs=(1,))
    module.launch(kernel, (1,), (32,), 0, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y, x)
