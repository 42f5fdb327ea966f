"""A kernel's parameter types as the build reads them (cudasrc.signatures.kernel_signatures): the dtype of every
argument racescan and the backends marshal comes from them."""
from __future__ import annotations

import pytest

from cudasrc.signatures import kernel_signatures, type_macros

KERNEL = "__global__ void k(const dfloat* x, dlong n, floatX* y) { }\n"
COMMON = ("#if defined(ENABLE_FP32)\ntypedef float floatX;\n#elif defined(ENABLE_FP16)\ntypedef half floatX;\n"
          "#else\ntypedef __nv_bfloat16 floatX;\n#endif\n")


def _types(code: str, defines=None, context: str = "") -> list[str]:
    return [t for t, _ in kernel_signatures(code, defines=defines, context=context)[0].params]


def test_a_build_macro_that_names_a_type_is_the_parameters_type():
    """HeCBench's adv builds with `-Ddfloat=double -Ddlong=int`: its kernel takes doubles. Before, the reader kept
    `dfloat`, and racescan refused every array argument of it ("no numpy dtype is known")."""
    assert _types(KERNEL, {"dfloat": "double", "dlong": "int"}, COMMON)[:2] == ["const double*", "int"]
    assert _types(KERNEL, {}, COMMON)[:2] == ["const dfloat*", "dlong"]             # without them: as written
    assert _types("#define real float\n__global__ void k(real* x) { }\n") == ["float*"]   # the source's own


def test_a_typedef_counts_only_in_the_branch_the_build_keeps():
    """llm.c's floatX is bf16 by default and float under `-D ENABLE_FP32`: each typedef sits in its own branch."""
    assert _types(KERNEL, {}, COMMON)[2] == "__nv_bfloat16*"
    assert _types(KERNEL, {"ENABLE_FP32": "1"}, COMMON)[2] == "float*"
    assert _types(KERNEL, {"ENABLE_FP16": "1"}, COMMON)[2] == "half*"


def test_only_macros_whose_text_may_be_a_type_replace_one():
    assert type_macros({"dfloat": "double", "T": "unsigned long long", "P": "float *", "N": "256", "ON": "1",
                        "E": "1e-3f", "F": "a + b", "EMPTY": ""}) == {"dfloat": "double", "T": "unsigned long long",
                                                                      "P": "float *", "EMPTY": ""}


def test_a_kernel_marked_by_a_macro_is_found_and_empty_macros_leave_its_types():
    """OpenMM's common kernels: `KERNEL void f(GLOBAL const real4* RESTRICT posq)` with `#define KERNEL extern "C"
    __global__`, `#define GLOBAL` and `#define RESTRICT __restrict__` in its platform's common.cu. A marker through
    another marker counts; a macro that stands for `__device__` marks no kernel."""
    code = ('#define EXTERN_C extern "C"\n#define KERNEL EXTERN_C __global__\n#define GLOBAL\n'
            "#define RESTRICT __restrict__\n#define DEVICE __device__\ntypedef float4 real4;\n"
            "DEVICE float helper(GLOBAL const float* x) { return x[0]; }\n"
            "KERNEL void f(int n, GLOBAL const real4* RESTRICT posq) { }\n")
    (sig,) = kernel_signatures(code)
    assert (sig.name, sig.line, [t for t, _ in sig.params]) == ("f", 8, ["int", "const float4*"])
    assert kernel_signatures(code.replace("KERNEL void", "DEVICE void")) == []


def test_static_may_follow_global():
    """Kaldi writes 133 of its 134 kernels so: `template<typename Real> __global__ static void _softmax_reduce`; the
    reader saw none of them ("their template kernels: _diff_group_pnorm", the one written without `static`)."""
    from cudasrc.signatures import template_kernels
    code = ("template<typename Real>\n__global__\nstatic void _scale(Real* y, Real a) { y[0] *= a; }\n"
            "__global__ static __launch_bounds__(64) void plain(float* y) { }\n")
    assert template_kernels(code) == ["_scale"]
    assert [s.name for s in kernel_signatures(code)] == ["plain"]
    assert kernel_signatures("static void host(float* y) { }\n") == []         # no __global__, no kernel


def test_an_alias_declaration_names_a_type_as_a_typedef_does():
    """cuFHE writes `using Torus = int32_t;`: its kernels take `Torus*`, which racescan refused ("no numpy dtype is
    known for the pointee type 'Torus'"). An alias template, whose name needs arguments, and a using-directive are
    no alias of a plain name."""
    code = ("namespace fhe {\nusing Torus = int32_t;\nusing namespace std;\ntemplate <typename T> using Vec = T;\n"
            "__global__ void k(Torus* out, const Torus* in, Vec<float> s) { }\n}\n")
    assert _types(code) == ["int32_t*", "const int32_t*", "Vec<float>"]


def test_a_long_macro_that_names_no_type_is_refused_at_once():
    """mshadow's headers define long macros of words that end in an expression; the type reader tried every split of
    every word of them before it failed (40 s for one program). Each word is now read whole: the answers are those
    of before (types kept, numbers and expressions not), and the long one is refused in one pass."""
    from cudasrc.signatures import type_macros
    long_one = "MSHADOW_XINLINE " * 40 + "operator()(a)"
    got = type_macros({"real": "float", "dfloat": " unsigned long long ", "P": "const Plan<T, U>*", "EMPTY": "",
                       "N": "4", "EXPR": "a + b", "LONG": long_one, "UNDEF": None})
    assert got == {"real": "float", "dfloat": "unsigned long long", "P": "const Plan<T, U>*", "EMPTY": ""}


def test_an_instantiation_whose_template_arguments_are_deduced_is_named_with_them():
    """bitsandbytes instantiates `template __global__ void kEstimateQuantiles(float *A, ...);`: the arguments are
    deduced from the parameters, and the kernel is launched as `kEstimateQuantiles<float>` (a host launch names it
    so). A parameter type that fits no instance of the template's is no instantiation qconform can name."""
    from cudasrc.signatures import kernel_signatures
    code = ("template <typename T, typename I> __global__ void k(T* __restrict__ const a, const T v, I* idx, int n) {}\n"
            "template __global__ void k(float* __restrict__ const a, const float v, int* idx, int n);\n"
            "template __global__ void k(unsigned short* __restrict__ const a, const unsigned short v, long* idx, int n);\n"
            "template __global__ void k(float* __restrict__ const a, const double v, int* idx, int n);\n")
    sigs = kernel_signatures(code)
    assert [s.name for s in sigs] == ["k<float,int>", "k<unsigned short,long>"]
    assert sigs[0].params[1] == ("const float", "v") and sigs[1].line == 3


def test_void_may_precede_global():
    """GPUMD writes `static void __global__ gpu_scale_velocity`: nvcc accepts the keyword after the return type."""
    sigs = kernel_signatures("static void __global__ k\n(int n, float* y) { }\nvoid  __global__ j(int* a) { }\n")
    assert [(k.name, k.line, k.ctypes) for k in sigs] == [("k", 1, ("int", "float*")), ("j", 3, ("int*",))]


def test_overloads_are_named_by_their_parameter_types_and_chosen_by_their_arity():
    from cudasrc.signatures import resolve_overload
    code = ("typedef double real;\n__global__ void f(int n, real* x) { }\n"
            "__global__ void f(int n, int m, real* x) { }\n__global__ void g(int* a) { }\n"
            "__global__ void f2(int a, float b) { }\n__global__ void f2(float a, int b) { }\n")
    sigs = {k.name: k for k in kernel_signatures(code)}
    assert list(sigs) == ["f(int,double*)", "f(int,int,double*)", "g", "f2(int,float)", "f2(float,int)"]
    assert sigs["f(int,double*)"].overloaded and not sigs["g"].overloaded
    assert sigs["f(int,double*)"].address == "static_cast<void (*)(int, double*)>(&f)" and sigs["g"].address == "&g"
    assert resolve_overload(sigs, "f", 3).name == "f(int,int,double*)"
    assert resolve_overload(sigs, "f(int,double*)", 3).name == "f(int,double*)"     # named: no choice made
    assert resolve_overload(sigs, "g", 1) is sigs["g"] and resolve_overload(sigs, "h", 1) is None
    with pytest.raises(ValueError, match=r"kernel 'f' is overloaded \(f\(int,double\*\), f\(int,int,double\*\)\), "
                                         r"and none takes 4 argument\(s\): name the one to launch "
                                         r".* `f\(int,double\*\)`"):
        resolve_overload(sigs, "f", 4)
    with pytest.raises(ValueError, match=r"'f2' is overloaded .* and 2 of them take 2 argument\(s\)"):
        resolve_overload(sigs, "f2", 2)
