"""A whole CUDA program loads on emu as its device code (its host functions dropped, as a GPU build leaves them
on the host), and the faults a GPU's own checkers find in such programs are found: a read of an output before it
is written (the values depend on the poison), and an access at an address its type does not allow (a GPU stops
with cudaErrorMisalignedAddress; an x86 CPU would go on)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends import KernelCrash, UninitializedRead

PROGRAM = r"""#include <cstdio>
#include <cassert>
#define CHECK(call) assert((call) == cudaSuccess)
static constexpr int N = 64;

__global__ void add_index(int* v) {
  int t = threadIdx.x + blockDim.x * blockIdx.x;
  v[t] += t;
}

__global__ void word_at(const char* bytes, int offset, float* y) {
  y[threadIdx.x] = *(const float*)(bytes + offset + 4 * threadIdx.x);
}

__global__ void vec_sums(const float* x, int offset, float* y) {
  float4 v = reinterpret_cast<const float4*>(x + offset)[threadIdx.x];
  y[threadIdx.x] = v.x + v.y + v.z + v.w;
}

__global__ void first_of_vec(const float* x, int offset, float* y) {
  y[threadIdx.x] = reinterpret_cast<const float4*>(x + offset + 4 * threadIdx.x)->x;
}

__device__ int word;
__global__ void odd_store(int* y) {
  *(int*)((char*)&word + 1) = 42;
  y[0] = 1;
}

struct __attribute__((packed)) Record { char tag; int value; };
__global__ void packed_values(const Record* r, int* y) { y[threadIdx.x] = r[threadIdx.x].value; }

int main() {
  int* v = nullptr;
  CHECK(cudaMalloc(&v, N * sizeof(int)));
  add_index<<<2, N / 2>>>(v);
  CHECK(cudaDeviceSynchronize());
  printf("done\n");
  return 0;
}
"""


def _line(text: str) -> int:
    return next(i for i, line in enumerate(PROGRAM.split("\n"), 1) if text in line)


@pytest.fixture(scope="module")
def program(emu):
    return emu.load(PROGRAM)


@pytest.fixture(scope="module", params=["race", "plain", "asan"])
def any_build(request, emu):
    """The program in each build emu makes: the race detector's (default), --race-check off's, AddressSanitizer's.
    A misaligned access is the kernel's fault in all three."""
    if request.param == "race":
        yield emu.load(PROGRAM)
        return
    from harness.backends.emu.backend import EmuBackend
    backend = (EmuBackend(timeout_s=60, race_check=False) if request.param == "plain" else
               EmuBackend(timeout_s=120, sanitize=True))
    yield backend.load(PROGRAM)
    backend.close()


def test_a_whole_program_loads_as_its_device_code(program):
    v = np.arange(64, dtype=np.int32) * 10
    program.launch("add_index", (2,), (32,), 0, [v], outputs=())
    assert np.array_equal(v, np.arange(64) * 11)


def test_an_output_read_before_it_is_written_is_an_uninitialized_read(program):
    v = np.zeros(64, np.int32)
    # v[0] += 0 writes the poison back unchanged; the other 63 values are computed from it
    with pytest.raises(UninitializedRead, match=r"read memory it had not written \(an output before writing it; 1 "
                                                r"element\(s\) of it hold the poison itself.*'v' differs at 63"):
        program.launch("add_index", (2,), (32,), 0, [v], outputs=(0,))


def test_a_misaligned_access_stops_the_kernel_as_on_a_gpu(any_build):
    data = np.arange(64, dtype=np.float32)
    raw = data.view(np.int8)
    y = np.zeros(8, np.float32)
    any_build.launch("word_at", (1,), (8,), 0, [raw, np.int32(8), y], outputs=(2,))
    assert np.array_equal(y, data[2:10])
    with pytest.raises(KernelCrash, match=rf"misaligned address: a 4-byte read of 0x[0-9a-f]+ at line "
                                          rf"{_line('y[threadIdx.x] = *(const float*)')} \(the address must be a "
                                          r"multiple of 4; a GPU stops the kernel with cudaErrorMisalignedAddress\)"):
        any_build.launch("word_at", (1,), (8,), 0, [raw, np.int32(2), y], outputs=(2,))


def test_a_packed_field_the_compiler_knows_is_unaligned_is_no_fault(any_build):
    rec = np.zeros(8, dtype=np.dtype([("tag", "i1"), ("value", "<i4")], align=False))
    rec["tag"], rec["value"] = 7, np.arange(8) * 3
    y = np.zeros(8, np.int32)
    any_build.launch("packed_values", (1,), (8,), 0, [rec.view(np.uint8), y], outputs=(1,))
    assert np.array_equal(y, np.arange(8) * 3)


def test_a_misaligned_float4_is_a_16_byte_access_even_where_gcc_copies_it_as_four_floats(any_build):
    """g++ splits the float4 into four 4-byte loads, each aligned at offset 1; a GPU loads it as one 16-byte vector
    and stops (every build's -fsanitize=alignment checks the access at the type's alignment)."""
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(4, np.float32)
    any_build.launch("vec_sums", (1,), (4,), 0, [x, np.int32(4), y], outputs=(2,))
    assert np.array_equal(y, x[4:20].reshape(4, 4).sum(axis=1))
    with pytest.raises(KernelCrash, match=rf"misaligned address: a 16-byte read of 0x[0-9a-f]+ at line "
                                          rf"{_line('float4 v = reinterpret_cast')} \(the address must be a "
                                          r"multiple of 16"):
        any_build.launch("vec_sums", (1,), (4,), 0, [x, np.int32(1), y], outputs=(2,))


def test_one_field_read_through_a_misaligned_float4_pointer_is_no_fault(any_build):
    """Only the field is loaded (4 bytes, aligned), as a GPU does: the member access alone touches nothing."""
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(4, np.float32)
    any_build.launch("first_of_vec", (1,), (4,), 0, [x, np.int32(1), y], outputs=(2,))
    assert np.array_equal(y, x[1:17:4])


def test_an_address_the_compiler_knows_is_odd_is_checked_too(any_build):
    """compute-sanitizer's memcheck demo: a store to a __device__ int's address + 1. g++ knows it is odd and
    stores through its unaligned path, which the race build's aligned entry points never saw and x86 runs."""
    with pytest.raises(KernelCrash, match=rf"misaligned address: a 4-byte write of 0x[0-9a-f]+ at line "
                                          rf"{_line('*(int*)((char*)&word + 1) = 42;')} "):
        any_build.launch("odd_store", (1,), (1,), 0, [np.zeros(1, np.int32)], outputs=(0,))


BINDING = r"""#include "binding.h"
__global__ void twice(const float* x, float* y, int n) {
  int i = threadIdx.x + blockDim.x * blockIdx.x;
  if (i < n) y[i] = 2 * x[i];
}
void twice_op(torch::Tensor& y, const torch::Tensor& x) {       // the framework's binding: host code
  TORCH_CHECK(x.is_cuda(), "x must be on the GPU");
  twice<<<1, 64, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
}
"""
BINDING_H = r"""#pragma once
inline void check_stream(cudaStream_t s) { c10::cuda::CUDAGuard guard(0); AT_CUDA_CHECK(cudaStreamQuery(s)); }
"""


def test_host_code_written_against_a_framework_nvcc_does_not_know_is_not_the_kernels(tmp_path, emu):
    """nvcc checks the device code emu builds, with the host functions dropped from the source and its headers:
    a binding written against torch's types (whose headers are not here) does not stop its kernel. A device
    function written against them still does (the negative control)."""
    from harness.backends.base import BuildError
    from harness.backends.emu import gate
    if gate.nvcc_gate()[0] is None:
        pytest.skip("the device-code gate needs nvcc (the toolchain extra)")
    (tmp_path / "binding.h").write_text(BINDING_H)
    flags = (f"-I{tmp_path}",)
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    emu.load(BINDING, flags).launch("twice", (1,), (64,), 0, [x, y, np.int32(64)], outputs=(1,))
    assert np.array_equal(y, 2 * x)
    broken = BINDING.replace("__global__ void twice(", "__device__ int rows(const torch::Tensor& t) { return 0; }\n"
                                                       "__global__ void twice(")
    with pytest.raises(BuildError, match=r"(?s)nvcc.s device-side compile refused it.*kernel.cu\(2\): error"):
        emu.load(broken, flags)


def test_what_nvcc_accepts_and_emu_cannot_compile_is_emus_limit_named_at_the_headers_own_path(tmp_path, emu):
    """A header's device function that uses a construct emu lacks (Hopper's DPX `__vimax3_s32`): nvcc's check
    passes, so the host compiler's refusal is emu's limit (UnsupportedConstruct: `unchecked`, never `fail`), and
    its message names the header where it lies, not the build's copy of it."""
    from harness.backends.base import BuildError, UnsupportedConstruct
    from harness.backends.emu import gate
    if gate.nvcc_gate()[0] is None:
        pytest.skip("telling emu's limits from the source's faults needs nvcc's device-side check (toolchain extra)")
    (tmp_path / "dpx.cuh").write_text("#pragma once\n__device__ int top3(int a, int b, int c) { return __vimax3_s32(a, b, c); }\n")
    source = '#include "dpx.cuh"\n__global__ void k(int* y) { y[0] = top3(y[0], y[1], y[2]); }\n'
    with pytest.raises(UnsupportedConstruct, match=r"(?s)nvcc's device-side check accepts kernel.cu.*"
                                                   + re.escape(f"{tmp_path}/dpx.cuh:2:")) as caught:
        emu.load(source, (f"-I{tmp_path}",))
    assert "emu+headers" not in str(caught.value)
    # the negative control: a header nvcc refuses too is the source's fault, named where it lies
    (tmp_path / "dpx.cuh").write_text("#pragma once\n__device__ int top3(int a, int b, int c) { return a + ; }\n")
    with pytest.raises(BuildError, match=re.escape(f"{tmp_path}/dpx.cuh(2)")) as caught:
        emu.load(source, (f"-I{tmp_path}",))
    assert not isinstance(caught.value, UnsupportedConstruct) and "device-headers" not in str(caught.value)


def test_a_headers_inline_ptx_runs_as_the_sources_does(tmp_path, emu):
    """Kernel libraries keep their PTX wrappers in headers (ggml's `mma.cuh`, Marlin's): the build's copy of a
    header has its inline PTX translated, as the source's is."""
    (tmp_path / "ptx.cuh").write_text('#pragma once\n__device__ __forceinline__ unsigned lane_id() {\n'
                                      '  unsigned r;\n  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));\n  return r;\n}\n')
    module = emu.load('#include "ptx.cuh"\n__global__ void lanes(unsigned* y) { y[threadIdx.x] = lane_id(); }\n',
                      (f"-I{tmp_path}",))
    y = np.zeros(64, np.uint32)
    module.launch("lanes", (1,), (64,), 0, [y], outputs=(0,))
    assert np.array_equal(y, np.arange(64) % 32)


def test_a_header_whose_class_launches_kernels_loads_and_its_kernel_runs(tmp_path, emu):
    """A benchmark's dispatcher class (GPUPrefixSums' `ChainedScanDecoupledLookbackDispatcher`) launches the
    kernels in its members: g++ cannot read `<<<`, so those members lose their bodies in the header's copy, and the
    header's kernel runs through the file that includes it."""
    from tests.cudasrc.test_host_code import LAUNCHING_CLASS
    (tmp_path / "dispatch.cuh").write_text("#pragma once\n" + LAUNCHING_CLASS)
    module = emu.load('#include "dispatch.cuh"\n', (f"-I{tmp_path}",))
    y = np.zeros(32, np.uint32)
    module.launch("fill", (1,), (32,), 0, [y, np.uint32(7)], outputs=(0,))
    assert np.array_equal(y, np.full(32, 7, np.uint32))
