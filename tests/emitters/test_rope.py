"""The rope emitter: deterministic text, signatures equal to its contracts and to the seed's kernels, the pair
layout (i, i + hd/2) and position handling as the family defines them, limits that fire, and the same
rounding/contraction as the seed (SASS floating-point-op census)."""
from __future__ import annotations

import pytest

from emitters import rope
from emitters.contract import ContractViolation
from cudasrc.signatures import kernel_signatures
from reference.shapes import QWEN3_30B_A3B, SHAPE_SETS, TINY
from tests.emitters import kit
from tests.seed import seed_source


@pytest.fixture(scope="module")
def seed():
    return seed_source()


@pytest.mark.parametrize("shape", list(SHAPE_SETS))
def test_emit_is_deterministic_and_follows_its_contracts(shape):
    a, b = rope.emit(None, SHAPE_SETS[shape]), rope.emit(None, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts
    assert a.kernel_names == ("k0_rope", "gk_qk_norm_rope", "gk_qk_norm_rope2")
    assert kit.signature_problems(a) == []
    kit.check_instances(a, SHAPE_SETS[shape])


def test_only_the_modeless_lane_exists():
    assert rope.MODES == (None,)
    from reference.modes import Mode
    with pytest.raises(ValueError, match="mode"):
        rope.emit(Mode.DEQUANT, TINY)


def test_contract_signatures_equal_the_seed_kernels(seed):
    for c in rope.emit(None, TINY).contracts:
        text = kit.gen_kernel(seed, c.name) if c.name.startswith("gk_") else \
            kit.seed_forward_kernel(seed, c, c.dims_for(TINY))
        (sig,) = kernel_signatures(text)
        assert sig.ctypes == c.signature(), c.name
        assert [n for _, n in sig.params] == [p.name for p in c.params], c.name


def test_geometry_and_buffers_match_the_decode_launch_lines():
    s = QWEN3_30B_A3B
    ks = rope.emit(None, s)
    one = ks.contract("gk_qk_norm_rope")
    k_dims = one.dims_for(s, "k_cache_row")
    assert one.geometry(k_dims) == ((s.n_kv, 1, 1), (128, 1, 1), 0)        # gk_qk_norm_rope<<<NKV,128>>>
    assert one.counts(k_dims)["base"] == s.kv_len * s.kv_dim                 # rows 0..pos of the K cache
    assert one.counts(one.dims_for(s, "q_heads"))["base"] == s.q_dim         # stride 0: the query buffer
    two = ks.contract("gk_qk_norm_rope2")
    assert two.geometry(two.dims_for(s)) == ((s.n_head + s.n_kv, 1, 1), (128, 1, 1), 0)
    assert two.param("kbase").role.value == "inout" and two.param("d_pos").fill == "const(pos)"
    table = ks.contract("k0_rope")
    d = table.dims_for(s, "q_heads")
    assert table.geometry(d)[0] == (-(-s.n_head * (s.head_dim // 2) // 256), 1, 1)


def test_pairs_and_positions_are_the_familys():
    code = rope.emit(None, TINY).code
    assert "y[head * hd + i] = a*c - b*s;" in code and "y[head * hd + i + HALF] = a*s + b*c;" in code
    assert code.count("const float a = h[k], b = h[k + half];") == 2
    assert code.count("powf(rbase, -2.0f * k / hd)") == 2
    assert "float* h = base + (long)pos * stride + head * hd;" in code
    assert "is_q ? qbase + head * hd : kbase + (long)pos * kstride + head * hd" in code


def test_limits():
    c = rope.emit(None, TINY).contract("gk_qk_norm_rope")
    dims = c.dims_for(TINY, "q_heads")
    for bad, param in [({"threads": 256}, "threads"), ({"hd": 63}, "hd"), ({"threads": 96}, "threads"),
                       ({"stride": 16}, "stride")]:
        with pytest.raises(ContractViolation) as err:
            c.check({**dims, **bad})
        assert f"parameter {param}" in str(err.value) and "kernel gk_qk_norm_rope" in str(err.value)


def test_float_op_census_equals_the_seed(seed):
    kit.sass_tools_or_skip()
    ks = rope.emit(None, TINY)
    # Negative control compiled beside the seed's kernels: rounding both rotation products on their own
    # removes the FMA the seed's rotation has.
    theirs_src = kit.seed_counterparts(seed, ks) + "\n" + kit.mutant(
        ks.code, "k0_rope", "y[head * hd + i] = a*c - b*s;", "y[head * hd + i] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));")
    ours, theirs = kit.float_op_census(ks.code), kit.float_op_census(theirs_src)
    for c in ks.contracts:
        assert ours[c.name] == theirs[c.name], (c.name, ours[c.name], theirs[c.name])
    assert theirs["k0_rope_mutant"] != theirs["k0_rope"]


def test_smoke_compile_sm80():
    if not kit.find_nvcc():
        pytest.skip("no nvcc found (set NVCC or install the toolchain extra)")
    assert kit.compile_cubin(rope.emit(None, TINY).code).stat().st_size > 0
