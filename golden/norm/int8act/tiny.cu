#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform norm kernels, mode int8act, shape set tiny.
// Written by emitters.norm; the contracts travel with this text in the KernelSource.
// one block per row; cols and eps compiled in (rms)
__global__ void k0_row(const float* x, const float* w, float* y, signed char* yq, float* ys) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 512;
  const float* xr = x + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 512; i += blockDim.x) { const double v = (double)xr[i]; sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)512 + 1e-06);
  for (int i = tid; i < 512; i += blockDim.x) yr[i] = (float)((double)xr[i] * inv) * w[i];
  __syncthreads();  // every yr element of the row is written before warps read whole blocks
  {
    const int ql = threadIdx.x & 31;
    for (int qb = threadIdx.x >> 5; qb < 16; qb += blockDim.x >> 5) {
      float qv = yr[qb * 32 + ql];
      float qa = fabsf(qv);
      for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
      qa = __shfl_sync(0xffffffffu, qa, 0);
      float qs = fmaxf(qa, 1e-30f) / 127.0f;
      int qi = (int)rintf(qv / qs);
      qi = min(127, max(-128, qi));
      if (ql == 0) ys[(long)blockIdx.x * 16 + qb] = qs;
      yq[base + qb * 32 + ql] = (signed char)qi;
    }
  }
}

// one block per row; cols and eps compiled in (rms)
__global__ void k1_row(const float* x, const float* w, const float* res, float* y, signed char* yq, float* ys) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 512;
  const float* xr = x + base;
  float* yr = y + base;
  const float* rr = res + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 512; i += blockDim.x) { const double v = ((double)xr[i] + (double)rr[i]); sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)512 + 1e-06);
  for (int i = tid; i < 512; i += blockDim.x) yr[i] = (float)(((double)xr[i] + (double)rr[i]) * inv) * w[i];
  __syncthreads();  // every yr element of the row is written before warps read whole blocks
  {
    const int ql = threadIdx.x & 31;
    for (int qb = threadIdx.x >> 5; qb < 16; qb += blockDim.x >> 5) {
      float qv = yr[qb * 32 + ql];
      float qa = fabsf(qv);
      for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
      qa = __shfl_sync(0xffffffffu, qa, 0);
      float qs = fmaxf(qa, 1e-30f) / 127.0f;
      int qi = (int)rintf(qv / qs);
      qi = min(127, max(-128, qi));
      if (ql == 0) ys[(long)blockIdx.x * 16 + qb] = qs;
      yq[base + qb * 32 + ql] = (signed char)qi;
    }
  }
}

// c = a + b (float), y = rmsnorm(c) in double; cols and eps compiled in
__global__ void k2_add_row(const float* a, const float* b, const float* w, float* c, float* y, signed char* yq, float* ys) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 512;
  const float* ar = a + base;
  const float* br = b + base;
  float* cr = c + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 512; i += blockDim.x) { const float v = ar[i] + br[i]; cr[i] = v; sq += (double)v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)512 + 1e-06);
  for (int i = tid; i < 512; i += blockDim.x) yr[i] = (float)((double)cr[i] * inv) * w[i];
  __syncthreads();  // every yr element of the row is written before warps read whole blocks
  {
    const int ql = threadIdx.x & 31;
    for (int qb = threadIdx.x >> 5; qb < 16; qb += blockDim.x >> 5) {
      float qv = yr[qb * 32 + ql];
      float qa = fabsf(qv);
      for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
      qa = __shfl_sync(0xffffffffu, qa, 0);
      float qs = fmaxf(qa, 1e-30f) / 127.0f;
      int qi = (int)rintf(qv / qs);
      qi = min(127, max(-128, qi));
      if (ql == 0) ys[(long)blockIdx.x * 16 + qb] = qs;
      yq[base + qb * 32 + ql] = (signed char)qi;
    }
  }
}

// add + rmsnorm, out also quantized (floor rule)
__global__ void gk_add_rmsnorm_q8(float* x, const float* y, float* out, const float* w, signed char* oq, float* os_, int n, float eps) {
  const int tid = threadIdx.x;
  __shared__ float sh[256];
  float sq = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) { const float v = x[i] + y[i]; x[i] = v; sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const float inv = rsqrtf(sh[0] / n + eps);
  for (int i = tid; i < n; i += blockDim.x) out[i] = x[i] * inv * w[i];
  __syncthreads();  // warps read whole 32-blocks of out written by other threads
  {
    const int ql = threadIdx.x & 31;
    for (int qb = threadIdx.x >> 5; qb < n / 32; qb += blockDim.x >> 5) {
      float qv = out[qb * 32 + ql];
      float qa = fabsf(qv);
      for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
      qa = __shfl_sync(0xffffffffu, qa, 0);
      float qs = fmaxf(qa, 1e-30f) / 127.0f;
      int qi = (int)rintf(qv / qs);
      qi = min(127, max(-128, qi));
      if (ql == 0) os_[qb] = qs;
      oq[qb * 32 + ql] = (signed char)qi;
    }
  }
}

// rmsnorm(x) * w quantized (unit rule); the f32 norm is not stored
__global__ void gk_rmsnorm_q8(const float* x, signed char* xq, float* xs, const float* w, int n, float eps) {
  const int tid = threadIdx.x;
  __shared__ float sh[256];
  float sq = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) sq += x[i] * x[i];
  sh[tid] = sq;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const float inv = rsqrtf(sh[0] / n + eps);
  {
    const int ql = threadIdx.x & 31;
    for (int qb = threadIdx.x >> 5; qb < n / 32; qb += 8) {
      float qv = x[qb * 32 + ql] * inv * w[qb * 32 + ql];
      float qa = fabsf(qv);
      for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
      qa = __shfl_sync(0xffffffffu, qa, 0);
      float qs = qa > 0.0f ? qa / 127.0f : 1.0f;
      int qi = __float2int_rn(qv / qs);
      if (ql == 0) xs[qb] = qs;
      xq[qb * 32 + ql] = (signed char)qi;
    }
  }
}

// x += y, then rmsnorm(x) * w quantized (unit rule)
__global__ void gk_add_rmsnorm_q8a(float* x, const float* y, signed char* xq, float* xs, const float* w, int n, float eps) {
  const int tid = threadIdx.x;
  __shared__ float sh[256];
  float sq = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) { const float v = x[i] + y[i]; x[i] = v; sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const float inv = rsqrtf(sh[0] / n + eps);
  {
    const int ql = threadIdx.x & 31;
    for (int qb = threadIdx.x >> 5; qb < n / 32; qb += 8) {
      float qv = x[qb * 32 + ql] * inv * w[qb * 32 + ql];
      float qa = fabsf(qv);
      for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
      qa = __shfl_sync(0xffffffffu, qa, 0);
      float qs = qa > 0.0f ? qa / 127.0f : 1.0f;
      int qi = __float2int_rn(qv / qs);
      if (ql == 0) xs[qb] = qs;
      xq[qb * 32 + ql] = (signed char)qi;
    }
  }
}
