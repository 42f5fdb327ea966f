"""Rotary position embedding: the table-driven forward kernel and the generation lane's per-head
QK-RMSNorm + RoPE (one launch per Q or K, or one fused launch over both).

Pairs are the two halves of a head: element i rotates with element i + hd/2 ("NeoX" layout):
  y[i] = a*c - b*s,  y[i+half] = a*s + b*c,  a = x[i], b = x[i+half].
The expressions are written exactly so (the compiler's FMA contraction of each then matches the family's).
  k{i}_rope reads c = rc[i], s = rs[i] from tables (one thread per pair, 256 per block);
  gk_qk_norm_rope / gk_qk_norm_rope2 first RMS-normalize each head in f32 (halving tree over sh[128],
  rsqrtf), scale by the per-dim weight, then rotate by the angle pos * theta^(-2i/hd) computed on the
  device with powf/cosf/sinf. The head sits at `base + pos*stride + head*hd`: stride 0 for the query
  buffer, the KV row width for a K cache row.

MODES = (None,). Kernels: k0_rope, gk_qk_norm_rope, gk_qk_norm_rope2.
"""
from __future__ import annotations

from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from ._kernel_text import (assemble, exact_threads, inout, inp, kernel, out, positive, scalar, rope_rotate,
                           tree_reduce, tree_threads)
from .contract import KernelContract, KernelSource, Precondition

FAMILY = "rope"
MODES = (None,)

_EVEN = Precondition("hd % 2 == 0", "hd", "rotation pairs element i with i + hd/2")


def _k_rope(stage: int) -> tuple[KernelContract, str]:
    inst = {"HALF": "head_dim // 2", "threads": "256"}
    c = KernelContract(
        name=f"k{stage}_rope", family=FAMILY, op="rope_table", mode=None,
        params=(inp("q", "const float*", "H*2*HALF"), inp("rc", "const float*", "HALF", doc="cos table"),
                inp("rs", "const float*", "HALF", doc="sin table"), out("y", "float*", "H*2*HALF"),
                scalar("H", "int", "H"), scalar("HALF", "int", "HALF")),
        grid=("ceil_div(H*HALF, threads)", "1", "1"), block=("threads", "1", "1"),
        preconditions=(exact_threads(256, "the launch lines use 256 threads and ceil(H*HALF/256) blocks"),
                       *positive("H", "HALF")),
        name_pattern=r"k\d+_rope",
        instances=(("q_heads", {"H": "n_head", **inst}), ("k_heads", {"H": "n_kv", **inst})),
        attrs={}, doc="rotate each head's (i, i+HALF) pairs by the cos/sin tables")
    body = ("  const int hd = 2 * HALF;\n"
            "  const int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (idx >= H * HALF) return;\n"
            "  const int head = idx / HALF, i = idx % HALF;\n"
            "  const float a = q[head * hd + i], b = q[head * hd + i + HALF];\n"
            "  const float c = rc[i], s = rs[i];\n"
            "  y[head * hd + i] = a*c - b*s;\n"
            "  y[head * hd + i + HALF] = a*s + b*c;\n")
    return c, kernel(c, body, c.doc)


_NORM_THREADS = tree_threads(128, "sh")


def _norm_rope_text(h: str, w: str, indent: str = "  ") -> str:
    """Normalize the head at pointer `h` with weight `w`, then rotate it at position `pos` (all in f32)."""
    i = indent
    return (f"{i}__shared__ float sh[128];\n"
            f"{i}float sq = 0.0f;\n"
            f"{i}for (int k = tid; k < hd; k += blockDim.x) sq += {h}[k] * {h}[k];\n"
            f"{i}sh[tid] = sq;\n{i}__syncthreads();\n" + tree_reduce("sh", indent=i) +
            f"{i}const float inv = rsqrtf(sh[0] / hd + eps);\n"
            f"{i}__syncthreads();  // sh[0] is read by every thread before anyone moves on\n"
            f"{i}for (int k = tid; k < hd; k += blockDim.x) {h}[k] = {h}[k] * inv * {w}[k];\n"
            f"{i}__syncthreads();\n" + rope_rotate(h, i))


_COMMON = {"hd": "head_dim", "pos": "kv_len - 1", "theta": "rope_theta", "eps": "rms_eps", "threads": "128"}


def _gk_qk_norm_rope() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="gk_qk_norm_rope", family=FAMILY, op="qk_norm_rope", mode=None,
        params=(inout("base", "float*", "pos*stride + n_heads*hd", doc="the heads of row pos, normed and rotated in place"),
                inp("d_pos", "const int*", "1", fill="const(pos)"), scalar("stride", "int", "stride"),
                inp("nw", "const float*", "hd"), scalar("n_heads", "int", "n_heads"), scalar("hd", "int", "hd"),
                scalar("rbase", "float", "theta"), scalar("eps", "float", "eps")),
        grid=("n_heads", "1", "1"), block=("threads", "1", "1"),
        preconditions=(_NORM_THREADS, _EVEN, *positive("n_heads", "hd"),
                       Precondition("pos >= 0", "d_pos", "the position indexes a cache row"),
                       Precondition("stride == 0 or stride >= n_heads*hd", "stride",
                                    "rows of a cache must not overlap the heads of another row")),
        instances=(("q_heads", {"n_heads": "n_head", "stride": "0", **_COMMON}),
                   ("k_cache_row", {"n_heads": "n_kv", "stride": "kv_dim", **_COMMON})),
        attrs={"fused_qk": False}, doc="per-head RMSNorm * nw, then RoPE at position *d_pos")
    body = ("  const int head = blockIdx.x;\n  if (head >= n_heads) return;\n"
            "  const int tid = threadIdx.x;\n  const int pos = *d_pos;\n"
            "  float* h = base + (long)pos * stride + head * hd;\n" + _norm_rope_text("h", "nw"))
    return c, kernel(c, body, c.doc)


def _gk_qk_norm_rope2() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="gk_qk_norm_rope2", family=FAMILY, op="qk_norm_rope", mode=None,
        params=(inout("qbase", "float*", "nh*hd"),
                inout("kbase", "float*", "pos*kstride + nkv*hd", doc="the K cache; row pos is rotated"),
                inp("d_pos", "const int*", "1", fill="const(pos)"), scalar("kstride", "int", "kstride"),
                inp("qnw", "const float*", "hd"), inp("knw", "const float*", "hd"),
                scalar("nh", "int", "nh"), scalar("nkv", "int", "nkv"), scalar("hd", "int", "hd"),
                scalar("rbase", "float", "theta"), scalar("eps", "float", "eps")),
        grid=("nh + nkv", "1", "1"), block=("threads", "1", "1"),
        preconditions=(_NORM_THREADS, _EVEN, *positive("nh", "nkv", "hd"),
                       Precondition("pos >= 0", "d_pos", "the position indexes a cache row"),
                       Precondition("kstride >= nkv*hd", "kstride", "cache rows must not overlap")),
        instances=(("qk_heads", {"nh": "n_head", "nkv": "n_kv", "kstride": "kv_dim", **_COMMON}),),
        attrs={"fused_qk": True}, doc="blocks [0, nh) norm+rotate the query heads, [nh, nh+nkv) the K cache row")
    body = ("  const int blk = blockIdx.x;\n"
            "  const bool is_q = blk < nh;\n"
            "  const int head = is_q ? blk : blk - nh;\n"
            "  const int tid = threadIdx.x;\n  const int pos = *d_pos;\n"
            "  float* h = is_q ? qbase + head * hd : kbase + (long)pos * kstride + head * hd;\n"
            "  const float* w = is_q ? qnw : knw;\n" + _norm_rope_text("h", "w"))
    return c, kernel(c, body, c.doc)


def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    if mode is not None:
        raise ValueError(f"mode: the rope family does not depend on the mode; pass None, not {mode}")
    return assemble(FAMILY, None, shape, [_k_rope(0), _gk_qk_norm_rope(), _gk_qk_norm_rope2()], {})
