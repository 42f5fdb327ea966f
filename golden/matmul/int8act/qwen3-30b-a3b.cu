#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform matmul kernels, mode int8act, shape set qwen3-30b-a3b.
// Written by emitters.matmul; the contracts travel with this text in the KernelSource.
__global__ void k0_qact(const float* a, signed char* aq, float* as_, int M, int K) {
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
  aq[blk * 32 + lane] = (signed char)qi;
}

__global__ void k0_q8dp4a(const signed char* aq, const float* as_, const signed char* wq, const __half* ws, float* y, int M, int N, int K) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const __half* srow = ws + (long)row * (K / 32);
  for (int r = 0; r < M; ++r) {
    const signed char* arow = aq + (long)r * K;
    const float* arsc = as_ + (long)r * (K / 32);
    float acc = 0.0f;
    const int n512 = K / 512;
    for (int b = 0; b < n512; ++b) {
      const int blk = b * 16 + lane / 2;
      const float asc = arsc[blk];
      const int4 apack = ((const int4*)arow)[b * 32 + lane];
      const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
      const float wa0 = __half2float(srow[blk]) * asc;
      int dot0 = __dp4a(wpack0.x, apack.x, 0); dot0 = __dp4a(wpack0.y, apack.y, dot0); dot0 = __dp4a(wpack0.z, apack.z, dot0); dot0 = __dp4a(wpack0.w, apack.w, dot0);
      acc += (float)dot0 * wa0;
    }
    const int n128 = K / 128;
    for (int b = n512 * 4; b < n128; ++b) {
      const int blk = b * 4 + lane / 8;
      const float asc = arsc[blk];
      const int aword = ((const int*)arow)[b * 32 + lane];
      const int wword0 = ((const int*)wrow)[b * 32 + lane];
      acc += (float)__dp4a(wword0, aword, 0) * (__half2float(srow[blk]) * asc);
    }
    for (int t = n128 * 128 + lane; t < K; t += 32) {
      const int blk = t / 32;
      const float asc = arsc[blk];
      const int av = (int)arow[t];
      acc += (float)(av * (int)wrow[t]) * (__half2float(srow[blk]) * asc);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[(long)r * N + row] = acc;
  }
}

__global__ void gk_quant_act(const float* x, signed char* xq, float* xs, int K) {
  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if ((long)blk * 32 >= K) return;
  const int lane = threadIdx.x & 31;
  float qv = x[blk * 32 + lane];
  float qa = fabsf(qv);
  for (int off = 16; off > 0; off >>= 1) qa = fmaxf(qa, __shfl_down_sync(0xffffffffu, qa, off));
  qa = __shfl_sync(0xffffffffu, qa, 0);
  float qs = qa > 0.0f ? qa / 127.0f : 1.0f;
  int qi = __float2int_rn(qv / qs);
  if (lane == 0) xs[blk] = qs;
  xq[blk * 32 + lane] = (signed char)qi;
}

__global__ void gk_gemv(float* y, const signed char* wq, const float* ws, const signed char* xq, const float* xs, int K, int N) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const float* srow = ws + (long)row * (K / 32);
  float acc = 0.f;
  const int n512 = K / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float asc = xs[blk];
    const int4 apack = ((const int4*)xq)[b * 32 + lane];
    const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
    int dot0 = __dp4a(wpack0.x, apack.x, 0); dot0 = __dp4a(wpack0.y, apack.y, dot0); dot0 = __dp4a(wpack0.z, apack.z, dot0); dot0 = __dp4a(wpack0.w, apack.w, dot0);
    acc += (float)dot0 * (srow[blk] * asc);
  }
  for (int t = n512 * 512 + lane; t < K; t += 32) {
    const int blk = t / 32;
    const float asc = xs[blk];
    const int av = (int)xq[t];
    acc += (float)(av * (int)wrow[t]) * (srow[blk] * asc);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}

__global__ void gk_gemv_kv(float* cache, const int* d_pos, int KD, const signed char* wq, const float* ws, const signed char* xq, const float* xs, int K, int N) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const float* srow = ws + (long)row * (K / 32);
  float acc = 0.f;
  const int n512 = K / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float asc = xs[blk];
    const int4 apack = ((const int4*)xq)[b * 32 + lane];
    const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
    int dot0 = __dp4a(wpack0.x, apack.x, 0); dot0 = __dp4a(wpack0.y, apack.y, dot0); dot0 = __dp4a(wpack0.z, apack.z, dot0); dot0 = __dp4a(wpack0.w, apack.w, dot0);
    acc += (float)dot0 * (srow[blk] * asc);
  }
  for (int t = n512 * 512 + lane; t < K; t += 32) {
    const int blk = t / 32;
    const float asc = xs[blk];
    const int av = (int)xq[t];
    acc += (float)(av * (int)wrow[t]) * (srow[blk] * asc);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) cache[(long)(*d_pos) * KD + row] = acc;
}

__global__ void gk_gemv_qkv(float* qbuf, float* kc, float* vc, const int* d_pos, int KD, const signed char* wqq, const float* wqs, const signed char* wkq, const float* wks, const signed char* wvq, const float* wvs, const signed char* xq, const float* xs, int K, int QD) {
  const int nall = QD + 2 * KD;
  const int og = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (og >= nall) return;
  // The output range picks the weight: [0,QD) -> Q, then K, then V (cache row *d_pos).
  const signed char* wsel; const float* ssel; float* dst; long at; int row;
  if (og < QD) { wsel = wqq; ssel = wqs; row = og; dst = qbuf; at = row; }
  else if (og < QD + KD) { wsel = wkq; ssel = wks; row = og - QD; dst = kc; at = (long)(*d_pos) * KD + row; }
  else { wsel = wvq; ssel = wvs; row = og - QD - KD; dst = vc; at = (long)(*d_pos) * KD + row; }
  const signed char* wrow = wsel + (long)row * K;
  const float* srow = ssel + (long)row * (K / 32);
  float acc = 0.f;
  const int n512 = K / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float asc = xs[blk];
    const int4 apack = ((const int4*)xq)[b * 32 + lane];
    const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
    int dot0 = __dp4a(wpack0.x, apack.x, 0); dot0 = __dp4a(wpack0.y, apack.y, dot0); dot0 = __dp4a(wpack0.z, apack.z, dot0); dot0 = __dp4a(wpack0.w, apack.w, dot0);
    acc += (float)dot0 * (srow[blk] * asc);
  }
  for (int t = n512 * 512 + lane; t < K; t += 32) {
    const int blk = t / 32;
    const float asc = xs[blk];
    const int av = (int)xq[t];
    acc += (float)(av * (int)wrow[t]) * (srow[blk] * asc);
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) dst[at] = acc;
}

// Int8 tensor-core Q8_0 GEMM (mma.sync m16n8k32 s8, nt=2); needs sm_80+.
__global__ void gk_marlin_q8(const signed char* Xq, const float* Xs, const signed char* Wq, const float* Ws, float* Y, int B, int N, int K) {
  const int NT = 2;
  const int KB = K / 32;
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  const int ntiles = N / (8 * NT);
  const int m0 = (warp / ntiles) * 16, n0 = (warp % ntiles) * 8 * NT;
  const int g = lane >> 2, q = lane & 3;  // fragment group (row) and thread-in-group (k / col pair)
  float acc[NT][4];
  for (int j = 0; j < NT; ++j) { acc[j][0] = 0.f; acc[j][1] = 0.f; acc[j][2] = 0.f; acc[j][3] = 0.f; }
  const signed char* xr0 = Xq + (long)(m0 + g) * K;
  const signed char* xr1 = Xq + (long)(m0 + g + 8) * K;
  for (int kb = 0; kb < KB; ++kb) {
    const int k0 = kb * 32;
    // A fragment (16 x 32, row-major): rows g and g+8, bytes 4q..4q+3 of each 16-byte half.
    const int fa0 = *(const int*)(xr0 + k0 + q * 4);
    const int fa1 = *(const int*)(xr1 + k0 + q * 4);
    const int fa2 = *(const int*)(xr0 + k0 + 16 + q * 4);
    const int fa3 = *(const int*)(xr1 + k0 + 16 + q * 4);
    const float xsc0 = Xs[(long)(m0 + g) * KB + kb], xsc1 = Xs[(long)(m0 + g + 8) * KB + kb];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int c0 = n0 + j * 8;
      // B fragment (32 x 8, column-major = weight row c0+g): bytes 4q..4q+3 of each half.
      const signed char* wr = Wq + (long)(c0 + g) * K + k0;
      const int fb0 = *(const int*)(wr + q * 4);
      const int fb1 = *(const int*)(wr + 16 + q * 4);
      int r0 = 0, r1 = 0, r2 = 0, r3 = 0;
      asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+r"(r0), "+r"(r1), "+r"(r2), "+r"(r3)
                   : "r"(fa0), "r"(fa1), "r"(fa2), "r"(fa3), "r"(fb0), "r"(fb1));
      // C fragment: rows g / g+8, columns c0+2q and c0+2q+1.
      const float wsc0 = Ws[(long)(c0 + q * 2) * KB + kb], wsc1 = Ws[(long)(c0 + q * 2 + 1) * KB + kb];
      acc[j][0] += (float)r0 * (wsc0 * xsc0);
      acc[j][1] += (float)r1 * (wsc1 * xsc0);
      acc[j][2] += (float)r2 * (wsc0 * xsc1);
      acc[j][3] += (float)r3 * (wsc1 * xsc1);
    }
  }
  for (int j = 0; j < NT; ++j) {
    const int ca = n0 + j * 8 + q * 2, cb = ca + 1, ra = m0 + g, rb = ra + 8;
    if (ra < B) { if (ca < N) Y[(long)ra * N + ca] = acc[j][0]; if (cb < N) Y[(long)ra * N + cb] = acc[j][1]; }
    if (rb < B) { if (ca < N) Y[(long)rb * N + ca] = acc[j][2]; if (cb < N) Y[(long)rb * N + cb] = acc[j][3]; }
  }
}
