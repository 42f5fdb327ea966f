"""The moe emitter: contracts, seed equivalence (signatures and numeric profile), limits, compile smoke."""
from __future__ import annotations

import dataclasses

import pytest

from emitters import moe
from emitters.contract import ContractViolation
from reference.modes import Mode
from reference.shapes import SHAPE_SETS, TINY
from tests.emitters.kit import (check_instances, profile_problems, seed_signature_problems,
                                        signature_problems)

MODE_IDS = {"ids": lambda m: m.value}


@pytest.mark.parametrize("shape", tuple(SHAPE_SETS))
@pytest.mark.parametrize("mode", moe.MODES, **MODE_IDS)
def test_emit_is_deterministic_and_matches_its_contracts(mode, shape):
    a, b = moe.emit(mode, SHAPE_SETS[shape]), moe.emit(mode, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts
    assert signature_problems(a) == []
    check_instances(a, SHAPE_SETS[shape])


@pytest.mark.parametrize("mode", moe.MODES, **MODE_IDS)
def test_contract_signatures_equal_the_seed_kernels(mode):
    assert seed_signature_problems(moe.emit(mode, TINY)) == []


def test_numeric_profile_equals_the_seed():
    assert profile_problems([moe.emit(mode, TINY) for mode in moe.MODES]) == []


def test_a_single_pass_kernel_checked_against_the_two_pass_seed_differs():
    # negative control: the same check must tell the two activation precisions apart
    src = moe.emit(Mode.INT8_ACT, TINY)
    swapped = dataclasses.replace(src, mode=Mode.TWO_PASS_INT8)
    assert seed_signature_problems(swapped)


def test_a_dropped_tier_shows_in_the_numeric_profile():
    src = moe.emit(Mode.INT8_ACT, TINY)
    # skip the 128 tier of both fused kernels: the scalar tail then covers it, with a different instruction mix
    bad = dataclasses.replace(src, code=src.code.replace("for (int b = n512 * 4; b < n128; ++b)",
                                                         "for (int b = n128; b < n128; ++b)"))
    assert bad.code != src.code
    problems = profile_problems(bad)
    assert {p.split(" ")[0] for p in problems} == {"moe_gate_up_silu", "moe_down_combine"}


@pytest.mark.parametrize("mode,field,value,kernel,param", [
    (Mode.INT8_ACT, "n_expert", 2048, "moe_topk_idx", "E"),     # > 1024 threads / shared slots
    (Mode.TWO_PASS_INT8, "n_expert", 48, "moe_topk_idx", "E"),  # a partial warp in the block
    (Mode.DEQUANT, "n_expert", 512, "moe_topk", "E"),           # > 256-entry stack arrays
    (Mode.INT8_ACT, "top_k", 40, "moe_down_combine", "K"),      # 40 warps = 1280 threads (and K > E)
    (Mode.DEQUANT, "dff", 144, "moe_gemv", "K"),                # expert_down K = dff not whole 32-blocks
    (Mode.INT8_ACT, "top_k", 33, "moe_gate_up_silu", "K"),      # more routed experts than experts
])
def test_a_bad_shape_raises_naming_kernel_and_parameter(mode, field, value, kernel, param):
    shape = dataclasses.replace(TINY, name="bad", **{field: value})
    with pytest.raises(ContractViolation) as err:
        moe.emit(mode, shape)
    assert f"kernel {kernel}: parameter {param} breaks" in str(err.value)


def test_down_combine_launches_one_warp_per_routed_expert_and_one_block_per_output():
    for mode in moe.MODES:
        src = moe.emit(mode, TINY)
        name = "gk_moe_down_deq" if mode is Mode.DEQUANT else "moe_down_combine"
        c = src.contract(name)
        for shape in SHAPE_SETS.values():
            dims = c.dims_for(shape)
            grid, block, _ = c.geometry(dims)
            assert grid == (shape.d, 1, 1) and block == (32 * shape.top_k, 1, 1), (mode, shape.name)


def test_topk_kernels_break_ties_toward_the_lowest_index():
    src = moe.emit(Mode.DEQUANT, TINY)
    for name in ("moe_topk", "moe_topk_idx"):
        body = src.code.split(f"void {name}(", 1)[1].split("\n}\n", 1)[0]
        assert "] > best) {" in body, name          # strict '>' while scanning e upward keeps the first maximum
        assert src.contract(name).attrs["tie"] == "lowest index"


def test_topk_idx_holds_the_max_before_reusing_the_reduction_slots():
    body = moe.emit(Mode.INT8_ACT, TINY).code.split("void moe_topk_idx(", 1)[1]
    read_max = body.index("const float mx = red[0];")
    assert body.index("__syncthreads();", read_max) < body.index("red[wid] = s;")


def test_sparse_kernels_read_expert_indices_from_the_index_fill():
    for mode in moe.MODES:
        for c in moe.emit(mode, TINY).contracts:
            if "idx" in [p.name for p in c.params] and c.op != "moe_topk_idx":
                assert c.param("idx").fill == "index(E)", c.name
