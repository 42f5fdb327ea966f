"""Single-query GQA decode attention: one block per query head over a KV cache of L rows
(row j of the K cache holds the n_kv heads of key j: `kc[j*KV*HD + kvh*HD + e]`; query head h reads
kv head `h / (H/KV)`).

Variants and their numerics:
  static (`k{i}_attn`): scores in `__shared__ float sc[L]` with L compiled in, a warp per key (lane-strided
    dot, shfl_down tree), a block softmax with `expf` (warp max / sum into red[32], thread 0 folds the warps),
    then one thread per output dim sums sc[j]*v over j in order and divides by the sum. Optional int8
    epilogue (floor rule) over each head's HD outputs.
  dynamic (`gk_attn`): the same math with scores in dynamic shared memory (MAXSEQ floats) and L = *d_pos + 1.
  fused_qknorm_rope (`gk_fused_attn`): the query head is RMS-normalized (f32, warp sums), scaled by qnw and
    rotated in shared qh[256] first, then as `gk_attn`.
  online (`gk_attn_online`): each warp streams keys wp, wp+nw, ... keeping a running max, sum and weighted-V
    accumulator with `__expf`, the query held in registers (hd/32 values per lane); the warps are merged once.
  partials (`gk_attn_part`): grid n_head*P; block b = head*P + p streams keys j = p + idx*P (idx = wp,
    wp+nw, ...) and stores its merged max, sum and UNNORMALIZED weighted V; `gk_attn_comb(_q)` merges the P
    partials per head (`__expf`) and divides, optionally quantizing the result (floor rule).

These kernels add one barrier the family's do not have: after every thread has read the block max from
red[0] and before red[] is reused for the sums (a write-after-read hazard otherwise; no effect on values).

Grouping by mode:
  DEQUANT   k0_attn, gk_attn, gk_attn_online, gk_attn_part, gk_attn_comb, gk_fused_attn;
  INT8_ACT  k0_attn with the yq/ys epilogue, gk_attn_part, gk_attn_comb_q.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from ._kernel_text import (SHARED_LIMIT_BYTES, assemble, baked, baked_value, inp, kernel, out, positive, rope_rotate,
                           scalar, warp_blocks_quant, whole_warps)
from .contract import KernelContract, KernelSource, Precondition
from .cuda_snippets import warp_sum

FAMILY = "attention"
MODES = (Mode.DEQUANT, Mode.INT8_ACT)

RED_BYTES = 32 * 4          # __shared__ float red[32]
QH_BYTES = 256 * 4          # __shared__ float qh[256] of gk_fused_attn
_WHOLE_WARPS = whole_warps(1024, "red[32] keeps one partial per warp and the shuffles use the full-warp mask")
_ONLINE_WARPS = whole_warps(256, "sm[8], sd[8] and sa[8][128] keep one slot per warp: at most 8 warps")
_ONLINE_HD = Precondition("hd % 32 == 0 and hd <= 128", "hd",
                          "each lane keeps hd/32 query and accumulator values (qreg[8], acc[8]) and each warp "
                          "one row of sa[8][128]; a ragged hd drops its tail dims")


def _gqa(h: str, kv: str) -> Precondition:
    return Precondition(f"{kv} >= 1 and {h} % {kv} == 0", kv,
                        f"query head h reads kv head h/({h}/{kv}); {h} must be a multiple of {kv}")


# -- shared text ------------------------------------------------------------------------------------------
def _softmax_v(qh: str, rowstride: str, hd: str, out_expr: str) -> str:
    """Scores into sc[0..L), block softmax, weighted V sum (needs head, kvh, L, scale, kc, vc, sc, red)."""
    return (
        "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;\n"
        "  for (int j = warp; j < L; j += nwarps) {\n"
        f"    const float* kj = kc + (long)j * {rowstride} + kvh * {hd};\n"
        "    float s = 0.0f;\n"
        f"    for (int e = lane; e < {hd}; e += 32) s += {qh}[e] * kj[e];\n"
        + warp_sum("s", "    ")
        + "    if (lane == 0) sc[j] = s * scale;\n"
        "  }\n"
        "  __syncthreads();\n"
        "  float m = -1e30f;\n"
        "  for (int j = threadIdx.x; j < L; j += blockDim.x) m = fmaxf(m, sc[j]);\n"
        "  for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, off));\n"
        "  if (lane == 0) red[warp] = m;\n"
        "  __syncthreads();\n"
        "  if (threadIdx.x == 0) { float mm = red[0]; for (int w = 1; w < nwarps; ++w) mm = fmaxf(mm, red[w]); red[0] = mm; }\n"
        "  __syncthreads();\n"
        "  const float mx = red[0];\n"
        "  __syncthreads();  // all have read the max before red[] takes the sums\n"
        "  float ss = 0.0f;\n"
        "  for (int j = threadIdx.x; j < L; j += blockDim.x) { const float ev = expf(sc[j] - mx); sc[j] = ev; ss += ev; }\n"
        + warp_sum("ss")
        + "  if (lane == 0) red[warp] = ss;\n"
        "  __syncthreads();\n"
        "  if (threadIdx.x == 0) { float su = 0.0f; for (int w = 0; w < nwarps; ++w) su += red[w]; red[0] = su; }\n"
        "  __syncthreads();\n"
        "  const float den = red[0];\n"
        f"  for (int e = threadIdx.x; e < {hd}; e += blockDim.x) {{\n"
        "    float acc = 0.0f;\n"
        f"    for (int j = 0; j < L; ++j) acc += sc[j] * vc[(long)j * {rowstride} + kvh * {hd} + e];\n"
        f"    {out_expr} = acc / den;\n"
        "  }\n")


def _online_stream(key_loop: str) -> str:
    """One warp's running-softmax pass over its keys, then the merge of the warps into M, D and sa[][]."""
    return (
        "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;\n"
        "  const int per_lane = hd >> 5;\n"
        "  float qreg[8], acc[8];\n"
        "#pragma unroll\n"
        "  for (int i = 0; i < 8; ++i) if (i < per_lane) { qreg[i] = qh[lane + (i << 5)]; acc[i] = 0.0f; }\n"
        "  float m = -1e30f, dsum = 0.0f;\n"
        f"{key_loop}"
        "    const float* kj = kc + (long)j * KD + kvh * hd;\n"
        "    float dot = 0.0f;\n"
        "#pragma unroll\n"
        "    for (int i = 0; i < 8; ++i) if (i < per_lane) dot += qreg[i] * kj[lane + (i << 5)];\n"
        "    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);\n"
        "    const float sj = dot * scale;\n"
        "    const float mn = fmaxf(m, sj), corr = __expf(m - mn), pj = __expf(sj - mn);\n"
        "    m = mn;\n"
        "    dsum = dsum * corr + pj;\n"
        "    const float* vj = vc + (long)j * KD + kvh * hd;\n"
        "#pragma unroll\n"
        "    for (int i = 0; i < 8; ++i) if (i < per_lane) acc[i] = acc[i] * corr + pj * vj[lane + (i << 5)];\n"
        "  }\n"
        "  __shared__ float sm[8], sd[8], sa[8][128];\n"
        "  if (lane == 0) { sm[warp] = m; sd[warp] = dsum; }\n"
        "#pragma unroll\n"
        "  for (int i = 0; i < 8; ++i) if (i < per_lane) sa[warp][lane + (i << 5)] = acc[i];\n"
        "  __syncthreads();\n"
        "  float M = -1e30f;\n"
        "  for (int w = 0; w < nwarps; ++w) M = fmaxf(M, sm[w]);\n"
        "  float D = 0.0f;\n"
        "  for (int w = 0; w < nwarps; ++w) D += sd[w] * __expf(sm[w] - M);\n")


def _gk_head_prologue(with_split: bool = False) -> str:
    s = ("  const int blk = blockIdx.x;\n  const int head = blk / P, p = blk % P;\n" if with_split
         else "  const int head = blockIdx.x;\n")
    return (s + "  if (head >= n_head) return;\n"
            "  const int kvh = head / (n_head / n_kv);\n"
            "  const int L = *d_pos + 1;\n"
            "  const int KD = n_kv * hd;\n")


# -- contracts: common parameter groups -------------------------------------------------------------------
def _gk_inputs() -> list:
    return [inp("q", "const float*", "n_head*hd"), inp("kc", "const float*", "maxseq*n_kv*hd"),
            inp("vc", "const float*", "maxseq*n_kv*hd"), inp("d_pos", "const int*", "1", fill="const(L-1)"),
            scalar("n_head", "int", "n_head"), scalar("n_kv", "int", "n_kv"), scalar("hd", "int", "hd"),
            scalar("scale", "float", "1.0/sqrt(hd)")]


def _gk_pre(extra_static: int = 0, dynamic: bool = False) -> list:
    pre = [_gqa("n_head", "n_kv"), *positive("n_head", "hd", "L"),
           Precondition("L <= maxseq", "d_pos", "the cache holds maxseq rows; *d_pos + 1 keys past them are read "
                        "out of bounds" + (" and overflow the score array" if dynamic else ""))]
    if dynamic:
        pre.append(Precondition(f"maxseq*4 + {RED_BYTES + extra_static} <= {SHARED_LIMIT_BYTES}", "maxseq",
                                "dynamic plus static shared memory over 48 KiB needs an opt-in the launch lines "
                                "do not make: the launch fails"))
    return pre


_GK_INST = {"n_head": "n_head", "n_kv": "n_kv", "hd": "head_dim", "L": "kv_len", "maxseq": "kv_len",
            "threads": "256"}


# -- k{i}_attn ---------------------------------------------------------------------------------------------
def _k_attn(stage: int, mode: Mode, quant: bool) -> KernelContract:
    params = [inp("q", "const float*", "H*HD"), inp("kc", "const float*", "L*KV*HD"),
              inp("vc", "const float*", "L*KV*HD"), out("ctx", "float*", "H*HD"),
              scalar("L", "int", "L"), scalar("H", "int", "H"), scalar("KV", "int", "KV"), scalar("HD", "int", "HD"),
              scalar("scale", "float", "1.0/sqrt(HD)")]
    pre = [_WHOLE_WARPS, _gqa("H", "KV"), *positive("H", "HD", "L"),
           Precondition(f"L*4 + {RED_BYTES} <= {SHARED_LIMIT_BYTES}", "L",
                        "sc[L] is static shared memory; over 48 KiB the kernel does not compile")]
    if quant:
        params += [out("yq", "signed char*", "H*HD"), out("ys", "float*", "H*HD//32")]
        pre.append(Precondition("HD % 32 == 0", "HD", "each head's outputs are quantized as whole 32-blocks"))
    return KernelContract(
        name=f"k{stage}_attn", family=FAMILY, op="attention", mode=mode, params=tuple(params),
        grid=("H", "1", "1"), block=("threads", "1", "1"), shared_bytes="0", preconditions=tuple(pre),
        name_pattern=r"k\d+_attn",
        instances=(("decode", {"H": "n_head", "KV": "n_kv", "HD": "head_dim", "L": "kv_len", "threads": "256"}),),
        attrs={"variant": "static", "quant": "floor" if quant else None, "exp": "expf"},
        doc="one block per query head; scores in static shared sc[L] (L compiled in)")


def _k_attn_body(c: KernelContract, L: int) -> str:
    s = ("  const int head = blockIdx.x;\n  if (head >= H) return;\n"
         "  const int kvh = head / (H / KV);\n"
         "  const float* qh = q + head * HD;\n"
         f"  __shared__ float sc[{L}];\n  __shared__ float red[32];\n"
         + _softmax_v("qh", "KV * HD", "HD", "ctx[head * HD + e]"))
    if c.attrs["quant"]:
        s += ("  __syncthreads();  // the head's outputs are read back by whole warps\n"
              + warp_blocks_quant("ctx[head * HD + qb * 32 + ql]", "yq[head * HD + qb * 32 + ql]",
                                  "ys[head * (HD / 32) + qb]", "HD / 32", "floor"))
    return s


# -- generation lane -----------------------------------------------------------------------------------------
def _gk_attn() -> KernelContract:
    return KernelContract(
        name="gk_attn", family=FAMILY, op="attention", mode=Mode.DEQUANT,
        params=(out("out", "float*", "n_head*hd"), *_gk_inputs()),
        grid=("n_head", "1", "1"), block=("threads", "1", "1"), shared_bytes="maxseq*4",
        preconditions=(_WHOLE_WARPS, *_gk_pre(dynamic=True)), instances=(("decode", _GK_INST),),
        attrs={"variant": "dynamic", "quant": None, "exp": "expf"},
        doc="one block per query head; scores in dynamic shared memory (maxseq floats)")


def _gk_attn_body() -> str:
    return (_gk_head_prologue()
            + "  const float* qh = q + (long)head * hd;\n"
            "  extern __shared__ float sc[];\n  __shared__ float red[32];\n"
            + _softmax_v("qh", "KD", "hd", "out[(long)head * hd + e]"))


def _gk_fused_attn() -> KernelContract:
    params = (out("out", "float*", "n_head*hd"), *_gk_inputs(), inp("qnw", "const float*", "hd"),
              scalar("rbase", "float", "theta"), scalar("eps", "float", "eps"))
    return KernelContract(
        name="gk_fused_attn", family=FAMILY, op="attention", mode=Mode.DEQUANT, params=params,
        grid=("n_head", "1", "1"), block=("threads", "1", "1"), shared_bytes="maxseq*4",
        preconditions=(_WHOLE_WARPS, Precondition("hd <= 256 and hd % 2 == 0", "hd",
                                                  "the normed, rotated query lives in shared qh[256]"),
                       *_gk_pre(extra_static=QH_BYTES, dynamic=True)),
        instances=(("decode", {**_GK_INST, "theta": "rope_theta", "eps": "rms_eps"}),),
        attrs={"variant": "fused_qknorm_rope", "quant": None, "exp": "expf"},
        doc="query head RMSNorm * qnw and RoPE at *d_pos, then attention as gk_attn")


def _gk_fused_attn_body() -> str:
    return (_gk_head_prologue()
            + "  const int tid = threadIdx.x;\n  const int pos = L - 1;\n"
            "  extern __shared__ float sc[];\n  __shared__ float red[32];\n  __shared__ float qh[256];\n"
            "  const float* qsrc = q + (long)head * hd;\n"
            "  {\n"
            "    const int lane = tid & 31, warp = tid >> 5, nwarps = (blockDim.x + 31) >> 5;\n"
            "    float qsum = 0.0f;\n"
            "    for (int i = tid; i < hd; i += blockDim.x) qsum += qsrc[i] * qsrc[i];\n"
            + warp_sum("qsum", "    ")
            + "    if (lane == 0) red[warp] = qsum;\n"
            "    __syncthreads();\n"
            "    if (tid == 0) { float t = 0.0f; for (int w = 0; w < nwarps; ++w) t += red[w]; red[0] = t; }\n"
            "    __syncthreads();\n"
            "  }\n"
            "  const float qrms = rsqrtf(red[0] / hd + eps);\n"
            "  for (int i = tid; i < hd; i += blockDim.x) qh[i] = qsrc[i] * qrms * qnw[i];\n"
            "  __syncthreads();\n"
            + rope_rotate("qh") +
            "  __syncthreads();\n"
            + _softmax_v("qh", "KD", "hd", "out[(long)head * hd + e]"))


def _gk_attn_online() -> KernelContract:
    return KernelContract(
        name="gk_attn_online", family=FAMILY, op="attention", mode=Mode.DEQUANT,
        params=(out("out", "float*", "n_head*hd"), *_gk_inputs()),
        grid=("n_head", "1", "1"), block=("threads", "1", "1"), shared_bytes="0",
        preconditions=(_ONLINE_WARPS, _ONLINE_HD, *_gk_pre()), instances=(("decode", _GK_INST),),
        attrs={"variant": "online", "quant": None, "exp": "__expf"},
        doc="one block per query head; per-warp running softmax, one merge (launch geometry by design: "
            "the family never launches it)")


def _gk_attn_online_body() -> str:
    return (_gk_head_prologue() + "  const float* qh = q + (long)head * hd;\n"
            + _online_stream("  for (int j = warp; j < L; j += nwarps) {\n")
            + "  for (int d = threadIdx.x; d < hd; d += blockDim.x) {\n"
            "    float a = 0.0f;\n"
            "    for (int w = 0; w < nwarps; ++w) a += sa[w][d] * __expf(sm[w] - M);\n"
            "    out[(long)head * hd + d] = a / D;\n"
            "  }\n")


def _gk_attn_part(mode: Mode) -> KernelContract:
    params = (*_gk_inputs(), scalar("P", "int", "P"), out("acc_part", "float*", "n_head*P*hd"),
              out("m_part", "float*", "n_head*P"), out("d_part", "float*", "n_head*P"))
    return KernelContract(
        name="gk_attn_part", family=FAMILY, op="attention_partials", mode=mode, params=params,
        grid=("n_head*P", "1", "1"), block=("threads", "1", "1"), shared_bytes="0",
        preconditions=(_ONLINE_WARPS, _ONLINE_HD, *positive("P"), *_gk_pre()),
        instances=(("decode", {**_GK_INST, "P": "attn_split"}),),
        attrs={"exp": "__expf", "key_split": "j = p + idx*P"},
        doc="block head*P + p: running softmax over keys p, p+P, ...; stores max, sum, unnormalized V")


def _gk_attn_part_body() -> str:
    return (_gk_head_prologue(with_split=True) + "  const float* qh = q + (long)head * hd;\n"
            + _online_stream("  for (int t = warp; ; t += nwarps) {\n    const int j = p + t * P;\n"
                             "    if (j >= L) break;\n")
            + "  if (threadIdx.x == 0) { m_part[blk] = M; d_part[blk] = D; }\n"
            "  for (int d = threadIdx.x; d < hd; d += blockDim.x) {\n"
            "    float a = 0.0f;\n"
            "    for (int w = 0; w < nwarps; ++w) a += sa[w][d] * __expf(sm[w] - M);\n"
            "    acc_part[(long)blk * hd + d] = a;\n"
            "  }\n")


_COMB_INST = (("decode", {"n_head": "n_head", "hd": "head_dim", "P": "attn_split", "threads": "128"}),)


def _comb_params() -> list:
    return [scalar("n_head", "int", "n_head"), scalar("hd", "int", "hd"), scalar("P", "int", "P"),
            inp("acc_part", "const float*", "n_head*P*hd"), inp("m_part", "const float*", "n_head*P"),
            inp("d_part", "const float*", "n_head*P")]


def _gk_attn_comb() -> KernelContract:
    return KernelContract(
        name="gk_attn_comb", family=FAMILY, op="attention_combine", mode=Mode.DEQUANT,
        params=(out("out", "float*", "n_head*hd"), *_comb_params()),
        grid=("n_head", "1", "1"), block=("threads", "1", "1"), shared_bytes="0",
        preconditions=(Precondition("1 <= threads <= 1024", "threads", "a CUDA block holds at most 1024 threads"),
                       *positive("n_head", "hd", "P")),
        instances=_COMB_INST, attrs={"quant": None, "exp": "__expf"},
        doc="merge the P partials of each head and normalize (launched like gk_attn_comb_q: 128 threads)")


def _gk_attn_comb_q() -> KernelContract:
    return KernelContract(
        name="gk_attn_comb_q", family=FAMILY, op="attention_combine", mode=Mode.INT8_ACT,
        params=(out("aq", "signed char*", "n_head*hd"), out("as_", "float*", "n_head*hd//32"), *_comb_params()),
        grid=("n_head", "1", "1"), block=("threads", "1", "1"), shared_bytes="0",
        preconditions=(whole_warps(1024, "the quant epilogue strides whole warps over 32-blocks"),
                       Precondition("hd % 32 == 0 and hd <= 128", "hd",
                                    "the head's outputs are staged in shared so[128] and quantized as whole blocks"),
                       *positive("n_head", "P")),
        instances=_COMB_INST, attrs={"quant": "floor", "exp": "__expf"},
        doc="merge the P partials of each head, normalize, quantize the head's outputs (floor rule)")


def _comb_body(quant: bool) -> str:
    s = ("  const int head = blockIdx.x;\n  if (head >= n_head) return;\n"
         "  __shared__ float gmax, gden;\n")
    if quant:
        s += "  __shared__ float so[128];\n"
    s += ("  if (threadIdx.x == 0) {\n"
          "    float M = -1e30f;\n"
          "    for (int p = 0; p < P; ++p) M = fmaxf(M, m_part[head * P + p]);\n"
          "    gmax = M;\n"
          "    float D = 0.0f;\n"
          "    for (int p = 0; p < P; ++p) D += d_part[head * P + p] * __expf(m_part[head * P + p] - M);\n"
          "    gden = D;\n"
          "  }\n"
          "  __syncthreads();\n"
          "  const float M = gmax, D = gden;\n"
          "  for (int d = threadIdx.x; d < hd; d += blockDim.x) {\n"
          "    float a = 0.0f;\n"
          "    for (int p = 0; p < P; ++p) a += acc_part[(long)(head * P + p) * hd + d] * __expf(m_part[head * P + p] - M);\n")
    if not quant:
        return s + "    out[(long)head * hd + d] = a / D;\n  }\n"
    return (s + "    so[d] = a / D;\n  }\n  __syncthreads();\n"
            + warp_blocks_quant("so[qb * 32 + ql]", "aq[(head * (hd / 32) + qb) * 32 + ql]",
                                "as_[head * (hd / 32) + qb]", "hd / 32", "floor"))


# -- emit ------------------------------------------------------------------------------------------------------
def contracts(mode: Optional[Mode]) -> list[KernelContract]:
    if mode is Mode.DEQUANT:
        return [_k_attn(0, mode, False), _gk_attn(), _gk_attn_online(), _gk_attn_part(mode), _gk_attn_comb(),
                _gk_fused_attn()]
    if mode is Mode.INT8_ACT:
        return [_k_attn(0, mode, True), _gk_attn_part(mode), _gk_attn_comb_q()]
    raise ValueError(f"mode: the attention family is emitted in {', '.join(m.value for m in MODES)}, not {mode}")


_BODIES = {"gk_attn": _gk_attn_body, "gk_attn_online": _gk_attn_online_body, "gk_attn_part": _gk_attn_part_body,
           "gk_attn_comb": lambda: _comb_body(False), "gk_attn_comb_q": lambda: _comb_body(True),
           "gk_fused_attn": _gk_fused_attn_body}


def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    kernels, baked_consts = [], {}
    for c in contracts(mode):
        if c.name in _BODIES:
            kernels.append((c, kernel(c, _BODIES[c.name](), c.doc)))
            continue
        L = baked_value(c, shape, "L")
        c = replace(c, preconditions=(baked("L", L, c.name), *c.preconditions))
        kernels.append((c, kernel(c, _k_attn_body(c, L), c.doc)))
        baked_consts[c.name] = {"L": L}
    return assemble(FAMILY, mode, shape, kernels, {"baked": baked_consts})
