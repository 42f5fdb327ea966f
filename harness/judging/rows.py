"""Per-op judges for the row and element-wise families: norms (RMSNorm with residual / in-place add / int8
epilogue, LayerNorm, softmax rows), element-wise chains and regions, SiLU, transpose, the f32 matmul,
table RoPE and the per-head QK-norm + RoPE. Registered into judge.OPS."""
from __future__ import annotations

import numpy as np

from . import budgets as B
from harness.cases import inputs
from .core import act_quant_ref, ref_act_scales, compare_exact, compare_float
from .registry import Ctx, Judge, JudgeError, op

U = B.U32


def _rows_cols(ctx: Ctx) -> tuple[int, int]:
    if "cols" in ctx.dims:
        return int(ctx.dims.get("rows", 1)), int(ctx.dims["cols"])
    return 1, int(ctx.dim("n"))


# -- RMSNorm family ---------------------------------------------------------------------------------------------
_RMS_IN = ("x", "a")
_RMS_RES = ("res", "y", "b")        # residual operand: k*_row res, gk_add_rmsnorm* y, k*_add_row b
_RMS_OUT = ("out", "y")             # float output (y only when it is an OUTPUT: see _float_out)
_Q = ("yq", "oq", "xq")
_QS = ("ys", "os_", "xs")


def _output_name(ctx: Ctx, names) -> "str | None":
    from emitters.contract import Role
    for n in names:
        if ctx.has(n) and ctx.contract.param(n).role is Role.OUTPUT:
            return n
    return None


def _residual(ctx: Ctx) -> str:
    """The residual operand's parameter: the first of _RMS_RES in the contract that is not the output."""
    return next(n for n in _RMS_RES if ctx.has(n) and n != _output_name(ctx, (n,)))


@op("rms_norm")
class RmsNorm(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        rows, cols = _rows_cols(ctx)
        if ctx.case.variant == "model":
            from harness.cases import model_inputs as case_inputs
            ctx.put(ctx.pname(*_RMS_IN), case_inputs.activation(ctx, rows * cols, default="x"))
        elif ctx.case.variant == "massive":
            from harness.cases.variants import massive_activation
            ctx.put(ctx.pname(*_RMS_IN), massive_activation(ctx.rng, rows * cols))
        else:
            ctx.put(ctx.pname(*_RMS_IN), inputs.activation(ctx.rng, rows * cols))
        if ctx.has("w"):
            ctx.put("w", inputs.norm_weight(ctx.rng, cols))
        if ctx.attrs.get("residual", "none") != "none":
            res = _residual(ctx)
            ctx.put(res, inputs.activation(ctx.rng, rows * cols, outliers=False))
            ctx.extra["res"] = res

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        return {"res": _residual(ctx)} if ctx.attrs.get("residual", "none") != "none" else {}

    @staticmethod
    def check(ctx: Ctx) -> list:
        rows, cols = _rows_cols(ctx)
        xin = ctx.pname(*_RMS_IN)
        x = (ctx.before[xin] if xin in ctx.before else ctx.out(xin)).astype(np.float32).reshape(rows, cols)
        w = ctx.out("w").astype(np.float64) if ctx.has("w") else None
        residual = ctx.attrs.get("residual", "none")
        comps = []
        if residual == "none":
            v = x.astype(np.float64)
        elif residual == "input":      # summed in double inside the kernel, never stored
            v = x.astype(np.float64) + ctx.out(ctx.extra["res"]).astype(np.float64).reshape(rows, cols)
        else:                          # "add_out" (stored in c) / "add_inplace" (stored back into x): f32 sums
            s32 = (x + ctx.out(ctx.extra["res"]).astype(np.float32).reshape(rows, cols)).astype(np.float32)
            stored = "c" if residual == "add_out" else xin
            comps.append(compare_exact(f"{stored} (x + residual)", ctx.out(stored), s32, "exact"))
            v = s32.astype(np.float64)
        from reference.norm import rms_norm
        ref = rms_norm(v, weight=w, eps=float(ctx.dim("eps")))
        acc = str(ctx.attrs.get("accumulate", "f32"))
        yname = _output_name(ctx, _RMS_OUT) if ctx.attrs.get("writes_norm", True) else None
        if yname:
            comps.append(compare_float(yname, ctx.out(yname), ref, B.rms_norm(ref, cols, acc)))
        quant = ctx.attrs.get("quant")
        if quant:
            qn, sn = ctx.pname(*_Q), ctx.pname(*_QS)
            q_out, s_out = ctx.out(qn), ctx.out(sn)
            if yname:
                # the epilogue quantizes the kernel's own float output: bit for bit against the reference quantizer
                q_ref, s_ref = act_quant_ref(ctx.out(yname).astype(np.float32).reshape(rows, cols), quant, False)
                comps.append(compare_exact(qn, q_out, q_ref))
                comps.append(compare_exact(sn, s_out, s_ref))
            else:
                # only int8 is written: judge the dequantized values against the exact norm
                step = np.repeat(s_out.astype(np.float64), 32)
                rec = q_out.astype(np.float64) * step
                bud = B.rms_norm(ref, cols, acc, quant_step=step)
                comps.append(compare_float(f"{qn} * {sn} (dequantized)", rec, ref, bud))
                s_ref = ref_act_scales(ref, quant)
                bud_s = B.rms_norm(s_ref, cols, acc)
                comps.append(compare_float(sn, s_out, s_ref, B.Budget(bud_s.values + U * s_ref, bud_s.formula +
                                                                        " + u (amax/127)", "mode")))
        return comps


@op("layer_norm")
class LayerNorm(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        rows, cols = _rows_cols(ctx)
        ctx.put("x", inputs.activation(ctx.rng, rows * cols) + np.float32(0.5))
        if ctx.has("w"):
            ctx.put("w", inputs.norm_weight(ctx.rng, cols))
        if ctx.has("bias"):
            ctx.put("bias", (0.1 * ctx.rng.standard_normal(cols)).astype(np.float32))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.norm import layer_norm
        rows, cols = _rows_cols(ctx)
        x = ctx.out("x").astype(np.float64).reshape(rows, cols)
        w = ctx.out("w").astype(np.float64) if ctx.has("w") else None
        b = ctx.out("bias").astype(np.float64) if ctx.has("bias") else None
        ref = layer_norm(x, weight=w, bias=b, eps=float(ctx.dim("eps")))
        core = layer_norm(x, eps=float(ctx.dim("eps"))) * (1 if w is None else w)
        # f64 arithmetic throughout (error ~ gamma_n(u64), negligible) then one f32 rounding of y; 2u covers both
        bud = B.Budget(2 * U * (np.abs(core) + (0 if b is None else np.abs(b))) + B.F32_TINY,
                       "2u (|(x-m)/d w| + |b|) (f64 LayerNorm, one f32 rounding)", "mode")
        return [compare_float("y", ctx.out("y"), ref, bud)]


@op("softmax_rows")
class SoftmaxRows(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        rows, cols = _rows_cols(ctx)
        ctx.put("x", (ctx.rng.standard_normal(rows * cols) * 3).astype(np.float32))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.norm import softmax
        rows, cols = _rows_cols(ctx)
        x = ctx.out("x").astype(np.float64).reshape(rows, cols)
        ref = softmax(x)
        if ctx.attrs.get("accumulate", "f64") == "f64":
            bud = B.Budget(2 * U * ref + B.F32_TINY, "2u |p| (f64 softmax, one f32 rounding)", "mode")
        else:
            bud = B.softmax(ref, np.abs(x - x.max(axis=1, keepdims=True)), cols, B.ULP["expf"])
        return [compare_float("y", ctx.out("y"), ref, bud)]


# -- element-wise -------------------------------------------------------------------------------------------------
def _step(opname: str, t, et, v=None, ev=None):
    """One op of a chain in float64 with its forward error bound: (value, bound)."""
    if opname == "silu":
        from reference.elementwise import silu
        val = silu(t)
        return val, 1.1 * et + (B.ULP["expf"] + 3) * U * np.abs(val)
    if opname in ("add", "sub"):
        val = t + v if opname == "add" else t - v
        return val, et + ev + U * np.abs(val)
    if opname == "mul":
        val = t * v
        return val, et * np.abs(v) + ev * np.abs(t) + U * np.abs(val)
    raise JudgeError(f"elementwise: unknown op {opname!r}")


@op("elementwise")
class Elementwise(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        from emitters.contract import Role
        for p in ctx.contract.params:
            if p.is_pointer and p.role in (Role.INPUT, Role.INOUT):
                ctx.put(p.name, inputs.activation(ctx.rng, ctx.counts[p.name], outliers=False, std=2.0))

    @staticmethod
    def check(ctx: Ctx) -> list:
        layout = ctx.attrs.get("layout", "binary")
        ops = list(ctx.attrs.get("ops", []))
        val = lambda n: (ctx.before[n] if n in ctx.before else ctx.out(n)).astype(np.float64)  # noqa: E731
        zero = lambda a: np.zeros_like(a)  # noqa: E731
        if layout == "binary":
            a, b = val("a"), val("b")
            ref, err = _step(ops[0], a, zero(a), b, zero(b))
            return [compare_float("c", ctx.out("c"), ref, B.Budget(err + B.F32_TINY, "u |c| (one op)", "mode"))]
        if layout == "inplace":
            x, y = val("x"), val("y")
            ref, err = _step(ops[0], x, zero(x), y, zero(y))
            return [compare_float("x", ctx.out("x"), ref, B.Budget(err + B.F32_TINY, "u |x| (one op)", "mode"))]
        if layout == "chain":
            ins = [p.name for p in ctx.contract.params if p.name.startswith("i")]
            t, et = val(ins[0]), zero(val(ins[0]))
            k = 1
            for o in ops:
                if o == "silu":
                    t, et = _step(o, t, et)
                else:
                    v = val(ins[k])
                    t, et = _step(o, t, et, v, zero(v))
                    k += 1
            out = next(p.name for p in ctx.contract.params if p.name.startswith("o"))
            return [compare_float(out, ctx.out(out), t, B.Budget(et + B.F32_TINY,
                                                                "forward error of the chain: u per op, silu' <= 1.1, "
                                                                f"expf {B.ULP['expf']} ulp", "mode"))]
        if layout == "region":
            temps: dict = {}
            for m, member in enumerate(ctx.attrs["members"]):
                opname, *operands = member
                vals = [temps[o] if o in temps else (val(o), zero(val(o))) for o in operands]
                if opname == "silu":
                    temps[f"t{m}"] = _step(opname, *vals[0])
                else:
                    temps[f"t{m}"] = _step(opname, vals[0][0], vals[0][1], vals[1][0], vals[1][1])
            comps = []
            for j, member_index in enumerate(ctx.attrs["stores"]):
                ref, err = temps[f"t{member_index}"]
                comps.append(compare_float(f"o{j}", ctx.out(f"o{j}"), ref,
                                           B.Budget(err + B.F32_TINY, "forward error of the region's ops", "mode")))
            return comps
        raise JudgeError(f"elementwise: unknown layout {layout!r}")


@op("silu")
class Silu(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        ctx.put("x", inputs.activation(ctx.rng, ctx.counts["x"], outliers=False, std=4.0))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.elementwise import silu
        x = ctx.out("x").astype(np.float64)
        ref = silu(x)
        return [compare_float("y", ctx.out("y"), ref,
                              B.relative(ref, B.ULP["expf"] + 3, "expf, negate, add, divide", "mode", B.F32_TINY))]


@op("transpose")
class Transpose(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        ctx.put("x", inputs.activation(ctx.rng, ctx.counts["x"], outliers=False))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.elementwise import transpose
        R, C = int(ctx.dim("R")), int(ctx.dim("C"))
        return [compare_exact("y", ctx.out("y"), transpose(ctx.out("x").reshape(R, C)).astype(np.float32))]


@op("matmul_f32")
class MatmulF32(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        ctx.put("a", inputs.activation(ctx.rng, ctx.counts["a"]))
        ctx.put("b", inputs.gaussian_matrix(ctx.rng, 1, ctx.counts["b"]))

    @staticmethod
    def check(ctx: Ctx) -> list:
        M, N, K = int(ctx.dim("M")), int(ctx.dim("N")), int(ctx.dim("K"))
        a = ctx.out("a").astype(np.float64).reshape(M, K)
        b = ctx.out("b").astype(np.float64).reshape(K, N)
        ref = a @ b
        bud = B.Budget(B.gamma(K + 1) * (np.abs(a) @ np.abs(b)) + B.F32_TINY,
                       f"gamma_{K + 1} * sum|a b| (f32 serial dot of K terms)", "mode")
        return [compare_float("c", ctx.out("c"), ref, bud)]


# -- RoPE ---------------------------------------------------------------------------------------------------------
@op("rope_table")
class RopeTable(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        H, HALF = int(ctx.dim("H")), int(ctx.dim("HALF"))
        shape = ctx.case.shape_set
        pos = int(ctx.rng.integers(0, max(shape.kv_len, 2)))
        ang = pos * shape.rope_theta ** (-2.0 * np.arange(HALF) / (2 * HALF))
        ctx.put("q", inputs.activation(ctx.rng, H * 2 * HALF, outliers=False))
        ctx.put("rc", np.cos(ang).astype(np.float32))
        ctx.put("rs", np.sin(ang).astype(np.float32))

    @staticmethod
    def check(ctx: Ctx) -> list:
        H, HALF = int(ctx.dim("H")), int(ctx.dim("HALF"))
        q = ctx.out("q").astype(np.float64).reshape(H, 2, HALF)
        c, s = ctx.out("rc").astype(np.float64), ctx.out("rs").astype(np.float64)
        a, b = q[:, 0], q[:, 1]
        ref = np.stack([a * c - b * s, a * s + b * c], axis=1).reshape(-1)
        mag = np.stack([np.abs(a * c) + np.abs(b * s), np.abs(a * s) + np.abs(b * c)], axis=1).reshape(-1)
        return [compare_float("y", ctx.out("y"), ref, B.Budget(B.gamma(3) * mag + B.F32_TINY,
                                                               "gamma_3 (|a c| + |b s|), gamma_3 (|a s| + |b c|) (two products, one add)",
                                                               "mode"))]


def rope_budget(normed: np.ndarray, pos: int, theta: float, hd: int, norm_rel: float) -> np.ndarray:
    """Per-element bound of norm + RoPE in f32. The exponent -2i/hd rounds twice (2u relative), which
    powf turns into 2u |x ln theta| relative in the frequency, plus powf's 4 ulp; pos * f adds 1 rounding;
    so the angle errs by (|x ln theta| 2 + 4 + 1) u |a|; cos/sin add 2 ulp; the rotation 3 roundings."""
    half = hd // 2
    i = np.arange(half)
    xexp = 2.0 * i / hd
    ang = pos * theta ** (-xexp)
    dang = (2 * np.abs(xexp * np.log(theta)) + B.ULP["powf"] + 1) * U * ang + B.ULP["sinf"] * U
    h = normed.reshape(-1, 2, half)
    mag = np.abs(h[:, 0]) + np.abs(h[:, 1])                     # |x0| + |x1| per pair
    pair = mag * (dang + B.gamma(3)) + norm_rel * mag
    return np.stack([pair, pair], axis=1).reshape(-1)


@op("qk_norm_rope")
class QkNormRope(Judge):
    @staticmethod
    def build(ctx: Ctx) -> None:
        hd = int(ctx.dim("hd"))
        for base in ("base", "qbase", "kbase"):
            if ctx.has(base):
                ctx.put(base, inputs.activation(ctx.rng, ctx.counts[base], outliers=False))
        for wn in ("nw", "qnw", "knw"):
            if ctx.has(wn):
                ctx.put(wn, inputs.norm_weight(ctx.rng, hd))
        ctx.put("d_pos", np.array([int(ctx.dim("pos"))], dtype=np.int32))

    @staticmethod
    def check(ctx: Ctx) -> list:
        from reference.rope import qk_norm_rope
        hd, pos = int(ctx.dim("hd")), int(ctx.dim("pos"))
        theta, eps = float(ctx.dim("theta")), float(ctx.dim("eps"))
        if ctx.has("base"):
            groups = [("base", "nw", int(ctx.dim("stride")), int(ctx.dim("n_heads")))]
        else:
            groups = [("qbase", "qnw", 0, int(ctx.dim("nh"))), ("kbase", "knw", int(ctx.dim("kstride")),
                                                               int(ctx.dim("nkv")))]
        comps = []
        norm_rel = B.rms_norm_rel(hd)
        for buf, wn, stride, nheads in groups:
            before = ctx.before[buf].astype(np.float64)
            after = ctx.out(buf)
            lo = pos * stride
            hi = lo + nheads * hd
            x = before[lo:hi]
            ref = qk_norm_rope(x.reshape(1, -1), ctx.out(wn).astype(np.float64), np.int64(pos), theta, hd, eps)[0]
            from reference.norm import rms_norm
            normed = rms_norm(x.reshape(nheads, hd), weight=ctx.out(wn).astype(np.float64), eps=eps).reshape(-1)
            bud = B.Budget(rope_budget(normed, pos, theta, hd, norm_rel) + B.F32_TINY,
                           "RMSNorm (gamma_(hd+1)/2 + 6u) + angle error (exponent, powf 4 ulp, pos*f) + sin/cos "
                           "2 ulp + gamma_3 rotation, times |x0|+|x1|", "mode")
            comps.append(compare_float(f"{buf}[heads at d_pos]", after[lo:hi], ref, bud))
            mask = np.ones(after.size, dtype=bool)
            mask[lo:hi] = False
            comps.append(compare_exact(f"{buf} (outside the heads)", after[mask], ctx.before[buf][mask], "exact"))
        return comps
