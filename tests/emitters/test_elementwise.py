"""The elementwise emitter: deterministic text, signatures equal to its contracts and to the seed's kernels,
chains/regions that round every product on its own where a sum follows, limits that fire, and the same
rounding/contraction as the seed (SASS floating-point-op census)."""
from __future__ import annotations

import pytest

from emitters import elementwise
from emitters.contract import ContractViolation
from cudasrc.signatures import kernel_signatures
from reference.shapes import SHAPE_SETS, TINY
from tests.emitters import kit
from tests.seed import seed_source

NAMES = ("k0_elem", "k1_elem", "k2_elem", "k3_fused", "k4_fused", "k5_fused", "k6_region", "k7_silu",
         "k8_transpose", "gk_add")


@pytest.fixture(scope="module")
def seed():
    return seed_source()


@pytest.mark.parametrize("shape", list(SHAPE_SETS))
def test_emit_is_deterministic_and_follows_its_contracts(shape):
    a, b = elementwise.emit(None, SHAPE_SETS[shape]), elementwise.emit(None, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts
    assert a.kernel_names == NAMES
    assert kit.signature_problems(a) == []
    kit.check_instances(a, SHAPE_SETS[shape])


def test_contract_signatures_equal_the_seed_kernels(seed):
    for c in elementwise.emit(None, TINY).contracts:
        text = kit.gen_kernel(seed, c.name) if c.name.startswith("gk_") else \
            kit.seed_forward_kernel(seed, c, c.dims_for(TINY))
        (sig,) = kernel_signatures(text)
        assert sig.ctypes == c.signature(), c.name
        assert [n for _, n in sig.params] == [p.name for p in c.params], c.name


def test_attrs_describe_the_chain_and_the_region():
    ks = elementwise.emit(None, TINY)
    assert ks.contract("k3_fused").attrs == {"ops": ["mul", "add"], "layout": "chain", "carry": "left"}
    region = ks.contract("k6_region")
    assert region.attrs["members"] == [["silu", "i0"], ["mul", "t0", "i1"], ["add", "t1", "i2"]]
    assert region.attrs["stores"] == [2, 0] and [p.name for p in region.params][3:5] == ["o0", "o1"]
    assert ks.contract("gk_add").param("x").role.value == "inout"
    geo = ks.contract("k8_transpose")
    d = geo.dims_for(TINY)
    assert geo.geometry(d)[0][0] == -(-TINY.n_head * TINY.head_dim // 256)


def test_products_before_a_sum_are_rounded_alone():
    code = elementwise.emit(None, TINY).code
    assert "float t = __fmul_rn(i0[idx], i1[idx]);\n    t = t + i2[idx];" in code       # mul -> add
    assert "float t = __fmul_rn(i0[idx], i1[idx]);\n    t = t - i2[idx];" in code       # mul -> sub
    assert "t = t * i2[idx];" in code                                                    # last step: plain
    assert "const float t1 = __fmul_rn(t0, i1[idx]);" in code                            # every region product


def test_bad_chains_and_regions_are_refused():
    with pytest.raises(ValueError, match="ops"):
        elementwise._fused(0, ["mul", "pow"], "x", "d")
    with pytest.raises(ValueError, match="members"):
        elementwise._region(0, [("add", "i0", "t0")], 1, [0], "x", "d")
    with pytest.raises(ValueError, match="stores"):
        elementwise._region(0, [("silu", "i0")], 1, [1], "x", "d")
    c = elementwise.emit(None, TINY).contract("k0_elem")
    with pytest.raises(ContractViolation, match="parameter threads"):
        c.check({**c.dims_for(TINY), "threads": 128})
    with pytest.raises(ContractViolation, match="parameter N"):
        c.check({**c.dims_for(TINY), "N": 0})


def test_float_op_census_equals_the_seed(seed):
    """k5_fused (mul then sub) is the one known difference: the seed's chain leaves that product to FMA
    contraction (see docs/KERNELS.md, section 2); every other kernel must match."""
    kit.sass_tools_or_skip()
    ks = elementwise.emit(None, TINY)
    # Negative control compiled beside the seed's kernels: a chain product left to contraction becomes an FMA.
    theirs_src = kit.seed_counterparts(seed, ks) + "\n" + kit.mutant(
        ks.code, "k3_fused", "float t = __fmul_rn(i0[idx], i1[idx]);", "float t = i0[idx] * i1[idx];")
    ours, theirs = kit.float_op_census(ks.code), kit.float_op_census(theirs_src)
    for c in ks.contracts:
        if c.name == "k5_fused":
            assert ours[c.name]["FFMA"] == 0 and theirs[c.name]["FFMA"] == 1
        else:
            assert ours[c.name] == theirs[c.name], (c.name, ours[c.name], theirs[c.name])
    assert theirs["k3_fused_mutant"]["FFMA"] == 1 and ours["k3_fused"]["FFMA"] == 0


def test_smoke_compile_sm80():
    if not kit.find_nvcc():
        pytest.skip("no nvcc found (set NVCC or install the toolchain extra)")
    assert kit.compile_cubin(elementwise.emit(None, TINY).code).stat().st_size > 0
