"""Launches of the seed's kernels at the `tiny` shapes, with plausible inputs (random floats from a recorded
seed, index inputs in range). Geometry follows the seed's own host launch lines (grid/block per kernel).

Each builder returns (grid, block, shared_bytes, args, outputs); in-place parameters (a residual, a KV cache,
the decode position) are passed but not named as outputs, since a kernel legitimately leaves most of them.
"""
from __future__ import annotations

import numpy as np

from reference.shapes import TINY

S = TINY
D, FF, E, TOP, NH, NKV, HD, V, P = S.d, S.dff, S.n_expert, S.top_k, S.n_head, S.n_kv, S.head_dim, S.vocab, S.attn_split
QD, KD = NH * HD, NKV * HD
MAXSEQ = S.kv_len + 1
POS = S.kv_len - 1          # decode position: L = POS + 1 cached keys
EPS = np.float32(S.rms_eps)
ROPE = np.float32(S.rope_theta)
SCALE = np.float32(1.0 / np.sqrt(HD))
i32 = np.int32
# The seed kernels the race detector reports at tiny (docs/KERNELS.md, section 3: `red[0]` read for the block max
# while warp 0 overwrites it with its partial sum). moe_topk_idx has the same race but runs one warp at tiny
# (E = 32 threads), whose shuffles order its lanes: it races from two warps on (tests/.../test_race_detector.py).
RACES_AT_TINY = {("GEN_DEVICE_KERNELS", "gk_attn"), ("GEN_DEVICE_KERNELS", "gk_fused_attn")}
RACE_REPORT = r"data race on __shared__ 'red' .* index 0 .*different warps"


class Inputs:
    """Random inputs from one seed (printed by every failing test for replay)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def f(self, *n, scale=1.0):
        return (self.rng.standard_normal(int(np.prod(n))) * scale).astype(np.float32)

    def pos(self, *n):
        return (self.rng.random(int(np.prod(n))) * 0.02 + 0.001).astype(np.float32)   # Q8_0-like block scales

    def q(self, *n):
        return self.rng.integers(-127, 128, int(np.prod(n)), dtype=np.int8)

    def h(self, *n):
        return self.pos(*n).astype(np.float16)

    def experts(self):
        return self.rng.choice(E, TOP, replace=False).astype(np.int32)

    def zeros(self, n, dtype=np.float32):
        return np.zeros(n, dtype)


def gg(n):          # the seed's Gg(): one warp per output row, 8 warps per 256-thread block
    return ((n + 7) // 8,)


def _moe_common(x: Inputs, name: str):
    if name == "moe_gemv":
        return (E + 255) // 256, 256, 0, [x.f(D), x.q(E * D), x.pos(E * D // 32), x.zeros(E), i32(E), i32(D)], (3,)
    if name == "moe_silu_had":
        return 1, 256, 0, [x.f(FF), x.f(FF), x.zeros(FF), i32(FF)], (2,)
    if name == "moe_zero":
        return (D + 255) // 256, 256, 0, [x.f(D), i32(D)], (0,)
    if name == "moe_combine":
        return (D + 255) // 256, 256, 0, [x.f(D), x.f(D), x.pos(E), i32(3), i32(D)], ()
    if name == "moe_topk":
        return 1, E, 0, [x.f(E), x.zeros(E), i32(E), i32(TOP)], (1,)
    raise KeyError(name)


def _router(x: Inputs, name: str):
    if name == "moe_router_fast":
        return gg(E), 256, 0, [x.f(D), x.q(E * D), x.pos(E * D // 32), x.zeros(E), i32(E), i32(D)], (3,)
    if name == "moe_topk_idx":
        logits = (x.rng.permutation(E) * 0.37 - 5).astype(np.float32)
        return 1, E, 0, [logits, x.zeros(TOP, np.int32), x.zeros(TOP), i32(E), i32(TOP)], (1, 2)
    raise KeyError(name)


def _moe_fused(x: Inputs, name: str, two_pass: bool):
    lo = [x.q(D)] if two_pass else []
    if name == "moe_qact":
        outs = [x.zeros(D, np.int8)] * (2 if two_pass else 1)
        outs = [np.zeros(D, np.int8) for _ in outs]
        args = [x.f(D)] + outs + [x.zeros(D // 32), i32(D)]
        return ((D // 32) + 7) // 8, 256, 0, args, tuple(range(1, len(args) - 1))
    if name == "moe_gate_up_silu":
        args = [x.q(D)] + lo + [x.pos(D // 32), x.q(E * FF * D), x.pos(E * FF * D // 32), x.q(E * FF * D),
                                x.pos(E * FF * D // 32), x.experts(), x.zeros(TOP * FF), i32(TOP), i32(FF), i32(D)]
        return (TOP * FF + 7) // 8, 256, 0, args, (len(args) - 4,)
    if name == "moe_down_combine":
        hlo = [x.q(TOP * FF)] if two_pass else []
        args = [x.q(TOP * FF)] + hlo + [x.pos(TOP * FF // 32), x.q(E * D * FF), x.pos(E * D * FF // 32),
                                        x.experts(), x.pos(TOP), x.zeros(D), i32(TOP), i32(D), i32(FF)]
        return D, TOP * 32, 0, args, (len(args) - 4,)
    raise KeyError(name)


M_ROWS, N_OUT, K_IN = 2, 64, D


def _forward(x: Inputs, name: str, set_name: str):
    two = set_name == "emit_forward#1"
    nb = K_IN // 32
    if name == "k0_qact":
        q = [np.zeros(M_ROWS * K_IN, np.int8) for _ in range(2 if two else 1)]
        args = [x.f(M_ROWS * K_IN)] + q + [x.zeros(M_ROWS * nb), i32(M_ROWS), i32(K_IN)]
        return (M_ROWS * nb + 7) // 8, 256, 0, args, tuple(range(1, len(args) - 2))
    if name == "k0_q8dp4a":
        a = [x.q(M_ROWS * K_IN)] * (2 if two else 1)
        args = a + [x.pos(M_ROWS * nb), x.q(N_OUT * K_IN), x.h(N_OUT * nb), x.zeros(M_ROWS * N_OUT),
                    i32(M_ROWS), i32(N_OUT), i32(K_IN)]
        args[:len(a)] = [x.q(M_ROWS * K_IN) for _ in a]
        return gg(N_OUT), 256, 0, args, (len(args) - 4,)
    if name == "k0_q8gemv":
        return ((M_ROWS * N_OUT + 255) // 256,), 256, 0, [x.f(M_ROWS * K_IN), x.q(N_OUT * K_IN), x.pos(N_OUT * nb),
                                                          x.zeros(M_ROWS * N_OUT), i32(M_ROWS), i32(N_OUT), i32(K_IN)], (3,)
    if name == "k0_rope":
        half = HD // 2
        return ((NH * half + 255) // 256,), 256, 0, [x.f(NH * HD), x.f(half), x.f(half), x.zeros(NH * HD), i32(NH),
                                                      i32(half)], (3,)
    raise KeyError(name)


def _marlin(x: Inputs, name: str):
    B, N, K = 16, 64, D                      # one 16-row M tile, 4 warps of 8*NT columns
    return 1, 32 * (B // 16) * (N // 16), 0, [x.q(B * K), x.pos(B * K // 32), x.q(N * K), x.pos(N * K // 32),
                                              x.zeros(B * N), i32(B), i32(N), i32(K)], (4,)


def _gen(x: Inputs, name: str):
    pos = lambda: np.array([POS], np.int32)             # noqa: E731
    cache = lambda: x.f(MAXSEQ * KD)                    # noqa: E731
    if name == "gk_embed":
        return (D + 255) // 256, 256, 0, [x.zeros(D), x.q(V * D), x.pos(V * D // 32), np.array([17], np.int32), i32(D)], (0,)
    if name == "gk_rmsnorm":
        return 1, 256, 0, [x.zeros(D), x.f(D), x.f(D), i32(D), EPS], (0,)
    if name == "gk_add_rmsnorm":
        return 1, 256, 0, [x.f(D), x.f(D), x.zeros(D), x.f(D), i32(D), EPS], (2,)
    if name == "gk_add_rmsnorm_q8":
        return 1, 256, 0, [x.f(D), x.f(D), x.zeros(D), x.f(D), x.zeros(D, np.int8), x.zeros(D // 32), i32(D), EPS], (2, 4, 5)
    if name == "gk_rmsnorm_q8":
        return 1, 256, 0, [x.f(D), x.zeros(D, np.int8), x.zeros(D // 32), x.f(D), i32(D), EPS], (1, 2)
    if name == "gk_add_rmsnorm_q8a":
        return 1, 256, 0, [x.f(D), x.f(D), x.zeros(D, np.int8), x.zeros(D // 32), x.f(D), i32(D), EPS], (2, 3)
    if name == "gk_quant_act":
        return (QD + 255) // 256, 256, 0, [x.f(QD), x.zeros(QD, np.int8), x.zeros(QD // 32), i32(QD)], (1, 2)
    if name == "gk_gemv":
        return gg(N_OUT), 256, 0, [x.zeros(N_OUT), x.q(N_OUT * D), x.pos(N_OUT * D // 32), x.q(D), x.pos(D // 32),
                                   i32(D), i32(N_OUT)], (0,)
    if name == "gk_gemv_kv":
        return gg(KD), 256, 0, [cache(), pos(), i32(KD), x.q(KD * D), x.pos(KD * D // 32), x.q(D), x.pos(D // 32),
                                i32(D), i32(KD)], ()
    if name == "gk_gemv_qkv":
        return gg(QD + 2 * KD), 256, 0, [x.zeros(QD), cache(), cache(), pos(), i32(KD), x.q(QD * D), x.pos(QD * D // 32),
                                         x.q(KD * D), x.pos(KD * D // 32), x.q(KD * D), x.pos(KD * D // 32), x.q(D),
                                         x.pos(D // 32), i32(D), i32(QD)], (0,)
    if name == "gk_qk_norm_rope":
        return NKV, 128, 0, [cache(), pos(), i32(KD), x.f(HD), i32(NKV), i32(HD), ROPE, EPS], ()
    if name == "gk_qk_norm_rope2":
        return NH + NKV, 128, 0, [x.f(QD), cache(), pos(), i32(KD), x.f(HD), x.f(HD), i32(NH), i32(NKV), i32(HD), ROPE,
                                  EPS], ()
    if name in ("gk_attn", "gk_attn_online"):
        shared = MAXSEQ * 4 if name == "gk_attn" else 0
        return NH, 256, shared, [x.zeros(QD), x.f(QD), cache(), cache(), pos(), i32(NH), i32(NKV), i32(HD), SCALE], (0,)
    if name == "gk_attn_part":
        return NH * P, 256, 0, [x.f(QD), cache(), cache(), pos(), i32(NH), i32(NKV), i32(HD), SCALE, i32(P),
                                x.zeros(NH * P * HD), x.zeros(NH * P), x.zeros(NH * P)], (9, 10, 11)
    if name == "gk_attn_comb":
        return NH, 128, 0, [x.zeros(QD), i32(NH), i32(HD), i32(P), x.f(NH * P * HD), x.f(NH * P), x.pos(NH * P) * 50], (0,)
    if name == "gk_attn_comb_q":
        return NH, 128, 0, [x.zeros(QD, np.int8), x.zeros(QD // 32), i32(NH), i32(HD), i32(P), x.f(NH * P * HD),
                            x.f(NH * P), x.pos(NH * P) * 50], (0, 1)
    if name == "gk_add":
        return (D + 255) // 256, 256, 0, [x.f(D), x.f(D), i32(D)], ()
    if name == "gk_argmax_adv":
        return 1, 256, 0, [x.f(V), i32(V), x.zeros(1, np.int32), pos()], (2,)
    if name == "gk_gemv_deq":
        return gg(N_OUT), 256, 0, [x.zeros(N_OUT), x.q(N_OUT * D), x.pos(N_OUT * D // 32), x.f(D), i32(D), i32(N_OUT)], (0,)
    if name == "gk_gemv_kv_deq":
        return gg(KD), 256, 0, [cache(), pos(), i32(KD), x.q(KD * D), x.pos(KD * D // 32), x.f(D), i32(D), i32(KD)], ()
    if name == "gk_fused_attn":
        return NH, 256, MAXSEQ * 4, [x.zeros(QD), x.f(QD), cache(), cache(), pos(), i32(NH), i32(NKV), i32(HD), SCALE,
                                     x.f(HD), ROPE, EPS], (0,)
    if name == "gk_moe_gate_up_deq":
        return (TOP * FF + 7) // 8, 256, 0, [x.f(D), x.q(E * FF * D), x.pos(E * FF * D // 32), x.q(E * FF * D),
                                             x.pos(E * FF * D // 32), x.experts(), x.zeros(TOP * FF), i32(TOP), i32(FF),
                                             i32(D)], (6,)
    if name == "gk_moe_down_deq":
        return D, TOP * 32, 0, [x.f(TOP * FF), x.q(E * D * FF), x.pos(E * D * FF // 32), x.experts(), x.pos(TOP),
                                x.zeros(D), i32(TOP), i32(D), i32(FF)], (5,)
    raise KeyError(name)


def build_launch(set_name: str, kernel: str, seed: int):
    x = Inputs(seed)
    if set_name in ("MOE_KERNELS", "emit_moe_forward"):
        return _moe_common(x, kernel)
    if set_name == "MOE_ROUTER_TOPK_KERNELS":
        return _router(x, kernel)
    if set_name in ("MOE_TWO_PASS_KERNELS", "MOE_SINGLE_PASS_KERNELS"):
        return _moe_fused(x, kernel, set_name == "MOE_TWO_PASS_KERNELS")
    if set_name.startswith("emit_forward#"):
        return _forward(x, kernel, set_name)
    if set_name == "emit_marlin_q8_gemm":
        return _marlin(x, kernel)
    if set_name == "GEN_DEVICE_KERNELS":
        return _gen(x, kernel)
    raise KeyError(set_name)
