"""CUB's block and warp collectives on emu (harness/backends/emu/cub/cub.cuh): BlockReduce, BlockScan, BlockLoad,
BlockStore and WarpReduce give NumPy's results (and CUB's arrangements), their temporary storages may share a `__shared__ union`, a storage reused without a barrier is
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

// A tile loaded into a blocked arrangement (or a striped one) and stored back, by each algorithm: `blocked` shows each
// thread's items, the guarded load fills past `valid` with -1.
template <cub::BlockLoadAlgorithm L, cub::BlockStoreAlgorithm S>
__global__ void tile_copy(const int* in, int* items_seen, int* out, int valid) {
  typedef cub::BlockLoad<int, 64, 4, L> Load;
  typedef cub::BlockStore<int, 64, 4, S> Store;
  __shared__ union { typename Load::TempStorage l; typename Store::TempStorage s; } tmp;
  int items[4];
  Load(tmp.l).Load(in, items, valid, -1);
  for (int i = 0; i < 4; ++i) items_seen[threadIdx.x * 4 + i] = items[i];
  __syncthreads();
  Store(tmp.s).Store(out, items);
}
template __global__ void tile_copy<cub::BLOCK_LOAD_DIRECT, cub::BLOCK_STORE_DIRECT>(const int*, int*, int*, int);
template __global__ void tile_copy<cub::BLOCK_LOAD_STRIPED, cub::BLOCK_STORE_STRIPED>(const int*, int*, int*, int);
template __global__ void tile_copy<cub::BLOCK_LOAD_VECTORIZE, cub::BLOCK_STORE_VECTORIZE>(const int*, int*, int*, int);
template __global__ void tile_copy<cub::BLOCK_LOAD_TRANSPOSE, cub::BLOCK_STORE_TRANSPOSE>(const int*, int*, int*, int);
template __global__ void tile_copy<cub::BLOCK_LOAD_WARP_TRANSPOSE, cub::BLOCK_STORE_WARP_TRANSPOSE>(const int*, int*,
                                                                                                   int*, int);

// Two loads through one storage (ggml's ssm_scan_f32 before llama.cpp #24360 added the barrier between them).
template <bool BARRIER>
__global__ void two_loads(const float* a, const float* b, float* out) {
  typedef cub::BlockLoad<float, 64, 4, cub::BLOCK_LOAD_WARP_TRANSPOSE> Load;
  __shared__ typename Load::TempStorage tmp;
  float x[4], y[4];
  Load(tmp).Load(a, x);
  if (BARRIER) __syncthreads();
  Load(tmp).Load(b, y);
  for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = x[i] * y[i];
}
template __global__ void two_loads<false>(const float*, const float*, float*);
template __global__ void two_loads<true>(const float*, const float*, float*);

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


@pytest.mark.parametrize("algorithm", ["DIRECT", "STRIPED", "VECTORIZE", "TRANSPOSE", "WARP_TRANSPOSE"])
def test_block_load_and_store_give_cubs_arrangements(cub, algorithm):
    """Thread t's item i: in[4t + i] (blocked), or in[64i + t] (STRIPED); past `valid` the default; the store puts
    each item back where the load took it."""
    tile = np.arange(1000, 1256, dtype=np.int32)
    kernel = f"tile_copy<cub::BLOCK_LOAD_{algorithm},cub::BLOCK_STORE_{algorithm}>"
    seen, out = np.zeros(256, np.int32), np.zeros(256, np.int32)
    cub.launch(kernel, (1,), (64,), 0, [tile, seen, out, np.int32(200)], [1, 2])
    where = (np.arange(4)[None, :] * 64 + np.arange(64)[:, None]).ravel() if algorithm == "STRIPED" \
        else np.arange(256)
    assert np.array_equal(seen, np.where(where < 200, tile[where], -1))
    assert np.array_equal(out, np.where(np.arange(256) < 200, tile, -1))


def test_a_load_storage_reused_without_a_barrier_is_a_race_and_with_one_is_not(cub):
    """WARP_TRANSPOSE exchanges through each warp's part of the storage: the second load's stores race with the
    first load's reads by other lanes of the warp. The barrier between the loads (ggml's fix) orders them."""
    a, b = np.linspace(-1, 1, 256, dtype=np.float32), np.linspace(2, 3, 256, dtype=np.float32)
    with pytest.raises(DataRace, match="__shared__ 'tmp'.*in cub.cuh:"):
        cub.launch("two_loads<false>", (1,), (64,), 0, [a, b, np.zeros(256, np.float32)], [2])
    out = np.zeros(256, np.float32)
    cub.launch("two_loads<true>", (1,), (64,), 0, [a, b, out], [2])
    assert np.array_equal(out, a * b)


def test_a_block_of_another_size_than_the_templates_traps(cub):
    """Negative control of the sizes above: CUB computes garbage there on a GPU; emu says so."""
    with pytest.raises(KernelFault, match=r"cub::BlockScan at line \d+ was built for blocks of 128 threads, and this "
                                          r"block has 64"):
        cub.launch("offsets", (1,), (64,), 0, [np.zeros(64, np.int32), np.zeros(64, np.int32),
                                                np.zeros(64, np.int32), np.zeros(1, np.int32),
                                                np.zeros(64, np.int32)], [1, 2, 3, 4])


def test_what_emus_cub_lacks_is_its_limit(emu):
    source = ("#include <cub/cub.cuh>\n__global__ void k(int* y) {\n"
              "  typedef cub::BlockHistogram<unsigned char, 32, 1, 256> Hist;\n  __shared__ typename Hist::TempStorage t;\n"
              "  unsigned char v[1] = {(unsigned char)y[threadIdx.x]};\n  Hist(t).Histogram(v, y);\n}\n")
    with pytest.raises(UnsupportedConstruct, match="cub::BlockHistogram is not in emu's CUB"):
        emu.load(source)
    member = ("#include <cub/cub.cuh>\n__global__ void k(float* y) {\n  typedef cub::WarpReduce<float> W;\n"
              "  __shared__ typename W::TempStorage t;\n"
              "  y[threadIdx.x] = W(t).HeadSegmentedSum(y[threadIdx.x], threadIdx.x == 0);\n}\n")
    with pytest.raises(UnsupportedConstruct, match="cub::WarpReduce::HeadSegmentedSum is not in emu's CUB"):
        emu.load(member)
