"""Reading kernels' symbols out of a real cubin (nvcc's), and the GPU backend's lookup of an instantiation."""
from __future__ import annotations

import pytest

from cudasrc.instantiations import instantiated
from harness.toolchain.compile import cubin_of
from harness.toolchain.cubin import demangle, entry_symbols, kernel_symbol

SOURCE = """#include <cstdint>
struct cfg { int a; bool b; };
namespace moe {
template <int N, bool B, typename T = float>
__launch_bounds__(128) __global__ void route(const T* x, T* y, cfg c) { if (threadIdx.x < N) y[threadIdx.x] = x[0]; }
__device__ __noinline__ float helper(float v) { return v * 3; }
}
template <typename T> __global__ void fill(T* y) { y[threadIdx.x] = moe::helper(1.f); }
extern "C" __global__ void plain(float* y) { y[0] = 1; }
void host(float* x, float* y, cfg c) { moe::route<4, true><<<1, 32>>>(x, y, c); }
"""


@pytest.fixture(scope="module")
def cubin(toolchain):
    code = instantiated(SOURCE, ["route<8, false>", "route<16,true,double>", "fill<int32_t>"])
    data, log = cubin_of(code, toolchain.nvcc, ["-arch", "sm_90"])
    assert data is not None, log
    return data


def test_entry_symbols_are_the_kernels_and_not_device_functions(cubin):
    names = sorted(demangle(s) for s in entry_symbols(cubin))
    assert names == ["fill<int>(int*)", "moe::route<16, true, double>(double const*, double*, cfg)",
                     "moe::route<4, true, float>(float const*, float*, cfg)",
                     "moe::route<8, false, float>(float const*, float*, cfg)", "plain"]


def test_kernel_symbol_finds_each_instantiation_by_qconforms_spelling(cubin):
    symbol, _ = kernel_symbol(cubin, "route<8,false,float>", "moe::")
    assert symbol == "_ZN3moe5routeILi8ELb0EfEEvPKT1_PS1_3cfg"
    assert kernel_symbol(cubin, "route<16,true,double>", "moe::")[0] != symbol
    assert kernel_symbol(cubin, "plain")[0] == "plain"          # C linkage: the symbol is the name


def test_defaulted_arguments_and_other_spellings(cubin):
    # `route<8,false>` is `route<8, false, float>` to the demangler
    assert kernel_symbol(cubin, "route<8,false>", "moe::")[0] == kernel_symbol(cubin, "route<8,false,float>",
                                                                             "moe::")[0]
    # the one instantiation of `fill` is found whatever the typedef
    assert demangle(kernel_symbol(cubin, "fill<int32_t>")[0]) == "fill<int>(int*)"
    # of `route`'s three, none is guessed
    symbol, others = kernel_symbol(cubin, "route<32,true>", "moe::")
    assert symbol is None and len(others) == 3 and "moe::route<8, false, float>" in others


def test_a_plain_kernel_with_cpp_linkage_is_found_by_its_demangled_name(toolchain, tmp_path):
    # a header's kernel gets no `extern "C"` (only the source's do): its symbol is mangled, static or not
    code = ("static __global__ void halve(float* y) { y[threadIdx.x] *= 0.5f; }\n"
            "namespace q { __global__ void twice(float* y) { y[threadIdx.x] *= 2; } }\n"
            'extern "C" __global__ void plain(float* y) { y[0] = 1; }\n')
    data, log = cubin_of(code, toolchain.nvcc, ["-arch", "sm_90"])
    assert data is not None, log
    assert demangle(kernel_symbol(data, "halve")[0]) == "halve(float*)"
    assert demangle(kernel_symbol(data, "twice", "q::")[0]) == "q::twice(float*)"
    assert kernel_symbol(data, "twice")[0] is None and kernel_symbol(data, "absent")[0] is None


def test_not_a_cubin():
    with pytest.raises(ValueError, match="not an ELF64"):
        entry_symbols(b"__global__ void k() {}")
    assert demangle("plain") == "plain"


def test_overloads_and_static_kernels_are_found_by_their_cpp_symbols(toolchain):
    """GPUMD's overloaded and static kernels keep C++ linkage (gpu.prepare_source): each is found in nvcc's cubin by
    its name and, for an overload, its parameter types as the signature reader normalizes them."""
    from harness.backends.gpu import prepare_source
    from cudasrc.signatures import kernel_signatures
    code = ("typedef double real;\nstatic void __global__ scale(int n, real* y) { y[0] = n; }\n"
            "static __global__ void scale(int n, const real* __restrict__ x, real* y) { y[0] = x[n]; }\n"
            "__global__ static void once(int* a) { a[0] = 1; }\n")
    data, log = cubin_of(prepare_source(code), toolchain.nvcc, ["-arch", "sm_90"])
    assert data is not None, log
    sigs = {k.name: k for k in kernel_signatures(code)}
    assert list(sigs) == ["scale(int,double*)", "scale(int,const double*,double*)", "once"]
    found = {name: kernel_symbol(data, k.spelling or k.name, "", k.ctypes if k.overloaded else None)[0]
             for name, k in sigs.items()}
    assert {name: demangle(s) for name, s in found.items()} == {
        "scale(int,double*)": "scale(int, double*)", "scale(int,const double*,double*)":
            "scale(int, double const*, double*)", "once": "once(int*)"}
    assert kernel_symbol(data, "scale", "", ("int", "float*"))[0] is None        # no overload of those types
