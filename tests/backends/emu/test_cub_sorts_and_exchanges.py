"""CUB's rearrangements on emu: cub::BlockRadixSort, BlockExchange, BlockAdjacentDifference and ShuffleIndex.
BlockRadixSort: keys (and values) sorted stably in CUB's key order (signed integers by sign, floats by
value with -0 before +0) over a bit range, ascending or descending, blocked or striped, checked against NumPy's stable
sort; two sorts on one storage without a barrier between them race, as CUB's documentation says they do on a GPU
(flashinfer's top-k and bitsandbytes' kernels sort with it)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace

SEED = 11          # the inputs' seed; a failure's replay needs nothing else

SOURCE = r"""
#include <cub/cub.cuh>

// 64 threads x 4 items: keys with their input positions as values; `order` picks the method
template <class K>
__global__ void sort_pairs(const K* in, K* keys_out, int* pos_out, int order, int begin_bit, int end_bit) {
  typedef cub::BlockRadixSort<K, 64, 4, int> Sort;
  __shared__ typename Sort::TempStorage tmp;
  K k[4];
  int v[4];
  for (int i = 0; i < 4; ++i) { k[i] = in[threadIdx.x * 4 + i]; v[i] = threadIdx.x * 4 + i; }
  if (order == 0) Sort(tmp).Sort(k, v, begin_bit, end_bit);
  else if (order == 1) Sort(tmp).SortDescending(k, v, begin_bit, end_bit);
  else if (order == 2) Sort(tmp).SortBlockedToStriped(k, v, begin_bit, end_bit);
  else Sort(tmp).SortDescendingBlockedToStriped(k, v, begin_bit, end_bit);
  for (int i = 0; i < 4; ++i) { keys_out[threadIdx.x * 4 + i] = k[i]; pos_out[threadIdx.x * 4 + i] = v[i]; }
}
template __global__ void sort_pairs<int>(const int*, int*, int*, int, int, int);
template __global__ void sort_pairs<float>(const float*, float*, int*, int, int, int);
template __global__ void sort_pairs<unsigned>(const unsigned*, unsigned*, int*, int, int, int);

// keys alone, sorted twice on one storage: with the barrier CUB asks for between uses, or without it
__global__ void sort_twice(const unsigned* in, unsigned* out, int barrier) {
  typedef cub::BlockRadixSort<unsigned, 32, 2> Sort;
  __shared__ typename Sort::TempStorage tmp;
  unsigned k[2] = {in[threadIdx.x * 2], in[threadIdx.x * 2 + 1]};
  Sort(tmp).Sort(k);
  if (barrier) __syncthreads();
  Sort(tmp).SortDescending(k);
  out[threadIdx.x * 2] = k[0];
  out[threadIdx.x * 2 + 1] = k[1];
}
"""


@pytest.fixture(scope="module")
def sorts(emu):
    return emu.load(SOURCE)


def _keys(dtype):
    rng = np.random.default_rng(SEED)
    if dtype == np.float32:      # ties, both zeros, infinities
        keys = rng.choice(np.array([-np.inf, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf], np.float32), 256)
    elif dtype == np.int32:
        keys = rng.integers(-50, 50, 256).astype(np.int32)
    else:
        keys = rng.integers(0, 2**32, 256, dtype=np.uint64).astype(np.uint32)
    return keys


def _cub_order(keys, begin_bit, end_bit):
    """CUB's radix key of each key, over the bits [begin_bit, end_bit)."""
    if keys.dtype == np.float32:
        bits = keys.view(np.uint32).astype(np.uint64)
        radix = np.where(bits >> 31, ~bits & 0xFFFFFFFF, bits | 0x80000000)
    elif keys.dtype == np.int32:
        radix = keys.view(np.uint32).astype(np.uint64) ^ 0x80000000
    else:
        radix = keys.astype(np.uint64)
    return (radix >> begin_bit) & ((1 << (end_bit - begin_bit)) - 1)


@pytest.mark.parametrize("dtype, name", [(np.int32, "int"), (np.float32, "float"), (np.uint32, "unsigned")])
@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_pairs_sort_as_cub_orders_them(sorts, dtype, name, order):
    keys = _keys(dtype)
    begin_bit, end_bit = (4, 20) if dtype == np.uint32 else (0, 32)      # a bit range: the others bits ignored
    digit = _cub_order(keys, begin_bit, end_bit)
    descending = order in (1, 3)
    rank = np.argsort(-digit.astype(np.float64) if descending else digit, kind="stable")   # stable both ways
    out_keys, out_pos = np.zeros_like(keys), np.zeros(256, np.int32)
    sorts.launch(f"sort_pairs<{name}>", (1,), (64,), 0,
                 [keys, out_keys, out_pos, np.int32(order), np.int32(begin_bit), np.int32(end_bit)], [1, 2])
    if order in (2, 3):          # striped: thread t's item i is rank 64i + t
        where = (np.arange(4)[None, :] * 64 + np.arange(64)[:, None]).ravel()
        rank = rank[where]
    assert np.array_equal(out_pos, rank), f"seed {SEED}, {name}, order {order}"
    assert np.array_equal(out_keys.view(np.uint32), keys[rank].view(np.uint32))    # -0 and +0 told apart


def test_a_storage_reused_without_a_barrier_races_and_with_one_does_not(sorts):
    keys = _keys(np.uint32)[:64]
    out = np.zeros(64, np.uint32)
    sorts.launch("sort_twice", (1,), (32,), 0, [keys, out, np.int32(1)], [1])
    assert np.array_equal(out, np.sort(keys)[::-1])
    with pytest.raises(DataRace, match=r"__shared__ 'tmp'.*in cub.cuh:"):
        sorts.launch("sort_twice", (1,), (32,), 0, [keys, out, np.int32(0)], [1])


ADJACENT = r"""
#include <cub/cub.cuh>
struct Differs {
  __device__ bool operator()(const bool& a, const bool& b) const { return a != b; }
};
struct Minus {
  __device__ int operator()(const int& a, const int& b) const { return a - b; }
};

// 32 threads x 4 items: flashinfer's pattern (the first item where a running flag turns on) and differences of ints
__global__ void adjacent(const int* x, int* left, int* right, int* flips) {
  typedef cub::BlockAdjacentDifference<int, 32> Diff;
  typedef cub::BlockAdjacentDifference<bool, 32> Flags;
  __shared__ typename Diff::TempStorage tmp;
  __shared__ typename Flags::TempStorage ftmp;
  int v[4], l[4], r[4];
  bool on[4], flip[4];
  for (int i = 0; i < 4; ++i) { v[i] = x[threadIdx.x * 4 + i]; on[i] = v[i] > 10; }
  Diff(tmp).SubtractLeft(v, l, Minus());
  __syncthreads();
  Diff(tmp).SubtractRight(v, r, Minus(), 1000);
  Flags(ftmp).SubtractLeft<4>(on, flip, Differs());
  for (int i = 0; i < 4; ++i) {
    int k = threadIdx.x * 4 + i;
    left[k] = l[i]; right[k] = r[i]; flips[k] = flip[i];
  }
}
// two left differences through one storage: the second's stores meet the first's reads unless a barrier is between
__global__ void left_twice(const int* x, int* y, int barrier) {
  typedef cub::BlockAdjacentDifference<int, 32> Diff;
  __shared__ typename Diff::TempStorage tmp;
  int v[1] = {x[threadIdx.x]}, d[1], e[1];
  Diff(tmp).SubtractLeft(v, d, Minus());
  if (barrier) __syncthreads();
  Diff(tmp).SubtractLeft(d, e, Minus());
  y[threadIdx.x] = e[0];
}
"""


def test_adjacent_differences_and_flags_as_cub_gives_them(emu):
    x = np.random.default_rng(SEED).integers(0, 20, 128).astype(np.int32)
    outs = [np.zeros(128, np.int32) for _ in range(3)]
    emu.load(ADJACENT).launch("adjacent", (1,), (32,), 0, [x, *outs], [1, 2, 3])
    left, right, flips = outs
    assert np.array_equal(left, np.concatenate([[x[0]], np.diff(x)]))
    assert np.array_equal(right, np.concatenate([x[:-1] - x[1:], [x[-1] - 1000]]))
    on = x > 10
    assert np.array_equal(flips, np.concatenate([[on[0]], on[1:] != on[:-1]]))


def test_an_adjacent_difference_storage_reused_without_a_barrier_races(emu):
    module = emu.load(ADJACENT)
    x = np.random.default_rng(SEED).integers(0, 20, 32).astype(np.int32)
    y = np.zeros(32, np.int32)
    module.launch("left_twice", (1,), (32,), 0, [x, y, np.int32(1)], [1])
    d = np.concatenate([[x[0]], np.diff(x)])
    assert np.array_equal(y, np.concatenate([[d[0]], np.diff(d)]))
    with pytest.raises(DataRace, match=r"__shared__ 'tmp'.*in cub.cuh:"):
        module.launch("left_twice", (1,), (32,), 0, [x, y, np.int32(0)], [1])


EXCHANGE = r"""
#include <cub/cub.cuh>
// 64 threads x 4 items, each item its blocked rank: where each arrangement puts it
__global__ void exchanges(int* to_striped, int* to_warp, int* back) {
  typedef cub::BlockExchange<int, 64, 4> Exchange;
  __shared__ typename Exchange::TempStorage tmp;
  int v[4], w[4];
  for (int i = 0; i < 4; ++i) v[i] = threadIdx.x * 4 + i;
  Exchange(tmp).BlockedToStriped(v);
  for (int i = 0; i < 4; ++i) to_striped[threadIdx.x * 4 + i] = v[i];
  __syncthreads();
  Exchange(tmp).StripedToBlocked(v);
  __syncthreads();
  Exchange(tmp).BlockedToWarpStriped(v, w);
  for (int i = 0; i < 4; ++i) to_warp[threadIdx.x * 4 + i] = w[i];
  __syncthreads();
  Exchange(tmp).WarpStripedToBlocked(w);
  for (int i = 0; i < 4; ++i) back[threadIdx.x * 4 + i] = w[i];
}
"""


def test_block_exchange_gives_cubs_arrangements(emu):
    outs = [np.zeros(256, np.int32) for _ in range(3)]
    emu.load(EXCHANGE).launch("exchanges", (1,), (64,), 0, outs, [0, 1, 2])
    t, i = np.arange(64)[:, None], np.arange(4)[None, :]
    assert np.array_equal(outs[0], (i * 64 + t).ravel())                      # striped: thread t holds t, t+64, ...
    assert np.array_equal(outs[1], ((t // 32) * 128 + i * 32 + t % 32).ravel())  # warp-striped within each warp
    assert np.array_equal(outs[2], np.arange(256))                            # and back to blocked


SHUFFLE = r"""
#include <cub/cub.cuh>
// bitsandbytes broadcasts each warp's lane 0 value so; a logical warp of 8 lanes broadcasts its lane 3
__global__ void broadcasts(const float* x, float* whole, float* eighths) {
  whole[threadIdx.x] = cub::ShuffleIndex<32>(x[threadIdx.x], 0, 0xffffffff);
  eighths[threadIdx.x] = cub::ShuffleIndex<8>(x[threadIdx.x], 3, 0xffffffff);
}
"""


def test_shuffle_index_broadcasts_within_each_logical_warp(emu):
    x = np.arange(64, dtype=np.float32) * 1.5
    whole, eighths = np.zeros(64, np.float32), np.zeros(64, np.float32)
    emu.load(SHUFFLE).launch("broadcasts", (1,), (64,), 0, [x, whole, eighths], [1, 2])
    assert np.array_equal(whole, np.repeat(x[::32], 32))
    assert np.array_equal(eighths, np.repeat(x[3::8], 8))
