#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform moe kernels, mode dequant, shape set qwen3-30b-a3b.
// Written by emitters.moe; the contracts travel with this text in the KernelSource.
__global__ void moe_gemv(const float* a, const signed char* wq, const float* ws, float* y, int N, int K) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= N) return;
  const int nblk = K / 32;
  const signed char* wrow = wq + (long)o * K;
  const float* srow = ws + (long)o * nblk;
  double total = 0.0;
  for (int b = 0; b < nblk; ++b) {
    double part = 0.0;
    for (int j = 0; j < 32; ++j) part += (double)wrow[b * 32 + j] * (double)a[b * 32 + j];
    total += part * (double)srow[b];
  }
  y[o] = (float)total;
}

__global__ void moe_silu_had(const float* g, const float* u, float* he, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float gv = g[i];
  he[i] = (gv / (1.0f + expf(-gv))) * u[i];
}

__global__ void moe_zero(float* y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.0f;
}

__global__ void moe_combine(float* H, const float* oute, const float* wv, int e, int d) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o < d) H[o] += wv[e] * oute[o];
}

__global__ void moe_topk(const float* logits, float* w, int E, int K) {
  if (threadIdx.x != 0) return;  // one thread does the routing; the rest of the block idles
  float prob[256], left[256];
  float mx = logits[0];
  for (int e = 1; e < E; ++e) if (logits[e] > mx) mx = logits[e];
  float den = 0.0f;
  for (int e = 0; e < E; ++e) den += expf(logits[e] - mx);
  for (int e = 0; e < E; ++e) { prob[e] = expf(logits[e] - mx) / den; left[e] = prob[e]; w[e] = 0.0f; }
  float kept = 0.0f;
  for (int r = 0; r < K; ++r) {
    float best = -1e30f; int at = 0;
    for (int e = 0; e < E; ++e) if (left[e] > best) { best = left[e]; at = e; }  // strict: lowest index wins ties
    kept += prob[at]; w[at] = prob[at]; left[at] = -1e30f;
  }
  for (int e = 0; e < E; ++e) w[e] /= kept;
}

__global__ void moe_router_fast(const float* a, const signed char* wq, const float* ws, float* y, int N, int K) {
  const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (row >= N) return;
  const int lane = threadIdx.x & 31;
  const signed char* wrow = wq + (long)row * K;
  const float* srow = ws + (long)row * (K / 32);
  float acc = 0.0f;
  const int n128 = K / 128;
  for (int b = 0; b < n128; ++b) {
    const char4 wc = ((const char4*)wrow)[b * 32 + lane];
    const int blk = b * 4 + lane / 8;
    const float* xv = a + b * 128 + lane * 4;
    acc += srow[blk] * ((float)wc.x * xv[0] + (float)wc.y * xv[1] + (float)wc.z * xv[2] + (float)wc.w * xv[3]);
  }
  for (int t = n128 * 128 + lane; t < K; t += 32) {
    const int blk = t / 32;
    acc += srow[blk] * (float)wrow[t] * a[t];
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) y[row] = acc;
}

__global__ void moe_topk_idx(const float* logits, int* idx, float* w, int E, int K) {
  __shared__ float prob[1024];
  __shared__ float red[32];
  const int t = threadIdx.x, nthr = blockDim.x, wid = t >> 5, ln = t & 31, nwarp = (nthr + 31) >> 5;
  float m = -1e30f;
  for (int e = t; e < E; e += nthr) m = fmaxf(m, logits[e]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  m = __shfl_sync(0xffffffffu, m, 0);
  if (ln == 0) red[wid] = m;
  __syncthreads();
  if (t == 0) { float v = red[0]; for (int i = 1; i < nwarp; ++i) v = fmaxf(v, red[i]); red[0] = v; }
  __syncthreads();
  const float mx = red[0];
  __syncthreads();  // every thread holds mx before red is reused for the sums
  float s = 0.0f;
  for (int e = t; e < E; e += nthr) { const float p = expf(logits[e] - mx); prob[e] = p; s += p; }
  for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
  if (ln == 0) red[wid] = s;
  __syncthreads();
  if (t == 0) { float v = 0.0f; for (int i = 0; i < nwarp; ++i) v += red[i]; red[0] = v; }
  __syncthreads();
  const float total = red[0];
  if (t != 0) return;
  float kept = 0.0f;
  for (int r = 0; r < K; ++r) {
    float best = -1e30f; int at = 0;
    for (int e = 0; e < E; ++e) if (prob[e] > best) { best = prob[e]; at = e; }  // strict: lowest index wins
    idx[r] = at;
    const float p = prob[at] / total;
    w[r] = p; kept += p; prob[at] = -1e30f;
  }
  for (int r = 0; r < K; ++r) w[r] /= kept;
}

__global__ void gk_moe_gate_up_deq(const float* x, const signed char* wg_q, const float* wg_s, const signed char* wu_q, const float* wu_s, const int* idx, float* h, int K, int N, int Kd) {
  const long row = (blockIdx.x * (long)blockDim.x + threadIdx.x) >> 5;
  if (row >= (long)K * N) return;
  const int lane = threadIdx.x & 31;
  const int kk = row / N, j = row % N;
  const int e = idx[kk];
  const long wofs = ((long)e * N + j) * Kd;
  const signed char* grow = wg_q + wofs;
  const signed char* urow = wu_q + wofs;
  const float* gsc = wg_s + ((long)e * N + j) * (Kd / 32);
  const float* usc = wu_s + ((long)e * N + j) * (Kd / 32);
  float ga = 0.0f, ua = 0.0f;
  const int n512 = Kd / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float* xv = x + b * 512 + lane * 16;
    const int4 wpack0 = ((const int4*)grow)[b * 32 + lane];
    const signed char* wb0 = (const signed char*)&wpack0;
    float part0 = 0.f;
    const int4 wpack1 = ((const int4*)urow)[b * 32 + lane];
    const signed char* wb1 = (const signed char*)&wpack1;
    float part1 = 0.f;
    for (int i = 0; i < 16; ++i) {
      const float xi = xv[i];
      part0 += (float)wb0[i] * xi;
      part1 += (float)wb1[i] * xi;
    }
    ga += gsc[blk] * part0;
    ua += usc[blk] * part1;
  }
  for (int t = n512 * 512 + lane; t < Kd; t += 32) {
    const int blk = t / 32;
    const float xi = x[t];
    ga += gsc[blk] * (float)grow[t] * xi;
    ua += usc[blk] * (float)urow[t] * xi;
  }
  for (int off = 16; off > 0; off >>= 1) { ga += __shfl_down_sync(0xffffffffu, ga, off); ua += __shfl_down_sync(0xffffffffu, ua, off); }
  if (lane == 0) h[row] = (ga / (1.0f + expf(-ga))) * ua;
}

__global__ void gk_moe_down_deq(const float* hbuf, const signed char* wd_q, const float* wd_s, const int* idx, const float* wc, float* H, int K, int N, int Kd) {
  const int o = blockIdx.x;
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int e = idx[wid];
  const signed char* wrow = wd_q + ((long)e * N + o) * Kd;
  const float* wsc = wd_s + ((long)e * N + o) * (Kd / 32);
  float acc = 0.0f;
  const float* hrow = hbuf + (long)wid * Kd;
  const int n512 = Kd / 512;
  for (int b = 0; b < n512; ++b) {
    const int blk = b * 16 + lane / 2;
    const float* xv = hrow + b * 512 + lane * 16;
    const int4 wpack0 = ((const int4*)wrow)[b * 32 + lane];
    const signed char* wb0 = (const signed char*)&wpack0;
    float part0 = 0.f;
    for (int i = 0; i < 16; ++i) {
      const float xi = xv[i];
      part0 += (float)wb0[i] * xi;
    }
    acc += wsc[blk] * part0;
  }
  for (int t = n512 * 512 + lane; t < Kd; t += 32) {
    const int blk = t / 32;
    const float xi = hrow[t];
    acc += wsc[blk] * (float)wrow[t] * xi;
  }
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  __shared__ float part[64];
  if (lane == 0) part[wid] = wc[wid] * acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int kk = 0; kk < K; ++kk) sum += part[kk];  // expert order, as routed
    H[o] = sum;
  }
}
