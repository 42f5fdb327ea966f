#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform moe kernels, mode twopass, shape set qwen3-30b-a3b.
// Written by emitters.moe; the contracts travel with this text in the KernelSource.
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

__global__ void moe_qact(const float* a, signed char* aqh, signed char* aql, float* as_, int K) {
  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (blk >= K / 32) return;
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

__global__ void moe_gate_up_silu(const signed char* xqh, const signed char* xql, const float* xs, const signed char* wg_q, const float* wg_s, const signed char* wu_q, const float* wu_s, const int* idx, float* h, int K, int N, int Kd) {
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
  const int n128 = Kd / 128;
  for (int b = 0; b < n128; ++b) {
    const int blk = b * 4 + lane / 8;
    const int hword = ((const int*)xqh)[b * 32 + lane];
    const int lword = ((const int*)xql)[b * 32 + lane];
    const float sh = xs[blk];
    const float sl = sh * 0.0078125f;
    const int wword0 = ((const int*)grow)[b * 32 + lane];
    ga += gsc[blk] * (sh * (float)__dp4a(wword0, hword, 0) + sl * (float)__dp4a(wword0, lword, 0));
    const int wword1 = ((const int*)urow)[b * 32 + lane];
    ua += usc[blk] * (sh * (float)__dp4a(wword1, hword, 0) + sl * (float)__dp4a(wword1, lword, 0));
  }
  for (int t = n128 * 128 + lane; t < Kd; t += 32) {
    const int blk = t / 32;
    const float sh = xs[blk];
    const float sl = sh * 0.0078125f;
    const int hv = (int)xqh[t];
    const int lv = (int)xql[t];
    { const int wv = (int)grow[t]; ga += gsc[blk] * (sh * (float)(wv * hv) + sl * (float)(wv * lv)); }
    { const int wv = (int)urow[t]; ua += usc[blk] * (sh * (float)(wv * hv) + sl * (float)(wv * lv)); }
  }
  for (int off = 16; off > 0; off >>= 1) { ga += __shfl_down_sync(0xffffffffu, ga, off); ua += __shfl_down_sync(0xffffffffu, ua, off); }
  if (lane == 0) h[row] = (ga / (1.0f + expf(-ga))) * ua;
}

__global__ void moe_down_combine(const signed char* hqh, const signed char* hql, const float* hs, const signed char* wd_q, const float* wd_s, const int* idx, const float* wc, float* H, int K, int N, int Kd) {
  const int o = blockIdx.x;
  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int e = idx[wid];
  const signed char* wrow = wd_q + ((long)e * N + o) * Kd;
  const float* wsc = wd_s + ((long)e * N + o) * (Kd / 32);
  float acc = 0.0f;
  const signed char* hhrow = hqh + (long)wid * Kd;
  const signed char* hlrow = hql + (long)wid * Kd;
  const float* hsc = hs + (long)wid * (Kd / 32);
  const int n128 = Kd / 128;
  for (int b = 0; b < n128; ++b) {
    const int blk = b * 4 + lane / 8;
    const int hword = ((const int*)hhrow)[b * 32 + lane];
    const int lword = ((const int*)hlrow)[b * 32 + lane];
    const float sh = hsc[blk];
    const float sl = sh * 0.0078125f;
    const int wword0 = ((const int*)wrow)[b * 32 + lane];
    acc += wsc[blk] * (sh * (float)__dp4a(wword0, hword, 0) + sl * (float)__dp4a(wword0, lword, 0));
  }
  for (int t = n128 * 128 + lane; t < Kd; t += 32) {
    const int blk = t / 32;
    const float sh = hsc[blk];
    const float sl = sh * 0.0078125f;
    const int hv = (int)hhrow[t];
    const int lv = (int)hlrow[t];
    { const int wv = (int)wrow[t]; acc += wsc[blk] * (sh * (float)(wv * hv) + sl * (float)(wv * lv)); }
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
