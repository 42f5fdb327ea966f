#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform rope kernels, mode any, shape set tails.
// Written by emitters.rope; the contracts travel with this text in the KernelSource.
// rotate each head's (i, i+HALF) pairs by the cos/sin tables
__global__ void k0_rope(const float* q, const float* rc, const float* rs, float* y, int H, int HALF) {
  const int hd = 2 * HALF;
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= H * HALF) return;
  const int head = idx / HALF, i = idx % HALF;
  const float a = q[head * hd + i], b = q[head * hd + i + HALF];
  const float c = rc[i], s = rs[i];
  y[head * hd + i] = a*c - b*s;
  y[head * hd + i + HALF] = a*s + b*c;
}

// per-head RMSNorm * nw, then RoPE at position *d_pos
__global__ void gk_qk_norm_rope(float* base, const int* d_pos, int stride, const float* nw, int n_heads, int hd, float rbase, float eps) {
  const int head = blockIdx.x;
  if (head >= n_heads) return;
  const int tid = threadIdx.x;
  const int pos = *d_pos;
  float* h = base + (long)pos * stride + head * hd;
  __shared__ float sh[128];
  float sq = 0.0f;
  for (int k = tid; k < hd; k += blockDim.x) sq += h[k] * h[k];
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const float inv = rsqrtf(sh[0] / hd + eps);
  __syncthreads();  // sh[0] is read by every thread before anyone moves on
  for (int k = tid; k < hd; k += blockDim.x) h[k] = h[k] * inv * nw[k];
  __syncthreads();
  const int half = hd / 2;
  for (int k = tid; k < half; k += blockDim.x) {
    const float freq = powf(rbase, -2.0f * k / hd);
    const float ang = pos * freq, c = cosf(ang), s = sinf(ang);
    const float a = h[k], b = h[k + half];
    h[k] = a*c - b*s;
    h[k + half] = a*s + b*c;
  }
}

// blocks [0, nh) norm+rotate the query heads, [nh, nh+nkv) the K cache row
__global__ void gk_qk_norm_rope2(float* qbase, float* kbase, const int* d_pos, int kstride, const float* qnw, const float* knw, int nh, int nkv, int hd, float rbase, float eps) {
  const int blk = blockIdx.x;
  const bool is_q = blk < nh;
  const int head = is_q ? blk : blk - nh;
  const int tid = threadIdx.x;
  const int pos = *d_pos;
  float* h = is_q ? qbase + head * hd : kbase + (long)pos * kstride + head * hd;
  const float* w = is_q ? qnw : knw;
  __shared__ float sh[128];
  float sq = 0.0f;
  for (int k = tid; k < hd; k += blockDim.x) sq += h[k] * h[k];
  sh[tid] = sq;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (tid < k) sh[tid] += sh[tid + k];
    __syncthreads();
  }
  const float inv = rsqrtf(sh[0] / hd + eps);
  __syncthreads();  // sh[0] is read by every thread before anyone moves on
  for (int k = tid; k < hd; k += blockDim.x) h[k] = h[k] * inv * w[k];
  __syncthreads();
  const int half = hd / 2;
  for (int k = tid; k < half; k += blockDim.x) {
    const float freq = powf(rbase, -2.0f * k / hd);
    const float ang = pos * freq, c = cosf(ang), s = sinf(ang);
    const float a = h[k], b = h[k + half];
    h[k] = a*c - b*s;
    h[k + half] = a*s + b*c;
  }
}
