"""<cuda_pipeline.h>'s asynchronous copies on emu: a copy lands when a wait completes its batch (the latest moment a
GPU may complete it), so a read before the wait sees the old bytes and a read by another thread that no barrier
orders after the wait is a DataRace at the wait's line; the negative control waits before the barrier."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace, KernelFault

SOURCE = r"""
#include <cuda_pipeline.h>

// Three batches of one float each, then a 16-byte copy whose last 8 bytes are zero-filled. What the thread sees of
// its own destinations after each wait goes to `seen` (its own copies: no race).
__global__ void batches(const float* x, float* seen, float* tail) {
  __shared__ float s[64][3];
  __shared__ __align__(16) float v[64][4];
  int t = threadIdx.x;
  for (int k = 0; k < 3; ++k) {
    s[t][k] = -1.0f;                                   // the old bytes
    __pipeline_memcpy_async(&s[t][k], &x[3 * t + k], sizeof(float));
    __pipeline_commit();
  }
  __pipeline_memcpy_async(&v[t][0], &x[0], 16, 8);     // not committed: no wait completes it
  __pipeline_wait_prior(2);                            // the oldest batch only
  for (int k = 0; k < 3; ++k) seen[6 * t + k] = s[t][k];
  __pipeline_wait_prior(0);                            // every committed batch
  for (int k = 0; k < 3; ++k) seen[6 * t + 3 + k] = s[t][k];
  v[t][2] = 7.0f;
  __pipeline_commit();
  __pipeline_wait_prior(0);                            // now the 16-byte copy lands: 8 bytes, then 8 zero bytes
  for (int k = 0; k < 4; ++k) tail[4 * t + k] = v[t][k];
}

__global__ void stage(const float* x, float* y, int fix) {
  __shared__ float s[64];
  int t = threadIdx.x;
  __pipeline_memcpy_async(&s[t], &x[blockIdx.x * 64 + t], sizeof(float));
  __pipeline_commit();
  if (fix) __pipeline_wait_prior(0);
  __syncthreads();
  if (!fix) __pipeline_wait_prior(0);   // the copy lands after the barrier: unordered with the other warps' reads
  y[blockIdx.x * 64 + t] = s[63 - t];
}

// The same through inline PTX, as hand-tuned kernels write it: shared-space addresses from
// __cvta_generic_to_shared, a 16-byte cp.async.cg with an L2 prefetch hint, one with a source size (zero fill),
// the group commit and the waits.
__device__ void copy16(void* smem, const void* gmem, int src_bytes) {
  unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if (src_bytes == 16)
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" :: "r"(dst), "l"(gmem));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" :: "r"(dst), "l"(gmem), "r"(src_bytes));
}
__global__ void ptx_tiles(const float4* x, float* y, int src_bytes, int fix) {
  extern __shared__ __align__(16) float4 tile[];
  int t = threadIdx.x;
  copy16(&tile[t], &x[blockIdx.x * blockDim.x + t], src_bytes);
  asm volatile("cp.async.commit_group;\n" ::);
  if (fix) asm volatile("cp.async.wait_group %0;\n" :: "n"(0));
  __syncthreads();
  if (!fix) asm volatile("cp.async.wait_all;\n" ::);
  float4 v = tile[blockDim.x - 1 - t];
  y[blockIdx.x * blockDim.x + t] = v.x + v.y + v.z + v.w;
}

__global__ void not_shared(const float* x, float* y) {
  y[0] = (float)__cvta_generic_to_shared(x);
}

__global__ void misaligned(const float* x, float* y, int size) {
  __shared__ __align__(16) float s[8];
  __pipeline_memcpy_async(&s[1], &x[1], size);         // 16 bytes at a 4-byte boundary, or a size of 12
  __pipeline_commit();
  __pipeline_wait_prior(0);
  y[threadIdx.x] = s[1];
}
"""


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def test_a_copy_lands_when_a_wait_completes_its_batch(module):
    x = np.arange(1, 193, dtype=np.float32)
    seen = np.zeros(6 * 64, np.float32)
    tail = np.zeros(4 * 64, np.float32)
    module.launch("batches", (1,), (64,), 0, [x, seen, tail], outputs=(1, 2))
    seen = seen.reshape(64, 6)
    mine = x.reshape(64, 3)
    assert np.array_equal(seen[:, 0], mine[:, 0]) and np.all(seen[:, 1:3] == -1.0)   # after wait_prior(2)
    assert np.array_equal(seen[:, 3:], mine)                                           # after wait_prior(0)
    # the late batch: x[0], x[1], then the zero fill over the 7.0 the thread stored before the copy landed
    assert np.array_equal(tail.reshape(64, 4)[:, :3], np.tile([x[0], x[1], 0.0], (64, 1)))
    assert np.all(tail.reshape(64, 4)[:, 3] == 0.0)


def test_a_copy_waited_for_after_the_barrier_races(module):
    line = SOURCE.split("\n").index("  if (!fix) __pipeline_wait_prior(0);   // the copy lands after the barrier: "
                                    "unordered with the other warps' reads") + 1
    x = np.arange(128, dtype=np.float32)
    y = np.zeros(128, np.float32)
    with pytest.raises(DataRace, match=rf"__shared__ 's' .*(write by .* at line {line}|at line {line} are unordered)"):
        module.launch("stage", (2,), (64,), 0, [x, y, np.int32(0)], outputs=(1,))
    module.launch("stage", (2,), (64,), 0, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y, x.reshape(2, 64)[:, ::-1].ravel())


@pytest.mark.parametrize("size, rule", [(16, "aligned to the size"), (12, "size of 4, 8 or 16")])
def test_a_misaligned_or_odd_sized_copy_traps(module, size, rule):
    x = np.zeros(8, np.float32)
    y = np.zeros(1, np.float32)
    with pytest.raises(KernelFault, match=rf"__pipeline_memcpy_async at line \d+ with size {size} .*{rule}"):
        module.launch("misaligned", (1,), (1,), 0, [x, y, np.int32(size)], outputs=(1,))
    module.launch("misaligned", (1,), (1,), 0, [x, y, np.int32(4)], outputs=(1,))   # the control: 4 bytes


@pytest.mark.parametrize("src_bytes", [16, 8, 0])
def test_inline_ptx_cp_async_with_commit_and_waits(module, src_bytes):
    x = np.arange(4 * 128, dtype=np.float32) + 1
    y = np.zeros(128, np.float32)
    module.launch("ptx_tiles", (2,), (64,), 64 * 16, [x, y, np.int32(src_bytes), np.int32(1)], outputs=(1,))
    quads = x.reshape(2, 64, 4)[:, ::-1, :].copy()
    quads[:, :, src_bytes // 4:] = 0.0                     # the bytes past the source size are zero-filled
    assert np.array_equal(y, quads.sum(axis=2).ravel())
    line = SOURCE.split("\n").index('  if (!fix) asm volatile("cp.async.wait_all;\\n" ::);') + 1
    with pytest.raises(DataRace, match=rf"extern __shared__ 'tile' .*write by .* at line {line} are unordered"):
        module.launch("ptx_tiles", (2,), (64,), 64 * 16, [x, y, np.int32(src_bytes), np.int32(0)], outputs=(1,))


def test_a_shared_space_address_of_global_memory_traps(module):
    with pytest.raises(KernelFault, match=r"shared-space address of .* at line \d+, which is not shared memory"):
        module.launch("not_shared", (1,), (1,), 0, [np.zeros(1, np.float32), np.zeros(1, np.float32)], outputs=(1,))


PIPELINE = r"""
#include <cuda/pipeline>

// Two stages of a thread-scope pipeline: each thread copies its own elements (a float4 and a float) per stage;
// consumer_wait lands the oldest stage only. `late`: the copies are read by other threads after a barrier that comes
// before the wait.
__global__ void stages(const float4* x, const float* y, float* out, int late) {
  __shared__ __align__(16) float4 a[2][32];
  __shared__ float b[2][32];
  int t = threadIdx.x;
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const auto shape = cuda::aligned_size_t<alignof(float4)>(sizeof(float4));
  for (int s = 0; s < 2; ++s) {
    pipe.producer_acquire();
    cuda::memcpy_async(&a[s][t], &x[32 * s + t], shape, pipe);
    cuda::memcpy_async(&b[s][t], &y[32 * s + t], sizeof(float), pipe);
    pipe.producer_commit();
  }
  b[1][t] = -1.0f;                       // stage 1 has not landed: its copy will overwrite this
  if (!late) pipe.consumer_wait();       // stage 0
  __syncthreads();
  if (late) pipe.consumer_wait();
  float4 v = a[0][31 - t];
  out[3 * t] = v.x + v.y + v.z + v.w + b[0][31 - t];
  out[3 * t + 1] = b[1][t];              // still this thread's own -1
  pipe.consumer_release();
  pipe.consumer_wait();                  // stage 1
  out[3 * t + 2] = b[1][t];
}
"""


def test_a_thread_scope_cuda_pipeline_lands_stages_in_order(detector):
    mod = detector.load(PIPELINE)
    x, y = np.arange(256, dtype=np.float32).reshape(64, 4), np.arange(64, dtype=np.float32) * 10
    out = np.zeros(96, np.float32)
    mod.launch("stages", (1,), (32,), 0, [x, y, out, np.int32(0)], outputs=(2,))
    t = np.arange(32)
    assert np.array_equal(out[0::3], x[31 - t].sum(axis=1) + y[31 - t])
    assert np.all(out[1::3] == -1.0) and np.array_equal(out[2::3], y[32 + t])
    with pytest.raises(DataRace, match=r"__shared__ '[ab]'"):
        mod.launch("stages", (1,), (32,), 0, [x, y, out, np.int32(1)], outputs=(2,))
