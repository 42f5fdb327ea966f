"""Judge one case: build the kernel's arguments from its contract, launch it, and compare every output with
the mode-faithful reference (the same quantization decisions the kernel made: its own int8 activation, its
own half-precision weight scales) and with the exact DEQUANT reference, each against a derived budget.

Integer outputs (int8 activations, top-K indices, token ids, positions) compare bit for bit; a top-K set
compares as a set, and a difference explained by an exact (or within-budget) tie is a "tie", not a failure.
Per-op knowledge lives in the family modules (ops, rows, attention), registered in ``registry.OPS`` (op name
from the contract vocabulary) when the package is imported; an op without a judge is reported as unchecked,
never passed.
"""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Optional

import numpy as np

from emitters.contract import KernelContract, Role
from emitters.expr import evaluate
from reference.bounds import warp_row_depth
from reference.modes import Mode

from harness.backends.base import KernelFault, ResourceExhausted
from harness.cases import inputs
from harness.cases.names import Case, derived_dims
from harness.cases.variants import PromiseError

from . import budgets as B
from .registry import (  # noqa: F401  (FAIL ... UNCHECKED, Comparison: the verdict vocabulary callers import here)
    FAIL, OPS, PASS, TIE, UNCHECKED, Comparison, Ctx, JudgeError,
)


@dataclass
class CaseResult:
    case: Case
    verdict: str
    reason: str
    comparisons: list[Comparison]
    dims: dict
    launch: str = ""
    elapsed_ms: Optional[float] = None       # GPU kernel time (median of timed repeats)
    bytes_moved: Optional[int] = None        # bytes the kernel must read + write
    notes: tuple[str, ...] = ()
    wall_s: float = 0.0
    fault: Optional[str] = None              # KernelFault class name when the launch faulted
    coverage: Optional[dict] = None          # emu: blocks run under each schedule (LaunchResult.coverage)


# -- comparisons --------------------------------------------------------------------------------------------
def _metrics(out: np.ndarray, ref: np.ndarray) -> dict:
    """harness.judging.metrics' figures under the report's keys (max_ulp = float32 ulps, worst_index flat). Relative
    error and ULP distance mean nothing where the reference is 0 (any nonzero output is infinitely far in
    relative terms, and float32's ulp at 0 is a denormal): they are taken over the nonzero reference elements
    only, the count left out is recorded, and with no nonzero reference element they are left empty with the
    reason."""
    from . import metrics as M
    d = M.compare(out, ref).as_dict()
    d["max_ulp"] = d.pop("max_ulp_f32")
    wi = d["worst_index"]
    d["worst_index"] = int(wi[0]) if len(wi) == 1 else wi
    zero = np.asarray(ref).reshape(-1) == 0
    if zero.any():
        d["zero_reference_elements"] = int(zero.sum())
        if zero.all():
            d["max_rel"] = d["max_ulp"] = None
            d["metric_note"] = "the reference is all zero: no relative error or ULP distance (see max abs)"
        else:
            keep = ~zero
            o, r = np.asarray(out).reshape(-1)[keep], np.asarray(ref).reshape(-1)[keep]
            d["max_rel"], d["max_ulp"] = M.max_rel(o, r), M.max_ulp_f32(o, r)
            d["metric_note"] = f"max rel and max ULP over the {int(keep.sum())} nonzero reference elements"
    return d


def _histogram(err: np.ndarray, budget: np.ndarray) -> dict:
    """The distribution of log10(|err| / budget) per element: 0 is the budget line, > 0 over budget."""
    from . import metrics as M
    return M.usage_histogram(err, budget)


def compare_float(name: str, out: np.ndarray, ref: np.ndarray, budget: B.Budget, what: str = "") -> Comparison:
    out64 = np.asarray(out, dtype=np.float64).reshape(-1)
    ref64 = np.asarray(ref, dtype=np.float64).reshape(-1)
    if out64.shape != ref64.shape:
        raise JudgeError(f"{name}: kernel output has {out64.size} elements, reference {ref64.size}")
    m = _metrics(out64, ref64)
    bvals = np.broadcast_to(np.asarray(budget.values, dtype=np.float64).reshape(-1), out64.shape)
    if not np.all(np.isfinite(out64)):
        bad = int(np.flatnonzero(~np.isfinite(out64))[0])
        return Comparison(name, budget.against, FAIL, m, budget.formula, reason=(
            f"{name}: non-finite value {out64[bad]} at index {bad} (reference {ref64[bad]:.9g})"),
            histogram=_histogram(out64 - ref64, bvals))
    err = out64 - ref64
    usage, i = budget.usage(err)
    bvals = budget.values.reshape(-1)
    b_at = float(bvals[i] if bvals.size > 1 else bvals[0])
    verdict = PASS if usage <= 1.0 else FAIL
    if np.any(ref64 != 0) and np.all(np.broadcast_to(bvals, ref64.shape) >= np.abs(ref64)):
        # an all-zero output would pass too: the bound says nothing here; the report shows it
        m["vacuous_budget"] = "every element's budget is at least |reference|: an all-zero output would pass"
    reason = "" if verdict == PASS else (
        f"{name} vs {budget.against}: |err| {abs(err[i]):.3g} at index {i} exceeds budget {b_at:.3g} "
        f"({usage:.3g}x; kernel {out64[i]:.9g}, reference {ref64[i]:.9g}){' ' + what if what else ''}")
    return Comparison(name, budget.against, verdict, m, budget.formula, b_at, float(abs(err[i])), usage, reason,
                      _histogram(err, np.broadcast_to(bvals, err.shape)))


def compare_exact(name: str, out: np.ndarray, ref: np.ndarray, against: str = "mode", note: str = "") -> Comparison:
    out = np.asarray(out).reshape(-1)
    ref = np.asarray(ref).reshape(-1)
    if out.shape != ref.shape:
        raise JudgeError(f"{name}: kernel output has {out.size} elements, reference {ref.size}")
    if out.dtype.kind == "f":
        diff = out.view(np.uint32 if out.dtype == np.float32 else np.uint64) != \
            ref.astype(out.dtype).view(np.uint32 if out.dtype == np.float32 else np.uint64)
    else:
        diff = out.astype(np.int64) != ref.astype(np.int64)
    n = int(diff.sum())
    metrics = {"mismatches": n, "elements": int(out.size)}
    if out.dtype.kind in "iu" and out.size:
        # integer codes and indices: the error is counted in steps of the output's own grid, never in float ULPs
        metrics["max_abs"] = float(np.max(np.abs(out.astype(np.int64) - ref.astype(np.int64))))
        metrics["max_steps"] = metrics["max_abs"]
        metrics["max_ulp"] = None
        metrics["metric_note"] = "integer output: error in steps of its grid (max steps), no float ULP"
    if n == 0:
        return Comparison(name, against, PASS, metrics, "0 (bit for bit)", 0.0, 0.0, 0.0)
    i = int(np.flatnonzero(diff)[0])
    return Comparison(name, against, FAIL, metrics, "0 (bit for bit)", 0.0, None, float("inf"),
                      f"{name}: {n} of {out.size} elements differ from the reference bit for bit; first at index "
                      f"{i}: kernel {out[i]!r}, reference {ref[i]!r}{'; ' + note if note else ''}")


# -- shared reference helpers ----------------------------------------------------------------------------------
def act_quant_ref(x: np.ndarray, zero_rule: str, two_pass: bool):
    from reference import quant as Q
    if two_pass:
        return Q.quantize_act_two_pass(x)
    return Q.quantize_act_int8(x, zero_rule=zero_rule)


def ref_act_scales(values: np.ndarray, zero_rule: str) -> np.ndarray:
    """The reference quantizer's per-32-block scales of values (flattened, rounded to float32 as the kernel
    reads them) under the contract's zero rule ("floor" | "unit"), as float64."""
    return act_quant_ref(np.asarray(values).reshape(-1).astype(np.float32), zero_rule, False)[1] \
        .astype(np.float64).reshape(-1)


def weight_scales(ctx: Ctx, name: str, scales: np.ndarray) -> np.ndarray:
    """The scales as the kernel holds them: float16 where its parameter is `const __half*`."""
    dt = ctx.contract.param(name).dtype
    return np.asarray(scales, dtype=np.float32).astype(dt)


def place_q8(ctx: Ctx, qname: str, sname: str, w, rows_total: int, row0: int = 0, filler: bool = False):
    """Write Q8 weight rows [row0, row0+rows) into the contract's buffers; other rows get a constant
    pattern (int8 7, scale 1.0) that makes a read of the wrong rows grossly visible."""
    K = w.quants.shape[1]
    if filler:
        q = np.full((rows_total, K), 7, dtype=np.int8)
        s = np.ones((rows_total, K // 32), dtype=np.float32)
    else:
        q = np.zeros((rows_total, K), dtype=np.int8)
        s = np.zeros((rows_total, K // 32), dtype=np.float32)
    q[row0:row0 + w.quants.shape[0]] = w.quants
    s[row0:row0 + w.quants.shape[0]] = w.scales
    ctx.put(qname, q)
    ctx.put(sname, weight_scales(ctx, sname, s))


ACT_MODE = {"f32": Mode.DEQUANT, "int8": Mode.INT8_ACT, "int8x2": Mode.TWO_PASS_INT8}


def effective_act(act: dict) -> np.ndarray:
    """The activation value (float64, (M, K)) the kernel's dots multiply with, via the reference."""
    from reference.quant import QuantizedActivation
    if "f32" in act:
        return np.atleast_2d(np.asarray(act["f32"], dtype=np.float32)).astype(np.float64)
    if "int8" in act:
        q, s = act["int8"]
        qa = QuantizedActivation(np.atleast_2d(q).astype(np.int8), np.atleast_2d(s).astype(np.float32))
    else:
        qh, ql, s = act["int8x2"]
        qa = QuantizedActivation(np.atleast_2d(qh).astype(np.int8), np.atleast_2d(s).astype(np.float32),
                                 np.atleast_2d(ql).astype(np.int8))
    return qa.dequantize()


def gemv_terms(wq: np.ndarray, ws: np.ndarray, act: dict, K: int):
    """Mode-faithful y and sum|terms| (float64, exact) of Q8 rows wq (N, K) int8, ws (N, K/32), computed
    by the reference's blocked Q8_0 product on the activation exactly as the kernel received it.

    act: {"f32": x (M, K)} | {"int8": (q, s)} | {"int8x2": (qh, ql, s)}; returns (y (M, N), abs (M, N))."""
    from reference.matmul import blocked_product
    from reference.quant import Q8Tensor
    w = Q8Tensor(np.ascontiguousarray(wq, dtype=np.int8).reshape(-1, K),
                 np.ascontiguousarray(ws, dtype=np.float32).reshape(-1, K // 32))
    x_eff = effective_act(act)
    return blocked_product(w, x_eff), blocked_product(w, x_eff, absolute=True)


def gemv_depth(contract, K: int) -> int:
    """Roundings any term passes through: the family's warp-per-row structure (reference.bounds.warp_row_depth)
    or, for a thread-per-output kernel, a serial sum of K terms."""
    if contract.attrs.get("threading") == "thread_per_output":
        return K + 3
    return warp_row_depth(K)


def gemv_mode_budget(accumulate: str, K: int, y: np.ndarray, abs_sum: np.ndarray,
                     depth: "int | None" = None) -> B.Budget:
    if accumulate == "f64":
        return B.f64_sum_to_f32(y, abs_sum, K)
    n = depth if depth is not None else warp_row_depth(K)
    return B.Budget(B.gamma(n) * np.asarray(abs_sum, dtype=np.float64) + B.F32_TINY,
                    f"gamma_{n} * sum|w_j s_w x_j| (f32 accumulation, depth {n}; reference.bounds)", "mode")


def gemv_dequant_budget(wq, ws, x: np.ndarray, act_kind: str, K: int, fp: B.Budget) -> B.Budget:
    """Budget against the exact DEQUANT product: the activation quantization bound of reference.bounds
    (s (0.5 + 128u) per element, two-pass sl (0.5 + 16400u) which covers a fused or unfused residual),
    weighted by |w s_w| (q8_matmul_mode_bound), plus the kernel's own f32 budget."""
    if act_kind == "f32":
        return B.Budget(fp.values, fp.formula + " (f32 activation: DEQUANT math)", "dequant")
    from reference.bounds import q8_matmul_mode_bound
    from reference.quant import Q8Tensor
    w = Q8Tensor(np.ascontiguousarray(wq, dtype=np.int8).reshape(-1, K),
                 np.ascontiguousarray(ws, dtype=np.float32).reshape(-1, K // 32))
    term = q8_matmul_mode_bound(np.atleast_2d(np.asarray(x, dtype=np.float32)), w, ACT_MODE[act_kind], fma=False)
    return B.quantized_dot_vs_dequant(term, fp.values, "reference.bounds.q8_matmul_mode_bound, unfused residual")


def q8_act_for(ctx: Ctx, x: np.ndarray, kind: str, M: int, K: int) -> dict:
    """Quantize the activation as the mode's quantizer does (the contract's zero rule, default floor): the act
    dict {"int8": (q, s)} | {"int8x2": (qh, ql, s)}."""
    zero_rule = ctx.attrs.get("zero_rule", "floor")
    if kind == "int8":
        q, s = act_quant_ref(x.reshape(M, K), zero_rule, False)
        return {"int8": (np.asarray(q).reshape(M, K), np.asarray(s, np.float32).reshape(M, K // 32))}
    qh, ql, s = act_quant_ref(x.reshape(M, K), zero_rule, True)
    s = np.asarray(s, np.float32).reshape(M, K // 32)
    return {"int8x2": (np.asarray(qh).reshape(M, K), np.asarray(ql).reshape(M, K), s)}


# -- generic argument filling and the launch -------------------------------------------------------------------
def _fill_rest(ctx: Ctx) -> None:
    for p in ctx.contract.params:
        if p.name in ctx.args:
            continue
        if not p.is_pointer:
            if p.value is not None:
                v = evaluate(p.value, ctx.dims)
            elif p.name in ctx.dims:
                v = ctx.dims[p.name]
            else:
                raise JudgeError(f"kernel {ctx.contract.name}: scalar {p.name} has no value expression and no dim")
            ctx.args[p.name] = np.dtype(p.dtype).type(v)
            continue
        n = ctx.counts[p.name]
        if p.fill:
            ctx.put(p.name, _fill_content(ctx, p.fill, n, p.name))
        elif p.role in (Role.INPUT, Role.INOUT):
            ctx.put(p.name, inputs.random_of_dtype(ctx.rng, p.dtype, n))
        else:
            ctx.put(p.name, np.zeros(n, dtype=p.dtype))


def _fill_content(ctx: Ctx, fill: str, n: int, name: str) -> np.ndarray:
    fill = fill.strip()
    if fill.startswith("index(") and fill.endswith(")"):
        upper = int(evaluate(fill[6:-1], ctx.dims))
        return inputs.distinct_indices(ctx.rng, n, upper)
    if fill.startswith("const(") and fill.endswith(")"):
        return np.full(n, evaluate(fill[6:-1], ctx.dims))
    raise JudgeError(f"kernel {ctx.contract.name}: parameter {name} has an unknown fill {fill!r}")


def case_dims(case: Case, contract: KernelContract) -> dict:
    shape = case.shape_set
    if contract.instances:
        dims = contract.dims_for(shape, case.instance)
    else:
        dims = {}
    for k, v in case.dims_override:
        dims[k] = v
    return derived_dims(dims, dict(case.dims_override))


def prepare(case: Case, contract: KernelContract) -> Ctx:
    """Build every argument of the case (without launching): used by the judge and by `replay`."""
    if contract.op not in OPS:
        raise JudgeError(f"no judge for op {contract.op!r} (kernel {contract.name})")
    dims = case_dims(case, contract)
    contract.check(dims)
    from harness.cases.model_inputs import NoModelInput, require_supported
    try:
        if case.variant == "model":
            require_supported(contract.op)
        ctx = Ctx(case, contract, dims)
        OPS[contract.op].build(ctx)
    except NoModelInput as exc:     # the checkpoint cannot feed this case: the tool's limit, not the kernel's
        raise JudgeError(f"model inputs: {exc}") from None
    _fill_rest(ctx)
    for p in contract.params:
        if p.role is Role.INOUT:
            ctx.before[p.name] = np.array(ctx.args[p.name], copy=True)
    return ctx


def _touched(ctx: Ctx) -> dict:
    """Elements of the buffers an op must touch where that is less than the whole buffer: the routed experts
    of a MoE weight, one embedding row, one KV-cache row written, the L cached rows attention reads."""
    op, d = ctx.contract.op, ctx.dims
    out: dict = {}
    if op in ("moe_gate_up_silu", "moe_down_combine"):
        rows = int(d["K"]) * int(d["N"])
        for q, s in (("wg_q", "wg_s"), ("wu_q", "wu_s"), ("wd_q", "wd_s")):
            if ctx.has(q):
                out[q], out[s] = rows * int(d["Kd"]), rows * int(d["Kd"]) // 32
    elif op == "embed_q8":
        out["wq"], out["ws"] = int(d["E"]), int(d["E"]) // 32
    elif op == "q8_gemv" and ctx.attrs.get("dest") == "kv_cache":
        out["cache"] = int(d["N"])
    elif op == "q8_gemv_qkv":
        out["kc"] = out["vc"] = int(d["KD"])
    elif op in ("attention", "attention_partials") and "L" in d:
        nkv, hd = int(ctx.dim("n_kv", "KV")), int(ctx.dim("hd", "HD"))
        out["kc"] = out["vc"] = int(d["L"]) * nkv * hd
    elif op == "qk_norm_rope":
        for b, heads in (("base", "n_heads"), ("qbase", "nh"), ("kbase", "nkv")):
            if ctx.has(b):
                out[b] = int(d[heads]) * int(d["hd"])
    return out


def bytes_moved(ctx: Ctx) -> int:
    """Bytes the kernel must move at least: each input element it needs read once, each output written
    once (a buffer read and written counts twice; a KV-cache row only written counts once)."""
    touched = _touched(ctx)
    write_only = {"cache", "kc", "vc"} if ctx.contract.op in ("q8_gemv", "q8_gemv_qkv") else set()
    total = 0
    for p in ctx.contract.params:
        if p.is_pointer:
            a = ctx.args[p.name]
            n = min(touched.get(p.name, a.size), a.size)  # type: ignore[union-attr]
            both = p.role is Role.INOUT and p.name not in write_only
            total += n * a.itemsize * (2 if both else 1)  # type: ignore[union-attr]
    return total


def launch(module, ctx: Ctx, timing=None):
    c = ctx.contract
    grid, block, shared = c.geometry(ctx.dims)
    args = [ctx.args[p.name] for p in c.params]
    outputs = tuple(i for i, p in enumerate(c.params) if p.role is Role.OUTPUT)
    kw = {"timing": timing} if timing else {}
    return module.launch(c.name, grid, block, shared, args, outputs=outputs, **kw)


def combine(comparisons: list[Comparison]) -> tuple[str, str]:
    """The verdict and reason of a launch from its comparisons: any fail fails, else any tie is a tie; a judge
    that compared nothing fails (a judge must check something)."""
    fails = [c for c in comparisons if c.verdict == FAIL]
    if fails:
        return FAIL, "; ".join(c.reason for c in fails)
    ties = [c for c in comparisons if c.verdict == TIE]
    if ties:
        return TIE, "; ".join(c.reason for c in ties)
    if not comparisons:
        return FAIL, "the judge compared nothing (no output was checked)"
    return PASS, ""


@dataclass
class Judged:
    """The outcome of judging one launch's outputs (judge_outputs)."""
    verdict: str
    reason: str
    comparisons: list[Comparison]


def judge_outputs(ctx: Ctx, against: "tuple[str, ...] | None" = None) -> Judged:
    """Judge the outputs of a launch that ran on ctx.args: the one hook the case runner (judge_case) and the
    launch-by-launch blame (harness.model.blame) share. The op's `extras` complete ctx.extra with what its
    check needs beyond the arguments (where the builder did not note it), then its check compares; `against`
    keeps only the comparisons against those references.

    A judge that cannot judge is the tool's limit, never the kernel's verdict: an op without a judge, a
    JudgeError (a contract the judge does not understand), or any other exception of the judge (a bug in the
    judge: the reason names it and carries the traceback) leaves the launch `unchecked` with the reason. A
    kernel's bad output is never such an exception: the checks read kernel-written values defensively (an
    index out of range, a non-finite value) and fail them as comparisons."""
    judge = OPS.get(ctx.contract.op)
    if judge is None:
        return Judged(UNCHECKED, f"no judge for op {ctx.contract.op!r} (kernel {ctx.contract.name})", [])
    try:
        for key, value in judge.extras(ctx).items():
            ctx.extra.setdefault(key, value)
        comps = judge.check(ctx)
    except JudgeError as exc:
        return Judged(UNCHECKED, str(exc), [])
    except Exception as exc:  # noqa: BLE001 - a judge's bug: reported as such, unchecked, with where it happened
        return Judged(UNCHECKED, f"judge error, the tool's fault, not the kernel's ({type(exc).__name__}: {exc}); "
                                 f"{traceback.format_exc(limit=3)}", [])
    if against is not None:
        comps = [c for c in comps if c.against in against]
    verdict, reason = combine(comps)
    return Judged(verdict, reason, comps)


def verdict_for_fault(exc: KernelFault) -> str:
    """A kernel's fault fails its case. The tool's own limits leave it unchecked: a case the machine has no
    memory for, or an emulator too slow to finish a block within its time limit (`tool_limit`)."""
    if isinstance(exc, ResourceExhausted) or exc.tool_limit:
        return UNCHECKED
    return FAIL


def judge_case(module, case: Case, contract: KernelContract, timing=None) -> CaseResult:
    """Run one case on a loaded module and judge it. Never raises for a kernel's misbehaviour: a fault, a
    broken precondition or a mismatch becomes a failed result whose reason says what happened."""
    t0 = time.perf_counter()
    dims: dict = {}
    try:
        ctx = prepare(case, contract)
        dims = ctx.dims
    except (JudgeError, PromiseError) as exc:    # the tool cannot judge it (a variant broke its promise)
        return CaseResult(case, UNCHECKED, str(exc), [], dims, wall_s=time.perf_counter() - t0)
    except ValueError as exc:     # ContractViolation and bad dims
        return CaseResult(case, FAIL, f"cannot build the case: {exc}", [], dims, wall_s=time.perf_counter() - t0)
    try:
        res = launch(module, ctx)
    except KernelFault as exc:
        return CaseResult(case, verdict_for_fault(exc), str(exc), [], dims, wall_s=time.perf_counter() - t0,
                          fault=type(exc).__name__, coverage=exc.coverage)
    elapsed, notes = None, list(getattr(res, "notes", ()) or ())
    if timing:
        # timed repeats run on copies: an in-place kernel (x += y, d_pos += 1) must not change what is judged
        spare = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else v) for k, v in ctx.args.items()}
        real, ctx.args = ctx.args, spare
        try:
            timed = launch(module, ctx, timing)
            elapsed = timed.elapsed_ms
            notes += [n for n in timed.notes if n.startswith("timing")]   # how it was timed, or why not
        except KernelFault as exc:
            notes.append(f"timing launch failed: {exc}")
        finally:
            ctx.args = real
    judged = judge_outputs(ctx)
    if judged.verdict == UNCHECKED:
        return CaseResult(case, UNCHECKED, judged.reason, [], dims, wall_s=time.perf_counter() - t0)
    return CaseResult(case, judged.verdict, judged.reason, judged.comparisons, dims,
                      launch=str(res.launch) if res else "",
                      elapsed_ms=elapsed, bytes_moved=bytes_moved(ctx), notes=tuple(notes),
                      wall_s=time.perf_counter() - t0, coverage=res.coverage if res else None)
