#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform elementwise kernels, mode any, shape set tiny.
// Written by emitters.elementwise; the contracts travel with this text in the KernelSource.
// c = a + b
__global__ void k0_elem(const float* a, const float* b, float* c, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) c[idx] = a[idx] + b[idx];
}

// c = a * b
__global__ void k1_elem(const float* a, const float* b, float* c, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) c[idx] = a[idx] * b[idx];
}

// c = a - b
__global__ void k2_elem(const float* a, const float* b, float* c, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) c[idx] = a[idx] - b[idx];
}

// chain mul -> add
__global__ void k3_fused(const float* i0, const float* i1, const float* i2, float* o, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    float t = __fmul_rn(i0[idx], i1[idx]);
    t = t + i2[idx];
    o[idx] = t;
  }
}

// chain add -> silu -> mul
__global__ void k4_fused(const float* i0, const float* i1, const float* i2, float* o, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    float t = i0[idx] + i1[idx];
    t = t / (1.0f + expf(-t));
    t = t * i2[idx];
    o[idx] = t;
  }
}

// chain mul -> sub
__global__ void k5_fused(const float* i0, const float* i1, const float* i2, float* o, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    float t = __fmul_rn(i0[idx], i1[idx]);
    t = t - i2[idx];
    o[idx] = t;
  }
}

// region t0=silu(i0), t1=mul(t0,i1), t2=add(t1,i2)
__global__ void k6_region(const float* i0, const float* i1, const float* i2, float* o0, float* o1, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    float t0;
    { const float v = i0[idx]; t0 = v / (1.0f + expf(-v)); }
    const float t1 = __fmul_rn(t0, i1[idx]);
    const float t2 = t1 + i2[idx];
    o0[idx] = t2;
    o1[idx] = t0;
  }
}

// y = x / (1 + exp(-x))
__global__ void k7_silu(const float* x, float* y, int N) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < N) {
    const float v = (float)x[idx];
    y[idx] = v / (1.0f + expf(-v));
  }
}

// y (C x R) = transpose of x (R x C), both row-major
__global__ void k8_transpose(const float* x, float* y, int R, int C) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= R * C) return;
  const int r = idx / C, col = idx % C;
  y[col * R + r] = x[r * C + col];
}

// x += y (the generation lane's residual add)
__global__ void gk_add(float* x, const float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += y[i];
}
