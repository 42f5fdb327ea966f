"""The attention emitter: deterministic text, signatures equal to its contracts and to the seed's kernels,
geometry as the seed's host code launches it, limits that fire, the index arithmetic written as the family
defines it, and the same rounding/contraction as the seed (SASS floating-point-op census)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from emitters import attention
from emitters.contract import ContractViolation
from cudasrc.signatures import kernel_signatures
from reference.modes import Mode
from reference.shapes import QWEN3_30B_A3B, SHAPE_SETS, TINY
from tests.emitters import kit
from tests.seed import seed_source

CASES = [(m, s) for m in attention.MODES for s in SHAPE_SETS]


@pytest.fixture(scope="module")
def seed():
    return seed_source()


@pytest.mark.parametrize("mode,shape", CASES, ids=[f"{m.value}-{s}" for m, s in CASES])
def test_emit_is_deterministic_and_follows_its_contracts(mode, shape):
    a, b = attention.emit(mode, SHAPE_SETS[shape]), attention.emit(mode, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts
    assert kit.signature_problems(a) == []
    kit.check_instances(a, SHAPE_SETS[shape])
    assert f"__shared__ float sc[{SHAPE_SETS[shape].kv_len}];" in a.code   # static scores sized per shape set


def test_kernel_sets_per_mode():
    assert attention.emit(Mode.DEQUANT, TINY).kernel_names == (
        "k0_attn", "gk_attn", "gk_attn_online", "gk_attn_part", "gk_attn_comb", "gk_fused_attn")
    assert attention.emit(Mode.INT8_ACT, TINY).kernel_names == ("k0_attn", "gk_attn_part", "gk_attn_comb_q")


@pytest.mark.parametrize("mode", attention.MODES, ids=lambda m: m.value)
def test_contract_signatures_equal_the_seed_kernels(seed, mode):
    for c in attention.emit(mode, TINY).contracts:
        text = kit.gen_kernel(seed, c.name) if c.name.startswith("gk_") else \
            kit.seed_forward_kernel(seed, c, c.dims_for(TINY))
        (sig,) = kernel_signatures(text)
        assert sig.ctypes == c.signature(), c.name
        assert [n for _, n in sig.params] == [p.name for p in c.params], c.name


def test_geometry_matches_the_decode_launch_lines():
    """Qwen3-30B-A3B: gk_attn<<<NH,256,MAXSEQ*4>>>, gk_attn_part<<<NH*ATTN_SPLIT,256>>>,
    gk_attn_comb_q<<<NH,128>>>, k{i}_attn<<<H,256>>> with static scores."""
    s = QWEN3_30B_A3B
    deq = attention.emit(Mode.DEQUANT, s)
    geo = {c.name: c.geometry(c.dims_for(s)) for c in deq.contracts}
    assert geo["gk_attn"] == ((32, 1, 1), (256, 1, 1), s.kv_len * 4)
    assert geo["gk_fused_attn"] == ((32, 1, 1), (256, 1, 1), s.kv_len * 4)
    assert geo["gk_attn_part"] == ((32 * 8, 1, 1), (256, 1, 1), 0)
    assert geo["k0_attn"] == ((32, 1, 1), (256, 1, 1), 0)
    q = attention.emit(Mode.INT8_ACT, s).contract("gk_attn_comb_q")
    assert q.geometry(q.dims_for(s)) == ((32, 1, 1), (128, 1, 1), 0)
    part = deq.contract("gk_attn_part")
    assert part.counts(part.dims_for(s))["acc_part"] == 32 * 8 * 128
    assert part.param("d_pos").fill == "const(L-1)"
    assert abs(part.scalars(part.dims_for(s))["scale"] - 128 ** -0.5) < 1e-15


def test_index_arithmetic_is_the_familys():
    """Hand-checked forms: GQA head map, split-K key striding, the partial's block index, the epilogue offsets."""
    code = attention.emit(Mode.DEQUANT, TINY).code
    assert code.count("const int kvh = head / (n_head / n_kv);") == 4
    assert "const int kvh = head / (H / KV);" in code
    assert "const int head = blk / P, p = blk % P;" in code and "const int j = p + t * P;" in code
    assert "acc_part[(long)blk * hd + d] = a;" in code
    assert "acc_part[(long)(head * P + p) * hd + d]" in code
    q = attention.emit(Mode.INT8_ACT, TINY).code
    assert "aq[(head * (hd / 32) + qb) * 32 + ql]" in q and "as_[head * (hd / 32) + qb]" in q
    assert "ys[head * (HD / 32) + qb]" in q


# -- limits (negative controls) ------------------------------------------------------------------------------
def test_a_head_dim_over_the_register_arrays_is_refused():
    bad = replace(TINY, name="bad", head_dim=160)
    with pytest.raises(ContractViolation) as err:
        attention.emit(Mode.DEQUANT, bad)
    assert "kernel gk_attn_online" in str(err.value) and "parameter hd" in str(err.value)


def test_ragged_head_dim_breaks_the_quant_epilogue():
    bad = replace(TINY, name="bad", head_dim=48)
    with pytest.raises(ContractViolation) as err:
        attention.emit(Mode.INT8_ACT, bad)
    assert "kernel k0_attn" in str(err.value) and "parameter HD" in str(err.value)


def test_gqa_needs_whole_groups():
    bad = replace(TINY, name="bad", n_head=6, n_kv=4)
    with pytest.raises(ContractViolation) as err:
        attention.emit(Mode.DEQUANT, bad)
    assert "parameter KV" in str(err.value)


def test_a_cache_over_the_static_shared_limit_is_refused():
    bad = replace(TINY, name="bad", kv_len=12_300)
    with pytest.raises(ContractViolation) as err:
        attention.emit(Mode.DEQUANT, bad)
    assert "kernel k0_attn" in str(err.value) and "parameter L" in str(err.value)


@pytest.mark.parametrize("kernel,dim,value", [("gk_attn", "L", 8), ("gk_attn_online", "threads", 512),
                                              ("gk_attn", "maxseq", 12_300), ("gk_fused_attn", "hd", 320),
                                              ("k0_attn", "L", 6)])
def test_launch_dims_the_kernels_cannot_take(kernel, dim, value):
    c = attention.emit(Mode.DEQUANT, TINY).contract(kernel)
    dims = c.dims_for(TINY)
    c.check(dims)
    with pytest.raises(ContractViolation) as err:
        c.check({**dims, dim: value})
    assert f"kernel {kernel}" in str(err.value)


# -- numerics against the seed -------------------------------------------------------------------------------
# gk_attn_online / gk_attn_part keep qreg/acc in registers (fully unrolled, guarded by hd/32) where the seed's
# runtime-bounded loops put them on the stack; the instruction counts then differ by the unrolling, not by
# any rounding, so for them the census compares which operation kinds occur.
_UNROLLED = {"gk_attn_online", "gk_attn_part"}


# Negative control compiled beside the seed's kernels: the fast __expf in the static softmax changes the census.
_MUTANT = ("k0_attn", "const float ev = expf(sc[j] - mx);", "const float ev = __expf(sc[j] - mx);")


@pytest.mark.parametrize("mode", attention.MODES, ids=lambda m: m.value)
def test_float_op_census_equals_the_seed(seed, mode):
    kit.sass_tools_or_skip()
    ks = attention.emit(mode, TINY)
    theirs_src = kit.seed_counterparts(seed, ks)
    if mode is Mode.DEQUANT:
        theirs_src += "\n" + kit.mutant(ks.code, *_MUTANT)
    ours, theirs = kit.float_op_census(ks.code), kit.float_op_census(theirs_src)
    for c in ks.contracts:
        if c.name in _UNROLLED:
            assert set(ours[c.name]) == set(theirs[c.name]), c.name
        else:
            assert ours[c.name] == theirs[c.name], (c.name, ours[c.name], theirs[c.name])
    if mode is Mode.DEQUANT:
        assert theirs["k0_attn_mutant"] != theirs["k0_attn"]


def test_smoke_compile_sm80():
    if not kit.find_nvcc():
        pytest.skip("no nvcc found (set NVCC or install the toolchain extra)")
    for mode in attention.MODES:
        assert kit.compile_cubin(attention.emit(mode, TINY).code).stat().st_size > 0


# -- the limits as one independent statement ------------------------------------------------------------------
@given(hd=st.integers(1, 20).map(lambda k: 16 * k), n_kv=st.integers(1, 8), group=st.integers(1, 4),
       extra=st.integers(0, 3), kv_len=st.sampled_from([1, 7, 300, 12_000, 12_001, 12_256, 12_257]))
def test_emit_succeeds_exactly_inside_the_documented_limits(hd, n_kv, group, extra, kv_len):
    """Dequant lane: hd % 32 == 0 and hd <= 128 (online/partials), n_head % n_kv == 0 (GQA), and the scores of
    gk_fused_attn (maxseq floats + red + qh) within 48 KiB, i.e. kv_len <= 12000."""
    n_head = n_kv * group + extra
    shape = replace(TINY, name="prop", head_dim=hd, n_kv=n_kv, n_head=n_head, kv_len=kv_len)
    valid = hd % 32 == 0 and hd <= 128 and n_head % n_kv == 0 and kv_len <= 12_000
    if valid:
        ks = attention.emit(Mode.DEQUANT, shape)
        assert kit.signature_problems(ks) == []
    else:
        with pytest.raises(ContractViolation):
            attention.emit(Mode.DEQUANT, shape)
