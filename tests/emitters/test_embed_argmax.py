"""The embed and argmax emitters, and the coverage of the seed kernels emitters_a re-implements."""
from __future__ import annotations

import dataclasses

import pytest

from emitters import argmax, embed, matmul, moe
from emitters.contract import ContractViolation, Role
from reference.shapes import SHAPE_SETS, TINY
from tests.emitters.test_matmul import (_seed_sets, check_instances, profile_problems, seed_set_names,
                                        seed_signature_problems, signature_problems, smoke_compile)

MODULES = {"embed": embed, "argmax": argmax}

# Every seed kernel this part of the project re-implements (k0_ names stand for their k{i}_ pattern).
OWNED = {
    "gk_embed", "gk_quant_act", "gk_gemv", "gk_gemv_kv", "gk_gemv_qkv", "gk_argmax_adv", "gk_gemv_deq",
    "gk_gemv_kv_deq", "gk_moe_gate_up_deq", "gk_moe_down_deq", "gk_marlin_q8", "k0_q8gemv", "k0_qact",
    "k0_q8dp4a", "k0_matmul", "moe_gemv", "moe_silu_had", "moe_zero", "moe_combine", "moe_topk",
    "moe_router_fast", "moe_topk_idx", "moe_qact", "moe_gate_up_silu", "moe_down_combine",
}


@pytest.mark.parametrize("shape", tuple(SHAPE_SETS))
@pytest.mark.parametrize("family", tuple(MODULES))
def test_emit_is_deterministic_and_matches_its_contracts(family, shape):
    mod = MODULES[family]
    assert mod.MODES == (None,)
    a, b = mod.emit(None, SHAPE_SETS[shape]), mod.emit(None, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts and a.mode is None
    assert signature_problems(a) == []
    check_instances(a, SHAPE_SETS[shape])


@pytest.mark.parametrize("family", tuple(MODULES))
def test_seed_signatures_and_ptx_profile(family):
    src = MODULES[family].emit(None, TINY)
    assert seed_signature_problems(src) == []
    assert profile_problems(src) == []


@pytest.mark.parametrize("family", tuple(MODULES))
def test_smoke_compile_at_tiny(family):
    smoke_compile(MODULES[family].emit(None, TINY).code)


@pytest.mark.parametrize("family", tuple(MODULES))
def test_a_mode_is_refused(family):
    from reference.modes import Mode
    with pytest.raises(ValueError, match="mode"):
        MODULES[family].emit(Mode.DEQUANT, TINY)


def test_embed_bad_width_raises_naming_kernel_and_parameter():
    with pytest.raises(ContractViolation, match=r"kernel gk_embed: parameter E breaks 'E % 32 == 0"):
        embed.emit(None, dataclasses.replace(TINY, name="bad", d=520))


def test_argmax_empty_vocab_raises_naming_kernel_and_parameter():
    with pytest.raises(ContractViolation, match=r"kernel gk_argmax_adv: parameter vocab breaks"):
        argmax.emit(None, dataclasses.replace(TINY, name="bad", vocab=0))


def test_argmax_roles_and_fills():
    c = argmax.emit(None, TINY).contract("gk_argmax_adv")
    assert c.param("d_pos").role is Role.INOUT and c.param("d_pos").fill == "const(pos)"
    assert c.param("d_tok").role is Role.OUTPUT
    assert c.geometry(c.dims_for(TINY)) == ((1, 1, 1), (argmax.THREADS, 1, 1), 0)


def test_embed_token_is_a_valid_row_index():
    c = embed.emit(None, TINY).contract("gk_embed")
    assert c.param("d_tok").fill == "index(V)" and c.dims_for(TINY)["V"] == TINY.vocab


def _all_emitted():
    out = []
    for mod in (matmul, moe, embed, argmax):
        for mode in mod.MODES:
            out.append(mod.emit(mode, TINY))
    return out


def test_emitters_a_cover_every_owned_seed_kernel():
    names = {c.name for src in _all_emitted() for c in src.contracts}
    assert names == OWNED


def test_every_owned_seed_kernel_is_in_the_seed():
    in_seed = {k for ks in _seed_sets().values() for k in ks.kernels}
    assert OWNED <= in_seed, OWNED - in_seed


def test_coverage_check_catches_a_missing_kernel():
    names = {c.name for src in _all_emitted() for c in src.contracts} - {"gk_gemv_qkv"}
    assert names != OWNED
