"""Per-op judges for decode attention: single-pass (static / dynamic shared scores, fused QK-norm+RoPE),
online softmax, split-K partials and their combine, with the optional int8 epilogues.

Budget (per output element of head h, dim e), derived in docs/NUMERICS.md:
  score error   ds_j <= gamma_(hd+2) * scale * sum_i |q_i k_ji|  (+ scale * sum_i |dq_i| |k_ji| for a fused
                query norm+rope);  D = max_j ds_j
  weight error  rel(p_j) <= 2 (2D + u max_j|s_j - m| + (exp ulps + 2) u) + gamma_(L+1)
                (numerator and denominator each; every key's weight passes through at most L running-max
                rescalings in the online and split forms, each one more exp: times L there)
  output        |do_e| <= (rel(p) + gamma_(L+1)) sum_j p_j |v_je| + u |o_e|
"""
from __future__ import annotations

import numpy as np

from . import budgets as B
from harness.cases import inputs
from harness.cases import variants as V
from .core import act_quant_ref, ref_act_scales, compare_exact, compare_float
from .registry import Ctx, Judge, op

U = B.U32
SENTINEL_MAX = np.float32(-1e30)   # the family's "no key yet" running max (an empty split stores it)


def _geom(ctx: Ctx):
    nh = int(ctx.dim("n_head", "H"))
    nkv = int(ctx.dim("n_kv", "KV"))
    hd = int(ctx.dim("hd", "HD"))
    L = int(ctx.dim("L"))
    return nh, nkv, hd, L


def _build_qkv(ctx: Ctx) -> None:
    nh, nkv, hd, L = _geom(ctx)
    # q and k Gaussian with per-dim std 1 give scores scale*q.k ~ N(0, 1); a few larger keys make the
    # softmax peaked the way trained attention is.
    ctx.put("q", inputs.activation(ctx.rng, ctx.counts["q"], outliers=False))
    k = inputs.activation(ctx.rng, ctx.counts["kc"], outliers=False).reshape(-1, nkv * hd)
    k[: min(L, k.shape[0])] *= ctx.rng.uniform(0.5, 2.5, size=(min(L, k.shape[0]), 1)).astype(np.float32)
    ctx.put("kc", k)
    ctx.put("vc", inputs.activation(ctx.rng, ctx.counts["vc"], outliers=False))
    if ctx.case.variant == "model":
        from harness.cases import model_inputs as case_inputs
        fused = ctx.attrs.get("variant") == "fused_qknorm_rope"     # the kernel norms and ropes q itself
        q, k, v = case_inputs.attention(ctx, nh, nkv, hd, ctx.counts["kc"] // (nkv * hd), L, raw_query=fused)
        ctx.put("q", q)
        ctx.put("kc", k)
        ctx.put("vc", v)
        if ctx.has("qnw"):
            ctx.put("qnw", case_inputs.q_norm(ctx))
        return
    if ctx.case.variant in V.ATTENTION_VARIANTS:
        q, k = V.attention_qk(ctx.rng, ctx.case.variant, ctx.out("q"), ctx.out("kc"), nh, nkv, hd, L,
                              1.0 / np.sqrt(hd))
        ctx.put("q", q)
        ctx.put("kc", k)
    if ctx.has("qnw"):
        ctx.put("qnw", inputs.norm_weight(ctx.rng, hd))


def _caches(ctx: Ctx):
    """The kernel's K and V caches as reference.attention reads them: (positions, n_kv * hd) float64."""
    nh, nkv, hd, L = _geom(ctx)
    return (ctx.out("kc").astype(np.float64).reshape(-1, nkv * hd),
            ctx.out("vc").astype(np.float64).reshape(-1, nkv * hd))


def _scores(ctx: Ctx, q: np.ndarray):
    """What the budget needs of the scores: (scores (nh, L), |q||k| sums (nh, L), keys (L, nh, hd), scale),
    float64."""
    nh, nkv, hd, L = _geom(ctx)
    scale = float(ctx.args["scale"])
    kc = _caches(ctx)[0].reshape(-1, nkv, hd)[:L]
    keys = kc[:, np.arange(nh) // (nh // nkv), :]                   # (L, nh, hd)
    qh = q.reshape(nh, hd)
    s = np.einsum("hd,nhd->hn", qh, keys) * scale
    sabs = np.einsum("hd,nhd->hn", np.abs(qh), np.abs(keys)) * scale
    return s, sabs, keys, scale


def _exp_ulps(ctx: Ctx, spread: float) -> float:
    return B.expf_fast_ulp(spread) if ctx.attrs.get("exp") == "__expf" else float(B.ULP["expf"])


def _weight_rel(ctx: Ctx, s: np.ndarray, D: np.ndarray, rescalings: int) -> np.ndarray:
    """Relative error bound of every softmax weight, per head (nh,)."""
    L = s.shape[1]
    spread = np.max(s.max(axis=1, keepdims=True) - s, axis=1)      # max |s_j - m| per head
    ulps = _exp_ulps(ctx, float(spread.max()))
    per_exp = (ulps + 2) * U
    return 2 * (2 * D + U * spread + per_exp * rescalings) + B.gamma(L + 1)


def attention_budget(ctx: Ctx, q: np.ndarray, dq: "np.ndarray | None", rescalings: int):
    """(reference output (nh*hd), per-element budget, softmax weights p (nh, L))."""
    from reference.attention import decode_attention
    from reference.norm import softmax
    nh, nkv, hd, L = _geom(ctx)
    s, sabs, keys, scale = _scores(ctx, q)
    ds = B.gamma(hd + 2) * sabs
    if dq is not None:
        ds = ds + scale * np.einsum("hd,nhd->hn", dq.reshape(nh, hd), np.abs(keys))
    D = ds.max(axis=1)
    kc, vc = _caches(ctx)
    out = decode_attention(q, kc, vc, nh, nkv, hd, length=L, scale=scale).reshape(nh, hd)
    pv = decode_attention(q, kc, np.abs(vc), nh, nkv, hd, length=L, scale=scale).reshape(nh, hd)  # sum p|v|
    rel = _weight_rel(ctx, s, D, rescalings)
    bud = (rel[:, None] + B.gamma(L + 1)) * pv + U * np.abs(out) + B.F32_TINY
    return out.reshape(-1), bud.reshape(-1), softmax(s)


def _fused_query(ctx: Ctx):
    """The query after the fused per-head RMSNorm * qnw + RoPE at pos = L - 1, and its error bound."""
    from reference.norm import rms_norm
    from reference.rope import qk_norm_rope

    from .rows import rope_budget
    nh, nkv, hd, L = _geom(ctx)
    pos = L - 1
    theta, eps = float(ctx.dim("theta")), float(ctx.dim("eps"))
    q = ctx.out("q").astype(np.float64)
    w = ctx.out("qnw").astype(np.float64)
    qr = qk_norm_rope(q.reshape(1, -1), w, np.int64(pos), theta, hd, eps)[0]
    normed = rms_norm(q.reshape(nh, hd), weight=w, eps=eps).reshape(-1)
    norm_rel = B.rms_norm_rel(hd)
    return qr, rope_budget(normed, pos, theta, hd, norm_rel)


@op("attention")
class Attention(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        _build_qkv(ctx)

    @staticmethod
    def check(ctx: Ctx) -> list:
        nh, nkv, hd, L = _geom(ctx)
        variant = ctx.attrs.get("variant", "dynamic")
        if variant == "fused_qknorm_rope":
            q, dq = _fused_query(ctx)
        else:
            q, dq = ctx.out("q").astype(np.float64), None
        rescalings = L if variant == "online" else 1
        ref, bud, _ = attention_budget(ctx, q, dq, rescalings)
        oname = "ctx" if ctx.has("ctx") else "out"
        comps = [compare_float(oname, ctx.out(oname), ref,
                               B.Budget(bud, "scores gamma_(hd+2) sum|q k| -> softmax weights (2D + u|s-m| + exp "
                                        "ulps) -> gamma_(L+1) sum p|v| (module docstring)", "mode"))]
        if ctx.attrs.get("quant"):
            q_ref, s_ref = act_quant_ref(ctx.out(oname).astype(np.float32), ctx.attrs["quant"], False)
            comps.append(compare_exact("yq", ctx.out("yq"), q_ref))
            comps.append(compare_exact("ys", ctx.out("ys"), s_ref))
        return comps


def _partials(ctx: Ctx, P: int):
    """Reference partials with the kernel's empty-split convention (m = -1e30, d = 0, acc = 0)."""
    from reference.attention import attention_partials
    nh, nkv, hd, L = _geom(ctx)
    kc, vc = _caches(ctx)
    part = attention_partials(ctx.out("q").astype(np.float64), kc, vc, nh, nkv, hd, P, length=L,
                              scale=float(ctx.args["scale"]))
    m = np.where(np.isneginf(part.m), np.float64(SENTINEL_MAX), part.m)
    return part, m


@op("attention_partials")
class AttentionPartials(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        _build_qkv(ctx)

    @staticmethod
    def check(ctx: Ctx) -> list:
        nh, nkv, hd, L = _geom(ctx)
        P = int(ctx.dim("P"))
        part, m = _partials(ctx, P)
        from reference.attention import attention_partials
        q = ctx.out("q").astype(np.float64)
        s, sabs, _, scale = _scores(ctx, q)
        D = (B.gamma(hd + 2) * sabs).max(axis=1)                        # per head
        rel = _weight_rel(ctx, s, D, L)                                 # per head
        empty = np.isneginf(part.m)
        comps = []
        m_bud = np.where(empty, 0.0, D[:, None] + U * np.abs(m))
        comps.append(compare_float("m_part", ctx.out("m_part"), m.reshape(-1),
                                   B.Budget(m_bud.reshape(-1), "max score error D + u|m| (exact for an empty split)",
                                            "mode")))
        # exp(s - m) with m carrying the same score error: d and acc err relatively by rel (+ the sums)
        d_bud = (rel[:, None] + B.gamma(L + 1)) * part.d + B.F32_TINY
        comps.append(compare_float("d_part", ctx.out("d_part"), part.d.reshape(-1),
                                   B.Budget(d_bud.reshape(-1), "(rel(p) + gamma_(L+1)) d", "mode")))
        # sum_j exp(s_j - m_p) |v_j| per split p (the weights relative to the split's own max; 0 for an empty
        # split): the reference's partial accumulators of |v|
        kc, vc = _caches(ctx)
        acc_abs = attention_partials(q, kc, np.abs(vc), nh, nkv, hd, P, length=L, scale=scale).acc
        acc_bud = (rel[:, None, None] + B.gamma(L + 1)) * acc_abs + B.F32_TINY
        comps.append(compare_float("acc_part", ctx.out("acc_part"), part.acc.reshape(-1),
                                   B.Budget(acc_bud.reshape(-1), "(rel(p) + gamma_(L+1)) sum e|v|", "mode")))
        return comps


@op("attention_combine")
class AttentionCombine(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        nh, hd, P = int(ctx.dim("n_head")), int(ctx.dim("hd")), int(ctx.dim("P"))
        # partials of a realistic attention over L keys with L not a multiple of P (some splits short)
        L = int(ctx.dims.get("L", ctx.case.shape_set.kv_len))
        s = ctx.rng.standard_normal((nh, L)) * 2.0
        v = ctx.rng.standard_normal((L, nh, hd))
        m = np.full((nh, P), -np.inf)
        d = np.zeros((nh, P))
        acc = np.zeros((nh, P, hd))
        for p_ in range(P):
            js = np.arange(p_, L, P)
            if js.size:
                m[:, p_] = s[:, js].max(axis=1)
                e = np.exp(s[:, js] - m[:, p_][:, None])
                d[:, p_] = e.sum(axis=1)
                acc[:, p_] = np.einsum("hn,nhd->hd", e, v[js])
        ctx.put("m_part", np.where(np.isneginf(m), SENTINEL_MAX, m).astype(np.float32))
        ctx.put("d_part", d.astype(np.float32))
        ctx.put("acc_part", acc.astype(np.float32))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.attention import AttentionPartials as AP
        from reference.attention import combine_partials
        nh, hd, P = int(ctx.dim("n_head")), int(ctx.dim("hd")), int(ctx.dim("P"))
        m32 = ctx.out("m_part").astype(np.float64).reshape(nh, P)
        m = np.where(m32 <= float(SENTINEL_MAX), -np.inf, m32)
        d = ctx.out("d_part").astype(np.float64).reshape(nh, P)
        acc = ctx.out("acc_part").astype(np.float64).reshape(nh, P, hd)
        ref = combine_partials(AP(m=m, d=d, acc=acc)).reshape(nh, hd)
        M = m.max(axis=1, keepdims=True)
        f = np.exp(m - M)
        spread = float(np.max(np.where(np.isfinite(m), M - m, 0.0)))
        ulps = _exp_ulps(ctx, spread)
        # each factor exp(m_p - M): (ulps + 1) u relative (the subtraction rounds once); two sums of P terms
        rel = 2 * ((ulps + 1) * U + U * spread + B.gamma(P + 1))
        num_abs = np.einsum("hp,hpd->hd", f, np.abs(acc)) / (f * d).sum(axis=1)[:, None]
        bud = rel * num_abs + U * np.abs(ref) + B.F32_TINY
        budget = B.Budget(bud.reshape(-1), "2 ((exp ulps + 1) u + u|m_p - M| + gamma_(P+1)) sum f|acc| / sum f d + u|o|",
                          "mode")
        if not ctx.attrs.get("quant"):
            return [compare_float("out", ctx.out("out"), ref.reshape(-1), budget)]
        # only int8 is written: the dequantized values against the exact combine
        q, s = ctx.out("aq"), ctx.out("as_")
        step = np.repeat(s.astype(np.float64), 32)
        rec = q.astype(np.float64) * step
        comps = [compare_float("aq * as_ (dequantized)", rec, ref.reshape(-1),
                               B.Budget(budget.values + B.act_quant_error(step), budget.formula + " + s (0.5 + 128u)",
                                        "mode"))]
        s_ref = ref_act_scales(ref, ctx.attrs["quant"])
        s_bud = np.abs(budget.values.reshape(-1, 32)).max(axis=1) / 127.0 + U * s_ref
        comps.append(compare_float("as_", s, s_ref, B.Budget(s_bud, "max budget of the block / 127 + u s", "mode")))
        return comps
