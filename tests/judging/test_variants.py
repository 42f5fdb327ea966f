"""The value-range variants: each generator makes what its name promises, each variant is in the matrix, and
each finds a bug the Gaussian cases let pass (negative controls built from the surviving mutants of the
mutation analysis)."""
from __future__ import annotations

import numpy as np

from emitters.registry import emit, golden_matrix
from harness.cases import variants as V
from harness.cases.names import cases_for_contract, variants_for
from harness.judging.core import judge_case
from harness.judging.registry import FAIL, PASS, UNCHECKED
from reference.modes import Mode
from reference.shapes import TAILS, TINY


def test_massive_channels_are_100_to_10000_times_the_median():
    x = V.massive_activation(np.random.default_rng(1), 2048).astype(np.float64)
    ratio = np.sort(np.abs(x))[::-1] / np.median(np.abs(x))
    assert (ratio[:V.MASSIVE_CHANNELS] >= 100).all() and (ratio[:V.MASSIVE_CHANNELS] <= 10000 * 1.01).all()
    assert ratio[V.MASSIVE_CHANNELS] < 10


def test_all_ties_cover_every_tie_and_one_nonzero_blocks_hold_one_value():
    x = V.all_ties(np.random.default_rng(2), 32 * 16).reshape(-1, 32).astype(np.float64)
    step = np.abs(x[:, :1]) / 127.0
    k = x[:, 1:] / step
    assert np.all(k - np.floor(k) == 0.5)
    assert set((np.floor(k)).astype(int).ravel()) == set(range(-127, 127))
    z = V.one_nonzero_blocks(np.random.default_rng(3), 32 * 8).reshape(-1, 32)
    assert all(np.count_nonzero(z[i]) == 1 for i in range(0, 8, 2))


def test_router_and_attention_variants_reach_the_exp_overflow_range():
    rng = np.random.default_rng(4)
    z = V.router_logits(rng, 32, "dominant")
    assert np.sort(z)[-1] - np.sort(z)[-2] >= V.ROUTER_DOMINANCE - 1e-3
    assert len(set(V.router_logits(rng, 32, "all-equal").tolist())) == 1
    nh, nkv, hd, L = 4, 2, 64, 7
    q = rng.standard_normal(nh * hd).astype(np.float32)
    k = rng.standard_normal((L, nkv * hd)).astype(np.float32)
    scale = 1 / np.sqrt(hd)
    qs, ks = V.attention_qk(rng, "spread", q, k, nh, nkv, hd, L, scale)
    s = np.einsum("hd,nhd->hn", qs.reshape(nh, hd).astype(np.float64),
                  ks.reshape(L, nkv, hd)[:, np.arange(nh) // 2].astype(np.float64)) * scale
    assert np.abs(s).max() > V.EXP_OVERFLOW and (s.max(axis=1) - s.min(axis=1)).max() > 100
    qs, ks = V.attention_qk(rng, "sink", q, k, nh, nkv, hd, L, scale)
    s = np.einsum("hd,nhd->hn", qs.reshape(nh, hd).astype(np.float64),
                  ks.reshape(L, nkv, hd)[:, np.arange(nh) // 2].astype(np.float64)) * scale
    top2 = np.sort(s, axis=1)[:, -2:]
    assert ((top2[:, 1] - top2[:, 0]) >= V.SINK_LEAD * 0.99).sum() >= nh // 2
    _, ke = V.attention_qk(rng, "equal", q, k, nh, nkv, hd, L, scale)
    assert np.all(ke[:L] == ke[0])


def test_every_new_variant_is_in_the_matrix():
    seen = set()
    for fam, mode, shape in golden_matrix(("tiny", "tails")):
        for c in emit(fam, mode, shape).contracts:
            for case in cases_for_contract(c, shape, 1):
                seen.add(case.variant)
    want = {*V.ACT_QUANT_VARIANTS, *V.GEMV_VARIANTS, *V.ROUTER_VARIANTS, *V.ATTENTION_VARIANTS, *V.LM_HEAD_GAPS,
            "len=33", "len=257"}
    assert want <= seen, want - seen
    # long caches up to the contract's maximum where the kernel allows it; a static-length kernel keeps its own
    part = emit("attention", Mode.DEQUANT, "tails").contract("gk_attn_part")
    lengths = {dict(o)["L"] for _, o in variants_for(part, TAILS)}
    assert {33, 257, TAILS.attn_split, 2 * TAILS.attn_split + 1} <= lengths and max(lengths) < 4096
    # the CPU-backend sets stop at the cap; the full-size set runs the contract's own maximum
    from reference.shapes import QWEN3_30B_A3B
    allowed = lambda n: n <= 12000    # noqa: E731  (a dynamic-shared-memory kernel's limit)
    assert V.long_cache_lengths(allowed, 8, QWEN3_30B_A3B.name)["len=12000"] == 12000
    assert "len=12000" not in V.long_cache_lengths(allowed, 8, "tiny")
    static = lambda n: n <= 300       # noqa: E731  (a static score array)
    assert V.long_cache_lengths(static, 8, "tiny")["len=300"] == 300
    static = emit("attention", Mode.DEQUANT, "tiny").contract("k0_attn")
    assert {dict(o)["L"] for _, o in variants_for(static, TINY)} == {TINY.kv_len}


def test_half_overflowing_weight_scale_is_undefined_not_passed(emu):
    src = emit("moe", Mode.INT8_ACT, "tiny")
    c = src.contract("moe_router_fast")
    case = cases_for_contract(c, "tiny", 5, variants=["w-overflow"])[0]
    res = judge_case(emu.load(src.code), case, c)
    assert res.verdict == UNCHECKED and res.reason.startswith(V.UNDEFINED + ":") and "float16" in res.reason


def _mutated(code: str, kernel: str, description: str) -> str:
    from harness.mutation.operators import mutants_of
    m = next(m for m in mutants_of(code, kernel) if m.description == description)
    return m.apply(code)


def test_dominant_router_logit_catches_a_skipped_max_reduction(emu):
    """moe_topk_idx without its warp max reduction (each lane keeps its own max; a mutant the Gaussian
    and tie cases let survive) passes the Gaussian case and fails the dominant-expert case: its exp
    overflows."""
    src = emit("moe", Mode.INT8_ACT, "tiny")
    c = src.contract("moe_topk_idx")
    line = "for (int off = 16; off > 0; off >>= 1) m = fmaxf("
    at = src.code.index(line) + len("for (int off = 16; off ")
    bad = src.code[:at] + "<" + src.code[at + 1:]
    module = emu.load(bad)
    verdicts = {case.variant: judge_case(module, case, c).verdict for case in cases_for_contract(c, "tiny", 9)}
    assert verdicts["gauss"] == PASS and verdicts["dominant"] == FAIL, verdicts


def test_spread_scores_catch_an_exp_without_max_subtraction(emu):
    """gk_attn taking exp(s) instead of exp(s - max) passes the Gaussian caches (scores ~ N(0, 1)) and fails
    the spread case, whose scores overflow expf."""
    src = emit("attention", Mode.DEQUANT, "tiny")
    c = src.contract("gk_attn")
    code = src.code
    start = code.index("__global__ void gk_attn(")
    body = code[start:code.index("\n}\n", start)]
    exp_call = next(tok for tok in ("__expf(", "expf(") if tok in body)
    i = body.index(exp_call) + len(exp_call)
    j = body.index(")", i)
    arg = body[i:j]
    assert "-" in arg, arg
    new_body = body[:i] + arg.split("-")[0].strip() + body[j:]
    module = emu.load(code[:start] + new_body + code[start + len(body):])
    verdicts = {case.variant: judge_case(module, case, c).verdict
                for case in cases_for_contract(c, "tiny", 9, variants=["len=7", "spread"])}
    assert verdicts == {"len=7": PASS, "spread": FAIL}, verdicts
