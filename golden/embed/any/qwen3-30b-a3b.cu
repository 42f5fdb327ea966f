#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform embed kernels, mode any, shape set qwen3-30b-a3b.
// Written by emitters.embed; the contracts travel with this text in the KernelSource.
__global__ void gk_embed(float* x, const signed char* wq, const float* ws, const int* d_tok, int E) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= E) return;
  const long tok = *d_tok;
  x[t] = (float)wq[tok * E + t] * ws[tok * (E / 32) + t / 32];
}
