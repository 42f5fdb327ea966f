"""Cases name themselves and replay from the name; inputs are seeded and realistic; bad input is refused."""
from __future__ import annotations

import numpy as np
import pytest

from emitters.registry import emit
from harness.cases import inputs
from harness.cases.names import case_from_name, cases_for_contract, derive_seed, parse_case_name, variants_for
from reference.modes import Mode
from reference.shapes import TAILS, TINY


def test_case_names_are_unique_and_round_trip():
    src = emit("moe", Mode.INT8_ACT, "tiny")
    cases = [case for c in src.contracts for case in cases_for_contract(c, "tiny", 1234)]
    names = [c.name for c in cases]
    assert len(names) == len(set(names))
    assert "moe_topk_idx[int8act,tiny,router,near-tie,seed=" in " ".join(names)
    for case in cases:
        back, contract = case_from_name(case.name, src.contracts)
        assert back == case and contract.name == case.kernel


def test_parse_case_name_rejects_malformed_names():
    with pytest.raises(ValueError, match="KERNEL\\[MODE"):
        parse_case_name("gk_gemv[int8act,tiny]")
    with pytest.raises(ValueError, match="shape set"):
        parse_case_name("gk_gemv[int8act,huge,lm_head,gauss,seed=1]")
    with pytest.raises(ValueError, match="no kernel"):
        case_from_name("nope[int8act,tiny,x,gauss,seed=1]", emit("matmul", Mode.INT8_ACT, "tiny").contracts)


def test_case_seeds_depend_on_base_seed_and_identity():
    a = derive_seed(1, "gk_gemv", "int8act", "tiny", "lm_head", "gauss")
    assert a == derive_seed(1, "gk_gemv", "int8act", "tiny", "lm_head", "gauss")
    assert a != derive_seed(2, "gk_gemv", "int8act", "tiny", "lm_head", "gauss")
    assert a != derive_seed(1, "gk_gemv", "int8act", "tiny", "attn_q", "gauss")


def test_attention_cases_cover_short_and_ragged_caches():
    c = emit("attention", Mode.DEQUANT, "tails").contract("gk_attn_part")
    lengths = [dict(o)["L"] for _, o in variants_for(c, TAILS)]
    assert 1 in lengths and 3 in lengths and TAILS.kv_len in lengths
    assert any(n % TAILS.attn_split for n in lengths if n > TAILS.attn_split)
    # a static-L kernel (length compiled in) is only judged at its own length
    static = emit("attention", Mode.DEQUANT, "tiny").contract("k0_attn")
    assert {dict(o)["L"] for _, o in variants_for(static, TINY)} == {TINY.kv_len}


def test_activation_has_outliers_and_is_seeded():
    a = inputs.activation(inputs.rng_for(5), 4096)
    b = inputs.activation(inputs.rng_for(5), 4096)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert np.abs(a).max() > 15 * np.median(np.abs(a))          # outlier channels
    z = inputs.activation(inputs.rng_for(5), 256, zero_block=True).reshape(-1, 32)
    assert (np.abs(z).max(axis=1) == 0).sum() >= 1


@pytest.mark.parametrize("tie", ["near", "exact"])
def test_router_logits_put_a_tie_at_the_top_k_boundary(tie):
    z = inputs.router_logits(inputs.rng_for(3), 32, 4, tie)
    top = np.sort(z)[::-1]
    if tie == "exact":
        assert top[3] == top[4]
    else:
        assert top[3] > top[4] and np.nextafter(top[4], np.float32(np.inf)) == top[3]


def test_inputs_refuse_bad_arguments():
    with pytest.raises(ValueError, match="top_k"):
        inputs.router_logits(inputs.rng_for(1), 8, 8)
    with pytest.raises(ValueError, match="tie"):
        inputs.router_logits(inputs.rng_for(1), 8, 2, "maybe")
    with pytest.raises(ValueError, match="seed"):
        inputs.rng_for(-1)
    with pytest.raises(ValueError, match="cols"):
        inputs.q8_weight(inputs.rng_for(1), 4, 33)
    with pytest.raises(ValueError, match="count"):
        inputs.distinct_indices(inputs.rng_for(1), 5, 4)


def test_half_ties_sit_exactly_between_two_int8_steps():
    x = inputs.half_ties(inputs.rng_for(9), 256).reshape(-1, 32).astype(np.float64)
    amax = np.abs(x).max(axis=1, keepdims=True)
    q = x / (amax / 127.0)
    assert np.all(np.abs(q[:, 0]) == 127)
    assert np.all(q[:, 1:] - np.floor(q[:, 1:]) == 0.5)
    with pytest.raises(ValueError, match="32-block"):
        inputs.half_ties(inputs.rng_for(1), 40)
