"""What orders the lanes of a warp for the race detector (EmuBackend(warp_order=...)): every warp collective naming
both lanes ("collectives"), or __syncwarp alone ("syncwarp": the CUDA C++ Programming Guide promises memory ordering
for __syncwarp only; a shuffle or vote exchanges registers, and compute-sanitizer's racecheck reports a store and a
read with only a shuffle between, as llama.cpp's mm_ids_helper had)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace
from harness.backends.emu.backend import WARP_ORDER_ENV, EmuBackend

SOURCE = r"""
#include <cooperative_groups.h>
__global__ void exchange(const int* x, int* y, int how) {
  __shared__ int s[32];
  const int lane = threadIdx.x;
  s[lane] = x[lane];                                           // each lane stores its slot
  int v = x[lane];
  if (how == 0) v += __shfl_xor_sync(0xffffffffu, v, 1);       // a shuffle between
  if (how == 1) v += __ballot_sync(0xffffffffu, v & 1) != 0;   // a vote between
  if (how == 2) __syncwarp();                                  // the warp barrier
  if (how == 3) cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block()).sync();
  y[lane] = s[31 - lane] + 0 * v;                              // and reads another lane's
}
"""


def run(order: str, how: int) -> np.ndarray:
    be = EmuBackend(schedules=1, warp_order=order, timeout_s=60)
    try:
        y = np.zeros(32, np.int32)
        be.load(SOURCE).launch("exchange", (1,), (32,), 0, [np.arange(32, dtype=np.int32), y, np.int32(how)],
                               outputs=(1,))
        return y
    finally:
        be.close()


@pytest.mark.parametrize("how", [0, 1], ids=["shuffle", "vote"])
def test_a_shuffle_or_vote_orders_lanes_only_under_the_collectives_rule(how):
    assert np.array_equal(run("collectives", how), np.arange(31, -1, -1))
    with pytest.raises(DataRace, match=r"__shared__ 's' \(line 4\) .*lanes of one warp .*no __syncwarp naming both "
                                       r"between \(a shuffle or vote exchanges registers and does not order memory"):
        run("syncwarp", how)


@pytest.mark.parametrize("how", [2, 3], ids=["syncwarp", "tile_sync"])
def test_syncwarp_and_a_groups_sync_order_lanes_under_both_rules(how):
    """The negative control: __syncwarp (a tile's sync is one) orders memory under either rule."""
    for order in ("collectives", "syncwarp"):
        assert np.array_equal(run(order, how), np.arange(31, -1, -1)), order


def test_the_rule_is_checked_and_taken_from_the_environment(monkeypatch):
    with pytest.raises(ValueError, match=r"warp_order: expected one of \('collectives', 'syncwarp'\), got 'lanes'"):
        EmuBackend(warp_order="lanes")
    monkeypatch.setenv(WARP_ORDER_ENV, "syncwarp")
    be = EmuBackend(schedules=1)
    try:
        assert be.warp_order == "syncwarp" and be.describe()["warp_order"] == "syncwarp"
        assert be.spawn_config()[1]["warp_order"] == "syncwarp"
    finally:
        be.close()
    monkeypatch.setenv(WARP_ORDER_ENV, "sometimes")
    with pytest.raises(ValueError, match=r"\$QCONFORM_EMU_WARP_ORDER: expected one of"):
        EmuBackend()
