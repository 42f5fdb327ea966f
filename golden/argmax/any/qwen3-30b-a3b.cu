#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform argmax kernels, mode any, shape set qwen3-30b-a3b.
// Written by emitters.argmax; the contracts travel with this text in the KernelSource.
__global__ void gk_argmax_adv(const float* logits, int vocab, int* d_tok, int* d_pos) {
  __shared__ float bval[256];
  __shared__ int bidx[256];
  const int t = threadIdx.x;
  float v = -1e30f; int at = 0;
  for (int i = t; i < vocab; i += blockDim.x) { const float c = logits[i]; if (c > v) { v = c; at = i; } }
  bval[t] = v; bidx[t] = at;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h >>= 1) {
    // strict '>': on equal values the lower slot keeps its candidate
    if (t < h && bval[t + h] > bval[t]) { bval[t] = bval[t + h]; bidx[t] = bidx[t + h]; }
    __syncthreads();
  }
  if (t == 0) { *d_tok = bidx[0]; *d_pos = *d_pos + 1; }
}
