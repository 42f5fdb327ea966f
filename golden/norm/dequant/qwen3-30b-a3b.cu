#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform norm kernels, mode dequant, shape set qwen3-30b-a3b.
// Written by emitters.norm; the contracts travel with this text in the KernelSource.
// one block per row; cols and eps compiled in (rms)
__global__ void k0_row(const float* x, const float* w, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 2048;
  const float* xr = x + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) { const double v = (double)xr[i]; sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)2048 + 1e-06);
  for (int i = tid; i < 2048; i += blockDim.x) yr[i] = (float)((double)xr[i] * inv) * w[i];
}

// one block per row; cols and eps compiled in (rms)
__global__ void k1_row(const float* x, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 2048;
  const float* xr = x + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) { const double v = (double)xr[i]; sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)2048 + 1e-06);
  for (int i = tid; i < 2048; i += blockDim.x) yr[i] = (float)((double)xr[i] * inv);
}

// one block per row; cols and eps compiled in (rms)
__global__ void k2_row(const float* x, const float* w, const float* res, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 2048;
  const float* xr = x + base;
  float* yr = y + base;
  const float* rr = res + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) { const double v = ((double)xr[i] + (double)rr[i]); sq += v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)2048 + 1e-06);
  for (int i = tid; i < 2048; i += blockDim.x) yr[i] = (float)(((double)xr[i] + (double)rr[i]) * inv) * w[i];
}

// one block per row; cols and eps compiled in (softmax)
__global__ void k3_row(const float* x, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 128;
  const float* xr = x + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double top = -1e30;
  for (int i = tid; i < 128; i += blockDim.x) top = fmax(top, (double)xr[i]);
  sh[tid] = top;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] = fmax(sh[tid], sh[tid + k]);
    __syncthreads();
  }
  const double rowmax = sh[0];
  __syncthreads();
  double se = 0.0;
  for (int i = tid; i < 128; i += blockDim.x) se += exp((double)xr[i] - rowmax);
  sh[tid] = se;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double total = sh[0];
  for (int i = tid; i < 128; i += blockDim.x) yr[i] = (float)(exp((double)xr[i] - rowmax) / total);
}

// one block per row; cols and eps compiled in (layernorm)
__global__ void k4_row(const float* x, const float* w, const float* bias, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 2048;
  const float* xr = x + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double s1 = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) s1 += (double)xr[i];
  sh[tid] = s1;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double mean = sh[0] / (double)2048;
  __syncthreads();
  double s2 = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) { const double dv = (double)xr[i] - mean; s2 += dv * dv; }
  sh[tid] = s2;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double denom = sqrt(sh[0] / (double)2048 + 1e-06);
  for (int i = tid; i < 2048; i += blockDim.x) yr[i] = (float)(((double)xr[i] - mean) / denom * (double)w[i] + (double)bias[i]);
}

// c = a + b (float), y = rmsnorm(c) in double; cols and eps compiled in
__global__ void k5_add_row(const float* a, const float* b, const float* w, float* c, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 2048;
  const float* ar = a + base;
  const float* br = b + base;
  float* cr = c + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) { const float v = ar[i] + br[i]; cr[i] = v; sq += (double)v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)2048 + 1e-06);
  for (int i = tid; i < 2048; i += blockDim.x) yr[i] = (float)((double)cr[i] * inv) * w[i];
}

// c = a + b (float), y = rmsnorm(c) in double; cols and eps compiled in
__global__ void k7_add_row(const float* a, const float* b, float* c, float* y) {
  const int tid = threadIdx.x;
  const long base = (long)blockIdx.x * 2048;
  const float* ar = a + base;
  const float* br = b + base;
  float* cr = c + base;
  float* yr = y + base;
  __shared__ double sh[256];
  double sq = 0.0;
  for (int i = tid; i < 2048; i += blockDim.x) { const float v = ar[i] + br[i]; cr[i] = v; sq += (double)v * v; }
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const double inv = 1.0 / sqrt(sh[0] / (double)2048 + 1e-06);
  for (int i = tid; i < 2048; i += blockDim.x) yr[i] = (float)((double)cr[i] * inv);
}

// one block for the decode row; f32 tree, rsqrtf
__global__ void gk_rmsnorm(float* out, const float* x, const float* w, int n, float eps) {
  const int tid = threadIdx.x;
  __shared__ float sh[256];
  float sq = 0.0f;
  for (int i = tid; i < n; i += blockDim.x) sq += x[i] * x[i];
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const float inv = rsqrtf(sh[0] / n + eps);
  for (int i = tid; i < n; i += blockDim.x) out[i] = x[i] * inv * w[i];
}

// x += y in place, out = rmsnorm(x) * w
__global__ void gk_add_rmsnorm(float* x, const float* y, float* out, const float* w, int n, float eps) {
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
}
