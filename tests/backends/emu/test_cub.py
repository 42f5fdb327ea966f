"""CUB's block and warp collectives on emu (harness/backends/emu/cub/cub.cuh): BlockReduce, BlockScan and WarpReduce
give NumPy's results, their temporary storages may share a `__shared__ union`, a storage reused without a barrier is
a data race (CUB's rule), a block of another size than the template's traps, and what emu's CUB lacks is emu's limit
(UnsupportedConstruct), never the kernel's fault. The kernels are written for CUB 3 (CUDA 13: nvcc's device-side gate
compiles them against the toolkit's own CUB)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace, KernelFault, UnsupportedConstruct

SOURCE = r"""
#include <cub/cub.cuh>

template <int TPB>
__global__ void row_stats(const float* x, float* mx, float* sm, int* arg, float* part, int n, int valid) {
  typedef cub::BlockReduce<float, TPB> Reduce;
  typedef cub::BlockReduce<cub::KeyValuePair<int, float>, TPB> ArgReduce;
  __shared__ union { typename Reduce::TempStorage r; typename ArgReduce::TempStorage a; } tmp;
  const float* row = x + blockIdx.x * n;
  float m = -1e30f, s = 0.f;
  cub::KeyValuePair<int, float> best(-1, -1e30f);
  for (int i = threadIdx.x; i < n; i += TPB) {
    m = fmaxf(m, row[i]);
    s += row[i];
    best = cub::ArgMax()(best, cub::KeyValuePair<int, float>(i, row[i]));
  }
  float row_max = Reduce(tmp.r).Reduce(m, cuda::maximum<>());
  __syncthreads();
  float row_sum = Reduce(tmp.r).Sum(s);
  __syncthreads();
  cub::KeyValuePair<int, float> top = ArgReduce(tmp.a).Reduce(best, cub::ArgMax());
  __syncthreads();
  float first = Reduce(tmp.r).Sum(float(threadIdx.x), valid);       // threads 0..valid-1 only
  if (threadIdx.x == 0) {
    mx[blockIdx.x] = row_max; sm[blockIdx.x] = row_sum; arg[blockIdx.x] = top.key; part[blockIdx.x] = first;
  }
}
template __global__ void row_stats<96>(const float*, float*, float*, int*, float*, int, int);

__global__ void offsets(const int* counts, int* excl, int* incl, int* total, int* runmax) {
  typedef cub::BlockScan<int, 128> Scan;
  __shared__ typename Scan::TempStorage tmp;
  int c = counts[threadIdx.x], e, i, agg, r;
  Scan(tmp).ExclusiveSum(c, e, agg);
  __syncthreads();
  Scan(tmp).InclusiveSum(c, i);
  __syncthreads();
  Scan(tmp).ExclusiveScan(c, r, -7, cuda::maximum<>());
  excl[threadIdx.x] = e; incl[threadIdx.x] = i; runmax[threadIdx.x] = r;
  if (threadIdx.x == 0) *total = agg;
}

struct RunningTotal {
  int total;
  __device__ int operator()(int tile_total) { int before = total; total += tile_total; return before; }
};

// A scan of 4 items per thread, tile after tile, carried by a prefix callback (CUB's pattern for long inputs).
__global__ void long_scan(const int* in, int* out, int n) {
  typedef cub::BlockScan<int, 64> Scan;
  __shared__ typename Scan::TempStorage tmp;
  RunningTotal carry{0};
  for (int base = 0; base < n; base += 64 * 4) {
    int items[4];
    for (int k = 0; k < 4; ++k) items[k] = in[base + threadIdx.x * 4 + k];
    int tile_total;
    Scan(tmp).ExclusiveSum(items, items, tile_total);
    __syncthreads();
    int prefix;
    Scan(tmp).ExclusiveSum(0, prefix, carry);     // every thread: the tiles before this one
    __syncthreads();
    carry.total = prefix + tile_total;
    for (int k = 0; k < 4; ++k) out[base + threadIdx.x * 4 + k] = prefix + items[k];
  }
}

__global__ void warp_sums(const float* x, float* out) {
  typedef cub::WarpReduce<float, 16> Warp;
  __shared__ typename Warp::TempStorage tmp[4];
  float v = x[threadIdx.x];
  float all = Warp(tmp[threadIdx.x / 16]).Sum(v);
  float five = Warp(tmp[threadIdx.x / 16]).Sum(v, 5);
  if (threadIdx.x % 16 == 0) { out[threadIdx.x / 16] = all; out[4 + threadIdx.x / 16] = five; }
}

__global__ void reused_storage(const int* counts, int* out) {
  typedef cub::BlockScan<int, 64> Scan;
  __shared__ typename Scan::TempStorage tmp;
  int e, f;
  Scan(tmp).ExclusiveSum(counts[threadIdx.x], e);
  Scan(tmp).ExclusiveSum(e, f);                  // no __syncthreads() before the storage is reused
  out[threadIdx.x] = f;
}
"""


@pytest.fixture(scope="module")
def cub(emu):
    return emu.load(SOURCE)


def test_block_reduce_max_sum_argmax_and_a_partial_block(cub):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 200)).astype(np.float32)
    x[1, 150] = x[1, 20] = x[1].max() + 1                      # a tie: the first index wins
    mx, sm, part = (np.zeros(3, np.float32) for _ in range(3))
    arg = np.zeros(3, np.int32)
    cub.launch("row_stats<96>", (3,), (96,), 0, [x, mx, sm, arg, part, np.int32(200), np.int32(40)], [1, 2, 3, 4])
    assert (mx == x.max(axis=1)).all() and (arg == x.argmax(axis=1)).all() and arg[1] == 20
    exact = x.astype(np.float64).sum(axis=1)
    # a float32 sum of n terms in any order: |error| <= (n - 1) * eps32 * sum|x| (NUMERICS.md's summation bound)
    bound = 199 * np.finfo(np.float32).eps * np.abs(x).astype(np.float64).sum(axis=1)
    assert (np.abs(sm - exact) <= bound).all()
    assert (part == sum(range(40))).all()                     # threads 40..95 left out


def test_block_scan_sums_and_a_scan_with_an_initial_value(cub):
    counts = np.random.default_rng(1).integers(0, 9, 128).astype(np.int32)
    excl, incl, runmax = (np.zeros(128, np.int32) for _ in range(3))
    total = np.zeros(1, np.int32)
    cub.launch("offsets", (1,), (128,), 0, [counts, excl, incl, total, runmax], [1, 2, 3, 4])
    assert (incl == np.cumsum(counts)).all() and (excl == incl - counts).all() and total[0] == counts.sum()
    assert (runmax == np.maximum.accumulate(np.concatenate([[-7], counts[:-1]]))).all()


def test_block_scan_of_items_per_thread_carried_across_tiles_by_a_callback(cub):
    data = np.random.default_rng(2).integers(0, 5, 3 * 256).astype(np.int32)
    out = np.zeros_like(data)
    cub.launch("long_scan", (1,), (64,), 0, [data, out, np.int32(data.size)], [1])
    assert (out == np.cumsum(data) - data).all()


def test_warp_reduce_over_logical_warps_and_their_first_lanes(cub):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(8, np.float32)
    cub.launch("warp_sums", (1,), (64,), 0, [x, out], [1])
    sums = x.reshape(4, 16)
    assert (out[:4] == sums.sum(axis=1)).all() and (out[4:] == sums[:, :5].sum(axis=1)).all()


def test_a_storage_reused_without_a_barrier_is_a_race_on_it(cub):
    with pytest.raises(DataRace, match="__shared__ 'tmp'") as err:
        cub.launch("reused_storage", (1,), (64,), 0, [np.ones(64, np.int32), np.zeros(64, np.int32)], [1])
    line = SOURCE.split("\n").index("  Scan(tmp).ExclusiveSum(e, f);                  // no __syncthreads() before "
                                    "the storage is reused") + 1
    assert f"at line {line} (in cub.cuh:" in err.value.races[0]        # the kernel's line, then the place in CUB


def test_a_block_of_another_size_than_the_templates_traps(cub):
    """Negative control of the sizes above: CUB computes garbage there on a GPU; emu says so."""
    with pytest.raises(KernelFault, match=r"cub::BlockScan at line \d+ was built for blocks of 128 threads, and this "
                                          r"block has 64"):
        cub.launch("offsets", (1,), (64,), 0, [np.zeros(64, np.int32), np.zeros(64, np.int32),
                                                np.zeros(64, np.int32), np.zeros(1, np.int32),
                                                np.zeros(64, np.int32)], [1, 2, 3, 4])


def test_what_emus_cub_lacks_is_its_limit(emu):
    source = ("#include <cub/cub.cuh>\n__global__ void k(int* y) {\n"
              "  typedef cub::BlockRadixSort<int, 32, 1> Sort;\n  __shared__ typename Sort::TempStorage t;\n"
              "  int v[1] = {y[threadIdx.x]};\n  Sort(t).Sort(v);\n  y[threadIdx.x] = v[0];\n}\n")
    with pytest.raises(UnsupportedConstruct, match="cub::BlockRadixSort is not in emu's CUB"):
        emu.load(source)
    member = ("#include <cub/cub.cuh>\n__global__ void k(float* y) {\n  typedef cub::WarpReduce<float> W;\n"
              "  __shared__ typename W::TempStorage t;\n"
              "  y[threadIdx.x] = W(t).HeadSegmentedSum(y[threadIdx.x], threadIdx.x == 0);\n}\n")
    with pytest.raises(UnsupportedConstruct, match="cub::WarpReduce::HeadSegmentedSum is not in emu's CUB"):
        emu.load(member)
