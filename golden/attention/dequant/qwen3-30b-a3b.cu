#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

// qconform attention kernels, mode dequant, shape set qwen3-30b-a3b.
// Written by emitters.attention; the contracts travel with this text in the KernelSource.
// one block per query head; scores in static shared sc[L] (L compiled in)
__global__ void k0_attn(const float* q, const float* kc, const float* vc, float* ctx, int L, int H, int KV, int HD, float scale) {
  const int head = blockIdx.x;
  if (head >= H) return;
  const int kvh = head / (H / KV);
  const float* qh = q + head * HD;
  __shared__ float sc[300];
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  for (int j = warp; j < L; j += nwarps) {
    const float* kj = kc + (long)j * KV * HD + kvh * HD;
    float s = 0.0f;
    for (int e = lane; e < HD; e += 32) s += qh[e] * kj[e];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) sc[j] = s * scale;
  }
  __syncthreads();
  float m = -1e30f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, sc[j]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) { float mm = red[0]; for (int w = 1; w < nwarps; ++w) mm = fmaxf(mm, red[w]); red[0] = mm; }
  __syncthreads();
  const float mx = red[0];
  __syncthreads();  // all have read the max before red[] takes the sums
  float ss = 0.0f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) { const float ev = expf(sc[j] - mx); sc[j] = ev; ss += ev; }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, off);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) { float su = 0.0f; for (int w = 0; w < nwarps; ++w) su += red[w]; red[0] = su; }
  __syncthreads();
  const float den = red[0];
  for (int e = threadIdx.x; e < HD; e += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < L; ++j) acc += sc[j] * vc[(long)j * KV * HD + kvh * HD + e];
    ctx[head * HD + e] = acc / den;
  }
}

// one block per query head; scores in dynamic shared memory (maxseq floats)
__global__ void gk_attn(float* out, const float* q, const float* kc, const float* vc, const int* d_pos, int n_head, int n_kv, int hd, float scale) {
  const int head = blockIdx.x;
  if (head >= n_head) return;
  const int kvh = head / (n_head / n_kv);
  const int L = *d_pos + 1;
  const int KD = n_kv * hd;
  const float* qh = q + (long)head * hd;
  extern __shared__ float sc[];
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  for (int j = warp; j < L; j += nwarps) {
    const float* kj = kc + (long)j * KD + kvh * hd;
    float s = 0.0f;
    for (int e = lane; e < hd; e += 32) s += qh[e] * kj[e];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) sc[j] = s * scale;
  }
  __syncthreads();
  float m = -1e30f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, sc[j]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) { float mm = red[0]; for (int w = 1; w < nwarps; ++w) mm = fmaxf(mm, red[w]); red[0] = mm; }
  __syncthreads();
  const float mx = red[0];
  __syncthreads();  // all have read the max before red[] takes the sums
  float ss = 0.0f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) { const float ev = expf(sc[j] - mx); sc[j] = ev; ss += ev; }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, off);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) { float su = 0.0f; for (int w = 0; w < nwarps; ++w) su += red[w]; red[0] = su; }
  __syncthreads();
  const float den = red[0];
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < L; ++j) acc += sc[j] * vc[(long)j * KD + kvh * hd + e];
    out[(long)head * hd + e] = acc / den;
  }
}

// one block per query head; per-warp running softmax, one merge (launch geometry by design: the family never launches it)
__global__ void gk_attn_online(float* out, const float* q, const float* kc, const float* vc, const int* d_pos, int n_head, int n_kv, int hd, float scale) {
  const int head = blockIdx.x;
  if (head >= n_head) return;
  const int kvh = head / (n_head / n_kv);
  const int L = *d_pos + 1;
  const int KD = n_kv * hd;
  const float* qh = q + (long)head * hd;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int per_lane = hd >> 5;
  float qreg[8], acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) if (i < per_lane) { qreg[i] = qh[lane + (i << 5)]; acc[i] = 0.0f; }
  float m = -1e30f, dsum = 0.0f;
  for (int j = warp; j < L; j += nwarps) {
    const float* kj = kc + (long)j * KD + kvh * hd;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) if (i < per_lane) dot += qreg[i] * kj[lane + (i << 5)];
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float sj = dot * scale;
    const float mn = fmaxf(m, sj), corr = __expf(m - mn), pj = __expf(sj - mn);
    m = mn;
    dsum = dsum * corr + pj;
    const float* vj = vc + (long)j * KD + kvh * hd;
#pragma unroll
    for (int i = 0; i < 8; ++i) if (i < per_lane) acc[i] = acc[i] * corr + pj * vj[lane + (i << 5)];
  }
  __shared__ float sm[8], sd[8], sa[8][128];
  if (lane == 0) { sm[warp] = m; sd[warp] = dsum; }
#pragma unroll
  for (int i = 0; i < 8; ++i) if (i < per_lane) sa[warp][lane + (i << 5)] = acc[i];
  __syncthreads();
  float M = -1e30f;
  for (int w = 0; w < nwarps; ++w) M = fmaxf(M, sm[w]);
  float D = 0.0f;
  for (int w = 0; w < nwarps; ++w) D += sd[w] * __expf(sm[w] - M);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < nwarps; ++w) a += sa[w][d] * __expf(sm[w] - M);
    out[(long)head * hd + d] = a / D;
  }
}

// block head*P + p: running softmax over keys p, p+P, ...; stores max, sum, unnormalized V
__global__ void gk_attn_part(const float* q, const float* kc, const float* vc, const int* d_pos, int n_head, int n_kv, int hd, float scale, int P, float* acc_part, float* m_part, float* d_part) {
  const int blk = blockIdx.x;
  const int head = blk / P, p = blk % P;
  if (head >= n_head) return;
  const int kvh = head / (n_head / n_kv);
  const int L = *d_pos + 1;
  const int KD = n_kv * hd;
  const float* qh = q + (long)head * hd;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const int per_lane = hd >> 5;
  float qreg[8], acc[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) if (i < per_lane) { qreg[i] = qh[lane + (i << 5)]; acc[i] = 0.0f; }
  float m = -1e30f, dsum = 0.0f;
  for (int t = warp; ; t += nwarps) {
    const int j = p + t * P;
    if (j >= L) break;
    const float* kj = kc + (long)j * KD + kvh * hd;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) if (i < per_lane) dot += qreg[i] * kj[lane + (i << 5)];
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float sj = dot * scale;
    const float mn = fmaxf(m, sj), corr = __expf(m - mn), pj = __expf(sj - mn);
    m = mn;
    dsum = dsum * corr + pj;
    const float* vj = vc + (long)j * KD + kvh * hd;
#pragma unroll
    for (int i = 0; i < 8; ++i) if (i < per_lane) acc[i] = acc[i] * corr + pj * vj[lane + (i << 5)];
  }
  __shared__ float sm[8], sd[8], sa[8][128];
  if (lane == 0) { sm[warp] = m; sd[warp] = dsum; }
#pragma unroll
  for (int i = 0; i < 8; ++i) if (i < per_lane) sa[warp][lane + (i << 5)] = acc[i];
  __syncthreads();
  float M = -1e30f;
  for (int w = 0; w < nwarps; ++w) M = fmaxf(M, sm[w]);
  float D = 0.0f;
  for (int w = 0; w < nwarps; ++w) D += sd[w] * __expf(sm[w] - M);
  if (threadIdx.x == 0) { m_part[blk] = M; d_part[blk] = D; }
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int w = 0; w < nwarps; ++w) a += sa[w][d] * __expf(sm[w] - M);
    acc_part[(long)blk * hd + d] = a;
  }
}

// merge the P partials of each head and normalize (launched like gk_attn_comb_q: 128 threads)
__global__ void gk_attn_comb(float* out, int n_head, int hd, int P, const float* acc_part, const float* m_part, const float* d_part) {
  const int head = blockIdx.x;
  if (head >= n_head) return;
  __shared__ float gmax, gden;
  if (threadIdx.x == 0) {
    float M = -1e30f;
    for (int p = 0; p < P; ++p) M = fmaxf(M, m_part[head * P + p]);
    gmax = M;
    float D = 0.0f;
    for (int p = 0; p < P; ++p) D += d_part[head * P + p] * __expf(m_part[head * P + p] - M);
    gden = D;
  }
  __syncthreads();
  const float M = gmax, D = gden;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float a = 0.0f;
    for (int p = 0; p < P; ++p) a += acc_part[(long)(head * P + p) * hd + d] * __expf(m_part[head * P + p] - M);
    out[(long)head * hd + d] = a / D;
  }
}

// query head RMSNorm * qnw and RoPE at *d_pos, then attention as gk_attn
__global__ void gk_fused_attn(float* out, const float* q, const float* kc, const float* vc, const int* d_pos, int n_head, int n_kv, int hd, float scale, const float* qnw, float rbase, float eps) {
  const int head = blockIdx.x;
  if (head >= n_head) return;
  const int kvh = head / (n_head / n_kv);
  const int L = *d_pos + 1;
  const int KD = n_kv * hd;
  const int tid = threadIdx.x;
  const int pos = L - 1;
  extern __shared__ float sc[];
  __shared__ float red[32];
  __shared__ float qh[256];
  const float* qsrc = q + (long)head * hd;
  {
    const int lane = tid & 31, warp = tid >> 5, nwarps = (blockDim.x + 31) >> 5;
    float qsum = 0.0f;
    for (int i = tid; i < hd; i += blockDim.x) qsum += qsrc[i] * qsrc[i];
    for (int off = 16; off > 0; off >>= 1) qsum += __shfl_down_sync(0xffffffffu, qsum, off);
    if (lane == 0) red[warp] = qsum;
    __syncthreads();
    if (tid == 0) { float t = 0.0f; for (int w = 0; w < nwarps; ++w) t += red[w]; red[0] = t; }
    __syncthreads();
  }
  const float qrms = rsqrtf(red[0] / hd + eps);
  for (int i = tid; i < hd; i += blockDim.x) qh[i] = qsrc[i] * qrms * qnw[i];
  __syncthreads();
  const int half = hd / 2;
  for (int k = tid; k < half; k += blockDim.x) {
    const float freq = powf(rbase, -2.0f * k / hd);
    const float ang = pos * freq, c = cosf(ang), s = sinf(ang);
    const float a = qh[k], b = qh[k + half];
    qh[k] = a*c - b*s;
    qh[k + half] = a*s + b*c;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  for (int j = warp; j < L; j += nwarps) {
    const float* kj = kc + (long)j * KD + kvh * hd;
    float s = 0.0f;
    for (int e = lane; e < hd; e += 32) s += qh[e] * kj[e];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if (lane == 0) sc[j] = s * scale;
  }
  __syncthreads();
  float m = -1e30f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, sc[j]);
  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) { float mm = red[0]; for (int w = 1; w < nwarps; ++w) mm = fmaxf(mm, red[w]); red[0] = mm; }
  __syncthreads();
  const float mx = red[0];
  __syncthreads();  // all have read the max before red[] takes the sums
  float ss = 0.0f;
  for (int j = threadIdx.x; j < L; j += blockDim.x) { const float ev = expf(sc[j] - mx); sc[j] = ev; ss += ev; }
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, off);
  if (lane == 0) red[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) { float su = 0.0f; for (int w = 0; w < nwarps; ++w) su += red[w]; red[0] = su; }
  __syncthreads();
  const float den = red[0];
  for (int e = threadIdx.x; e < hd; e += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < L; ++j) acc += sc[j] * vc[(long)j * KD + kvh * hd + e];
    out[(long)head * hd + e] = acc / den;
  }
}
