"""The decode program as data: lanes, geometry from the contracts, buffers, --source checks."""
from __future__ import annotations

import re

import numpy as np
import pytest

from emitters.contract import Role
from harness.model.program import LANES, MISSING_KERNELS, ProgramError, RowRef, build_program

from reference.model import ModelConfig

from .weights import SMALL

# the kernel family's tiny shape set (d = 512, 32 experts, top-4, 4 heads / 2 KV heads of 64, vocab 1024)
TINY_DIMS = dict(d_model=512, n_head=4, n_kv_head=2, head_dim=64, n_expert=32, n_expert_used=4, d_expert=128,
                 vocab=1024)


def tiny_config(n_layer: int = 1) -> ModelConfig:
    return ModelConfig(**{**SMALL, **TINY_DIMS, "n_layer": n_layer})

# The seed's decode_step, kernel by kernel, per lane (layers unrolled once; head and tail outside the loop).
SEED_ORDER = {
    "precise": (["gk_embed"], ["gk_rmsnorm", "gk_gemv_deq", "gk_gemv_kv_deq", "gk_gemv_kv_deq", "gk_qk_norm_rope",
                               "gk_fused_attn", "gk_gemv_deq", "gk_add_rmsnorm", "moe_router_fast", "moe_topk_idx",
                               "gk_moe_gate_up_deq", "gk_moe_down_deq", "gk_add"], ["gk_rmsnorm", "gk_gemv_deq"]),
    "fast": (["gk_embed", "gk_rmsnorm_q8"], ["gk_gemv_qkv", "gk_qk_norm_rope2", "gk_attn", "gk_quant_act", "gk_gemv",
                                              "gk_add_rmsnorm_q8", "moe_router_fast", "moe_topk_idx",
                                              "moe_gate_up_silu", "moe_qact", "moe_down_combine",
                                              "gk_add_rmsnorm_q8a"], ["gk_gemv"]),
    "flash": (["gk_embed", "gk_rmsnorm_q8"], ["gk_gemv_qkv", "gk_qk_norm_rope2", "gk_attn_part", "gk_attn_comb_q",
                                               "gk_gemv", "gk_add_rmsnorm_q8", "moe_router_fast", "moe_topk_idx",
                                               "moe_gate_up_silu", "moe_qact", "moe_down_combine",
                                               "gk_add_rmsnorm_q8a"], ["gk_gemv"]),
}


@pytest.mark.parametrize("lane", sorted(SEED_ORDER))
def test_launch_order_mirrors_the_seeds_decode_step(lane):
    cfg = tiny_config(n_layer=2)
    p = build_program(cfg, lane, maxseq=16)
    head, layer, tail = SEED_ORDER[lane]
    assert [l.kernel for l in p.launches] == head + layer * 2 + tail
    assert p.advance.kernel == "gk_argmax_adv"
    assert [l.layer for l in p.launches] == [-1] * len(head) + [0] * len(layer) + [1] * len(layer) + [-1] * len(tail)


def test_seed_launch_geometry_and_bindings_at_tiny():
    """The seed's launch configurations (decode_step's <<<...>>>) at tiny dims, from the contracts."""
    cfg = tiny_config(n_layer=2)
    p = build_program(cfg, "fast", maxseq=40)
    by = {(l.kernel, l.layer): l for l in p.launches}
    E, QD, KD, NE, KT, FF, V = 512, 256, 128, 32, 4, 128, 1024
    assert by[("gk_gemv_qkv", 0)].grid == ((QD + 2 * KD + 7) // 8, 1, 1)
    assert by[("gk_qk_norm_rope2", 1)].grid == (4 + 2, 1, 1) and by[("gk_qk_norm_rope2", 1)].block == (128, 1, 1)
    attn = by[("gk_attn", 0)]
    assert (attn.grid, attn.block, attn.shared_bytes) == ((4, 1, 1), (256, 1, 1), 40 * 4)
    assert by[("moe_topk_idx", 0)].block == (NE, 1, 1)
    assert by[("moe_gate_up_silu", 0)].grid == ((KT * FF + 7) // 8, 1, 1)
    assert by[("moe_qact", 0)].grid == (((KT * FF) // 32 + 7) // 8, 1, 1)
    down = by[("moe_down_combine", 1)]
    assert (down.grid, down.block) == ((E, 1, 1), (KT * 32, 1, 1))
    assert by[("gk_gemv", -1)].grid == ((V + 7) // 8, 1, 1)
    # the last layer's fused add+norm+quant uses the output norm; layer 0's the next layer's attention norm
    assert by[("gk_add_rmsnorm_q8a", 0)].buffer("w") == "an[1]"
    assert by[("gk_add_rmsnorm_q8a", 1)].buffer("w") == "on_w"
    assert by[("gk_gemv_qkv", 1)].buffer("kc") == "kc[1]"
    # scalars as the seed passes them
    qkv = dict(by[("gk_gemv_qkv", 0)].bindings)
    assert (int(qkv["KD"]), int(qkv["K"]), int(qkv["QD"])) == (KD, E, QD)
    attn_args = dict(attn.bindings)
    assert attn_args["scale"] == np.float32(1 / 8.0) and attn_args["scale"].dtype == np.float32


@pytest.mark.parametrize("lane", LANES)
def test_every_buffer_is_declared_once_and_fits(lane):
    cfg = tiny_config(n_layer=2)
    p = build_program(cfg, lane, maxseq=9)
    for l in (*p.launches, p.advance):
        counts = l.contract.counts(l.dims)
        for prm, v in l.bindings:
            param = l.contract.param(prm)
            if not param.is_pointer:
                assert isinstance(v, np.generic) and v.dtype == np.dtype(param.dtype)
                continue
            name = v.buffer if isinstance(v, RowRef) else v
            d = p.buffers[name]
            assert d.dtype == param.dtype
            if isinstance(v, RowRef):
                assert d.size == v.length * p.maxseq
            elif param.role is Role.OUTPUT:
                assert d.size == counts[prm], (l.where(), prm)
            else:
                assert d.size >= counts[prm]
    assert p.buffers["kc[1]"].shape == (9, cfg.kv_dim) and p.buffers["kc[1]"].kind == "kv"


def test_twopass_lane_reports_what_qconform_lacks():
    p = build_program(tiny_config(), "twopass", maxseq=8)
    assert p.has_rows and "KV-cache row" in MISSING_KERNELS["twopass"]
    rows = [l for l in p.launches if l.has_rows]
    assert [l.instance for l in rows] == ["attn_k", "attn_v"]
    assert p.describe()["missing_in_qconform"] == MISSING_KERNELS["twopass"]
    for lane in ("precise", "fast", "flash"):
        assert not build_program(tiny_config(), lane, maxseq=8).has_rows


@pytest.mark.parametrize("lane", ["precise", "fast", "flash"])
def test_seed_generation_kernels_satisfy_the_lanes(lane, seed_gen_sources):
    p = build_program(tiny_config(), lane, maxseq=8, sources=seed_gen_sources)
    assert "GEN_DEVICE_KERNELS.cu" in p.source_label
    assert "qconform emitters" not in p.code


def test_source_lacking_a_kernel_is_an_error_naming_it(seed_gen_sources):
    gen = [s for s in seed_gen_sources if s[0].startswith("GEN_DEVICE")]
    with pytest.raises(ProgramError, match=r"kernel moe_router_fast is not in GEN_DEVICE_KERNELS\.cu"):
        build_program(tiny_config(), "fast", maxseq=8, sources=gen)
    with pytest.raises(ProgramError, match=r"kernel k0_qact is not in"):
        build_program(tiny_config(), "twopass", maxseq=8, sources=seed_gen_sources)


def test_source_with_a_different_parameter_list_is_an_error_naming_it(seed_gen_sources):
    label, code = seed_gen_sources[0]
    changed = re.sub(r"gk_add\(float\* x, const float\* y, int n\)", "gk_add(float* x, const float* y, long n)", code)
    assert changed != code
    with pytest.raises(ProgramError, match=r"kernel gk_add in .* has parameter list \(float\*, const float\*, long\); "
                                           r"its contract has \(float\*, const float\*, int\)"):
        build_program(tiny_config(), "precise", maxseq=8, sources=[(label, changed), *seed_gen_sources[1:]])


def test_a_kernel_defined_in_two_sources_is_an_error(seed_gen_sources):
    two = [*seed_gen_sources, ("copy.cu", seed_gen_sources[1][1])]
    with pytest.raises(ProgramError, match=r"moe_router_fast is defined in both"):
        build_program(tiny_config(), "fast", maxseq=8, sources=two)


def test_bad_lane_and_dims_are_errors():
    with pytest.raises(ProgramError, match=r"lane: unknown lane 'turbo'"):
        build_program(tiny_config(), "turbo", maxseq=8)
    with pytest.raises(ProgramError, match=r"maxseq"):
        build_program(tiny_config(), "fast", maxseq=0)
    # gk_attn keeps maxseq scores in dynamic shared memory: a cache too long breaks its precondition
    with pytest.raises(ProgramError, match=r"gk_attn.*maxseq"):
        build_program(tiny_config(), "fast", maxseq=20000)


@pytest.mark.parametrize("preset", ["tiny", "tails", "qwen3-30b-a3b"])
def test_qconform_emits_every_kernel_of_every_lane_at_the_presets(preset):
    from harness.model.synthetic import preset_config
    cfg = preset_config(preset, 2)
    for lane in LANES:
        p = build_program(cfg, lane, maxseq=300)
        assert p.source_label == "qconform emitters"
        launched = {l.kernel for l in (*p.launches, p.advance)}
        assert launched <= set(p.kernels()) and "gk_argmax_adv" in launched
