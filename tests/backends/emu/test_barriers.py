"""Arrive-wait barriers on emu: libcu++'s cuda::barrier and block-scope cuda::pipeline, cooperative groups'
memcpy_async, PTX's mbarrier (with a try_wait loop's labels and branches) and named barriers (bar.sync/bar.arrive
with an id and a thread count). Each runs its kernel to the values numpy gives; each ordering the barrier gives is
checked by the race detector with a negative control that leaves it out (DataRace at the lines concerned), and each
misuse (no init, too many arrivals, counts that disagree, a phase that cannot complete) is a fault naming its rule."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends import DataRace, KernelFault

BARRIER = r"""
#include <cuda/barrier>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// One tile of 64 floats per step, copied by 16 threads with memcpy_async onto the barrier and read reversed by all.
// `fix` 0: no barrier between the reads and the next step's copies.
__global__ void tiles(const float* x, float* y, int steps, int fix) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ __align__(16) float tile[64];
  int t = threadIdx.x;
  if (t == 0) init(&bar, blockDim.x);
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < steps; ++k) {
    if (t < 16) cuda::memcpy_async(&tile[4 * t], &x[64 * k + 4 * t], cuda::aligned_size_t<16>(16), bar);
    bar.arrive_and_wait();
    acc += tile[63 - t];
    if (fix) bar.arrive_and_wait();
  }
  y[blockIdx.x * 64 + t] = acc;
}

// Split arrive and wait: work between them; `early` reads a neighbour's value before the wait.
__global__ void split(const float* x, float* y, int early) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ float s[64];
  int t = threadIdx.x;
  if (t == 0) init(&bar, blockDim.x);
  __syncthreads();
  s[t] = x[t] * 2.0f;
  cuda::barrier<cuda::thread_scope_block>::arrival_token token = bar.arrive();
  float mine = x[t] + 1.0f;
  float other = early ? s[63 - t] : 0.0f;
  bar.wait(std::move(token));
  if (!early) other = s[63 - t];
  y[t] = mine + other;
}

// A completion function: the last thread to arrive sums what every thread wrote, before any is released.
struct SumAll {
  float* s;
  float* total;
  void operator()() const {
    float v = 0.0f;
    for (int i = 0; i < 64; ++i) v += s[i];
    *total = v;
  }
};
__global__ void completion(const float* x, float* y) {
  __shared__ cuda::barrier<cuda::thread_scope_block, SumAll> bar;
  __shared__ float s[64];
  __shared__ float total;
  int t = threadIdx.x;
  if (t == 0) init(&bar, blockDim.x, SumAll{s, &total});
  __syncthreads();
  s[t] = x[t];
  bar.arrive_and_wait();
  y[blockIdx.x * 64 + t] = total;
}

// Half the threads leave after the first phase (arrive_and_drop); the others go on through three more phases.
__global__ void drop(const float* x, float* y) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ float s[64];
  int t = threadIdx.x;
  if (t == 0) init(&bar, blockDim.x);
  __syncthreads();
  s[t] = x[t];
  if (t >= 32) { bar.arrive_and_drop(); return; }
  bar.arrive_and_wait();
  float v = s[t + 32];
  for (int k = 0; k < 3; ++k) {
    s[t] = v + 1.0f;
    bar.arrive_and_wait();
    v = s[31 - t];
    bar.arrive_and_wait();
  }
  y[t] = v;
}

// Misuses: no __syncthreads after init; no init at all; an update larger than the expected count; a count too large.
__global__ void misuse(float* y, int which) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  int t = threadIdx.x;
  if (which == 0) {
    if (t == 0) init(&bar, blockDim.x);
    bar.arrive_and_wait();
  } else if (which == 1) {
    bar.arrive_and_wait();
  } else if (which == 2) {
    if (t == 0) init(&bar, 1);
    __syncthreads();
    if (t == 0) (void)bar.arrive(2);
  } else {
    if (t == 0) init(&bar, 1 << 20);                 // one more than the PTX ISA's largest count
  }
  y[t] = 1.0f;
}
"""


@pytest.fixture(scope="module")
def barrier_module(detector):
    return detector.load(BARRIER)


def _line(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.split("\n"), 1) if text in line)


def test_memcpy_async_on_a_barrier_lands_before_the_phase_completes(barrier_module):
    x = np.arange(64 * 3, dtype=np.float32)
    y = np.zeros(128, np.float32)
    barrier_module.launch("tiles", (2,), (64,), 0, [x, y, np.int32(3), np.int32(1)], outputs=(1,))
    assert np.array_equal(y, np.tile(x.reshape(3, 64)[:, ::-1].sum(axis=0), 2))
    copy, read = _line(BARRIER, "cuda::memcpy_async(&tile"), _line(BARRIER, "acc += tile[63 - t]")
    with pytest.raises(DataRace, match=rf"__shared__ 'tile' .*(at line {read}.* at line {copy}|at line {copy}.* "
                                       rf"at line {read})"):
        barrier_module.launch("tiles", (2,), (64,), 0, [x, y, np.int32(3), np.int32(0)], outputs=(1,))


def test_a_split_arrive_and_wait_orders_only_what_follows_the_wait(barrier_module):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    barrier_module.launch("split", (1,), (64,), 0, [x, y, np.int32(0)], outputs=(1,))
    assert np.array_equal(y, x + 1.0 + 2.0 * x[::-1])
    read = _line(BARRIER, "float other = early ? s[63 - t]")
    with pytest.raises(DataRace, match=rf"__shared__ 's' .*line {read}"):
        barrier_module.launch("split", (1,), (64,), 0, [x, y, np.int32(1)], outputs=(1,))


def test_the_completion_function_runs_once_before_any_thread_is_released(barrier_module):
    x = np.arange(64, dtype=np.float32) * 0.5
    y = np.zeros(128, np.float32)
    barrier_module.launch("completion", (2,), (64,), 0, [x, y], outputs=(1,))
    assert np.all(y == np.float32(x.sum()))


def test_arrive_and_drop_lowers_the_count_of_later_phases(barrier_module):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    barrier_module.launch("drop", (1,), (64,), 0, [x, y], outputs=(1,))
    v = x[32:].copy()
    for _ in range(3):
        v = (v + 1.0)[::-1]
    assert np.array_equal(y[:32], v)


def test_barrier_misuse_is_a_race_or_a_fault_naming_the_rule(barrier_module):
    y = np.zeros(64, np.float32)
    with pytest.raises(DataRace, match=r"__shared__ 'bar'"):     # init, then arrivals with no __syncthreads between
        barrier_module.launch("misuse", (1,), (64,), 0, [y, np.int32(0)], outputs=(0,))
    with pytest.raises(KernelFault, match=r"barrier arrive at line \d+ on a barrier that was never initialised"):
        barrier_module.launch("misuse", (1,), (64,), 0, [y, np.int32(1)], outputs=(0,))
    with pytest.raises(KernelFault, match=r"barrier arrive at line \d+ with more arrivals than its phase still needs"):
        barrier_module.launch("misuse", (1,), (64,), 0, [y, np.int32(2)], outputs=(0,))
    with pytest.raises(KernelFault, match=r"barrier init at line \d+ with an expected count outside 1 \.\. 2\^20-1"):
        barrier_module.launch("misuse", (1,), (64,), 0, [y, np.int32(3)], outputs=(0,))


PIPELINE = r"""
#include <cuda/pipeline>
#include <cooperative_groups.h>
#include <cooperative_groups/memcpy_async.h>
namespace cg = cooperative_groups;

// Warp 1 produces 32-float rows into a 3-stage ring, warp 0 consumes them (roles named per thread).
// `skip` 1: the consumers read a stage before waiting for it.
__global__ void partitioned(const float* x, float* y, int rows, int skip) {
  constexpr int kStages = 3;
  __shared__ float ring[kStages][32];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, kStages> state;
  auto block = cg::this_thread_block();
  int t = threadIdx.x, lane = t % 32;
  bool producer = t >= 32;
  auto role = producer ? cuda::pipeline_role::producer : cuda::pipeline_role::consumer;
  auto pipe = cuda::make_pipeline(block, &state, role);
  float acc = 0.0f;
  for (int r = 0; r < rows; ++r) {
    float* slot = ring[r % kStages];
    if (producer) {
      pipe.producer_acquire();
      cuda::memcpy_async(&slot[lane], &x[32 * r + lane], sizeof(float), pipe);
      pipe.producer_commit();
    } else {
      float early = skip ? slot[31 - lane] : 0.0f;
      pipe.consumer_wait();
      acc += (skip ? early : slot[31 - lane]) * float(r + 1);
      pipe.consumer_release();
    }
  }
  if (!producer) y[blockIdx.x * 32 + lane] = acc;
}

// Every thread produces and consumes (the unified pipeline), or the first 32 by rank produce (a producer count).
__global__ void unified(const float* x, float* y, int rows, int by_count) {
  constexpr int kStages = 2;
  __shared__ float ring[kStages][64];
  __shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, kStages> state;
  auto block = cg::this_thread_block();
  int t = threadIdx.x;
  if (by_count) {
    auto pipe = cuda::make_pipeline(block, &state, size_t(32));
    for (int r = 0; r < rows; ++r) {
      float* slot = ring[r % kStages];
      if (t < 32) {
        pipe.producer_acquire();
        cuda::memcpy_async(cg::tiled_partition<32>(block), slot, &x[64 * r], sizeof(float) * 64, pipe);
        pipe.producer_commit();
      } else {
        pipe.consumer_wait();
        y[64 * r + t] = slot[63 - t] + slot[t - 32];
        pipe.consumer_release();
      }
    }
    return;
  }
  auto pipe = cuda::make_pipeline(block, &state);
  for (int r = 0; r < rows; ++r) {
    float* slot = ring[r % kStages];
    pipe.producer_acquire();
    cuda::memcpy_async(&slot[t], &x[64 * r + t], sizeof(float), pipe);
    pipe.producer_commit();
    pipe.consumer_wait();
    y[64 * r + t] = slot[63 - t];
    pipe.consumer_release();
  }
}

// cooperative_groups::memcpy_async shares a copy among the group; wait lands it and syncs the group.
__global__ void group_copy(const float* x, float* y, int fix) {
  __shared__ __align__(16) float s[256];
  auto block = cg::this_thread_block();
  cg::memcpy_async(block, s, x, sizeof(float) * 256);
  if (fix) cg::wait(block);
  int t = threadIdx.x;
  y[t] = s[255 - t] + s[t];
  if (!fix) cg::wait(block);
}
"""


@pytest.fixture(scope="module")
def pipeline_module(detector):
    return detector.load(PIPELINE)


def test_a_partitioned_block_scope_pipeline_hands_stages_from_producers_to_consumers(pipeline_module):
    rows = 7
    x = np.arange(32 * rows, dtype=np.float32)
    y = np.zeros(64, np.float32)
    pipeline_module.launch("partitioned", (2,), (64,), 0, [x, y, np.int32(rows), np.int32(0)], outputs=(1,))
    expected = (x.reshape(rows, 32)[:, ::-1] * (np.arange(rows, dtype=np.float32)[:, None] + 1)).sum(axis=0)
    assert np.array_equal(y, np.tile(expected, 2))
    read = _line(PIPELINE, "float early = skip ? slot[31 - lane]")
    with pytest.raises(DataRace, match=rf"__shared__ 'ring' .*line {read}"):
        pipeline_module.launch("partitioned", (1,), (64,), 0, [x, y, np.int32(rows), np.int32(1)], outputs=(1,))


@pytest.mark.parametrize("by_count", [0, 1])
def test_unified_and_counted_block_scope_pipelines(pipeline_module, by_count):
    rows = 5
    x = np.arange(64 * rows, dtype=np.float32)
    y = np.zeros(64 * rows, np.float32)
    pipeline_module.launch("unified", (1,), (64,), 0, [x, y, np.int32(rows), np.int32(by_count)], outputs=(1,))
    xr, yr = x.reshape(rows, 64), y.reshape(rows, 64)
    if by_count:
        t = np.arange(32, 64)
        assert np.array_equal(yr[:, 32:], xr[:, 63 - t] + xr[:, t - 32])
    else:
        assert np.array_equal(yr, xr[:, ::-1])


def test_cooperative_groups_memcpy_async_and_wait(pipeline_module):
    x = np.arange(256, dtype=np.float32)
    y = np.zeros(256, np.float32)
    pipeline_module.launch("group_copy", (1,), (256,), 0, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y, x[::-1] + x)
    with pytest.raises(DataRace, match=r"__shared__ 's'"):
        pipeline_module.launch("group_copy", (1,), (256,), 0, [x, y, np.int32(0)], outputs=(1,))


PTX = r"""
__device__ __forceinline__ unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// PTX mbarrier: init by one thread, an arrive that returns the phase's state, and a try_wait loop with labels and
// branches (as CUTLASS writes it). `fix` 0: no wait.
__global__ void ptx_mbarrier(const float* x, float* y, int fix) {
  __shared__ __align__(8) unsigned long long bar;
  __shared__ float s[64];
  int t = threadIdx.x;
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(blockDim.x));
  __syncthreads();
  s[t] = x[t] * 3.0f;
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(smem(&bar)) : "memory");
  if (fix)
    asm volatile("{\n\t.reg .pred P1;\n"
                 "LAB_WAIT:\n\t"
                 "mbarrier.try_wait.shared::cta.b64 P1, [%0], %1;\n\t"
                 "@P1 bra DONE;\n\t"
                 "bra LAB_WAIT;\n"
                 "DONE:\n\t}" :: "r"(smem(&bar)), "l"(state) : "memory");
  y[blockIdx.x * 64 + t] = s[63 - t];
}

// Phases by parity, with a pending count read from the state: three rounds over one barrier.
__global__ void ptx_parity(const float* x, float* y, unsigned* pending) {
  __shared__ __align__(8) unsigned long long bar;
  __shared__ float s[64];
  int t = threadIdx.x;
  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(blockDim.x));
  __syncthreads();
  float v = x[t];
  for (unsigned phase = 0; phase < 3; ++phase) {
    s[t] = v;
    unsigned long long state;
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(smem(&bar)) : "memory");
    unsigned count;
    asm volatile("mbarrier.pending_count.b64 %0, %1;" : "=r"(count) : "l"(state));
    if (t == 0) pending[phase] = count;
    unsigned done = 0;
    while (!done)
      asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                   "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(smem(&bar)), "r"(phase & 1) : "memory");
    v = s[63 - t] + 1.0f;
    __syncthreads();
  }
  y[t] = v;
}

// cp.async whose completion is an arrival of its own (.noinc): the barrier expects two per thread.
__global__ void ptx_async_arrive(const float4* x, float* y) {
  __shared__ __align__(8) unsigned long long bar;
  __shared__ __align__(16) float4 s[64];
  int t = threadIdx.x;
  if (t == 0) asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(2 * blockDim.x));
  __syncthreads();
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" :: "r"(smem(&s[t])), "l"(&x[t]));
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" :: "r"(smem(&bar)));
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];" : "=l"(state) : "r"(smem(&bar)));
  unsigned done = 0;
  while (!done)
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.shared.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem(&bar)), "l"(state));
  float4 v = s[63 - t];
  y[t] = v.x + v.y + v.z + v.w;
}

// Named barriers between a producer warp and a consumer warp: barrier 1 says a row is full (the producers arrive,
// the consumers wait), barrier 2 that it is free again. `fix` 0: the producers do not wait for barrier 2.
__global__ void named(const float* x, float* y, int rows, int fix) {
  __shared__ float row[32];
  int t = threadIdx.x, lane = t % 32;
  float acc = 0.0f;
  for (int r = 0; r < rows; ++r) {
    if (t >= 32) {
      if (r > 0 && fix) asm volatile("bar.sync 2, 64;" ::: "memory");
      row[lane] = x[32 * r + lane];
      asm volatile("bar.arrive 1, 64;" ::: "memory");
    } else {
      asm volatile("barrier.sync.aligned 1, %0;" :: "r"(64) : "memory");
      acc += row[31 - lane];
      asm volatile("bar.cta.arrive 2, 64;" ::: "memory");
    }
  }
  if (t < 32) y[blockIdx.x * 32 + lane] = acc;
}

// bar.red: a popc over the block at barrier 0, then an and over warps 0-1 at barrier 1 and an or of the negated
// predicate over warps 2-3 at barrier 2 (64 threads each), twice, the second round on new values. Each thread also
// writes a shared slot before the popc and reads another's after it (`order` 0: the read comes before the barrier).
__global__ void reductions(const int* x, unsigned* out, int order) {
  __shared__ int s[128];
  int t = threadIdx.x;
  s[t] = x[t];
  int seen = order ? 0 : s[127 - t];
  unsigned n;
  asm volatile("{ .reg .pred p;\n setp.gt.s32 p, %1, 0;\n bar.red.popc.u32 %0, 0, p; }" : "=r"(n) : "r"(x[t]) : "memory");
  if (order) seen = s[127 - t];
  for (int round = 0; round < 2; ++round) {
    int v = x[128 * (round + 1) + t];
    unsigned r;
    if (t < 64)
      asm volatile("{ .reg .pred p, q;\n setp.gt.s32 p, %1, 0;\n bar.red.and.pred q, 1, 64, p;\n"
                   " selp.u32 %0, 1, 0, q; }" : "=r"(r) : "r"(v) : "memory");
    else
      asm volatile("{ .reg .pred p, q;\n setp.gt.s32 p, %1, 0;\n barrier.cta.red.or.pred q, 2, %2, !p;\n"
                   " selp.u32 %0, 1, 0, q; }" : "=r"(r) : "r"(v), "r"(64) : "memory");
    out[4 * t + 1 + round] = r;
  }
  out[4 * t] = n;
  out[4 * t + 3] = unsigned(seen);
}

// Named-barrier misuse: counts that disagree, a count no threads can reach, a count not a multiple of 32.
__global__ void named_misuse(float* y, int which) {
  int t = threadIdx.x;
  if (which == 0) {
    if (t < 32) asm volatile("bar.sync 3, 64;");
    else asm volatile("bar.sync 3, 32;");
  } else if (which == 1) {
    asm volatile("bar.sync 4, 96;");
    if (t < 32) asm volatile("bar.sync 5, 96;");
  } else {
    asm volatile("bar.sync 6, %0;" :: "r"(24 * which));      // 48 (ptxas refuses it as a literal)
  }
  y[t] = 1.0f;
}
"""


@pytest.fixture(scope="module")
def ptx_module(detector):
    return detector.load(PTX)


def test_ptx_mbarrier_with_a_try_wait_loop(ptx_module):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(128, np.float32)
    ptx_module.launch("ptx_mbarrier", (2,), (64,), 0, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y, np.tile(3.0 * x[::-1], 2))
    read = _line(PTX, "y[blockIdx.x * 64 + t] = s[63 - t];")
    with pytest.raises(DataRace, match=rf"__shared__ 's' .*line {read}"):
        ptx_module.launch("ptx_mbarrier", (2,), (64,), 0, [x, y, np.int32(0)], outputs=(1,))


def test_ptx_mbarrier_parity_waits_and_pending_count(ptx_module):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    pending = np.full(3, 99, np.uint32)
    ptx_module.launch("ptx_parity", (1,), (64,), 0, [x, y, pending], outputs=(1, 2))
    v = x.copy()
    for _ in range(3):
        v = v[::-1] + 1.0
    assert np.array_equal(y, v)
    assert list(pending) == [64, 64, 64]      # thread 0 arrives first in every phase: all 64 were still pending


def test_ptx_cp_async_mbarrier_arrive_noinc(ptx_module):
    x = np.arange(256, dtype=np.float32)
    y = np.zeros(64, np.float32)
    ptx_module.launch("ptx_async_arrive", (1,), (64,), 0, [x, y], outputs=(1,))
    assert np.array_equal(y, x.reshape(64, 4)[::-1].sum(axis=1))


def test_named_barriers_order_a_producer_warp_and_a_consumer_warp(ptx_module):
    rows = 5
    x = np.arange(32 * rows, dtype=np.float32)
    y = np.zeros(64, np.float32)
    ptx_module.launch("named", (2,), (64,), 0, [x, y, np.int32(rows), np.int32(1)], outputs=(1,))
    assert np.array_equal(y, np.tile(x.reshape(rows, 32)[:, ::-1].sum(axis=0), 2))
    write, read = _line(PTX, "row[lane] = x[32 * r + lane];"), _line(PTX, "acc += row[31 - lane];")
    with pytest.raises(DataRace, match=rf"__shared__ 'row' .*(line {read}.*line {write}|line {write}.*line {read})"):
        ptx_module.launch("named", (1,), (64,), 0, [x, y, np.int32(rows), np.int32(0)], outputs=(1,))


def test_bar_red_counts_ands_and_ors_the_predicates_of_its_threads(ptx_module):
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 40, 3 * 128).astype(np.int32)
    x[128 + 64:128 + 128] = 1                          # round 0: warps 2-3 all positive, so or(!p) is false
    x[256:256 + 64] = 5                                # round 1: warps 0-1 all positive, so and(p) is true
    out = np.zeros(4 * 128, np.uint32)
    ptx_module.launch("reductions", (1,), (128,), 0, [x, out, np.int32(1)], outputs=(1,))
    got = out.reshape(128, 4)
    assert np.all(got[:, 0] == np.sum(x[:128] > 0))
    for rnd in range(2):
        v = x[128 * (rnd + 1):128 * (rnd + 2)]
        assert np.all(got[:64, 1 + rnd] == int(np.all(v[:64] > 0))), rnd
        assert np.all(got[64:, 1 + rnd] == int(np.any(v[64:] <= 0))), rnd
    assert list(got[[0, 64], 2]) == [1, 1] and list(got[[0, 64], 1]) == [0, 0]
    assert np.array_equal(got[:, 3], x[:128][::-1].astype(np.uint32))
    write, read = _line(PTX, "  s[t] = x[t];"), _line(PTX, "int seen = order ? 0 : s[127 - t];")
    with pytest.raises(DataRace, match=rf"__shared__ 's' .*(line {read}.*line {write}|line {write}.*line {read})"):
        ptx_module.launch("reductions", (1,), (128,), 0, [x, out, np.int32(0)], outputs=(1,))


def test_named_barrier_misuse_is_a_fault_naming_the_rule(ptx_module):
    y = np.zeros(64, np.float32)
    with pytest.raises(KernelFault, match=r"barrier 3 .* thread count of 32 while 32 thread\(s\) arrived with a "
                                          r"count of 64"):
        ptx_module.launch("named_misuse", (1,), (64,), 0, [y, np.int32(0)], outputs=(0,))
    with pytest.raises(KernelFault, match=r"barrier 4 .*thread count of 96, more than the block's 64 threads"):
        ptx_module.launch("named_misuse", (1,), (64,), 0, [y, np.int32(1)], outputs=(0,))
    with pytest.raises(KernelFault, match=r"barrier 6 .*thread count of 48, which is not a multiple of the warp size"):
        ptx_module.launch("named_misuse", (1,), (64,), 0, [y, np.int32(2)], outputs=(0,))


def test_a_named_barrier_that_cannot_complete_is_a_deadlock_naming_it(ptx_module):
    y = np.zeros(128, np.float32)
    with pytest.raises(KernelFault, match=r"no thread can make progress.*wait at bar\.sync \(line \d+\) on barrier 5 "
                                          r"\(32 of 96 threads arrived\)"):
        ptx_module.launch("named_misuse", (1,), (128,), 0, [y, np.int32(1)], outputs=(0,))


SPLIT_SITES = r"""
// Warps take different branches, each with its own __syncthreads(), as llama.cpp's tensor-core flash attention does
// (its comment: "all other warps also need to execute a __syncthreads()"). `fix` 0: warp 0 also reads before its
// barrier what warp 1 writes after its own, unordered.
__global__ void sites(float* y, int fix) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = t;
  if (t < 32) {
    if (!fix) y[t] = s[63 - t];
    __syncthreads();
  } else {
    __syncthreads();
    s[t] = 2 * t;
  }
  __syncthreads();
  y[t] = s[63 - t];
}
"""


def test_a_barrier_reached_at_two_call_sites_is_refused_unless_counted_as_the_hardware_does():
    from harness.backends import BarrierDivergence
    from harness.backends.emu.backend import EmuBackend
    strict = EmuBackend(schedules=1, timeout_s=60)
    counting = EmuBackend(schedules=1, timeout_s=60, barrier_sites="any")
    try:
        y = np.zeros(64, np.float32)
        with pytest.raises(BarrierDivergence, match=r"bar.sync is .aligned in PTX: all threads of the block must "
                                                     r"execute the same barrier instruction; barrier_sites='any'"):
            strict.load(SPLIT_SITES).launch("sites", (1,), (64,), 0, [y, np.int32(1)], outputs=(0,))
        module = counting.load(SPLIT_SITES)
        result = module.launch("sites", (1,), (64,), 0, [y, np.int32(1)], outputs=(0,))
        expected = np.where(np.arange(64)[::-1] >= 32, 2.0 * np.arange(64)[::-1], np.arange(64)[::-1])
        assert np.array_equal(y, expected.astype(np.float32))         # the phase completed for all 64 threads
        first, second = _line(SPLIT_SITES, "if (!fix)") + 1, _line(SPLIT_SITES, "s[t] = 2 * t") - 1
        assert len(result.caveats) == 1 and result.caveats[0] in result.notes
        assert re.search(rf"1 __syncthreads\(\) phase\(s\) of run 1 completed with threads at different call sites "
                         rf"\(lines ({first} and {second}|{second} and {first})\)", result.caveats[0]), result.caveats
        # the counted barrier orders warp 1's later store after warp 0's early read, and no more: that read still
        # races with the store before the barrier (the negative control)
        with pytest.raises(DataRace, match=rf"'s' .* read by .* at line {_line(SPLIT_SITES, 'if (!fix)')} and write "
                                           rf"by .* at line {_line(SPLIT_SITES, 's[t] = t;')} are unordered") as caught:
            module.launch("sites", (1,), (64,), 0, [y, np.int32(0)], outputs=(0,))
        assert f"line {_line(SPLIT_SITES, 's[t] = 2 * t')}" not in str(caught.value)
    finally:
        strict.close()
        counting.close()
