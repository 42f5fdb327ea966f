"""Kernels as inference engines ship them: the kernel file includes the engine's common header, which carries the
host code around every kernel (a context class that creates streams and a cuBLAS handle, launch helpers, error
macros) beside the device helpers. The kernel runs on emu as it builds on a GPU: host functions are reduced to
declarations (a class's host member may still name them), the runtime's and cuBLAS's host API is declared and
never defined, and device code that calls it is still refused."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import BuildError, UnsupportedConstruct
from harness.backends.emu import gate
from tests.marks import needs_nvcc


ENGINE_H = r"""#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <initializer_list>
#include <memory>
#include <vector>

#define ENGINE_CHECK(call) do { auto err_ = (call); if (err_ != cudaSuccess) engine_abort(#call, cudaGetErrorString(err_)); } while (0)
#define ENGINE_CUBLAS_CHECK(call) do { if ((call) != CUBLAS_STATUS_SUCCESS) engine_abort(#call, "cublas"); } while (0)

[[noreturn]] void engine_abort(const char* what, const char* why);
static CUdeviceptr engine_pool_addr[4] = {0};      // a virtual-memory pool's table, as ggml's 2024 file keeps one

static bool tensor_cores_available(const int cc) { return cc >= 700; }
static int count_uses(const int* uses, std::initializer_list<int> ops, std::initializer_list<int> outputs = {}) {
    return int(ops.size() + outputs.size()) + uses[0];
}

struct engine_context {
    cudaStream_t stream = nullptr;
    cublasHandle_t handle = nullptr;
    std::unique_ptr<float[]> scratch;
    engine_context() {
        ENGINE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        ENGINE_CUBLAS_CHECK(cublasCreate(&handle));
        ENGINE_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
    }
    bool use_tensor_cores(int cc) const { return tensor_cores_available(cc); }
};

struct launch_config {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr;
    launch_config(dim3 grid, dim3 block, cudaStream_t s) {
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.stream = s;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
};

template <int rows> void launch_rows(engine_context& ctx, const float* x, float* y, int n);
extern template void launch_rows<4>(engine_context& ctx, const float* x, float* y, int n);

static __device__ __forceinline__ void engine_wait_for_producer() {
#if CUDART_VERSION >= 12030
    cudaGridDependencySynchronize();
#endif
}
static __device__ __forceinline__ void engine_release_consumer() {
#if CUDART_VERSION >= 12030
    cudaTriggerProgrammaticLaunchCompletion();
#endif
}
static constexpr __host__ __device__ int warps_for(int rows) { return rows >= 4 ? 4 : 2; }
static constexpr __device__ int table_id() { return 1; }

static __device__ __forceinline__ unsigned fast_div(unsigned n, const uint3 d) { return (__umulhi(n, d.x) + n) >> d.y; }

struct epilogue_args {
    const float* bias = nullptr;
    float scale = 1.0f;
};
"""

KERNEL_CU = r"""#include "engine.cuh"

template <int rows>
__launch_bounds__(warps_for(rows * table_id()) * 32, 1)
static __global__ void row_sums(const float* x, float* y, const uint3 cols_div, const epilogue_args ep, const int n) {
    engine_wait_for_producer();
    __shared__ float part[warps_for(rows)][32];
    const int row = blockIdx.x;
    float s = 0.0f;
    for (int i = threadIdx.y * 32 + threadIdx.x; i < n; i += blockDim.x * blockDim.y) s += x[row * n + i];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    engine_release_consumer();
    if (threadIdx.y == 0) {
        float t = 0.0f;
        for (int w = 0; w < warps_for(rows); ++w) t += part[w][threadIdx.x];
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffff, t, o);
        if (threadIdx.x == 0) y[fast_div(row, cols_div)] = t * ep.scale + (ep.bias ? ep.bias[row] : 0.0f);
    }
}

template <int rows> void launch_rows(engine_context& ctx, const float* x, float* y, int n) {
    launch_config lc(dim3(rows), dim3(32, warps_for(rows)), ctx.stream);
    ENGINE_CHECK(cudaLaunchKernelEx(&lc.cfg, row_sums<rows>, x, y, make_uint3(1, 0, 1), epilogue_args{}, n));
}
template void launch_rows<4>(engine_context& ctx, const float* x, float* y, int n);
template __global__ void row_sums<4>(const float*, float*, const uint3, const epilogue_args, const int);
"""


def _epilogue(scale: float) -> np.ndarray:
    """epilogue_args by value: a null bias pointer, then the scale (x86-64 and CUDA lay it out alike)."""
    dt = np.dtype({"names": ["bias", "scale"], "formats": [np.uint64, np.float32], "offsets": [0, 8], "itemsize": 16})
    value = np.zeros((), dt)
    value["scale"] = scale
    return value[()]


@pytest.fixture
def engine(tmp_path):
    (tmp_path / "engine.cuh").write_text(ENGINE_H)
    return (f"-I{tmp_path}",)


@needs_nvcc
def test_a_kernel_inside_an_engines_host_code_runs_as_its_device_code(engine, emu):
    module = emu.load(KERNEL_CU, engine)
    x = np.random.default_rng(7).uniform(-1, 1, (4, 256)).astype(np.float32)
    y = np.zeros(4, np.float32)
    fastdiv_by_one = np.array((1, 0, 1), np.dtype([("x", np.uint32), ("y", np.uint32), ("z", np.uint32)]))[()]
    module.launch("row_sums<4>", (4,), (32, 4), 0, [x, y, fastdiv_by_one, _epilogue(2.0), np.int32(256)],
                  outputs=(1,))
    # float32 roundings on a row's path: 2 per-thread adds, 4 warps' partials, 5 shuffles, the scale, the store
    from reference.bounds import gamma
    bound = gamma(2 + 4 + 5 + 2) * 2.0 * np.abs(x.astype(np.float64)).sum(axis=1)
    assert np.all(np.abs(y - 2.0 * x.astype(np.float64).sum(axis=1)) <= bound)


@needs_nvcc
def test_device_code_that_calls_a_declared_host_library_is_refused(engine, emu):
    """The negative control: the declarations let the host code around the kernel compile, not device code call
    it: nvcc refuses a cuBLAS call in a kernel, the kernel's fault (BuildError, not emu's limit)."""
    broken = KERNEL_CU.replace("    engine_wait_for_producer();\n",
                               "    engine_wait_for_producer();\n    (void)cublasCreate((cublasHandle_t*)y);\n")
    with pytest.raises(BuildError, match=r"nvcc's device-side compile refused it") as caught:
        emu.load(broken, engine)
    assert not isinstance(caught.value, UnsupportedConstruct)


def test_a_runtime_call_in_device_code_stays_emus_limit(engine, emu):
    """The runtime's functions that device code may call (the device runtime of dynamic parallelism) are emu's
    limit, as before their host declarations existed."""
    broken = KERNEL_CU.replace("    engine_wait_for_producer();\n", "    cudaMemsetAsync(y, 0, 4);\n")
    with pytest.raises(UnsupportedConstruct, match=r"CUDA runtime API calls in device source \(line 6\)"):
        emu.load(broken, engine)


def test_without_nvcc_the_object_check_refuses_a_declared_host_call(engine, emu, monkeypatch):
    """With no nvcc to say so, emu's own check of the object finds the undefined host function."""
    monkeypatch.setattr(gate, "nvcc_gate", lambda: (None, "no nvcc"))
    broken = KERNEL_CU.replace("    engine_wait_for_producer();\n", "    (void)cublasCreate((cublasHandle_t*)y);\n")
    with pytest.raises(BuildError, match=r"calls host function\(s\) that device code cannot call: cublasCreate"):
        emu.load(broken, engine)


def test_a_host_class_in_the_kernel_file_is_host_code_and_a_device_members_runtime_call_is_emus_limit(emu):
    """A class in the kernel's own file keeps its host members (they never run here): their runtime calls are no
    construct of device code. A device member that calls the runtime (dynamic parallelism's device runtime, which
    nvcc accepts) is still emu's limit, found in the module's object."""
    runner = ("struct runner {\n  cudaStream_t s;\n  runner() { cudaStreamCreate(&s); }\n};\n"
              "__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n")
    y = np.zeros(32, np.float32)
    emu.load(runner).launch("k", (1,), (32,), 0, [y], outputs=(0,))
    assert np.all(y == 1.0)
    device_call = ("struct grabber {\n  __device__ void grab(float** p) { cudaMalloc((void**)p, 4); }\n};\n"
                   "__global__ void k(float* y) { float* p; grabber g; g.grab(&p); y[threadIdx.x] = 1.0f; }\n")
    with pytest.raises(UnsupportedConstruct, match=r"CUDA runtime API calls in device code \(cudaMalloc: the device "
                                                   r"runtime of dynamic parallelism\)"):
        emu.load(device_call)


def test_a_launch_macro_that_only_host_code_expands_is_not_a_launch_in_device_code(emu):
    """candle's MoE kernels launch through `LAUNCH_MOE_GGUF(...)`, a macro with `<<<...>>>` that only the dropped
    host function expands: nothing of it reaches the build. Expanded where it stays, it is a launch emu cannot
    build (the negative control)."""
    source = ("#define LAUNCH(k) k<<<1, 32>>>(y)\n__global__ void k(float* y) { y[threadIdx.x] = 2.0f; }\n"
              "void run(float* y) { LAUNCH(k); }\n")
    y = np.zeros(32, np.float32)
    emu.load(source).launch("k", (1,), (32,), 0, [y], outputs=(0,))
    assert np.all(y == 2.0)
    kept = source.replace("void run(float* y) { LAUNCH(k); }", "struct runner { void run(float* y) { LAUNCH(k); } };")
    with pytest.raises(UnsupportedConstruct, match=r"host-side kernel launch `<<<...>>>` \(line 1\)"):
        emu.load(kept)


def test_builtin_assume_holds_or_the_launch_is_a_fault(emu):
    """llama.cpp's attention tells the compiler `__builtin_assume(tid < nthreads)`: a launch with more threads has
    undefined behaviour, which emu reports where the assumption lies; a launch that keeps it runs."""
    source = ("__global__ void k(float* y) {\n  const int tid = threadIdx.x;\n  __builtin_assume(tid < 64);\n"
              "  y[tid] = 1.0f;\n}\n")
    module = emu.load(source)
    y = np.zeros(128, np.float32)
    module.launch("k", (1,), (64,), 0, [y[:64]], outputs=(0,))
    from harness.backends import KernelCrash
    with pytest.raises(KernelCrash, match=r"__builtin_assume\(tid < 64\) at kernel.cu:3 is false in this launch"):
        module.launch("k", (1,), (128,), 0, [y], outputs=(0,))


def test_the_classification_functions_are_in_the_global_namespace(emu):
    """ggml's flash attention calls `isinf(x)` unqualified, as CUDA's math API declares it in the global namespace
    (with isnan, isfinite and signbit); emu's build had them in std:: only and refused the file."""
    source = ("template <typename T> __device__ int classify(T v) {\n"
              "  return isinf(v) * 1 + isnan(v) * 2 + isfinite(v) * 4 + signbit(v) * 8;\n}\n"
              "__global__ void k(const float* x, const double* d, int* y) {\n"
              "  y[threadIdx.x] = classify(x[threadIdx.x]) + 16 * classify(d[threadIdx.x]);\n}\n")
    x = np.array([1.0, -np.inf, np.nan, -0.0], np.float32)
    y = np.zeros(4, np.int32)
    emu.load(source).launch("k", (1,), (4,), 0, [x, x.astype(np.float64), y], outputs=(2,))
    one = [4, 1 + 8, 2 + 8 * int(np.signbit(np.float32(np.nan))), 4 + 8]
    assert y.tolist() == [v + 16 * v for v in one]


TRAINING_COMMON_H = r"""#pragma once
#include <string>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <cuda_profiler_api.h>

extern cudaDeviceProp deviceProp;               // set by the program's main, read by its launchers

class NvtxRange {                               // a scoped profiler range around each launcher (llm.c's)
 public:
  NvtxRange(const char* s) { nvtxRangePush(s); }
  NvtxRange(const std::string& base, int number) { nvtxRangePush((base + " " + std::to_string(number)).c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
};
#define NVTX_RANGE_FN() NvtxRange nvtx_range(__FUNCTION__)
"""

TRAINING_KERNEL_CU = r"""#include "common.h"
__global__ void lanes(int* out) { out[threadIdx.x] = threadIdx.x % warpSize; }
void lanes_launch(int* out, cudaStream_t stream) {
  NVTX_RANGE_FN();
  cudaProfilerStart();
  lanes<<<1, deviceProp.warpSize * 2, 0, stream>>>(out);
  cudaProfilerStop();
}
"""


@pytest.mark.parametrize("with_nvcc", [True, False], ids=["gate", "no-gate"])
def test_a_training_programs_profiler_ranges_and_device_properties_are_host_code(tmp_path, emu, monkeypatch,
                                                                                  with_nvcc):
    """llm.c's common header includes NVTX's and the profiler's headers, which the toolkit's wheels here lack, for a
    range class around its launchers, and keeps the device's properties in an `extern cudaDeviceProp`: the kernel
    runs as its device code (qconform's stand-ins declare them; `warpSize` stays the kernel's 32 beside the
    property's member of that name). A kernel that calls NVTX is refused (the negative control)."""
    if not with_nvcc:
        monkeypatch.setattr(gate, "nvcc_gate", lambda: (None, "no nvcc"))
    elif gate.nvcc_gate()[0] is None:
        pytest.skip("nvcc (the toolchain extra) is not installed: the device-side check is not run")
    (tmp_path / "common.h").write_text(TRAINING_COMMON_H)
    out = np.zeros(64, np.int32)
    emu.load(TRAINING_KERNEL_CU, (f"-I{tmp_path}",)).launch("lanes", (1,), (64,), 0, [out], outputs=(0,))
    assert out.tolist() == [i % 32 for i in range(64)]
    broken = TRAINING_KERNEL_CU.replace("out[threadIdx.x] =", "nvtxMarkA(\"x\"); out[threadIdx.x] =")
    with pytest.raises(BuildError, match=r"nvtxMarkA"):
        emu.load(broken, (f"-I{tmp_path}",))


CUB_WITH_NVTX_CU = r"""#include <cub/cub.cuh>
#include <nvtx3/nvToolsExt.h>
__global__ void block_sum(const float* x, float* y) {
  using Reduce = cub::BlockReduce<float, 64>;
  __shared__ typename Reduce::TempStorage tmp;
  float s = Reduce(tmp).Sum(x[threadIdx.x]);
  if (threadIdx.x == 0) y[0] = s;
}
void launch(const float* x, float* y) { nvtxRangePushA("sum"); block_sum<<<1, 64>>>(x, y); nvtxRangePop(); }
"""


@needs_nvcc
def test_cubs_own_profiler_ranges_stay_off_beside_the_nvtx_stand_in(emu):
    """CUB opens NVTX ranges through NVTX's C++ API wherever <nvtx3/nvToolsExt.h> is found: the stand-in, which
    declares only what programs call, switched them on in nvcc's check and broke every file that includes
    <cub/cub.cuh> (ggml's cumsum: `nvtxDomainCreateW` undefined). The check builds with CCCL's NVTX off."""
    y = np.zeros(1, np.float32)
    emu.load(CUB_WITH_NVTX_CU).launch("block_sum", (1,), (64,), 0, [np.arange(64, dtype=np.float32), y],
                                      outputs=(1,))
    assert y[0] == 2016.0


# mshadow's BLAS engine: static host members of a class (which stay, since a class's body is kept) calling the
# classic cuBLAS entry points in every precision, beside a kernel of the same file
BLAS_ENGINE_CU = r"""#include <cublas_v2.h>
#include <cuda_fp16.h>
template <typename DType> struct BlasEngine;
template <> struct BlasEngine<float> {
    static void gemv(cublasHandle_t h, int m, int n, const float* a, const float* x, float* y) {
        float one = 1.0f, zero = 0.0f;
        cublasSgemv(h, CUBLAS_OP_N, m, n, &one, a, m, x, 1, &zero, y, 1);
        cublasSger(h, m, n, &one, x, 1, y, 1, const_cast<float*>(a), m);
        cublasSdot(h, n, x, 1, y, 1, &one);
        cublasSgemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, n, &one, a, CUDA_R_16F, m, x, CUDA_R_16F, n, &zero, y,
                      CUDA_R_32F, m);
        const float* as[2] = {a, a};
        float* ys[2] = {y, y};
        cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, &one, as, m, as, n, &zero, ys, m, 2);
        cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, n, &one, a, m, 0, a, n, 0, &zero, y, m, 0, 2);
    }
};
template <> struct BlasEngine<double> {
    static void gemm(cublasHandle_t h, int m, const double* a, double* c) {
        double one = 1.0;
        cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, m, m, &one, a, m, a, m, &one, c, m);
        cublasDgemv(h, CUBLAS_OP_T, m, m, &one, a, m, a, 1, &one, c, 1);
        cublasDnrm2(h, m, a, 1, c);
        int at;
        cublasIdamax(h, m, a, 1, &at);
        if (cudaStreamQuery(0) == cudaErrorCudartUnloading) return;     // mshadow's stream's idle check
        cublasHandle_t made;
        cublasCreate_v2(&made);                                            // bitsandbytes names the _v2 entry
    }
};
template <> struct BlasEngine<__half> {
    static void gemm(cublasHandle_t h, int m, const __half* a, __half* c, cuComplex* z) {
        __half one = __float2half(1.0f);
        cublasHgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, a, m, &one, c, m);
        cuComplex w = make_cuComplex(1.0f, 0.0f);
        cublasCgemm(h, CUBLAS_OP_C, CUBLAS_OP_N, m, m, m, &w, z, m, z, m, &w, z, m);
        cublasSetMatrix(m, m, sizeof(cuComplex), z, m, z, m);
    }
};
__global__ void scale(float* y, float s) { y[threadIdx.x] = s * threadIdx.x; }
"""


@needs_nvcc
def test_the_classic_blas_calls_of_a_host_class_compile_beside_a_kernel(emu):
    """The host class compiles against the stand-in cuBLAS header on both builds (nvcc's device-side compile reads
    host code too), and the file's kernel runs."""
    module = emu.load(BLAS_ENGINE_CU, ())
    y = np.zeros(4, np.float32)
    module.launch("scale", (1,), (4,), 0, [y, np.float32(2)], outputs=(0,))
    assert y.tolist() == [0.0, 2.0, 4.0, 6.0]


@needs_nvcc
def test_a_blas_call_with_the_wrong_types_is_still_refused(emu):
    """The negative control: the declarations carry cuBLAS's types, so a host call that cuBLAS would refuse (a
    double matrix to the single-precision GEMV) is refused here too: no catch-all declaration."""
    broken = BLAS_ENGINE_CU.replace("cublasSgemv(h, CUBLAS_OP_N, m, n, &one, a,",
                                    "cublasSgemv(h, CUBLAS_OP_N, m, n, &one, (const double*)a,")
    with pytest.raises(BuildError, match=r"cublasSgemv|argument of type"):
        emu.load(broken, ())
