import pytest

from cudasrc.types import normalize_ctype
from emitters.contract import ContractViolation, KernelContract, Param, Precondition, Role
from emitters.expr import ExprError, evaluate, names_in
from cudasrc.signatures import kernel_signatures
from reference.modes import Mode
from reference.shapes import TAILS, TINY, get_shape, parse_shape_list


def test_expr_arithmetic_and_errors():
    dims = {"N": 1000, "K": 672}
    assert evaluate("(N+7)//8", dims) == 125
    assert evaluate("K % 512 != 0 and K % 32 == 0", dims) is True
    assert evaluate("ceil_div(N, 256) * 256", dims) == 1024
    assert names_in("(N+7)//8 + min(K, 3)") == {"N", "K"}
    with pytest.raises(ExprError, match="needs dim 'M'"):
        evaluate("M*K", dims)
    with pytest.raises(ExprError, match="unsupported"):
        evaluate("__import__('os')", dims)


def _gemv() -> KernelContract:
    return KernelContract(
        name="k0_q8dp4a", family="matmul", op="q8_gemv", mode=Mode.INT8_ACT,
        params=(Param("aq", "const signed char *", Role.INPUT, count="M*K"),
                Param("y", "float*", Role.OUTPUT, count="M*N"),
                Param("K", "int", Role.SCALAR, value="K")),
        grid=("(N+7)//8", "1", "1"), block=("256", "1", "1"),
        preconditions=(Precondition("K % 32 == 0", "K", "Q8_0 blocks are 32 wide"),),
        name_pattern=r"k\d+_q8dp4a",
        instances=(("lm_head", {"M": "1", "N": "vocab", "K": "d"}),),
    )


def test_contract_geometry_counts_and_matching():
    c = _gemv()
    dims = c.dims_for(TINY)
    assert dims == {"M": 1, "N": 1024, "K": 512}
    assert c.geometry(dims) == ((128, 1, 1), (256, 1, 1), 0)
    assert c.counts(dims) == {"aq": 512, "y": 1024}
    assert c.signature() == ("const signed char*", "float*", "int")
    assert c.matches_name("k7_q8dp4a") and not c.matches_name("k7_q8gemv")
    c.check(dims)


def test_contract_violation_names_kernel_param_and_rule():
    with pytest.raises(ContractViolation, match=r"kernel k0_q8dp4a: parameter K breaks 'K % 32 == 0'"):
        _gemv().check({"M": 1, "N": 8, "K": 100})


def test_signature_reader_normalizes_types():
    code = "/* c */ __global__ void f(const float * __restrict__ a, signed  char* q, int n) {}\n" \
           "__global__ void __launch_bounds__(256) g(const __half* s){}"
    sigs = kernel_signatures(code)
    assert [s.name for s in sigs] == ["f", "g"]
    assert sigs[0].ctypes == ("const float*", "signed char*", "int")
    assert sigs[1].ctypes == ("const __half*",) and normalize_ctype("const __half *") == "const __half*"


def test_a_default_argument_is_not_part_of_the_parameter():
    sig, = kernel_signatures("__global__ void f(int* d, int* sums = NULL, float x=1.0f, bool b = 1 <= 2) {}")
    assert sig.params == (("int*", "d"), ("int*", "sums"), ("float", "x"), ("bool", "b"))


def test_modes_and_shapes_parse():
    assert Mode.parse("INT8_ACT") is Mode.INT8_ACT and Mode.parse("twopass") is Mode.TWO_PASS_INT8
    with pytest.raises(ValueError, match="mode: unknown mode"):
        Mode.parse("fp8")
    assert [s.name for s in parse_shape_list("tiny, tails")] == ["tiny", "tails"]
    with pytest.raises(ValueError, match="shapes: unknown shape set"):
        get_shape("huge")
    # tails exists to exercise every tail loop: K not a multiple of 128 or 512.
    assert TAILS.d % 128 and TAILS.d % 512 and TAILS.dff % 128 and TAILS.d % 32 == 0
