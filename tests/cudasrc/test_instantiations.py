"""Instantiations of template kernels that host code makes implicitly, made explicit so that they can be launched
by name without editing the source."""
from __future__ import annotations

import pytest

from cudasrc.instantiations import instantiated, split_instantiation
from cudasrc.signatures import kernel_signatures, launch_name

SOURCE = """#include <cstdint>
struct cfg { int scale; };
namespace moe { namespace {
template <int N, bool B, typename T = float, typename P = const T*>
__launch_bounds__(4 * 32, 1) __global__ void route(P x, T* __restrict__ y, float unused[N], const cfg c,
                                                   int n = 4) { }
} }
template <typename... Ts> __global__ void pack(Ts... xs) { }
template <typename... Ts, typename U> __global__ void early(U u, Ts... xs) { }
template <typename T> __global__ void made(T* y) { }
template __global__ void made<int>(int*);
void host() { moe::route<8, true><<<1, 32>>>(0, 0, 0, cfg{1}); }
"""


def test_the_instantiation_is_appended_and_launchable_by_its_name():
    code = instantiated(SOURCE, ["route<8, true>", "route<16,false,double>"])
    assert code.startswith(SOURCE)                              # the source's lines keep their numbers
    assert code[len(SOURCE):] == (
        "namespace moe { namespace  { template __global__ void route<8, true>(const float* x, float* __restrict__ y, "
        "float unused[8], const cfg c, int n); } }\n"
        "namespace moe { namespace  { template __global__ void route<16, false, double>(const double* x, "
        "double* __restrict__ y, float unused[16], const cfg c, int n); } }\n")
    sigs = {s.name: s for s in kernel_signatures(code)}
    assert sigs["route<8,true>"].params[:2] == (("const float*", "x"), ("float*", "y"))
    assert sigs["route<16,false,double>"].params[0] == ("const double*", "x")
    assert set(sigs) == {"made<int>", "route<8,true>", "route<16,false,double>"}


FOLD = """
__device__ float add(const float a, const float b) { return a + b; }
template <float (*op)(const float, const float), typename T, typename... ptrs>
__global__ void fused(const T* a, T* d, int n, ptrs... more) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float r = a[i];
    if constexpr (sizeof...(ptrs) > 0) { r = (..., (r = op(r, more[i]))); }
    d[i] = r;
}
"""


def test_a_trailing_parameter_pack_takes_the_arguments_left_and_expands_its_parameter():
    # llama.cpp's k_bin_bcast fuses any number of addends through `typename... src1_ptrs`; a function pointer's
    # name (`op`) is the template parameter's, not the `float` of its type
    code = instantiated(FOLD, ["fused<add, float>", "fused<add, float, const float *, const float *>"])
    assert code[len(FOLD):] == (
        "template __global__ void fused<add, float>(const float* a, float* d, int n);\n"
        "template __global__ void fused<add, float, const float *, const float *>(const float* a, float* d, int n, "
        "const float * more0, const float * more1);\n")
    sigs = {s.name: s for s in kernel_signatures(code)}
    assert sigs["fused<add,float,const float*,const float*>"].params[3:] == (("const float*", "more0"),
                                                                          ("const float*", "more1"))
    with pytest.raises(ValueError, match=r"1 template argument\(s\), but fused \(line 4\) takes 2 and then any "
                                         r"number for its pack"):
        instantiated(FOLD, ["fused<add>"])


def test_a_pack_instantiation_runs_with_one_argument_per_element(emu):
    import numpy as np
    name = "fused<add, float, const float *, const float *>"
    module = emu.load(instantiated(FOLD, [name]))
    a, b, c = (np.arange(64, dtype=np.float32) * k for k in (1, 2, 3))
    d = np.zeros(64, np.float32)
    module.launch(name, (2,), (32,), 0, [a, d, np.int32(64), b, c], outputs=(1,))      # spaced as written
    assert np.array_equal(d, a + b + c)


def test_names_that_need_nothing_leave_the_source_alone():
    assert instantiated(SOURCE, ["made<int>", "made< int >", "plain_kernel"]) == SOURCE


@pytest.mark.parametrize("name, message", [
    ("rout<8,true>", r"'rout<8,true>': neither the source nor its headers define a template kernel 'rout' "
                     r"\(their template kernels: route, pack, early, made\)"),
    ("route<8>", r"1 template argument\(s\), but route \(line 5\) takes 2 to 4: template <int N, bool B, "
                 r"typename T = float, typename P = const T\*>"),
    ("route<8,true,float,const float*,int>", "5 template argument"),
    ("early<int,float>", "a template parameter pack before its last template parameter"),
])
def test_a_name_the_source_cannot_instantiate_is_named_with_the_rule(name, message):
    with pytest.raises(ValueError, match=message):
        instantiated(SOURCE, [name])


def test_names_are_read_and_spelled_as_qconform_spells_them():
    assert split_instantiation("moe::route< 8, Pair<int, 2> >") == ("route", ("8", "Pair<int, 2>"))
    assert split_instantiation("route") is None
    assert launch_name("route<8, unsigned  int >") == "route<8,unsigned int>"      # one space between two words


def test_a_template_kernel_of_a_header_is_instantiated_after_the_source():
    header = "namespace lib {\ntemplate <typename T>\n__global__ void scale(const T* x, T* y, T a) { }\n}\n"
    source = '#include "lib.cuh"\nvoid host(float* x, float* y) { lib::scale<float><<<1, 32>>>(x, y, 2.f); }\n'
    code = instantiated(source, ["scale<float>"], headers={"lib.cuh": header})
    assert code == source + "namespace lib { template __global__ void scale<float>(const float* x, float* y, float a); }\n"
    sig, = kernel_signatures(code, context=header)
    assert (sig.name, sig.params) == ("scale<float>", (("const float*", "x"), ("float*", "y"), ("float", "a")))
    with pytest.raises(ValueError, match=r"but scale \(lib.cuh, line 3\) takes 1"):
        instantiated(source, ["scale<float,int>"], headers={"lib.cuh": header})


def test_a_header_whose_conditions_cannot_be_evaluated_is_read_as_written():
    """Another vendor's header (ggml's `vendors/hip.h`, `#if __has_builtin(...)`) is among the files read for
    template kernels, though the build never includes it: its conditions are read as written, not a stop."""
    hip = "#if __has_builtin(__builtin_amdgcn_ds_bpermute)\n#define FAST 1\n#endif\n"
    header = ("template <int N>\n__launch_bounds__(warps(N, table_id()) * 32, 1)\n"
              "static __global__ void rows(const float* x, float* y) { }\n")
    code = instantiated("", ["rows<4>"], headers={"vendors/hip.h": hip, "rows.cuh": header})
    assert code.endswith("template __global__ void rows<4>(const float* x, float* y);\n")


def test_a_template_head_with_preprocessor_lines_before_the_kernel_is_a_template():
    """ggml's 2024 `mul_mat_vec_q`: `template <...>`, then `#if !defined(GGML_USE_HIPBLAS)`, `__launch_bounds__(...)`
    and `#endif` before `static __global__ void`. It is a template kernel (launchable only instantiated), not a
    plain kernel whose trampoline cannot name it."""
    from cudasrc.signatures import template_kernels
    src = ("template <int ncols_y, typename block_t>\n#if !defined(GGML_USE_HIPBLAS)\n"
           "__launch_bounds__((ncols_y <= 4 ? 4 : 2)*32, 1)\n#endif // !defined(GGML_USE_HIPBLAS)\n"
           "static __global__ void mul_mat_vec_q(const void * vx, float * dst, const int n) { }\n"
           "__global__ void plain(float * y) { }\n")
    assert template_kernels(src) == ["mul_mat_vec_q"]
    assert [k.name for k in kernel_signatures(src)] == ["plain"]
    code = instantiated(src, ["mul_mat_vec_q<1, float>"])
    assert [k.name for k in kernel_signatures(code)] == ["plain", "mul_mat_vec_q<1,float>"]
    # mmq.cuh (2025): nested #ifs, more than 400 characters from the head to the kernel; and from a header, the
    # instantiation names the template's parameters
    long_head = ("template <int mmq_x, int nwarps, bool need_check>\n"
                 "#if defined(GGML_USE_HIP) && defined(__HIP_PLATFORM_AMD__)\n"
                 "#if defined(RDNA4) || defined(RDNA3) || defined(RDNA2) || defined(CDNA) || defined(GCN)\n"
                 "    __launch_bounds__(WARP_SIZE*nwarps, 2)\n"
                 "#endif // defined(RDNA4) || defined(RDNA3) || defined(RDNA2) || defined(CDNA) || defined(GCN)\n"
                 "#else\n#if __CUDA_ARCH__ >= GGML_CUDA_CC_VOLTA\n    __launch_bounds__(WARP_SIZE*nwarps, 1)\n"
                 "#else\n    __launch_bounds__(WARP_SIZE*nwarps, 2)\n#endif // __CUDA_ARCH__ >= GGML_CUDA_CC_VOLTA\n"
                 "#endif // defined(GGML_USE_HIP) && defined(__HIP_PLATFORM_AMD__)\n"
                 "static __global__ void mul_mat_q(const char * __restrict__ x, float * __restrict__ dst) { }\n")
    assert len(long_head) > 600 and template_kernels(long_head) == ["mul_mat_q"]
    code = instantiated("#include \"mmq.cuh\"\n", ["mul_mat_q<16, 8, false>"], {}, {"mmq.cuh": long_head})
    (k,) = kernel_signatures(code, context=long_head)
    assert k.params == (("const char*", "x"), ("float*", "dst"))
