"""Per-op judges (quantizers, Q8 GEMVs, MoE, embedding, argmax): how to build realistic inputs for a
contract of that op, and how to compare its outputs with the references. Registered into judge.OPS.

Parameter names follow the kernel family's own (the seed's) names, with the aliases the family uses.
"""
from __future__ import annotations

import numpy as np


from . import budgets as B
from harness.cases import inputs
from harness.cases import variants as V
from .core import (act_quant_ref, compare_exact, compare_float, effective_act, gemv_dequant_budget, gemv_depth,
                   gemv_mode_budget, gemv_terms, place_q8, q8_act_for, weight_scales)
from .registry import FAIL, PASS, TIE, Comparison, Ctx, Judge, JudgeError, op

ACT_F32 = ("a", "x", "hbuf")
ACT_Q = ("aq", "xq", "hq", "Xq")
ACT_QH = ("aqh", "xqh", "hqh")
ACT_QL = ("aql", "xql", "hql")
ACT_S = ("as_", "xs", "hs", "Xs")
W_Q, W_S, Y_OUT = ("wq", "Wq"), ("ws", "Ws"), ("y", "Y")


# -- activation quantizers -----------------------------------------------------------------------------------
@op("act_quant")
class ActQuant(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        a = ctx.pname(*ACT_F32)
        if ctx.case.variant == "model":
            from harness.cases import model_inputs as case_inputs
            x = case_inputs.activation(ctx, ctx.counts[a])
        elif ctx.case.variant == "half-ties":
            x = inputs.half_ties(ctx.rng, ctx.counts[a])
        elif ctx.case.variant == "massive":
            x = V.massive_activation(ctx.rng, ctx.counts[a])
        elif ctx.case.variant == "one-nonzero":
            x = V.one_nonzero_blocks(ctx.rng, ctx.counts[a])
        elif ctx.case.variant == "all-ties":
            x = V.all_ties(ctx.rng, ctx.counts[a])
        else:
            x = inputs.activation(ctx.rng, ctx.counts[a], zero_block=ctx.case.variant == "zero-block")
        ctx.put(a, x)

    @staticmethod
    def check(ctx: Ctx) -> list:
        x = ctx.out(ctx.pname(*ACT_F32))
        two = bool(ctx.attrs.get("two_pass", False))
        rule = str(ctx.attrs.get("zero_rule", "floor"))
        sname = ctx.pname(*ACT_S)
        comps = []
        if two:
            qh, ql, s = act_quant_ref(x, rule, True)
            comps.append(compare_exact(ctx.pname(*ACT_QH), ctx.out(ctx.pname(*ACT_QH)), qh))
            lo_out = ctx.out(ctx.pname(*ACT_QL))
            c = compare_exact(ctx.pname(*ACT_QL), lo_out, ql)
            if c.verdict == FAIL:
                # nvcc contracts r = v - qh*sh into one FMA by default; the unfused rounding is the other legal
                # result (documented emu/GPU difference): accept either, say which.
                from reference import quant as Q
                alt = Q.quantize_act_two_pass(x, fma=False)[1]
                if np.array_equal(lo_out.astype(np.int64), np.asarray(alt).reshape(-1).astype(np.int64)):
                    c = Comparison(c.output, "mode", PASS, c.metrics, "0 (bit for bit, unfused residual)", 0.0,
                                   0.0, 0.0, "")
            comps.append(c)
            comps.append(compare_exact(sname, ctx.out(sname), s))
            step = np.repeat(np.asarray(s, np.float64).reshape(-1), 32) / 128.0
            rec = (ctx.out(ctx.pname(*ACT_QH)).astype(np.float64) * np.repeat(ctx.out(sname).astype(np.float64), 32)
                   + ctx.out(ctx.pname(*ACT_QL)).astype(np.float64) * step)
            bud = B.Budget(B.act_quant_error(step, two_pass=True) + B.F32_TINY,
                           "sl (0.5 + 16400u), sl = scale/128 (reference.bounds, fused or unfused residual)",
                           "dequant")
        else:
            q, s = act_quant_ref(x, rule, False)
            qn = ctx.pname(*ACT_Q)
            comps.append(compare_exact(qn, ctx.out(qn), q))
            comps.append(compare_exact(sname, ctx.out(sname), s))
            step = np.repeat(ctx.out(sname).astype(np.float64), 32)
            rec = ctx.out(qn).astype(np.float64) * step
            bud = B.Budget(B.act_quant_error(step) + B.F32_TINY, "s (0.5 + 128u) (reference.bounds)", "dequant")
        comps.append(compare_float("dequantized activation", rec, x.astype(np.float64), bud))
        return comps


# -- Q8 GEMVs -------------------------------------------------------------------------------------------------
def _act_kind(ctx: Ctx) -> str:
    """The activation form the kernel reads (contract attr `act`): f32, int8 or int8x2; the int8 tensor-core
    GEMM reads int8 unless its contract says otherwise."""
    return str(ctx.attrs.get("act", "int8" if ctx.contract.op == "q8_gemm_mma" else "f32"))


def _gemv_act(ctx: Ctx, M: int, K: int, model_buffer: "str | None" = None):
    """Build the activation in the form the kernel reads; return (act dict, x f32 (M, K), kind)."""
    kind = _act_kind(ctx)
    if ctx.case.variant == "model":
        from harness.cases import model_inputs as case_inputs
        x = case_inputs.activation(ctx, M * K, name=model_buffer).reshape(M, K)
    elif ctx.case.variant == "massive":
        x = V.massive_activation(ctx.rng, M * K).reshape(M, K)
    else:
        x = inputs.activation(ctx.rng, M * K).reshape(M, K)
    if kind == "f32":
        ctx.put(ctx.pname(*ACT_F32), x)
        return {"f32": x}, x, kind
    act = q8_act_for(ctx, x, kind, M, K)
    if kind == "int8":
        q, s = act["int8"]
        ctx.put(ctx.pname(*ACT_Q), q)
    else:
        qh, ql, s = act["int8x2"]
        ctx.put(ctx.pname(*ACT_QH), qh)
        ctx.put(ctx.pname(*ACT_QL), ql)
    ctx.put(ctx.pname(*ACT_S), s)
    return act, x, kind


def _near_tie_rows(ctx: Ctx, w, x: np.ndarray, K: int):
    """Copy the top logit's weight row into a lower-index row and move one code of the copy by one step at
    a column c whose activation is below half an int8 step of its block (single-pass int8 rounds it to 0;
    the two-pass residual and f32 still see it), taking the largest such |s_w x_c|. The exact logits then
    differ by s_w |x_c|, well above float32 rounding; INT8_ACT sees two equal logits (the greedy token may
    flip: an explained near-tie), TWO_PASS_INT8 and DEQUANT must keep the token."""
    from reference.quant import Q8Tensor
    y, _ = gemv_terms(w.quants, w.scales, {"f32": x[None, :]}, K)
    top = int(np.argmax(y[0]))
    q, s = w.quants.copy(), w.scales.copy()
    twin = int(ctx.rng.integers(0, top)) if top > 0 else 1
    q[twin], s[twin] = q[top], s[top]
    xb = x.astype(np.float64).reshape(-1, 32)
    step = np.repeat(np.abs(xb).max(axis=1) / 127.0, 32)
    contrib = np.abs(np.repeat(s[top].astype(np.float64), 32) * x.astype(np.float64))
    ok = (x != 0) & (np.abs(q[top]) < 127) & (np.abs(x) < 0.45 * step)
    if not ok.any():
        ok = (x != 0) & (np.abs(q[top]) < 127)
    c = int(np.argmax(np.where(ok, contrib, -1.0)))
    q[twin, c] = q[twin, c] - np.int8(np.sign(x[c]))       # the twin's logit drops by s |x_c|
    ctx.extra["near_tie"] = (top, twin, c)
    return Q8Tensor(q, s)


def _variant_weight(ctx: Ctx, N: int, K: int):
    """Q8_0 weights of a GEMV case; a block whose half scale overflows is the reference's error (ggml would
    store inf), so that case is undefined and reported unchecked with the reason, never judged."""
    from reference.quant import quantize_q8_0
    if ctx.case.variant == "model":
        from harness.cases import model_inputs as case_inputs
        w = case_inputs.weight(ctx, N, K)
        if w is not None:
            return w
        ctx.extra["notes"] = "weights: seeded Gaussian (the checkpoint has no matrix for this instance)"
    if ctx.case.variant not in ("w-subnormal", "w-overflow"):
        return inputs.q8_weight(ctx.rng, N, K)
    try:
        return quantize_q8_0(V.weight_matrix(ctx.rng, N, K, ctx.case.variant, inputs.WEIGHT_STD))
    except ValueError as exc:
        raise JudgeError(f"{V.UNDEFINED}: the reference refuses these weights ({exc}); the kernel's result "
                         "is undefined here") from None


def _gap_rows(ctx: Ctx, w, x: np.ndarray, kind: str, K: int, fraction: float):
    """LM-head weights whose top two exact logits are `fraction` x the token judge's tie threshold apart
    (2 x the mode's logit error: max |y_mode - y_exact| + the f32 budget; harness.judging.tokens): a lower-index twin
    of the top row with one code moved by d steps at column c, (c, d) chosen so that s_w |d x_c| comes closest
    to the gap (Q8_0 scales are half precision, so the gap is made of codes, not of a scale); rows that would
    come between are negated. The gap reached and its ratio to the threshold are recorded in the token
    comparison's metrics; variants.check_gap checks the promise."""
    from reference.quant import Q8Tensor
    M = x.shape[0]
    act = q8_act_for(ctx, x, kind, M, K) if kind != "f32" else {"f32": x}
    y_mode, a_mode = gemv_terms(w.quants, w.scales, act, K)
    y_ex, _ = gemv_terms(w.quants, w.scales, {"f32": x}, K)
    fp = gemv_mode_budget(str(ctx.attrs.get("accumulate", "f32")), K, y_mode, a_mode,
                          gemv_depth(ctx.contract, K)).values
    threshold = 2.0 * (float(np.max(np.abs(y_mode - y_ex))) + float(np.max(fp)))
    top = int(np.argmax(y_ex[0]))
    twin = int(ctx.rng.integers(0, top)) if top > 0 else 1
    q, s = w.quants.copy(), w.scales.copy()
    q[twin], s[twin] = q[top], s[top]
    target = fraction * threshold
    reached = 0.0
    if target > 0:
        unit = np.abs(np.repeat(s[top].astype(np.float64), 32) * x[0].astype(np.float64))     # s_w |x_c|
        d = np.clip(np.rint(target / np.where(unit > 0, unit, np.inf)), 1, 127)
        # the code moves by -d sign(x_c) and must stay in Q8_0's range [-127, 127]
        room = 127 + np.sign(x[0]).astype(np.int64) * q[top].astype(np.int64)
        d = np.minimum(d, room)
        c = int(np.argmin(np.where(d >= 1, np.abs(d * unit - target), np.inf)))
        step = int(d[c]) * int(np.sign(x[0][c]) or 1)
        q[twin, c] = np.int8(int(q[twin, c]) - step)
        reached = float(abs(step) * unit[c])
    # every other row whose exact logit comes within a threshold of the twin's would be the runner-up or close
    # to it: its codes are negated (its logit -y), so the top two are the pair and the gap is theirs
    y0 = y_ex[0]
    rivals = np.flatnonzero((y0 >= y0[top] - reached - threshold) & (y0 > 0))
    rivals = rivals[(rivals != top) & (rivals != twin)]
    q[rivals] = np.clip(-q[rivals].astype(np.int16), -127, 127).astype(np.int8)
    ctx.extra["gap"] = {"top": top, "twin": twin, "target_fraction": fraction, "threshold": threshold,
                        "gap_reached": reached, "fraction_reached": reached / threshold if threshold else None}
    V.check_gap(ctx.case.variant, gemv_terms(q, s, {"f32": x}, K)[0][0], top, twin, reached)
    return Q8Tensor(q, s)


def _kernel_act(ctx: Ctx, kind: str, M: int, K: int):
    """The activation exactly as the kernel received it (read back from its own arguments)."""
    if kind == "f32":
        return {"f32": ctx.out(ctx.pname(*ACT_F32)).reshape(M, K)}
    s = ctx.out(ctx.pname(*ACT_S)).reshape(M, K // 32)
    if kind == "int8":
        return {"int8": (ctx.out(ctx.pname(*ACT_Q)).reshape(M, K), s)}
    return {"int8x2": (ctx.out(ctx.pname(*ACT_QH)).reshape(M, K), ctx.out(ctx.pname(*ACT_QL)).reshape(M, K), s)}


def _act_extras(ctx: Ctx, M: int, K: int) -> dict:
    """From the activation the kernel received: kind and x (dequantized: the DEQUANT reference's input where the
    unquantized activation the builder drew is not known)."""
    kind = _act_kind(ctx)
    return {"x": effective_act(_kernel_act(ctx, kind, M, K)).astype(np.float32), "kind": kind}


def _cache_pos(ctx: Ctx) -> dict:
    """The KV-cache row a writer writes: its d_pos argument."""
    return {"pos": int(ctx.out(ctx.pname("d_pos"))[0])} if ctx.has("d_pos") else {}


def _kv_dest(ctx: Ctx, cname: str, row_len: int):
    """A KV-cache destination: random prior content, a write position; returns nothing (kept in ctx)."""
    n = ctx.counts[cname]
    ctx.put(cname, ctx.rng.standard_normal(n).astype(np.float32))
    pos_name = ctx.pname("d_pos")
    rows = n // row_len
    pos = int(ctx.dims["pos"]) if "pos" in ctx.dims else int(ctx.rng.integers(0, rows))
    if not 0 <= pos < rows:
        raise JudgeError(f"kernel {ctx.contract.name}: cache position {pos} outside {rows} rows")
    ctx.put(pos_name, np.array([pos], dtype=np.int32))
    ctx.extra["pos"] = pos


def _kv_written(ctx: Ctx, cname: str, row_len: int, col0: int, ncols: int):
    """(the written slice, comparison that every other element of the cache is unchanged)."""
    pos = ctx.extra["pos"]
    after = ctx.out(cname).reshape(-1, row_len)
    before = ctx.before[cname].reshape(-1, row_len)
    mask = np.ones(after.shape, dtype=bool)
    mask[pos, col0:col0 + ncols] = False
    keep = compare_exact(f"{cname} (rows other than d_pos)", after[mask], before[mask], "exact",
                         note="a KV-cache writer must write only its row")
    return after[pos, col0:col0 + ncols], keep


@op("q8_gemv")
@op("q8_gemm_mma")
class Q8Gemv(Judge):
    """Q8 GEMVs and the batched int8 tensor-core GEMM (B activation rows): y[m, n] = sum_b s_w s_a dot."""
    @staticmethod
    def build(ctx: Ctx) -> None:
        N, K = int(ctx.dim("N")), int(ctx.dim("K"))
        M = int(ctx.dims.get("M", ctx.dims.get("B", 1)))
        act, x, kind = _gemv_act(ctx, M, K)
        w = _variant_weight(ctx, N, K)
        if ctx.case.variant == "near-tie":
            w = _near_tie_rows(ctx, w, x[0], K)
        elif ctx.case.variant in V.LM_HEAD_GAPS:
            w = _gap_rows(ctx, w, x, kind, K, V.LM_HEAD_GAPS[ctx.case.variant])
        place_q8(ctx, ctx.pname(*W_Q), ctx.pname(*W_S), w, N)
        ctx.extra.update(x=x, kind=kind, M=M, N=N, K=K)
        if ctx.attrs.get("dest", "y") == "kv_cache":
            _kv_dest(ctx, ctx.pname("cache"), int(ctx.dim("KD")))

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        N, K = int(ctx.dim("N")), int(ctx.dim("K"))
        M = int(ctx.dims.get("M", ctx.dims.get("B", 1)))
        return {**_act_extras(ctx, M, K), "M": M, "N": N, "K": K, **_cache_pos(ctx)}

    @staticmethod
    def check(ctx: Ctx) -> list:
        e = ctx.extra
        M, N, K, kind = e["M"], e["N"], e["K"], e["kind"]
        wq = ctx.out(ctx.pname(*W_Q)).reshape(N, K)
        ws_k = ctx.out(ctx.pname(*W_S)).astype(np.float32).reshape(N, K // 32)   # as the kernel holds them
        comps = []
        if ctx.attrs.get("dest", "y") == "kv_cache":
            y_out, keep = _kv_written(ctx, ctx.pname("cache"), int(ctx.dim("KD")), 0, N)
            y_out = y_out.reshape(1, N)
            comps.append(keep)
            yname = "cache[d_pos]"
        else:
            yname = ctx.pname(*Y_OUT)
            y_out = ctx.out(yname).reshape(M, N)
        comps += gemv_comparisons(ctx, yname, y_out, wq, ws_k, _kernel_act(ctx, kind, M, K), e["x"], kind, K)
        return comps


def gemv_comparisons(ctx: Ctx, yname: str, y_out, wq, ws, act_k, x, kind, K) -> list:
    acc = str(ctx.attrs.get("accumulate", "f32"))
    y_mode, a_mode = gemv_terms(wq, ws, act_k, K)
    depth = gemv_depth(ctx.contract, K)
    fp = gemv_mode_budget(acc, K, y_mode, a_mode, depth)
    comps = [compare_float(yname, y_out, y_mode, fp)]
    y_deq, a_deq = gemv_terms(wq, ws, {"f32": x}, K)
    fp_deq = gemv_mode_budget(acc, K, y_deq, np.maximum(a_deq, a_mode), depth)
    comps.append(compare_float(yname, y_out, y_deq, gemv_dequant_budget(wq, ws, x, kind, K, fp_deq)))
    if ctx.case.instance == "lm_head":
        from .tokens import token_comparison
        tok = token_comparison(y_out.reshape(-1), y_deq.reshape(-1), y_mode.reshape(-1), fp.values)
        if "gap" in ctx.extra:
            tok.metrics["constructed_gap"] = ctx.extra["gap"]
        comps.append(tok)
    return comps


@op("q8_gemv_qkv")
class Q8GemvQKV(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        K = int(ctx.dim("K"))
        QD, KD = int(ctx.dim("QD")), int(ctx.dim("KD"))
        act, x, kind = _gemv_act(ctx, 1, K)
        for (qn, sn), n in ((("wqq", "wqs"), QD), (("wkq", "wks"), KD), (("wvq", "wvs"), KD)):
            place_q8(ctx, ctx.pname(qn), ctx.pname(sn), _variant_weight(ctx, n, K), n)
        for cname in ("kc", "vc"):
            ctx.put(ctx.pname(cname), ctx.rng.standard_normal(ctx.counts[cname]).astype(np.float32))
        rows = ctx.counts["kc"] // KD
        pos = int(ctx.dims["pos"]) if "pos" in ctx.dims else int(ctx.rng.integers(0, rows))
        ctx.put(ctx.pname("d_pos"), np.array([pos], dtype=np.int32))
        ctx.extra.update(x=x, kind=kind, K=K, QD=QD, KD=KD, pos=pos)

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        K = int(ctx.dim("K"))
        return {**_act_extras(ctx, 1, K), "K": K, "QD": int(ctx.dim("QD")), "KD": int(ctx.dim("KD")), **_cache_pos(ctx)}

    @staticmethod
    def check(ctx: Ctx) -> list:
        e = ctx.extra
        K, kind = e["K"], e["kind"]
        act = _kernel_act(ctx, kind, 1, K)
        comps = []
        parts = (("qbuf", "wqq", "wqs", e["QD"]), ("kc", "wkq", "wks", e["KD"]), ("vc", "wvq", "wvs", e["KD"]))
        for dst, qn, sn, n in parts:
            wq = ctx.out(qn).reshape(n, K)
            ws = ctx.out(sn).astype(np.float32).reshape(n, K // 32)
            if dst == "qbuf":
                y = ctx.out(dst).reshape(1, n)
                name = dst
            else:
                y, keep = _kv_written(ctx, dst, e["KD"], 0, n)
                comps.append(keep)
                y = y.reshape(1, n)
                name = f"{dst}[d_pos]"
            comps += gemv_comparisons(ctx, name, y, wq, ws, act, e["x"], kind, K)
        return comps


# -- MoE --------------------------------------------------------------------------------------------------------
def _topk_comparison(logits: np.ndarray, got: np.ndarray, k: int) -> tuple[Comparison, np.ndarray]:
    """Compare a top-K index set with the reference's (as sets); explain a difference by ties."""
    from reference.moe import route_top_k
    from reference.norm import softmax
    ref_idx, _ = route_top_k(logits.astype(np.float64), k)
    ref_idx = np.asarray(ref_idx).astype(np.int64)
    got = np.asarray(got).astype(np.int64)
    metrics = {"k": k, "kernel": got.tolist(), "reference": ref_idx.tolist()}
    if len(set(got.tolist())) != got.size:
        return Comparison("idx (set)", "mode", FAIL, metrics, "set equality", reason=(
            f"top-K indices repeat an expert: {got.tolist()}")), ref_idx
    if set(got.tolist()) == set(ref_idx.tolist()):
        return Comparison("idx (set)", "mode", PASS, metrics, "set equality", 0.0, 0.0, 0.0), ref_idx
    p = softmax(logits)
    extra = sorted(set(got.tolist()) - set(ref_idx.tolist()))
    missing = sorted(set(ref_idx.tolist()) - set(got.tolist()))
    if any(not 0 <= i < logits.size for i in extra):
        return Comparison("idx (set)", "mode", FAIL, metrics, "set equality",
                          reason=f"top-K index out of range 0..{logits.size - 1}: {extra}"), ref_idx
    # A swap is a tie when the swapped experts' probabilities agree within the f32 softmax budget.
    bud = B.softmax(p, np.abs(logits - logits.max()), logits.size, B.ULP["expf"]).values
    gap = max(abs(p[i] - p[j]) for i in extra for j in missing)
    tol = max(bud[i] + bud[j] for i in extra for j in missing)
    exact = all(logits[i] == logits[j] for i, j in zip(extra, missing))
    metrics.update(gap=float(gap), tie_tolerance=float(tol))
    if exact or gap <= tol:
        kind = "exact tie" if exact else f"near tie (probability gap {gap:.3g} <= f32 softmax budget {tol:.3g})"
        return Comparison("idx (set)", "mode", TIE, metrics, "set equality; ties explained", reason=(
            f"top-K set differs only by an {kind}: kernel chose {extra}, reference {missing}")), ref_idx
    return Comparison("idx (set)", "mode", FAIL, metrics, "set equality", reason=(
        f"top-K set differs: kernel chose {extra} instead of {missing} (probability gap {gap:.3g} > "
        f"tie tolerance {tol:.3g})")), ref_idx


def _topk_logits(ctx: Ctx, E: int, k: int) -> np.ndarray:
    if ctx.case.variant in V.ROUTER_VARIANTS:
        return V.router_logits(ctx.rng, E, ctx.case.variant)
    if ctx.case.variant == f"E={V.MANY_EXPERTS}":       # several warps; the block max lives in the last one
        return V.router_logits(ctx.rng, E, "dominant")
    if ctx.case.variant == "model":
        from harness.cases import model_inputs as case_inputs
        return case_inputs.buffer(ctx, "moe_logits", E).astype(np.float32)
    tie = {"gauss": "none", "near-tie": "near", "exact-tie": "exact"}[ctx.case.variant]
    return inputs.router_logits(ctx.rng, E, k, tie)


@op("moe_topk_idx")
class MoeTopkIdx(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        E, k = int(ctx.dim("E")), int(ctx.dim("K", "k", "top_k"))
        ctx.put(ctx.pname("logits"), _topk_logits(ctx, E, k))
        ctx.extra.update(k=k)

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        return {"k": int(ctx.dim("K", "k", "top_k"))}

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.norm import softmax
        logits = ctx.out(ctx.pname("logits"))
        got = ctx.out(ctx.pname("idx"))
        c, ref_idx = _topk_comparison(logits, got, ctx.extra["k"])
        comps = [c]
        w = ctx.out(ctx.pname("w")).astype(np.float64)
        p = softmax(logits)
        # weights judged against the kernel's own choice of experts (a tie swap changes which weights exist)
        ok = np.all((got >= 0) & (got < logits.size))
        if ok:
            ref_w = p[got] / p[got].sum()
            bud = B.softmax(ref_w, np.abs(logits[got] - logits.max()), logits.size + ctx.extra["k"],
                            B.ULP["expf"])
            comps.append(compare_float("w", w, ref_w, bud))
        return comps


@op("moe_topk_mask")
class MoeTopkMask(Judge):
    build = MoeTopkIdx.build
    extras = MoeTopkIdx.extras

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.norm import softmax
        logits = ctx.out(ctx.pname("logits"))
        w = ctx.out(ctx.pname("w")).astype(np.float64)
        k = ctx.extra["k"]
        got = np.flatnonzero(w != 0)
        if got.size > k:
            return [Comparison("w (nonzero set)", "mode", FAIL, {"nonzero": int(got.size)}, "k nonzero weights",
                               reason=f"dense top-K weights have {got.size} nonzero entries, expected {k}")]
        p = softmax(logits)
        spread = np.abs(logits - logits.max())
        unseen = np.empty(0, dtype=np.int64)
        if got.size < k:
            # A selected expert's weight is legitimately an exact 0 when its reference weight lies within the
            # f32 budget of 0: below f32's smallest normal (plus the relative slack), where expf underflows or
            # flushes (a dominant router logit leads by > 88.7 > -ln(FLT_MIN), so every other weight is there).
            # Such experts cannot be told apart in the output; the reference's next-ranked ones stand in, and
            # the dense comparison below checks that each of them is within budget of 0.
            order = np.argsort(-logits.astype(np.float64), kind="stable")
            unseen = order[~np.isin(order, got)][:k - got.size]
            got = np.sort(np.concatenate([got, unseen]))
        c, _ = _topk_comparison(logits, got, k)
        ref = np.zeros_like(p)
        ref[got] = p[got] / p[got].sum()
        bud = B.softmax(ref, spread, logits.size + k, B.ULP["expf"])
        if unseen.size:
            over = unseen[ref[unseen] > bud.values[unseen]]
            if over.size:
                return [Comparison("w (nonzero set)", "mode", FAIL, {"nonzero": int(k - unseen.size)},
                                   "k nonzero weights unless a weight is within its f32 budget of 0", reason=(
                                       f"dense top-K weights have {k - unseen.size} nonzero entries, expected {k}: "
                                       f"expert {int(over[0])}'s weight is 0, reference {ref[over[0]]:.3g} "
                                       f"(budget {bud.values[over[0]]:.3g})"))]
            c.metrics["zero_weight_experts"] = (f"{unseen.size} selected weight(s) within the f32 budget of 0 "
                                                f"(underflow); their experts are unobservable in the output")
        return [c, compare_float("w", w, ref, bud)]


def _expert_weights(ctx: Ctx, qn: str, sn: str, E: int, rows: int, K: int, chosen: np.ndarray):
    """Q8 weights for E experts of `rows` rows each: Gaussian for the chosen experts, a loud constant pattern
    elsewhere (a kernel that reads an expert it was not routed to is grossly wrong, and memory stays small)."""
    if ctx.case.variant == "model":
        from harness.cases import model_inputs as case_inputs
        which = {"wg_q": "gate", "wu_q": "up", "wd_q": "down"}[qn]
        q, s = case_inputs.experts(ctx, which, E, rows, K)
        ctx.put(qn, q)
        ctx.put(sn, weight_scales(ctx, sn, s))
        return
    q = np.full((E, rows, K), 7, dtype=np.int8)
    s = np.ones((E, rows, K // 32), dtype=np.float32)
    for e in chosen:
        w = inputs.q8_weight(ctx.rng, rows, K)
        q[e] = w.quants
        s[e] = w.scales
    ctx.put(qn, q)
    ctx.put(sn, weight_scales(ctx, sn, s))


def _routed(ctx: Ctx, k: int, E: int) -> np.ndarray:
    """The experts a MoE GEMV is routed to: the decode's own choice in a model case, else a seeded draw."""
    if ctx.case.variant == "model":
        from harness.cases import model_inputs as case_inputs
        return case_inputs.buffer(ctx, "moe_idx", k).astype(np.int32)
    return inputs.distinct_indices(ctx.rng, k, E)


def _moe_dims(ctx: Ctx):
    k, N, Kd = int(ctx.dim("K")), int(ctx.dim("N")), int(ctx.dim("Kd"))
    E = int(ctx.dims["E"]) if "E" in ctx.dims else ctx.case.shape_set.n_expert
    return k, N, Kd, E


def _moe_extras(ctx: Ctx, rows: "int | None" = None) -> dict:
    """A MoE GEMV's dims and activation; `rows` activation rows (default: one per routed expert)."""
    k, N, Kd, E = _moe_dims(ctx)
    return {**_act_extras(ctx, k if rows is None else rows, Kd), "k": k, "N": N, "Kd": Kd, "E": E}


def _routed_rows(ctx: Ctx, weight: str, E: int, N: int, Kd: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The routed experts' rows of an expert-major Q8 weight (`<weight>_q`, `<weight>_s`), stacked (k*N, ...)."""
    k = len(idx)
    q = ctx.out(ctx.pname(f"{weight}_q")).reshape(E, N, Kd)[idx].reshape(k * N, Kd)
    s = ctx.out(ctx.pname(f"{weight}_s")).astype(np.float32).reshape(E, N, Kd // 32)[idx].reshape(k * N, -1)
    return q, s


@op("moe_gate_up_silu")
class MoeGateUp(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        k, N, Kd, E = _moe_dims(ctx)
        idx = _routed(ctx, k, E)
        ctx.put(ctx.pname("idx"), idx)
        act, x, kind = _gemv_act(ctx, 1, Kd, "x2n")
        _expert_weights(ctx, ctx.pname("wg_q"), ctx.pname("wg_s"), E, N, Kd, idx)
        _expert_weights(ctx, ctx.pname("wu_q"), ctx.pname("wu_s"), E, N, Kd, idx)
        ctx.extra.update(x=x, kind=kind, k=k, N=N, Kd=Kd, E=E)

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        return _moe_extras(ctx, rows=1)       # one activation row, shared by the routed experts

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.elementwise import silu
        e = ctx.extra
        N, Kd, E, kind = e["N"], e["Kd"], e["E"], e["kind"]
        idx = ctx.out(ctx.pname("idx")).astype(np.int64)
        act = _kernel_act(ctx, kind, 1, Kd)
        gq, gs = _routed_rows(ctx, "wg", E, N, Kd, idx)
        uq, us = _routed_rows(ctx, "wu", E, N, Kd, idx)
        h = ctx.out(ctx.pname("h")).astype(np.float64)
        comps = []
        for against, a in (("mode", act), ("dequant", {"f32": e["x"]})):
            g, ga = gemv_terms(gq, gs, a, Kd)
            u, ua = gemv_terms(uq, us, a, Kd)
            g, u, ga, ua = g[0], u[0], ga[0], ua[0]
            eg = gemv_mode_budget("f32", Kd, g, ga).values
            eu = gemv_mode_budget("f32", Kd, u, ua).values
            if against == "dequant" and kind != "f32":
                eg = eg + gemv_dequant_budget(gq, gs, e["x"], kind, Kd, B.Budget(0 * g, "", "")).values[0]
                eu = eu + gemv_dequant_budget(uq, us, e["x"], kind, Kd, B.Budget(0 * u, "", "")).values[0]
            ref = silu(g) * u
            bud = B.silu_product(g, u, eg, eu)
            bud = B.Budget(bud.values, bud.formula + (" with e_g, e_u the GEMV budgets" if against == "mode" else
                                                      " with e_g, e_u incl. activation quantization"), against)
            comps.append(compare_float("h", h, ref, bud))
        return comps


@op("moe_down_combine")
class MoeDown(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        k, N, Kd, E = _moe_dims(ctx)
        idx = _routed(ctx, k, E)
        ctx.put(ctx.pname("idx"), idx)
        if ctx.case.variant == "model":
            from harness.cases import model_inputs as case_inputs
            ctx.put(ctx.pname("wc"), case_inputs.buffer(ctx, "moe_w", k).astype(np.float32))
        else:
            ctx.put(ctx.pname("wc"), inputs.routing_weights(ctx.rng, k))
        act, x, kind = _gemv_act(ctx, k, Kd, "moe_he")      # h: one Kd-vector per chosen expert
        _expert_weights(ctx, ctx.pname("wd_q"), ctx.pname("wd_s"), E, N, Kd, idx)
        ctx.extra.update(x=x, kind=kind, k=k, N=N, Kd=Kd, E=E)

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        return _moe_extras(ctx)

    @staticmethod
    def check(ctx: Ctx) -> list:
        e = ctx.extra
        k, N, Kd, E, kind = e["k"], e["N"], e["Kd"], e["E"], e["kind"]
        idx = ctx.out(ctx.pname("idx")).astype(np.int64)
        wc = ctx.out(ctx.pname("wc")).astype(np.float64)
        wq = ctx.out(ctx.pname("wd_q")).reshape(E, N, Kd)
        ws = ctx.out(ctx.pname("wd_s")).astype(np.float32).reshape(E, N, Kd // 32)
        act = _kernel_act(ctx, kind, k, Kd)
        H = ctx.out(ctx.pname("H")).astype(np.float64)
        comps = []
        for against in ("mode", "dequant"):
            ref = np.zeros(N)
            absum = np.zeros(N)
            qerr = np.zeros(N)
            for r in range(k):       # k <= 8 experts: a short loop over experts, each a vectorized GEMV
                a_r = ({kk: (tuple(v[r:r + 1] for v in val) if isinstance(val, tuple) else val[r:r + 1])
                        for kk, val in act.items()} if against == "mode" else {"f32": e["x"][r:r + 1]})
                y, a = gemv_terms(wq[idx[r]], ws[idx[r]], a_r, Kd)
                ref += wc[r] * y[0]
                absum += abs(wc[r]) * a[0]
                if against == "dequant" and kind != "f32":
                    qerr += abs(wc[r]) * gemv_dequant_budget(wq[idx[r]], ws[idx[r]], e["x"][r:r + 1], kind, Kd,
                                                             B.Budget(np.zeros((1, N)), "", "")).values[0]
            from reference.bounds import warp_row_depth
            n = warp_row_depth(Kd) + k + 1     # each expert's warp sum, the weight product, k serial adds
            fp = B.Budget(B.gamma(n) * absum + B.F32_TINY,
                          f"gamma_{n} * sum_k |wc_k| sum|terms_k| (warp_row_depth(Kd) + K experts + 1)", "mode")
            if against == "mode":
                comps.append(compare_float("H", H, ref, fp))
            else:
                comps.append(compare_float("H", H, ref, B.Budget(fp.values + qerr, fp.formula +
                                                                 " + activation quantization", "dequant")))
        return comps


@op("moe_silu_had")
class MoeSiluHad(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        n = int(ctx.dim("n"))
        ctx.put(ctx.pname("g"), inputs.activation(ctx.rng, n, outliers=False, std=3.0))
        ctx.put(ctx.pname("u"), inputs.activation(ctx.rng, n, outliers=False))

    @staticmethod
    def check(ctx: Ctx) -> list:
        g = ctx.out("g").astype(np.float64)
        u = ctx.out("u").astype(np.float64)
        from reference.elementwise import silu
        ref = silu(g) * u
        return [compare_float(ctx.pname("he"), ctx.out(ctx.pname("he")), ref,
                              B.silu_product(g, u, np.zeros_like(g), np.zeros_like(u)))]


@op("moe_zero")
class MoeZero(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        pass

    @staticmethod
    def check(ctx: Ctx) -> list:
        y = ctx.out(ctx.pname("y"))
        return [compare_exact("y", y, np.zeros_like(y))]


@op("moe_combine")
class MoeCombine(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        d = ctx.counts[ctx.pname("H")]
        ctx.put(ctx.pname("H"), inputs.activation(ctx.rng, d, outliers=False))
        ctx.put(ctx.pname("oute"), inputs.activation(ctx.rng, ctx.counts["oute"], outliers=False))
        ctx.put(ctx.pname("wv"), inputs.routing_weights(ctx.rng, ctx.counts["wv"]))

    @staticmethod
    def check(ctx: Ctx) -> list:
        e = int(ctx.args[ctx.pname("e")])
        d = ctx.counts["H"]
        H0 = ctx.before["H"].astype(np.float32)
        # exactly what the kernel computes in f32: one product, one add (FMA contraction: one rounding)
        prod = np.float32(ctx.out("wv")[e]) * ctx.out("oute")[:d].astype(np.float32)
        ref = (H0.astype(np.float64) + np.float64(ctx.out("wv")[e]) * ctx.out("oute")[:d].astype(np.float64))
        bud = B.Budget(2 * B.U32 * (np.abs(H0) + np.abs(prod)).astype(np.float64) + B.F32_TINY,
                       "2u (|H| + |w e|) (one product, one add)", "mode")
        return [compare_float("H", ctx.out("H"), ref, bud)]


# -- embedding, argmax --------------------------------------------------------------------------------------------
@op("embed_q8")
class EmbedQ8(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        E = int(ctx.dim("E"))
        rows = ctx.counts[ctx.pname("wq")] // E
        tok = int(ctx.rng.integers(0, rows))
        w = inputs.q8_weight(ctx.rng, 1, E)
        place_q8(ctx, ctx.pname("wq"), ctx.pname("ws"), w, rows, row0=tok, filler=True)
        ctx.put(ctx.pname("d_tok"), np.array([tok], dtype=np.int32))
        ctx.extra.update(tok=tok, w=w)

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        """The token the kernel reads (d_tok) and its embedding row of the weights it was given."""
        from reference.quant import Q8Tensor
        E = int(ctx.dim("E"))
        tok = int(ctx.out(ctx.pname("d_tok"))[0])
        wq = ctx.out(ctx.pname("wq")).reshape(-1, E)[tok:tok + 1]
        ws = ctx.out(ctx.pname("ws")).reshape(-1, E // 32)[tok:tok + 1]
        return {"tok": tok, "w": Q8Tensor(np.ascontiguousarray(wq), np.ascontiguousarray(ws))}

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.embed import embed_q8
        ref = embed_q8(ctx.extra["w"], 0)
        # one f32 product of an int8 and an f32 scale: correctly rounded, so bit-exact against f32 math
        return [compare_exact(ctx.pname("x"), ctx.out(ctx.pname("x")), ref.astype(np.float32), "mode"),
                compare_float(ctx.pname("x"), ctx.out(ctx.pname("x")), ref,
                              B.relative(ref, 1, "one f32 product", "dequant", B.F32_TINY))]


@op("argmax_advance")
class ArgmaxAdvance(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        V = ctx.counts[ctx.pname("logits")]
        if ctx.case.variant == "model":
            from harness.cases import model_inputs as case_inputs
            z = case_inputs.activation(ctx, V, name="logits@final")
        else:
            z = (ctx.rng.standard_normal(V) * 3.0).astype(np.float32)
        if ctx.case.variant == "exact-tie":
            # the maximum twice, at indices a block-stride scan assigns to different threads
            i, j = sorted(ctx.rng.choice(V, size=2, replace=False).tolist())
            if (j - i) % 256 == 0:
                j = j - 1 if j - 1 > i else j
            z[i] = z[j] = np.float32(z.max() + 1.0)
        ctx.put(ctx.pname("logits"), z)
        ctx.put(ctx.pname("d_pos"), np.array([int(ctx.rng.integers(0, 1000))], dtype=np.int32))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from .tokens import argmax_comparison
        z = ctx.out(ctx.pname("logits"))
        tok = int(ctx.out(ctx.pname("d_tok"))[0])
        pos0 = int(ctx.before["d_pos"][0])
        return [argmax_comparison(tok, z),
                compare_exact("d_pos", ctx.out("d_pos"), np.array([pos0 + 1], dtype=np.int32), "exact")]
