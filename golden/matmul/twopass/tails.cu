#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform matmul kernels, mode twopass, shape set tails.
// Written by emitters.matmul; the contracts travel with this text in the KernelSource.
__global__ void k0_qact(const float* a, signed char* aqh, signed char* aql, float* as_, int M, int K) {
  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (blk >= M * (K / 32)) return;  // whole warps leave together
  const int lane = threadIdx.x & 31;
  float qv = a[blk * 32 + lane];
  float qa = fabsf(qv);
  for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
  qa = __shfl_sync(0xffffffffu, qa, 0);
  float qs = fmaxf(qa, 1e-30f) / 127.0f;
  int qi = (int)rintf(qv / qs);
  qi = min(127, max(-128, qi));
  if (lane == 0) as_[blk] = qs;
  aqh[blk * 32 + lane] = (signed char)qi;
  float qr = qv - (float)qi * qs;
  float qls = qs * 0.0078125f;
  int qlo = (int)rintf(qr / qls);
  qlo = min(127, max(-128, qlo));
  aql[blk * 32 + lane] = (signed char)qlo;
}

__global__ void k0_q8dp4a(const signed char* aqh, const signed char* aql, const float* as_, const signed char* wq, const __half* ws, float* y, int M, int N, int K) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const __half* srow = ws + (long)row * (K / 32);
  for (int r = 0; r < M; ++r) {
    const signed char* hrow = aqh + (long)r * K;
    const signed char* lrow = aql + (long)r * K;
    const float* arsc = as_ + (long)r * (K / 32);
    float acc = 0.0f;
    const int n128 = K / 128;
    for (int b = 0; b < n128; ++b) {
      const int blk = b * 4 + lane / 8;
      const int hword = ((const int*)hrow)[b * 32 + lane];
      const int lword = ((const int*)lrow)[b * 32 + lane];
      const float sh = arsc[blk];
      const int wword0 = ((const int*)wrow)[b * 32 + lane];
      acc += __half2float(srow[blk]) * (sh * (float)__dp4a(wword0, hword, 0) + sh * 0.0078125f * (float)__dp4a(wword0, lword, 0));
    }
    for (int t = n128 * 128 + lane; t < K; t += 32) {
      const int blk = t / 32;
      const float sh = arsc[blk];
      const int hv = (int)hrow[t];
      const int lv = (int)lrow[t];
      { const int wv = (int)wrow[t]; acc += __half2float(srow[blk]) * (sh * (float)(wv * hv) + sh * 0.0078125f * (float)(wv * lv)); }
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[(long)r * N + row] = acc;
  }
}
