"""The value-range variants: each generator makes what its name promises, each variant is in the matrix, and
each finds a bug the Gaussian cases let pass (negative controls built from the surviving mutants of the
mutation analysis)."""
from __future__ import annotations

import numpy as np
import pytest

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


def test_dominant_router_case_of_the_golden_dense_topk_passes(emu):
    """Replay of a false fail: at this seed the dominant-first case's other selected weights underflow to exact
    zeros in f32, which the judge took for too few selected experts."""
    src = emit("moe", Mode.DEQUANT, "tiny")
    c = src.contract("moe_topk")
    case = next(x for x in cases_for_contract(c, "tiny", 783555017) if x.variant == "dominant-first")
    res = judge_case(emu.load(src.code), case, c)
    assert res.verdict == PASS, res.reason


def test_dominant_lead_leaves_the_other_weights_below_f32_normal():
    """Why a dominant case may hold exact zero weights: the lead that makes exp overflow without the max
    subtracted (> 88.7) exceeds -ln(FLT_MIN) = 87.3, so no margin keeps both promises."""
    z = V.router_logits(np.random.default_rng(6), 32, "dominant").astype(np.float64)
    p = np.exp(z - z.max())
    p /= p.sum()
    assert np.sort(p)[-2] < np.finfo(np.float32).tiny and V.EXP_OVERFLOW > -np.log(np.finfo(np.float32).tiny)


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


# ------------------------------------------------------------------------------- each variant checks its promise
NH, NKV, HD = 32, 4, 128        # a group of 8 heads per KV head: the geometry the old sink construction missed


def _qk(seed: int, L: int):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(NH * HD).astype(np.float32)
    k = (rng.standard_normal((L + 1, NKV * HD)) * rng.uniform(0.5, 2.5, size=(L + 1, 1))).astype(np.float32)
    return q, k


def _raises_promise(variant: str, call) -> None:
    with pytest.raises(V.PromiseError, match=f"variant {variant}: its inputs break its promise"):
        call()


@pytest.mark.parametrize("seed", range(40))
def test_every_generator_keeps_its_promise(seed):
    """Each generator checks its own promise (raising PromiseError otherwise): built over many seeds and the
    shapes' sizes, none raises."""
    rng = np.random.default_rng(seed)
    for n in (64, 512, 672):
        V.massive_activation(rng, n), V.one_nonzero_blocks(rng, n), V.all_ties(rng, n)
        for v in ("w-subnormal", "w-overflow"):
            V.weight_matrix(rng, 4, n, v, 1 / np.sqrt(n))
    for n in (8, 32, 128):
        for v in V.ROUTER_VARIANTS:
            V.router_logits(rng, n, v)
    for L in (1, 2, 7, 37):
        q, k = _qk(seed, L)
        for v in V.ATTENTION_VARIANTS:
            V.attention_qk(np.random.default_rng(seed), v, q, k, NH, NKV, HD, L, 1 / np.sqrt(HD))


def test_massive_promise_rejects_a_gaussian_vector():
    _raises_promise("massive", lambda: V.check_massive(np.random.default_rng(0).standard_normal(512)))


def test_one_nonzero_promise_rejects_a_block_with_two_values():
    x = V.one_nonzero_blocks(np.random.default_rng(0), 128)
    x[np.flatnonzero(x[:32] == 0)[0]] = 1.0
    _raises_promise("one-nonzero", lambda: V.check_one_nonzero(x))


def test_all_ties_promise_rejects_a_value_off_the_tie():
    x = V.all_ties(np.random.default_rng(0), 32 * 16)
    x[5] = np.nextafter(x[5], np.float32(np.inf))
    _raises_promise("all-ties", lambda: V.check_all_ties(x))


def test_weight_promises_reject_normal_scales():
    w = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    _raises_promise("w-subnormal", lambda: V.check_weight(w, "w-subnormal"))
    _raises_promise("w-overflow", lambda: V.check_weight(w, "w-overflow"))


@pytest.mark.parametrize("variant, at", [("dominant", -1), ("dominant-first", 0), ("dominant-second", 1)])
def test_dominant_promise_needs_the_lead_and_the_exp_overflow(variant, at):
    z = V.router_logits(np.random.default_rng(0), 32, variant)
    assert z[at] > V.EXP_OVERFLOW and z[at] - np.delete(z, at % 32).max() >= V.ROUTER_DOMINANCE - 1e-3
    small = np.zeros(32, np.float32)
    small[at] = 60.0                               # leads by 60 and exp(60) does not overflow
    _raises_promise(variant, lambda: V.check_router(small, variant))
    lead = np.full(32, -20.0, np.float32)
    lead[at] = 79.0                                # leads by 99, exp(79) does not overflow
    _raises_promise(variant, lambda: V.check_router(lead, variant))


def test_dominant_logit_overflows_even_when_every_other_logit_is_negative():
    class Negative:                                # a generator whose normal draws are all far below zero
        def standard_normal(self, n):
            return np.full(n, -30.0)
    z = V.router_logits(Negative(), 16, "dominant")
    assert z[-1] > V.EXP_OVERFLOW


def test_all_equal_promise():
    _raises_promise("all-equal", lambda: V.check_router(np.arange(4, dtype=np.float32), "all-equal"))


def test_spread_reaches_the_overflow_when_the_largest_score_is_negative():
    """The old spread scaled the largest |score| to 150: when that score was negative every maximum stayed
    below expf's overflow, and the seed's gk_attn without its max subtracted survived. Now the keys are
    negated first."""
    L = 5
    q, k = _qk(1, L)
    q64, k64 = q.astype(np.float64).reshape(NH, HD), k.astype(np.float64).reshape(-1, NKV, HD)
    s = V._scores(q64, k64, L, NH, NH // NKV, 1 / np.sqrt(HD))
    if s.max() >= -s.min():                        # make the most negative score the largest in magnitude
        k = -k
    qs, ks = V.attention_qk(np.random.default_rng(1), "spread", q, k, NH, NKV, HD, L, 1 / np.sqrt(HD))
    s = V._scores(qs.reshape(NH, HD), ks.reshape(-1, NKV, HD), L, NH, NH // NKV, 1 / np.sqrt(HD))
    assert s.max() > V.EXP_OVERFLOW and (s.max(axis=1) - s.min(axis=1)).max() >= V.SPREAD_SPAN * 0.999
    _raises_promise("spread", lambda: V.check_attention("spread", q, _qk(1, L)[1] * 0.01, NH, NKV, HD, L,
                                                        1 / np.sqrt(HD)))


def test_sink_leads_every_head_of_a_group_of_eight():
    q, k = _qk(3, 7)
    qs, ks = V.attention_qk(np.random.default_rng(3), "sink", q, k, NH, NKV, HD, 7, 1 / np.sqrt(HD))
    s = V._scores(qs.reshape(NH, HD), ks.reshape(-1, NKV, HD), 7, NH, NH // NKV, 1 / np.sqrt(HD))
    top2 = np.sort(s, axis=1)[:, -2:]
    assert ((top2[:, 1] - top2[:, 0]) >= V.SINK_LEAD * 0.999).all() and len(set(np.argmax(s, axis=1))) == 1
    _raises_promise("sink", lambda: V.check_attention("sink", q, k, NH, NKV, HD, 7, 1 / np.sqrt(HD)))


def test_equal_promise():
    q, k = _qk(4, 7)
    _raises_promise("equal", lambda: V.check_attention("equal", q, k, NH, NKV, HD, 7, 1 / np.sqrt(HD)))


def test_a_broken_promise_leaves_the_case_unchecked(monkeypatch):
    """The tool's fault, not the kernel's: the judge reports the case unchecked with the reason."""
    src = emit("moe", Mode.INT8_ACT, "tiny")
    c = src.contract("moe_topk_idx")
    case = cases_for_contract(c, "tiny", 9, variants=["dominant"])[0]
    monkeypatch.setattr(V, "router_logits", lambda rng, n, v: V.check_router(np.zeros(n, np.float32), v))
    res = judge_case(None, case, c)
    assert res.verdict == UNCHECKED and "variant dominant: its inputs break its promise" in res.reason


def test_the_seeds_attention_without_the_max_subtracted_fails_at_tiny_and_tails(seed_cu_dir):
    """The held-out planted bug: the seed's gk_attn with expf(sc[j]) instead of expf(sc[j]-mx). It passes every
    Gaussian cache; the spread case must fail it at tiny and tails on every seed (it survived seeds whose
    largest-magnitude score was negative before the spread variant negated the keys). The values alone: the seed's
    red[0] race is still in the planted kernel (its `mx = red[0]` is now a dead load, which the detector sees:
    test_race_detector.py has that race), so the detector is off here."""
    from harness.backends.emu.backend import EmuBackend
    from harness.cases.planted import Plant
    from harness.judging.matching import all_contracts, match_kernels
    from reference.shapes import get_shape
    out, _ = seed_cu_dir
    code = Plant("seed-attn-no-max", "attention", None, "gk_attn", "tiny", "softmax without the max subtracted",
                 r"expf\(sc\[j\]-mx\)", "expf(sc[j])").apply((out / "GEN_DEVICE_KERNELS.cu").read_text())
    emu = EmuBackend(race_check=False)
    try:
        module = emu.load(code)
        for shape in ("tiny", "tails"):
            (m,) = [m for m in match_kernels(code, all_contracts(shape), None) if m.kernel == "gk_attn"]
            contract = m.contracts[0]
            verdicts = {seed: judge_case(module, case, contract).verdict for seed in range(8)
                        for case in cases_for_contract(contract, get_shape(shape), seed, variants=["spread"])}
            assert set(verdicts.values()) == {FAIL}, (shape, verdicts)
            gauss = cases_for_contract(contract, get_shape(shape), 0, variants=[f"len={get_shape(shape).kv_len}"])
            assert judge_case(module, gauss[0], contract).verdict == PASS, shape
    finally:
        emu.close()


def test_gap_promise_rejects_a_row_between_the_pair():
    y = np.array([0.0, 5.0, 4.9, 4.0])
    _raises_promise("gap=1", lambda: V.check_gap("gap=1", y, 1, 3, 1.0))     # row 2 lies between
    V.check_gap("gap=1", np.array([0.0, 5.0, 1.0, 4.0]), 1, 3, 1.0)


def test_lm_head_gap_cases_keep_their_promise():
    """Every gap case's top two exact logits are the constructed pair (before, another row came between in 19
    of 450 tiny + tails cases over seeds 0-14, among them tiny's gk_gemv at seeds 2, 3 and 7: the runner-up
    then was not the pair, at a smaller gap)."""
    from harness.judging.core import prepare
    for fam, mode, shape in golden_matrix(("tiny",)):
        for c in emit(fam, mode, shape).contracts:
            for seed in (2, 3, 7):
                for case in [x for x in cases_for_contract(c, shape, seed) if x.variant in V.LM_HEAD_GAPS]:
                    prepare(case, c)                     # raises PromiseError when the promise breaks


def _mutant_by_id(code: str, kernel: str, mutant_id: str) -> str:
    from harness.mutation.operators import mutants_of
    return next(m for m in mutants_of(code, kernel) if m.id == mutant_id).apply(code)


def test_many_experts_and_zero_logits_kill_the_router_softmax_survivors(emu):
    """Survivors of `qconform mutate` on moe_topk_idx (int8act, tiny): tiny's 32 experts fill one warp, so a
    deleted barrier or a warp partial stored by the wrong lanes changed nothing; the E=128 case (four warps) makes
    them races. A deleted store of the warp sums left the total as the stored maxima, which cancels in the
    renormalization unless it is 0: all-equal logits are 0."""
    src = emit("moe", Mode.INT8_ACT, "tiny")
    c = src.contract("moe_topk_idx")
    cases = {case.variant: case for case in cases_for_contract(c, "tiny", 19)}
    assert judge_case(emu.load(src.code), cases["E=128"], c).verdict == PASS
    assert judge_case(emu.load(src.code), cases["all-equal"], c).verdict == PASS
    for mutant_id, variant in (("ca0859b29d", "E=128"), ("4c3cda6e70", "E=128"), ("d4dd959df8", "E=128"),
                               ("3179753928", "all-equal")):
        res = judge_case(emu.load(_mutant_by_id(src.code, "moe_topk_idx", mutant_id)), cases[variant], c)
        assert res.verdict == FAIL, (mutant_id, res.reason)


def test_a_router_width_with_a_tail_kills_the_tail_loop_survivors(emu):
    """moe_router_fast's 32-wide tail loop never runs at tiny (d = 512, a multiple of its 128-wide loop): its
    mutants survived a tiny sample; the router's wide-K case leaves a 96-column tail."""
    src = emit("moe", Mode.INT8_ACT, "tiny")
    c = src.contract("moe_router_fast")
    (case,) = [x for x in cases_for_contract(c, "tiny", 23) if x.variant == f"K={V.WIDE_EXPERT_K}"]
    assert judge_case(emu.load(src.code), case, c).verdict == PASS
    for mutant_id in ("154dbd54ae", "d2f99f50fa", "3d2ad95b7e"):    # t / 33; the tail's add deleted; scale + 1
        res = judge_case(emu.load(_mutant_by_id(src.code, "moe_router_fast", mutant_id)), case, c)
        assert res.verdict == FAIL, (mutant_id, res.reason)


_CAMPAIGN_KILLS = (   # survivors of the full moe/int8act campaign (docs/KERNELS.md section 7) and the case that kills each
    ("moe_topk_idx", "dominant-mid", ("6fcf730d08", "6056be594d")),        # max / sum trees from offset 17 miss lane 16
    ("moe_router_fast", f"N={V.WIDE_EXPERT_N}", ("9a36bf841e",)),          # row guard `row > N`
    ("moe_router_fast", f"K={V.WIDE_EXPERT_K}", ("3f5fe6f623", "e275c0347a")),   # K / 127; tail stride 33
    ("moe_gate_up_silu", f"Kd={V.WIDE_EXPERT_K}", ("9b71912874", "97876e0e20", "3a33fd72a8")),  # `>` guard; / 127; 33
    ("moe_down_combine", f"Kd={V.WIDE_EXPERT_K}", ("7215b43404", "7a9fae492d")),               # Kd / 127; stride 33
    ("moe_down_combine", f"Kd={V.WHOLE_CHUNK_K}", ("5df29be2b8",)),        # Kd / 129: the tail recounts a chunk
)


@pytest.mark.parametrize("kernel, variant, mutants", _CAMPAIGN_KILLS, ids=[f"{k}-{v}" for k, v, _ in _CAMPAIGN_KILLS])
def test_the_campaign_survivors_are_killed_by_their_cases(emu, kernel, variant, mutants):
    """The unmutated kernel passes the case (or ties, for an explained top-K tie) and each mutant fails it."""
    src = emit("moe", Mode.INT8_ACT, "tiny")
    c = src.contract(kernel)
    (case,) = [x for x in cases_for_contract(c, "tiny", 5) if x.variant == variant]
    assert judge_case(emu.load(src.code), case, c).verdict == PASS
    for mutant_id in mutants:
        res = judge_case(emu.load(_mutant_by_id(src.code, kernel, mutant_id)), case, c)
        assert res.verdict == FAIL, (mutant_id, res.reason)


def test_dominant_mid_puts_the_dominant_expert_in_lane_16():
    z = V.router_logits(np.random.default_rng(3), 64, "dominant-mid")
    assert int(np.argmax(z)) == 16
    z[16] = z[0]                                   # no longer dominant: the promise check refuses it
    with pytest.raises(V.PromiseError):
        V.check_router(z, "dominant-mid")
