"""The norm emitter: deterministic text, signatures equal to its contracts and to the seed's kernels of the same
names, contracts that evaluate at every shape set, limits that fire, and the same rounding/contraction as the
seed (SASS floating-point-op census)."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from emitters import norm
from emitters.contract import ContractViolation
from cudasrc.signatures import kernel_signatures
from reference.modes import Mode
from reference.shapes import SHAPE_SETS, TINY
from tests.seed import seed_source

from tests.emitters import kit

CASES = [(m, s) for m in norm.MODES for s in SHAPE_SETS]


@pytest.fixture(scope="module")
def seed():
    return seed_source()


@pytest.mark.parametrize("mode,shape", CASES, ids=[f"{m.value}-{s}" for m, s in CASES])
def test_emit_is_deterministic_and_follows_its_contracts(mode, shape):
    a, b = norm.emit(mode, SHAPE_SETS[shape]), norm.emit(mode, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts
    assert a.family == "norm" and a.mode is mode and a.shape == shape
    assert kit.signature_problems(a) == []
    kit.check_instances(a, SHAPE_SETS[shape])


def test_kernel_sets_per_mode():
    assert norm.emit(Mode.DEQUANT, TINY).kernel_names == (
        "k0_row", "k1_row", "k2_row", "k3_row", "k4_row", "k5_add_row", "k7_add_row", "gk_rmsnorm", "gk_add_rmsnorm")
    assert norm.emit(Mode.INT8_ACT, TINY).kernel_names == (
        "k0_row", "k1_row", "k2_add_row", "gk_add_rmsnorm_q8", "gk_rmsnorm_q8", "gk_add_rmsnorm_q8a")
    with pytest.raises(ValueError, match="mode"):
        norm.emit(Mode.TWO_PASS_INT8, TINY)


def test_shape_constants_are_baked_per_shape_set():
    for name, shape in SHAPE_SETS.items():
        ks = norm.emit(Mode.DEQUANT, shape)
        assert f"i < {shape.d}; i += blockDim.x" in ks.code, name
        assert f"i < {shape.n_expert}; i += blockDim.x" in ks.code, name   # the softmax row (router width)
        assert ks.emitter_params["baked"]["k0_row"] == {"cols": shape.d, "eps": shape.rms_eps}


@pytest.mark.parametrize("mode", norm.MODES, ids=lambda m: m.value)
def test_contract_signatures_equal_the_seed_kernels(seed, mode):
    for c in norm.emit(mode, TINY).contracts:
        text = kit.gen_kernel(seed, c.name) if c.name.startswith("gk_") else \
            kit.seed_forward_kernel(seed, c, c.dims_for(TINY))
        (sig,) = kernel_signatures(text)
        assert sig.name == c.name
        assert sig.ctypes == c.signature(), c.name
        assert [n for _, n in sig.params] == [p.name for p in c.params], c.name


def test_attrs_use_the_shared_vocabulary():
    for mode in norm.MODES:
        for c in norm.emit(mode, TINY).contracts:
            assert c.op in ("rms_norm", "softmax_rows", "layer_norm"), c.name
            if c.op == "rms_norm":
                assert c.attrs["residual"] in ("none", "input", "add_inplace", "add_out")
                assert c.attrs["accumulate"] == ("f32" if c.name.startswith("gk_") else "f64")
                assert c.attrs["quant"] in (None, "floor", "unit")
                assert (c.attrs["quant"] is not None) == (mode is Mode.INT8_ACT)
    q8a = norm.emit(Mode.INT8_ACT, TINY).contract("gk_add_rmsnorm_q8a")
    assert q8a.attrs["writes_norm"] is False and q8a.param("x").role.value == "inout"


# -- limits (negative controls) ------------------------------------------------------------------------------
def test_a_row_length_off_the_32_grid_breaks_the_quant_epilogue():
    bad = replace(TINY, name="bad", d=100)
    norm.emit(Mode.DEQUANT, bad)                        # no quant: any length is fine
    with pytest.raises(ContractViolation) as err:
        norm.emit(Mode.INT8_ACT, bad)
    assert "kernel k0_row" in str(err.value) and "parameter cols" in str(err.value)


@pytest.mark.parametrize("kernel,threads", [("gk_rmsnorm", 512), ("gk_rmsnorm", 192), ("gk_rmsnorm_q8", 128),
                                            ("k0_row", 1024)])
def test_launch_blocks_the_reductions_cannot_take(kernel, threads):
    mode = Mode.INT8_ACT if kernel == "gk_rmsnorm_q8" else Mode.DEQUANT
    c = norm.emit(mode, TINY).contract(kernel)
    dims = c.dims_for(TINY)
    c.check(dims)
    with pytest.raises(ContractViolation) as err:
        c.check({**dims, "threads": threads})
    assert f"kernel {kernel}" in str(err.value) and "parameter threads" in str(err.value)


def test_a_baked_row_kernel_refuses_another_row_length():
    c = norm.emit(Mode.DEQUANT, TINY).contract("k0_row")
    with pytest.raises(ContractViolation, match="parameter cols"):
        c.check({**c.dims_for(TINY), "cols": 2 * TINY.d})


# -- numerics against the seed -------------------------------------------------------------------------------
# Negative control compiled beside the seed's kernels: the weight product taken in double must change the census.
_MUTANT = ("k0_row", "yr[i] = (float)((double)xr[i] * inv) * w[i];", "yr[i] = (float)((double)xr[i] * inv * w[i]);")


@pytest.mark.parametrize("mode", norm.MODES, ids=lambda m: m.value)
def test_float_op_census_equals_the_seed(seed, mode):
    kit.sass_tools_or_skip()
    ks = norm.emit(mode, TINY)
    theirs_src = kit.seed_counterparts(seed, ks)
    if mode is Mode.DEQUANT:
        theirs_src += "\n" + kit.mutant(ks.code, *_MUTANT)
    ours, theirs = kit.float_op_census(ks.code), kit.float_op_census(theirs_src)
    for c in ks.contracts:
        assert ours[c.name] == theirs[c.name], (c.name, ours[c.name], theirs[c.name])
    if mode is Mode.DEQUANT:
        assert theirs["k0_row_mutant"] != theirs["k0_row"]


def test_smoke_compile_sm80():
    if not kit.find_nvcc():
        pytest.skip("no nvcc found (set NVCC or install the toolchain extra)")
    for mode in norm.MODES:
        assert kit.compile_cubin(norm.emit(mode, TINY).code).stat().st_size > 0


# -- the limits as one independent statement ------------------------------------------------------------------
@given(d=st.integers(1, 4096), n_expert=st.integers(1, 512))
def test_emit_succeeds_exactly_inside_the_documented_limits(d, n_expert):
    """Any row length works without quant; the quant epilogues need d % 32 == 0."""
    shape = replace(TINY, name="prop", d=d, n_expert=n_expert)
    assert kit.signature_problems(norm.emit(Mode.DEQUANT, shape)) == []
    if d % 32 == 0:
        assert kit.signature_problems(norm.emit(Mode.INT8_ACT, shape)) == []
    else:
        with pytest.raises(ContractViolation, match="parameter cols"):
            norm.emit(Mode.INT8_ACT, shape)
