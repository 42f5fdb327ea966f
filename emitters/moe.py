"""Mixture-of-Experts kernels: routing, expert SwiGLU and combine, in each numeric mode.

Grouping (one KernelSource per mode):
  DEQUANT        the dense path: moe_gemv (thread per output, f64), moe_topk (single thread, dense weights
                 over E), moe_silu_had, moe_zero, moe_combine; plus the precise sparse lane: moe_router_fast,
                 moe_topk_idx, gk_moe_gate_up_deq, gk_moe_down_deq (f32 activation, int4 weight loads).
  INT8_ACT       moe_router_fast, moe_topk_idx, moe_qact, moe_gate_up_silu, moe_down_combine (one __dp4a per
                 word; int4 / int / scalar tiers).
  TWO_PASS_INT8  the same five with a hi + lo residual activation (two __dp4a per word; int / scalar tiers).
Expert weights are stacked: gate/up are E x N x Kd (N = dff, Kd = d), down is E x N x Kd (N = d, Kd = dff),
with per-32-block f32 scales. The sparse kernels read expert indices on the device (idx[K]).
"""
from __future__ import annotations

from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from . import _q8_dot as dot
from ._kbuild import BLOCK_256, ONE, int4_rows, k_blocks, warp_rows_grid
from ._kernel_text import assemble, inout, inp, kernel, out, scalar
from .contract import KernelContract, KernelSource, Param, Precondition
from .cuda_snippets import block_quant_body, warp_max

FAMILY = "moe"
MODES = (Mode.DEQUANT, Mode.INT8_ACT, Mode.TWO_PASS_INT8)
TOPK_STACK = 256      # moe_topk keeps softmax probabilities in two per-thread arrays of this size
TOPK_SHARED = 1024    # moe_topk_idx keeps them in a shared array of this size (and launches E threads)
PART_SLOTS = 64       # the down+combine kernels sum one partial per routed expert from a shared array this big

_ROUTER = (("router", {"E": "n_expert", "K": "top_k"}),)
_GATE_UP = (("experts", {"K": "top_k", "N": "dff", "Kd": "d", "E": "n_expert"}),)
_DOWN = (("experts", {"K": "top_k", "N": "d", "Kd": "dff", "E": "n_expert"}),)


def _grid_1d(n: str) -> tuple[str, str, str]:
    return (f"({n} + 255) // 256", "1", "1")


def _topk_pre() -> tuple[Precondition, ...]:
    return (Precondition("1 <= K <= E", "K", "a top-K larger than E selects index 0 again and double-counts it"),)


# ---- dense DEQUANT path -----------------------------------------------------------------------------------
def _moe_gemv() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_gemv", family=FAMILY, op="q8_gemv", mode=Mode.DEQUANT,
        params=(inp("a", "const float*", "K"), inp("wq", "const signed char*", "N * K"),
                inp("ws", "const float*", "N * (K // 32)"), out("y", "float*", "N"), scalar("N"), scalar("K")),
        grid=_grid_1d("N"), block=BLOCK_256, preconditions=(k_blocks(),),
        instances=(("router", {"N": "n_expert", "K": "d"}), ("expert_gate", {"N": "dff", "K": "d"}),
                   ("expert_up", {"N": "dff", "K": "d"}), ("expert_down", {"N": "d", "K": "dff"})),
        attrs={"act": "f32", "weight_scale": "f32", "accumulate": "f64", "dest": "y",
               "threading": "thread_per_output"},
        doc="Dequant GEMV for one expert (the host passes the expert's weight base): f64 per block and total.")
    body = ("  const int o = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (o >= N) return;\n"
            "  const int nblk = K / 32;\n"
            "  const signed char* wrow = wq + (long)o * K;\n"
            "  const float* srow = ws + (long)o * nblk;\n"
            "  double total = 0.0;\n"
            "  for (int b = 0; b < nblk; ++b) {\n"
            "    double part = 0.0;\n"
            "    for (int j = 0; j < 32; ++j) part += (double)wrow[b * 32 + j] * (double)a[b * 32 + j];\n"
            "    total += part * (double)srow[b];\n"
            "  }\n"
            "  y[o] = (float)total;\n")
    return c, kernel(c, body)


def _silu_had() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_silu_had", family=FAMILY, op="moe_silu_had", mode=Mode.DEQUANT,
        params=(inp("g", "const float*", "n"), inp("u", "const float*", "n"), out("he", "float*", "n"), scalar("n")),
        grid=_grid_1d("n"), block=BLOCK_256, preconditions=(Precondition("n >= 1", "n", "an empty launch"),),
        instances=(("expert", {"n": "dff"}),), attrs={"silu": "g / (1 + expf(-g))"},
        doc="he = silu(g) * u elementwise, silu(g) = g / (1 + expf(-g)) in f32.")
    body = ("  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (i >= n) return;\n"
            "  const float gv = g[i];\n"
            "  he[i] = (gv / (1.0f + expf(-gv))) * u[i];\n")
    return c, kernel(c, body)


def _zero() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_zero", family=FAMILY, op="moe_zero", mode=Mode.DEQUANT,
        params=(out("y", "float*", "n"), scalar("n")), grid=_grid_1d("n"), block=BLOCK_256,
        preconditions=(Precondition("n >= 1", "n", "an empty launch"),),
        instances=(("combine_acc", {"n": "d"}),), doc="y = 0.")
    body = "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = 0.0f;\n"
    return c, kernel(c, body)


def _combine() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_combine", family=FAMILY, op="moe_combine", mode=Mode.DEQUANT,
        params=(inout("H", "float*", "d"), inp("oute", "const float*", "d"), inp("wv", "const float*", "E"),
                scalar("e"), scalar("d")),
        grid=_grid_1d("d"), block=BLOCK_256,
        preconditions=(Precondition("0 <= e < E", "e", "wv[e] is read unchecked"),),
        instances=(("expert", {"d": "d", "E": "n_expert", "e": "n_expert - 1"}),),
        doc="H += wv[e] * oute (one f32 multiply-add per element).")
    body = ("  const int o = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (o < d) H[o] += wv[e] * oute[o];\n")
    return c, kernel(c, body)


def _topk_dense() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_topk", family=FAMILY, op="moe_topk_mask", mode=Mode.DEQUANT,
        params=(inp("logits", "const float*", "E"), out("w", "float*", "E"), scalar("E"), scalar("K")),
        grid=ONE, block=("min(E, 1024)", "1", "1"),
        preconditions=(Precondition(f"E <= {TOPK_STACK}", "E",
                                    f"the per-thread probability arrays hold {TOPK_STACK} floats"),
                       *_topk_pre()),
        instances=_ROUTER,
        attrs={"softmax": "max-shifted expf, serial sum in index order", "tie": "lowest index",
               "renormalize": "divide by the sum of the kept probabilities"},
        doc="Thread 0 only: softmax over E, keep the K largest (ties: lowest index), renormalise; w = 0 elsewhere.")
    body = ("  if (threadIdx.x != 0) return;  // one thread does the routing; the rest of the block idles\n"
            f"  float prob[{TOPK_STACK}], left[{TOPK_STACK}];\n"
            "  float mx = logits[0];\n"
            "  for (int e = 1; e < E; ++e) if (logits[e] > mx) mx = logits[e];\n"
            "  float den = 0.0f;\n"
            "  for (int e = 0; e < E; ++e) den += expf(logits[e] - mx);\n"
            "  for (int e = 0; e < E; ++e) { prob[e] = expf(logits[e] - mx) / den; left[e] = prob[e]; w[e] = 0.0f; }\n"
            "  float kept = 0.0f;\n"
            "  for (int r = 0; r < K; ++r) {\n"
            "    float best = -1e30f; int at = 0;\n"
            "    for (int e = 0; e < E; ++e) if (left[e] > best) { best = left[e]; at = e; }  // strict: lowest index wins ties\n"
            "    kept += prob[at]; w[at] = prob[at]; left[at] = -1e30f;\n"
            "  }\n"
            "  for (int e = 0; e < E; ++e) w[e] /= kept;\n")
    return c, kernel(c, body)


# ---- sparse routing (all modes) ----------------------------------------------------------------------------
def _router_fast(mode: Mode) -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_router_fast", family=FAMILY, op="q8_gemv", mode=mode,
        params=(inp("a", "const float*", "K"), inp("wq", "const signed char*", "N * K"),
                inp("ws", "const float*", "N * (K // 32)"), out("y", "float*", "N"), scalar("N"), scalar("K")),
        grid=warp_rows_grid("N"), block=BLOCK_256,
        preconditions=(k_blocks(), Precondition("K % 4 == 0", "K", "char4 loads need 4-byte aligned rows")),
        instances=(("router", {"N": "n_expert", "K": "d"}),),
        attrs={"act": "f32", "weight_scale": "f32", "accumulate": "f32", "dest": "y", "tiers": "128+scalar"},
        doc="Warp per router row; each lane takes a char4 and 4 f32 activations per 128-element step.")
    body = (dot.warp_row_head("N")
            + "  const signed char* wrow = wq + (long)row * K;\n"
            + "  const float* srow = ws + (long)row * (K / 32);\n"
            + "  float acc = 0.0f;\n"
            + dot.f32_act_char4("acc", "wrow", "srow", "a", "K")
            + dot.warp_total(["acc"]) + "  if (lane == 0) y[row] = acc;\n")
    return c, kernel(c, body)


def _topk_idx(mode: Mode) -> tuple[KernelContract, str]:
    c = KernelContract(
        name="moe_topk_idx", family=FAMILY, op="moe_topk_idx", mode=mode,
        params=(inp("logits", "const float*", "E"), out("idx", "int*", "K"), out("w", "float*", "K"),
                scalar("E"), scalar("K")),
        grid=ONE, block=("E", "1", "1"),
        preconditions=(Precondition(f"E <= {TOPK_SHARED}", "E",
                                    f"one thread per expert and a {TOPK_SHARED}-float shared array"),
                       Precondition("E % 32 == 0", "E",
                                    "full-mask warp shuffles need every warp of the block complete"),
                       *_topk_pre()),
        instances=_ROUTER,
        attrs={"softmax": "block max and sum (per-thread strided, warp shfl_down tree, warps in order)",
               "tie": "lowest index", "renormalize": "w[r] = p / sum of the K kept p, p = exp / total"},
        doc="Block-parallel softmax into shared memory; thread 0 picks the K largest in order.")
    body = (f"  __shared__ float prob[{TOPK_SHARED}];\n"
            "  __shared__ float red[32];\n"
            "  const int t = threadIdx.x, nthr = blockDim.x, wid = t >> 5, ln = t & 31, nwarp = (nthr + 31) >> 5;\n"
            "  float m = -1e30f;\n"
            "  for (int e = t; e < E; e += nthr) m = fmaxf(m, logits[e]);\n"
            + warp_max("m")
            + "  if (ln == 0) red[wid] = m;\n"
            "  __syncthreads();\n"
            "  if (t == 0) { float v = red[0]; for (int i = 1; i < nwarp; ++i) v = fmaxf(v, red[i]); red[0] = v; }\n"
            "  __syncthreads();\n"
            "  const float mx = red[0];\n"
            "  __syncthreads();  // every thread holds mx before red is reused for the sums\n"
            "  float s = 0.0f;\n"
            "  for (int e = t; e < E; e += nthr) { const float p = expf(logits[e] - mx); prob[e] = p; s += p; }\n"
            + dot.warp_total(["s"])
            + "  if (ln == 0) red[wid] = s;\n"
            "  __syncthreads();\n"
            "  if (t == 0) { float v = 0.0f; for (int i = 0; i < nwarp; ++i) v += red[i]; red[0] = v; }\n"
            "  __syncthreads();\n"
            "  const float total = red[0];\n"
            "  if (t != 0) return;\n"
            "  float kept = 0.0f;\n"
            "  for (int r = 0; r < K; ++r) {\n"
            "    float best = -1e30f; int at = 0;\n"
            "    for (int e = 0; e < E; ++e) if (prob[e] > best) { best = prob[e]; at = e; }  // strict: lowest index wins\n"
            "    idx[r] = at;\n"
            "    const float p = prob[at] / total;\n"
            "    w[r] = p; kept += p; prob[at] = -1e30f;\n"
            "  }\n"
            "  for (int r = 0; r < K; ++r) w[r] /= kept;\n")
    return c, kernel(c, body)


# ---- activation quantizer ------------------------------------------------------------------------------------
def _qact(mode: Mode) -> tuple[KernelContract, str]:
    two = mode is Mode.TWO_PASS_INT8
    q = (out("aqh", "signed char*", "K"), out("aql", "signed char*", "K")) if two else (out("aq", "signed char*", "K"),)
    c = KernelContract(
        name="moe_qact", family=FAMILY, op="act_quant", mode=mode,
        params=(inp("a", "const float*", "K"), *q, out("as_", "float*", "K // 32"), scalar("K")),
        grid=("(K // 32 + 7) // 8", "1", "1"), block=BLOCK_256, preconditions=(k_blocks(),),
        instances=(("x", {"K": "d"}), ("h", {"K": "top_k * dff"})),
        attrs={"zero_rule": "floor", "two_pass": two},
        doc="One warp per 32-block: the MoE input x before gate+up, the K expert h rows before down.")
    body = ("  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (blk >= K / 32) return;\n"
            "  const int lane = threadIdx.x & 31;\n"
            + block_quant_body("a[blk * 32 + lane]", "lane", f"{'aqh' if two else 'aq'}[blk * 32 + lane]", "as_[blk]",
                               "floor", lo_out="aql[blk * 32 + lane]" if two else None))
    return c, kernel(c, body)


# ---- fused expert kernels ------------------------------------------------------------------------------------
def _experts(prefix: str, n_rows: str, kd: str) -> tuple[Param, Param]:
    return (inp(f"{prefix}_q", "const signed char*", f"E * {n_rows} * {kd}"),
            inp(f"{prefix}_s", "const float*", f"E * {n_rows} * ({kd} // 32)"))


# the activation each mode's expert kernels read, and the dot tiers they use for it
_ACT_KIND = {Mode.DEQUANT: "f32", Mode.INT8_ACT: "int8", Mode.TWO_PASS_INT8: "int8x2"}
_TIERS = {"f32": "512+scalar", "int8": "512+128+scalar", "int8x2": "128+scalar"}


def _gate_up(mode: Mode) -> tuple[KernelContract, str]:
    act_kind = _ACT_KIND[mode]
    name = "gk_moe_gate_up_deq" if mode is Mode.DEQUANT else "moe_gate_up_silu"
    if act_kind == "f32":
        acts = (inp("x", "const float*", "Kd"),)
    elif act_kind == "int8":
        acts = (inp("xq", "const signed char*", "Kd"), inp("xs", "const float*", "Kd // 32"))
    else:
        acts = (inp("xqh", "const signed char*", "Kd"), inp("xql", "const signed char*", "Kd"),
                inp("xs", "const float*", "Kd // 32"))
    c = KernelContract(
        name=name, family=FAMILY, op="moe_gate_up_silu", mode=mode,
        params=(*acts, *_experts("wg", "N", "Kd"), *_experts("wu", "N", "Kd"),
                inp("idx", "const int*", "K", fill="index(E)"), out("h", "float*", "K * N"),
                scalar("K"), scalar("N"), scalar("Kd")),
        grid=warp_rows_grid("K * N"), block=BLOCK_256,
        preconditions=(k_blocks("Kd"), int4_rows("Kd"), *_topk_pre()),
        instances=_GATE_UP,
        attrs={"act": act_kind, "weight_scale": "f32", "accumulate": "f32",
               "tiers": _TIERS[act_kind],
               "silu": "g / (1 + expf(-g))"},
        doc="Warp per (routed expert kk, row j): gate and up dots of the shared activation, h = silu(g) * u.")
    body = (dot.warp_row_head("(long)K * N", wide=True)
            + "  const int kk = row / N, j = row % N;\n"
            + "  const int e = idx[kk];\n"
            + "  const long wofs = ((long)e * N + j) * Kd;\n"
            + "  const signed char* grow = wg_q + wofs;\n"
            + "  const signed char* urow = wu_q + wofs;\n"
            + "  const float* gsc = wg_s + ((long)e * N + j) * (Kd / 32);\n"
            + "  const float* usc = wu_s + ((long)e * N + j) * (Kd / 32);\n"
            + "  float ga = 0.0f, ua = 0.0f;\n")
    streams = [("ga", "grow", "gsc"), ("ua", "urow", "usc")]
    if act_kind == "f32":
        body += dot.f32_act_int4(streams, "x", "Kd")
    elif act_kind == "int8":
        body += dot.int8_act(streams, "xq", "xs", "Kd", tiers="512,128", scale_first=True)
    else:
        body += dot.int8x2_act(streams, "xqh", "xql", "xs", "Kd")
    body += dot.warp_total(["ga", "ua"]) + "  if (lane == 0) h[row] = (ga / (1.0f + expf(-ga))) * ua;\n"
    return c, kernel(c, body)


def _down(mode: Mode) -> tuple[KernelContract, str]:
    act_kind = _ACT_KIND[mode]
    name = "gk_moe_down_deq" if mode is Mode.DEQUANT else "moe_down_combine"
    if act_kind == "f32":
        acts = (inp("hbuf", "const float*", "K * Kd"),)
    elif act_kind == "int8":
        acts = (inp("hq", "const signed char*", "K * Kd"), inp("hs", "const float*", "K * (Kd // 32)"))
    else:
        acts = (inp("hqh", "const signed char*", "K * Kd"), inp("hql", "const signed char*", "K * Kd"),
                inp("hs", "const float*", "K * (Kd // 32)"))
    c = KernelContract(
        name=name, family=FAMILY, op="moe_down_combine", mode=mode,
        params=(*acts, *_experts("wd", "N", "Kd"), inp("idx", "const int*", "K", fill="index(E)"),
                inp("wc", "const float*", "K"), out("H", "float*", "N"), scalar("K"), scalar("N"), scalar("Kd")),
        grid=("N", "1", "1"), block=("K * 32", "1", "1"),
        preconditions=(k_blocks("Kd"), int4_rows("Kd"),
                       Precondition("1 <= K and K * 32 <= 1024", "K", "one warp per routed expert in one block"),
                       Precondition(f"K <= {PART_SLOTS}", "K", f"the shared partials array has {PART_SLOTS} slots"),
                       *_topk_pre()),
        instances=_DOWN,
        attrs={"act": act_kind, "weight_scale": "f32", "accumulate": "f32",
               "tiers": _TIERS[act_kind],
               "combine": "H[o] = sum over kk ascending of wc[kk] * dot_kk, serial in thread 0"},
        doc="Block per output o, warp per routed expert: down-projection dot, weighted, summed in expert order.")
    body = ("  const int o = blockIdx.x;\n"
            "  const int wid = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
            "  const int e = idx[wid];\n"
            "  const signed char* wrow = wd_q + ((long)e * N + o) * Kd;\n"
            "  const float* wsc = wd_s + ((long)e * N + o) * (Kd / 32);\n"
            "  float acc = 0.0f;\n")
    streams = [("acc", "wrow", "wsc")]
    if act_kind == "f32":
        body += "  const float* hrow = hbuf + (long)wid * Kd;\n" + dot.f32_act_int4(streams, "hrow", "Kd")
    elif act_kind == "int8":
        body += ("  const signed char* hrow = hq + (long)wid * Kd;\n"
                 "  const float* hsc = hs + (long)wid * (Kd / 32);\n"
                 + dot.int8_act(streams, "hrow", "hsc", "Kd", tiers="512,128", scale_first=True))
    else:
        body += ("  const signed char* hhrow = hqh + (long)wid * Kd;\n"
                 "  const signed char* hlrow = hql + (long)wid * Kd;\n"
                 "  const float* hsc = hs + (long)wid * (Kd / 32);\n"
                 + dot.int8x2_act(streams, "hhrow", "hlrow", "hsc", "Kd"))
    body += (dot.warp_total(["acc"])
             + f"  __shared__ float part[{PART_SLOTS}];\n"
             "  if (lane == 0) part[wid] = wc[wid] * acc;\n"
             "  __syncthreads();\n"
             "  if (threadIdx.x == 0) {\n"
             "    float sum = 0.0f;\n"
             "    for (int kk = 0; kk < K; ++kk) sum += part[kk];  // expert order, as routed\n"
             "    H[o] = sum;\n"
             "  }\n")
    return c, kernel(c, body)


def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    mode = Mode.parse(mode) if mode is not None else None
    if mode is Mode.DEQUANT:
        kernels = [_moe_gemv(), _silu_had(), _zero(), _combine(), _topk_dense(), _router_fast(mode),
                   _topk_idx(mode), _gate_up(mode), _down(mode)]
    elif mode in (Mode.INT8_ACT, Mode.TWO_PASS_INT8):
        kernels = [_router_fast(mode), _topk_idx(mode), _qact(mode), _gate_up(mode), _down(mode)]
    else:
        raise ValueError(f"mode: the moe family is emitted in {', '.join(m.value for m in MODES)}, not {mode!r}")
    return assemble(FAMILY, mode, shape, kernels, {"topk_stack": TOPK_STACK, "topk_shared": TOPK_SHARED,
                                                   "part_slots": PART_SLOTS})
