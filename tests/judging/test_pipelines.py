"""Cases of two kernels: the second consumes what the first wrote, and the end result is judged against
the exact reference. Checks the conventions between kernels (the int8 activation a GEMV reads is the one
its quantizer wrote; an empty split-K partial is the -1e30 / 0 / 0 sentinel the combine expects), for
qconform's kernels and the seed's."""
from __future__ import annotations

import numpy as np
import pytest

from emitters.contract import Role
from emitters.registry import emit
from harness.cases.names import cases_for_contract
from harness.judging.core import OPS, PASS, compare_float, launch, prepare
from harness.judging.attention import attention_budget
from reference.modes import Mode


def _seed_code(seed_cu_dir, stem):
    out, files = seed_cu_dir
    return next(f for f in files if f.stem == stem).read_text()


def _run_second(module, contract, dims, shared: dict):
    """Launch `contract` with the named buffers in `shared` (outputs of the first kernel), fresh outputs."""
    args, outputs = [], []
    counts, scalars = contract.counts(dims), contract.scalars(dims)
    for i, p in enumerate(contract.params):
        if not p.is_pointer:
            args.append(np.dtype(p.dtype).type(scalars[p.name]))
        elif p.name in shared:
            args.append(shared[p.name])
        else:
            args.append(np.zeros(counts[p.name], dtype=p.dtype))
            if p.role is Role.OUTPUT:
                outputs.append(i)
    grid, block, smem = contract.geometry(dims)
    module.launch(contract.name, grid, block, smem, args, outputs=tuple(outputs))
    return {p.name: a for p, a in zip(contract.params, args)}


@pytest.mark.parametrize("source", ["emitted", "seed"])
@pytest.mark.parametrize("length", ["len=1", "len=3", "len=7"])
def test_split_k_attention_partials_then_combine(emu, seed_cu_dir, source, length):
    src = emit("attention", Mode.DEQUANT, "tiny")
    part, comb = src.contract("gk_attn_part"), src.contract("gk_attn_comb")
    code = src.code if source == "emitted" else _seed_code(seed_cu_dir, "GEN_DEVICE_KERNELS")
    module = emu.load(code)
    ctx = prepare(cases_for_contract(part, "tiny", 17, variants=[length])[0], part)
    launch(module, ctx)
    out = _run_second(module, comb, comb.dims_for(ctx.case.shape_set), ctx.args)["out"]
    L, P = ctx.dims["L"], ctx.dims["P"]
    ref, bud, _ = attention_budget(ctx, ctx.out("q").astype(np.float64), None, rescalings=L + P)
    from harness.judging import budgets as B
    c = compare_float("out", out, ref, B.Budget(bud, "attention budget, L + P rescalings", "dequant"))
    assert c.verdict == PASS, c.reason


@pytest.mark.parametrize("source", ["emitted", "seed"])
@pytest.mark.parametrize("mode", [Mode.INT8_ACT, Mode.TWO_PASS_INT8])
def test_quantizer_then_gemv_judged_on_the_kernels_own_activation(emu, seed_cu_dir, source, mode):
    src = emit("matmul", mode, "tiny")
    qact, gemv = src.contract("k0_qact"), src.contract("k0_q8dp4a")
    stem = "emit_forward-2" if mode is Mode.INT8_ACT else "emit_forward-1"
    module = emu.load(src.code if source == "emitted" else _seed_code(seed_cu_dir, stem))
    qctx = prepare(cases_for_contract(qact, "tiny", 5, instances=["x_norm"], variants=["outliers"])[0], qact)
    launch(module, qctx)
    gctx = prepare(cases_for_contract(gemv, "tiny", 5, instances=["lm_head"], variants=["gauss"])[0], gemv)
    for name in ("aq", "aqh", "aql", "as_"):
        if name in qctx.args and name in gctx.args:
            gctx.args[name] = qctx.args[name]            # the GEMV reads the quantizer's own output
    gctx.extra["x"] = qctx.args["a"].reshape(1, -1)       # and DEQUANT is judged from the f32 activation
    launch(module, gctx)
    comps = OPS["q8_gemv"].check(gctx)
    bad = [c.reason for c in comps if c.verdict not in ("pass", "tie")]
    assert not bad, bad
    assert {c.against for c in comps} >= {"mode", "dequant"}
