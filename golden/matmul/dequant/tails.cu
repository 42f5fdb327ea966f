#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform matmul kernels, mode dequant, shape set tails.
// Written by emitters.matmul; the contracts travel with this text in the KernelSource.
// Dequant Q8 GEMV: one thread per output, f64 accumulation.
__global__ void k0_q8gemv(const float* a, const signed char* wq, const float* ws, float* y, int M, int N, int K) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= M * N) return;
  const int r = idx / N, n = idx % N, nblk = K / 32;
  const signed char* wrow = wq + (long)n * K;
  const float* arow = a + (long)r * K;
  double total = 0.0;
  for (int b = 0; b < nblk; ++b) {
    double part = 0.0;  // the block's integer-weighted sum, scaled once per block
    for (int j = 0; j < 32; ++j) part += (double)wrow[b * 32 + j] * (double)arow[b * 32 + j];
    total += part * (double)ws[(long)n * nblk + b];
  }
  y[idx] = (float)total;
}

__global__ void gk_gemv_deq(float* y, const signed char* wq, const float* ws, const float* x, int K, int N) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const float* srow = ws + (long)row * (K / 32);
  float acc = 0.f;
  const int n512 = K / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float* xv = x + b * 512 + lane * 16;
    const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
    const signed char* wb0 = (const signed char*)&wpack0;
    float part0 = 0.f;
    for (int i = 0; i < 16; ++i) {
      const float xi = xv[i];
      part0 += (float)wb0[i] * xi;
    }
    acc += srow[blk] * part0;
  }
  for (int t = n512 * 512 + lane; t < K; t += 32) {
    const int blk = t / 32;
    const float xi = x[t];
    acc += srow[blk] * (float)wrow[t] * xi;
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}

__global__ void gk_gemv_kv_deq(float* cache, const int* d_pos, int KD, const signed char* wq, const float* ws, const float* x, int K, int N) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const float* srow = ws + (long)row * (K / 32);
  float acc = 0.f;
  const int n512 = K / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float* xv = x + b * 512 + lane * 16;
    const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
    const signed char* wb0 = (const signed char*)&wpack0;
    float part0 = 0.f;
    for (int i = 0; i < 16; ++i) {
      const float xi = xv[i];
      part0 += (float)wb0[i] * xi;
    }
    acc += srow[blk] * part0;
  }
  for (int t = n512 * 512 + lane; t < K; t += 32) {
    const int blk = t / 32;
    const float xi = x[t];
    acc += srow[blk] * (float)wrow[t] * xi;
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) cache[(long)(*d_pos) * KD + row] = acc;
}

// Plain f32 matmul (weights that are not Q8_0).
__global__ void k0_matmul(const float* a, const float* b, float* c, int M, int N, int K) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= M * N) return;
  const int r = idx / N, col = idx % N;
  float s = 0;
  for (int k = 0; k < K; ++k) s += a[(long)r * K + k] * b[(long)k * N + col];
  c[idx] = s;
}
