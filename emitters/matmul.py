"""Q8_0 matrix-vector and matrix-matrix kernels, in each numeric mode.

Grouping (one KernelSource per mode):
  DEQUANT        k{i}_q8gemv (thread per output, f64), gk_gemv_deq / gk_gemv_kv_deq (warp per row, f32
                 activation, int4 weight loads, f32 accumulate), k{i}_matmul (plain f32 matmul).
  INT8_ACT       k{i}_qact + k{i}_q8dp4a (f16 weight scales, int4/int/scalar tiers), gk_quant_act +
                 gk_gemv / gk_gemv_kv / gk_gemv_qkv (int4 + scalar tail), gk_marlin_q8 (mma.sync m16n8k32 s8).
  TWO_PASS_INT8  k{i}_qact (hi byte + lo residual byte) + k{i}_q8dp4a (two __dp4a per word, int + scalar tiers).
Weights are Q8_0 rows: N rows of K int8 and N*(K/32) block scales; activations are row-major M x K.
"""
from __future__ import annotations

from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from . import _q8_dot as dot
from ._kbuild import BLOCK_256, cache_row, fits_int, int4_rows, k_blocks, warp_rows_grid
from ._kernel_text import assemble, inout, inp, kernel, out, scalar
from .contract import KernelContract, KernelSource, Precondition
from .cuda_snippets import block_quant_body

FAMILY = "matmul"
MODES = (Mode.DEQUANT, Mode.INT8_ACT, Mode.TWO_PASS_INT8)
FORWARD_INDEX = 0          # the k{i}_ stage index the forward-path kernels are emitted with
MARLIN_NT = 2              # n-subtiles of 8 columns per warp in gk_marlin_q8 (the seed's tuned value)

# Where the projections run in one decode step (M = 1) and in a prefill of kv_len tokens.
_PROJ = (
    ("attn_q", {"M": "1", "N": "q_dim", "K": "d"}),
    ("attn_k", {"M": "1", "N": "kv_dim", "K": "d"}),
    ("attn_v", {"M": "1", "N": "kv_dim", "K": "d"}),
    ("attn_out", {"M": "1", "N": "d", "K": "q_dim"}),
    ("lm_head", {"M": "1", "N": "vocab", "K": "d"}),
    ("attn_q_prefill", {"M": "kv_len", "N": "q_dim", "K": "d"}),
)
_GEN_PROJ = (   # generation lane: M is always 1 and not a parameter
    ("attn_q", {"N": "q_dim", "K": "d"}),
    ("attn_out", {"N": "d", "K": "q_dim"}),
    ("lm_head", {"N": "vocab", "K": "d"}),
)
_GEN_KV = tuple((lab, {"N": "kv_dim", "K": "d", "KD": "kv_dim", "L": "kv_len", "pos": "kv_len - 1"})
                for lab in ("attn_k", "attn_v"))
_ACT_ROWS = (
    ("x_norm", {"M": "1", "K": "d"}),
    ("attn_ctx", {"M": "1", "K": "q_dim"}),
    ("x_norm_prefill", {"M": "kv_len", "K": "d"}),
)


def _k(suffix: str) -> tuple[str, str]:
    return f"k{FORWARD_INDEX}_{suffix}", rf"k\d+_{suffix}"


def _q8_weight(scale_ctype: str = "const float*") -> tuple:
    return (inp("wq", "const signed char*", "N * K", doc="int8 weight rows, N x K"),
            inp("ws", scale_ctype, "N * (K // 32)", doc="per-32-block weight scales"))


# ---- DEQUANT ----------------------------------------------------------------------------------------------
def _q8gemv() -> tuple[KernelContract, str]:
    name, pat = _k("q8gemv")
    c = KernelContract(
        name=name, name_pattern=pat, family=FAMILY, op="q8_gemv", mode=Mode.DEQUANT,
        params=(inp("a", "const float*", "M * K"), *_q8_weight(), out("y", "float*", "M * N"),
                scalar("M"), scalar("N"), scalar("K")),
        grid=("(M * N + 255) // 256", "1", "1"), block=BLOCK_256,
        preconditions=(k_blocks(), fits_int("N * K", "wq", "the weight index n*K"),
                       fits_int("M * K", "a", "the activation index r*K"),
                       fits_int("M * N + 255", "y", "the output index")),
        instances=_PROJ, attrs={"act": "f32", "weight_scale": "f32", "accumulate": "f64", "dest": "y",
                                "threading": "thread_per_output"},
        doc="y[r,n] = sum_b ws[n,b] * sum_j wq[n,32b+j] a[r,32b+j]; every product and sum in f64.")
    body = ("  const int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (idx >= M * N) return;\n"
            "  const int r = idx / N, n = idx % N, nblk = K / 32;\n"
            "  const signed char* wrow = wq + (long)n * K;\n"
            "  const float* arow = a + (long)r * K;\n"
            "  double total = 0.0;\n"
            "  for (int b = 0; b < nblk; ++b) {\n"
            "    double part = 0.0;  // the block's integer-weighted sum, scaled once per block\n"
            "    for (int j = 0; j < 32; ++j) part += (double)wrow[b * 32 + j] * (double)arow[b * 32 + j];\n"
            "    total += part * (double)ws[(long)n * nblk + b];\n"
            "  }\n"
            "  y[idx] = (float)total;\n")
    return c, kernel(c, body, "Dequant Q8 GEMV: one thread per output, f64 accumulation.")


def _gemv_deq(kv: bool) -> tuple[KernelContract, str]:
    name = "gk_gemv_kv_deq" if kv else "gk_gemv_deq"
    if kv:
        head = (inout("cache", "float*", "L * KD", doc="KV cache; row *d_pos is written"),
                inp("d_pos", "const int*", "1", fill="const(pos)"), scalar("KD"))
    else:
        head = (out("y", "float*", "N"),)
    c = KernelContract(
        name=name, family=FAMILY, op="q8_gemv", mode=Mode.DEQUANT,
        params=(*head, *_q8_weight(), inp("x", "const float*", "K"), scalar("K"), scalar("N")),
        grid=warp_rows_grid("N"), block=BLOCK_256,
        preconditions=(k_blocks(), int4_rows(), *(cache_row() if kv else ())),
        instances=_GEN_KV if kv else _GEN_PROJ,
        attrs={"act": "f32", "weight_scale": "f32", "accumulate": "f32", "dest": "kv_cache" if kv else "y",
               "tiers": "512+scalar"},
        doc="Warp per row; each lane sums 16 int8*f32 products of an int4 then scales by its block.")
    dest = "cache[(long)(*d_pos) * KD + row]" if kv else "y[row]"
    body = (dot.warp_row_head("N")
            + "  const signed char* wrow = wq + (long)row * K;\n"
            + "  const float* srow = ws + (long)row * (K / 32);\n"
            + "  float acc = 0.f;\n"
            + dot.f32_act_int4([("acc", "wrow", "srow")], "x", "K")
            + dot.warp_total(["acc"])
            + f"  if (lane == 0) {dest} = acc;\n")
    return c, kernel(c, body)


def _matmul_f32() -> tuple[KernelContract, str]:
    name, pat = _k("matmul")
    c = KernelContract(
        name=name, name_pattern=pat, family=FAMILY, op="matmul_f32", mode=Mode.DEQUANT,
        params=(inp("a", "const float*", "M * K"), inp("b", "const float*", "K * N"), out("c", "float*", "M * N"),
                scalar("M"), scalar("N"), scalar("K")),
        grid=("(M * N + 255) // 256", "1", "1"), block=BLOCK_256,
        preconditions=(fits_int("M * K", "a", "the index r*K+k"), fits_int("K * N", "b", "the index k*N+col"),
                       fits_int("M * N + 255", "c", "the output index")),
        instances=(("router_f32", {"M": "1", "N": "n_expert", "K": "d"}),
                   ("scores", {"M": "n_head", "N": "kv_len", "K": "head_dim"})),
        attrs={"accumulate": "f32", "order": "k ascending"},
        doc="c = a @ b in f32, one thread per output, k summed in ascending order.")
    body = ("  const int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (idx >= M * N) return;\n"
            "  const int r = idx / N, col = idx % N;\n"
            "  float s = 0;\n"
            "  for (int k = 0; k < K; ++k) s += a[(long)r * K + k] * b[(long)k * N + col];\n"
            "  c[idx] = s;\n")
    return c, kernel(c, body, "Plain f32 matmul (weights that are not Q8_0).")


# ---- activation quantizers --------------------------------------------------------------------------------
def _qact(two_pass: bool, mode: Mode) -> tuple[KernelContract, str]:
    name, pat = _k("qact")
    q = (out("aqh", "signed char*", "M * K"), out("aql", "signed char*", "M * K")) if two_pass \
        else (out("aq", "signed char*", "M * K"),)
    c = KernelContract(
        name=name, name_pattern=pat, family=FAMILY, op="act_quant", mode=mode,
        params=(inp("a", "const float*", "M * K"), *q, out("as_", "float*", "M * (K // 32)"),
                scalar("M"), scalar("K")),
        grid=("(M * (K // 32) + 7) // 8", "1", "1"), block=BLOCK_256,
        preconditions=(k_blocks(), fits_int("M * K", "a", "the element index blk*32+lane")),
        instances=_ACT_ROWS, attrs={"zero_rule": "floor", "two_pass": two_pass},
        doc="One warp per 32-block of the row-major M x K activation.")
    lo = "aql[blk * 32 + lane]" if two_pass else None
    body = ("  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if (blk >= M * (K / 32)) return;  // whole warps leave together\n"
            "  const int lane = threadIdx.x & 31;\n"
            + block_quant_body("a[blk * 32 + lane]", "lane", f"{'aqh' if two_pass else 'aq'}[blk * 32 + lane]",
                               "as_[blk]", "floor", lo_out=lo))
    return c, kernel(c, body)


def _quant_act_gen() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="gk_quant_act", family=FAMILY, op="act_quant", mode=Mode.INT8_ACT,
        params=(inp("x", "const float*", "K"), out("xq", "signed char*", "K"), out("xs", "float*", "K // 32"),
                scalar("K")),
        grid=("(K + 255) // 256", "1", "1"), block=BLOCK_256,
        preconditions=(k_blocks(),),
        instances=(("attn_ctx", {"K": "q_dim"}), ("x_norm", {"K": "d"})),
        attrs={"zero_rule": "unit", "two_pass": False},
        doc="Generation-lane quantizer: scale 1 for an all-zero block, round to nearest even, no clamp.")
    body = ("  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;\n"
            "  if ((long)blk * 32 >= K) return;\n"
            "  const int lane = threadIdx.x & 31;\n"
            + block_quant_body("x[blk * 32 + lane]", "lane", "xq[blk * 32 + lane]", "xs[blk]", "unit"))
    return c, kernel(c, body)


# ---- INT8_ACT / TWO_PASS_INT8 forward GEMV ------------------------------------------------------------------
def _q8dp4a(two_pass: bool, mode: Mode) -> tuple[KernelContract, str]:
    name, pat = _k("q8dp4a")
    acts = (inp("aqh", "const signed char*", "M * K"), inp("aql", "const signed char*", "M * K")) if two_pass \
        else (inp("aq", "const signed char*", "M * K"),)
    c = KernelContract(
        name=name, name_pattern=pat, family=FAMILY, op="q8_gemv", mode=mode,
        params=(*acts, inp("as_", "const float*", "M * (K // 32)"), *_q8_weight("const __half*"),
                out("y", "float*", "M * N"), scalar("M"), scalar("N"), scalar("K")),
        grid=warp_rows_grid("N"), block=BLOCK_256,
        preconditions=(k_blocks(), int4_rows()),
        instances=_PROJ,
        attrs={"act": "int8x2" if two_pass else "int8", "weight_scale": "f16", "accumulate": "f32", "dest": "y",
               "tiers": "128+scalar" if two_pass else "512+128+scalar"},
        doc="Warp per weight row, looping over the M activation rows; f16 weight scales.")
    if two_pass:
        rowdot = dot.int8x2_act([("acc", "wrow", "srow")], "hrow", "lrow", "arsc", "K", wscale=dot.f16_scale,
                                inline_lo_scale=True, ind="    ")
        rows = ("    const signed char* hrow = aqh + (long)r * K;\n"
                "    const signed char* lrow = aql + (long)r * K;\n")
    else:
        rowdot = dot.int8_act([("acc", "wrow", "srow")], "arow", "arsc", "K", tiers="512,128",
                              wscale=dot.f16_scale, scale_first=False, premultiply512=True, ind="    ")
        rows = "    const signed char* arow = aq + (long)r * K;\n"
    body = (dot.warp_row_head("N")
            + "  const signed char* wrow = wq + (long)row * K;\n"
            + "  const __half* srow = ws + (long)row * (K / 32);\n"
            + "  for (int r = 0; r < M; ++r) {\n"
            + rows
            + "    const float* arsc = as_ + (long)r * (K / 32);\n"
            + "    float acc = 0.0f;\n"
            + rowdot
            + dot.warp_total(["acc"], "    ")
            + "    if (lane == 0) y[(long)r * N + row] = acc;\n"
            + "  }\n")
    return c, kernel(c, body)


# ---- generation-lane int8 GEMVs ----------------------------------------------------------------------------
def _gemv_gen(kind: str) -> tuple[KernelContract, str]:
    """kind: 'y' (gk_gemv), 'kv' (gk_gemv_kv) or 'qkv' (gk_gemv_qkv)."""
    act = (inp("xq", "const signed char*", "K"), inp("xs", "const float*", "K // 32"))
    pos = (inp("d_pos", "const int*", "1", fill="const(pos)"), scalar("KD"))
    if kind == "y":
        name, head, tail, rows = "gk_gemv", (out("y", "float*", "N"), *_q8_weight()), (scalar("K"), scalar("N")), "N"
        pre, inst, dest = (), _GEN_PROJ, "y"
    elif kind == "kv":
        name = "gk_gemv_kv"
        head = (inout("cache", "float*", "L * KD", doc="KV cache; row *d_pos is written"), *pos, *_q8_weight())
        tail, rows, pre, inst, dest = (scalar("K"), scalar("N")), "N", cache_row(), _GEN_KV, "kv_cache"
    elif kind == "qkv":
        name = "gk_gemv_qkv"
        head = (out("qbuf", "float*", "QD"), inout("kc", "float*", "L * KD"), inout("vc", "float*", "L * KD"), *pos,
                inp("wqq", "const signed char*", "QD * K"), inp("wqs", "const float*", "QD * (K // 32)"),
                inp("wkq", "const signed char*", "KD * K"), inp("wks", "const float*", "KD * (K // 32)"),
                inp("wvq", "const signed char*", "KD * K"), inp("wvs", "const float*", "KD * (K // 32)"))
        tail, rows, dest = (scalar("K"), scalar("QD")), "QD + 2 * KD", "qkv"
        pre = (Precondition("0 <= pos < L", "d_pos", "the kernel writes cache row *d_pos unchecked"),)
        inst = (("qkv", {"K": "d", "QD": "q_dim", "KD": "kv_dim", "L": "kv_len", "pos": "kv_len - 1"}),)
    else:
        raise ValueError(f"kind: expected 'y', 'kv' or 'qkv', got {kind!r}")
    c = KernelContract(
        name=name, family=FAMILY, op="q8_gemv_qkv" if kind == "qkv" else "q8_gemv", mode=Mode.INT8_ACT,
        params=(*head, *act, *tail), grid=warp_rows_grid(rows), block=BLOCK_256,
        preconditions=(k_blocks(), int4_rows(), *pre), instances=inst,
        attrs={"act": "int8", "weight_scale": "f32", "accumulate": "f32", "dest": dest, "tiers": "512+scalar"},
        doc="Warp per output row; int4 loads of both int8 operands, a scalar tail for K % 512.")
    if kind == "qkv":
        select = ("  const int nall = QD + 2 * KD;\n"
                  "  const int og = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
                  "  const int lane = threadIdx.x & 31;\n"
                  "  if (og >= nall) return;\n"
                  "  // The output range picks the weight: [0,QD) -> Q, then K, then V (cache row *d_pos).\n"
                  "  const signed char* wsel; const float* ssel; float* dst; long at; int row;\n"
                  "  if (og < QD) { wsel = wqq; ssel = wqs; row = og; dst = qbuf; at = row; }\n"
                  "  else if (og < QD + KD) { wsel = wkq; ssel = wks; row = og - QD; dst = kc; at = (long)(*d_pos) * KD + row; }\n"
                  "  else { wsel = wvq; ssel = wvs; row = og - QD - KD; dst = vc; at = (long)(*d_pos) * KD + row; }\n"
                  "  const signed char* wrow = wsel + (long)row * K;\n"
                  "  const float* srow = ssel + (long)row * (K / 32);\n")
        store = "dst[at]"
    else:
        select = (dot.warp_row_head("N")
                  + "  const signed char* wrow = wq + (long)row * K;\n"
                  + "  const float* srow = ws + (long)row * (K / 32);\n")
        store = "cache[(long)(*d_pos) * KD + row]" if kind == "kv" else "y[row]"
    body = (select + "  float acc = 0.f;\n"
            + dot.int8_act([("acc", "wrow", "srow")], "xq", "xs", "K", tiers="512", scale_first=False)
            + dot.warp_total(["acc"]) + f"  if (lane == 0) {store} = acc;\n")
    return c, kernel(c, body)


# ---- int8 tensor-core GEMM ---------------------------------------------------------------------------------
def _marlin(nt: int = MARLIN_NT) -> tuple[KernelContract, str]:
    if not isinstance(nt, int) or nt < 1 or nt > 8:
        raise ValueError(f"nt: the n-subtile count must be an int in 1..8, got {nt!r}")
    cols = 8 * nt
    c = KernelContract(
        name="gk_marlin_q8", family=FAMILY, op="q8_gemm_mma", mode=Mode.INT8_ACT,
        params=(inp("Xq", "const signed char*", "B * K"), inp("Xs", "const float*", "B * (K // 32)"),
                inp("Wq", "const signed char*", "N * K"), inp("Ws", "const float*", "N * (K // 32)"),
                out("Y", "float*", "B * N"), scalar("B"), scalar("N"), scalar("K")),
        # One warp per 16 x (8*nt) output tile, one warp per block: the kernel has no guard on the warp index,
        # so the launch must cover the tiles exactly.
        grid=(f"(B // 16) * (N // {cols})", "1", "1"), block=("32", "1", "1"),
        preconditions=(k_blocks(), Precondition("B % 16 == 0 and B >= 16", "B",
                                                "a 16-row m-tile reads rows m0..m0+15 of Xq unguarded"),
                       Precondition(f"N % {cols} == 0 and N >= {cols}", "N",
                                    f"a warp covers {cols} columns; a partial tile reads Wq rows past N")),
        instances=(("prefill_q", {"B": "16", "N": "q_dim", "K": "d"}),
                   ("prefill_out", {"B": "32", "N": "d", "K": "q_dim"})),
        attrs={"nt": nt, "act": "int8", "weight_scale": "f32", "accumulate": "f32"},
        doc="Y[m,n] = sum_kb (ws[n,kb]*xs[m,kb]) * int32 mma dot of the 32-block; kb ascending.")
    body = (f"  const int NT = {nt};\n"
            "  const int KB = K / 32;\n"
            "  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
            "  const int lane = threadIdx.x & 31;\n"
            "  const int ntiles = N / (8 * NT);\n"
            "  const int m0 = (warp / ntiles) * 16, n0 = (warp % ntiles) * 8 * NT;\n"
            "  const int g = lane >> 2, q = lane & 3;  // fragment group (row) and thread-in-group (k / col pair)\n"
            "  float acc[NT][4];\n"
            "  for (int j = 0; j < NT; ++j) { acc[j][0] = 0.f; acc[j][1] = 0.f; acc[j][2] = 0.f; acc[j][3] = 0.f; }\n"
            "  const signed char* xr0 = Xq + (long)(m0 + g) * K;\n"
            "  const signed char* xr1 = Xq + (long)(m0 + g + 8) * K;\n"
            "  for (int kb = 0; kb < KB; ++kb) {\n"
            "    const int k0 = kb * 32;\n"
            "    // A fragment (16 x 32, row-major): rows g and g+8, bytes 4q..4q+3 of each 16-byte half.\n"
            "    const int fa0 = *(const int*)(xr0 + k0 + q * 4);\n"
            "    const int fa1 = *(const int*)(xr1 + k0 + q * 4);\n"
            "    const int fa2 = *(const int*)(xr0 + k0 + 16 + q * 4);\n"
            "    const int fa3 = *(const int*)(xr1 + k0 + 16 + q * 4);\n"
            "    const float xsc0 = Xs[(long)(m0 + g) * KB + kb], xsc1 = Xs[(long)(m0 + g + 8) * KB + kb];\n"
            "#pragma unroll\n"
            "    for (int j = 0; j < NT; ++j) {\n"
            "      const int c0 = n0 + j * 8;\n"
            "      // B fragment (32 x 8, column-major = weight row c0+g): bytes 4q..4q+3 of each half.\n"
            "      const signed char* wr = Wq + (long)(c0 + g) * K + k0;\n"
            "      const int fb0 = *(const int*)(wr + q * 4);\n"
            "      const int fb1 = *(const int*)(wr + 16 + q * 4);\n"
            "      int r0 = 0, r1 = 0, r2 = 0, r3 = 0;\n"
            "      asm volatile(\"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\"\n"
            "                   : \"+r\"(r0), \"+r\"(r1), \"+r\"(r2), \"+r\"(r3)\n"
            "                   : \"r\"(fa0), \"r\"(fa1), \"r\"(fa2), \"r\"(fa3), \"r\"(fb0), \"r\"(fb1));\n"
            "      // C fragment: rows g / g+8, columns c0+2q and c0+2q+1.\n"
            "      const float wsc0 = Ws[(long)(c0 + q * 2) * KB + kb], wsc1 = Ws[(long)(c0 + q * 2 + 1) * KB + kb];\n"
            "      acc[j][0] += (float)r0 * (wsc0 * xsc0);\n"
            "      acc[j][1] += (float)r1 * (wsc1 * xsc0);\n"
            "      acc[j][2] += (float)r2 * (wsc0 * xsc1);\n"
            "      acc[j][3] += (float)r3 * (wsc1 * xsc1);\n"
            "    }\n"
            "  }\n"
            "  for (int j = 0; j < NT; ++j) {\n"
            "    const int ca = n0 + j * 8 + q * 2, cb = ca + 1, ra = m0 + g, rb = ra + 8;\n"
            "    if (ra < B) { if (ca < N) Y[(long)ra * N + ca] = acc[j][0]; if (cb < N) Y[(long)ra * N + cb] = acc[j][1]; }\n"
            "    if (rb < B) { if (ca < N) Y[(long)rb * N + ca] = acc[j][2]; if (cb < N) Y[(long)rb * N + cb] = acc[j][3]; }\n"
            "  }\n")
    return c, kernel(c, body, f"Int8 tensor-core Q8_0 GEMM (mma.sync m16n8k32 s8, nt={nt}); needs sm_80+.")


def emit(mode: Optional[Mode], shape: ShapeSet, nt: int = MARLIN_NT) -> KernelSource:
    mode = Mode.parse(mode) if mode is not None else None
    if mode is Mode.DEQUANT:
        kernels = [_q8gemv(), _gemv_deq(False), _gemv_deq(True), _matmul_f32()]
        params: dict = {}
    elif mode is Mode.INT8_ACT:
        kernels = [_qact(False, mode), _q8dp4a(False, mode), _quant_act_gen(), _gemv_gen("y"), _gemv_gen("kv"),
                   _gemv_gen("qkv"), _marlin(nt)]
        params = {"nt": nt}
    elif mode is Mode.TWO_PASS_INT8:
        kernels = [_qact(True, mode), _q8dp4a(True, mode)]
        params = {}
    else:
        raise ValueError(f"mode: the matmul family is emitted in {', '.join(m.value for m in MODES)}, not {mode!r}")
    params["forward_index"] = FORWARD_INDEX
    return assemble(FAMILY, mode, shape, kernels, params)
