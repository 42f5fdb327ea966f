"""What GPUVerify's front end gave files that nvcc does not (ci/race_suites/vector_math.py, gpuverify.py): the
element-wise arithmetic of CUDA's vector types and the SDK's helpers (`lerp`, `length`, `dot`, `make_float3(s)`),
the math constants without their include, a file's own `size_t`, a repeated `static`; a kernel body whose braces
are balanced only as the build's preprocessor keeps it; and the buffer preconditions the samples state (an identity
map, marching cubes' monotonic prefix sums). Each case runs clean; each negative control does not."""
from __future__ import annotations

import numpy as np
import pytest

from ci.race_suites import gpuverify, vector_math

HEAD = "//pass\n//--blockDim=64 --gridDim=2\n\n"
VECTORS = r"""
__global__ void shade(float3* out, const float4* in) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float3 a = make_float3(in[i]), b = make_float3(1.0f);
  float3 c = lerp(a, b * 2.0f, 0.25f) - a / 2.0f;
  c += 0.5f * normalize(b);
  out[i] = c * (length(a) + dot(a, b)) + make_float3(CUDART_PI_F);
}
"""
# bilateralFilter declares the math functions it calls, as GPUVerify's front end (no CUDA headers) needed
REDECLARED = r"""
__device__ float __saturatef(float);
__device__ float fabs(float);
__device__ float twice(float);
__global__ void clampit(float* y) { int i = blockIdx.x * blockDim.x + threadIdx.x; y[i] = __saturatef(fabs(y[i])); }
"""
# a 32-bit size_t of the file's own, as GPUVerify's front end compiled it
OWN_SIZE_T = r"""
typedef unsigned int size_t;
__global__ void count(size_t* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = sizeof(size_t); }
"""
# marching cubes' compaction: each occupied voxel writes its index at its place in the prefix sums
COMPACT = r"""
#define tid (blockIdx.x * blockDim.x + threadIdx.x)
#define other_tid __other_int(tid)
__global__ void compact(unsigned* out, unsigned* occupied, unsigned* scan, int* order) {
  REQUIRES
  __requires(__implies(tid < 128, order[tid] == tid));
  if (occupied[tid]) out[scan[tid]] = order[tid];
}
"""
SCAN_RULE = ("__requires(__implies(tid < other_tid, scan[tid] + occupied[tid] <= scan[other_tid]));\n"
             "  __requires(__implies(tid < other_tid, __add_noovfl(scan[tid], occupied[tid])));")
# RAY's render: an `if (...) {` written twice, one per branch of an #ifdef; md5's `static ... static`; and
# convolutionTexture's `static` explicit specializations
BRANCHES = r"""
static __attribute__((always_inline))
static __device__ int twice(int x) { return 2 * x; }
template<int i> __device__ static __attribute__((always_inline)) int sum(int x) { return x + i + sum<i - 1>(x); }
template<>      __device__ static __attribute__((always_inline)) int sum<-1>(int x) { return 0; }
__global__ void k(int* y, int n) {
  __requires(n == 48);
  int i = blockIdx.x * blockDim.x + threadIdx.x + n;
#ifdef DEBUG_RT
  if (i >= 0 && y != 0) {
#else
  if (i >= 0) {
#endif
    y[i] = twice(i) + sum<2>(i);
  }
}
"""
CASES = {"vectors": HEAD + VECTORS, "redeclared": HEAD + REDECLARED, "own_size_t": HEAD + OWN_SIZE_T, "branches": HEAD + BRANCHES,
         "compact": HEAD + COMPACT.replace("REQUIRES", SCAN_RULE),
         "compact_unspecified": HEAD + COMPACT.replace("REQUIRES", "")}


def test_vector_arithmetic_and_the_sdk_helpers_run(verdicts):
    assert verdicts["vectors"]["verdict"] == "clean", verdicts["vectors"]


def test_the_helpers_compute_what_the_sdk_s_do(emu):
    code = vector_math.with_vector_math(VECTORS.replace("CUDART_PI_F", "3.0f"), "kernel.cu")
    out, data = np.zeros(3 * 4, np.float32), np.arange(16, dtype=np.float32)
    emu.load(code).launch("shade", (1,), (4,), 0, [out, data], [0])
    a = data.reshape(4, 4)[:, :3].astype(np.float64)
    c = a + 0.25 * (2.0 - a) - a / 2 + 0.5 / np.sqrt(3.0)
    want = c * (np.linalg.norm(a, axis=1) + a.sum(axis=1))[:, None] + 3.0
    assert np.allclose(out.reshape(4, 3), want, rtol=1e-5)


def test_a_helper_the_file_declares_is_left_to_it():
    """lineOfSight declares `length(float2)` to take its result as arbitrary: no second definition."""
    source = "__device__ float length(float2);\n__global__ void k(float2* p, float* y){ y[0] = length(p[0]) * dot(p[0], p[0]); }"
    added = vector_math.vector_math_for(source)
    assert " dot(" in added and " length(" not in added
    assert vector_math.vector_math_for("__global__ void k(int* y){ y[0] = 1; }") == ""     # no vector type: nothing
    assert "operator" not in vector_math.vector_math_for("float3 operator+(float3 a, float b);\nfloat3 v;")


def test_without_the_definitions_nvcc_refuses_the_file(emu):
    """The negative control: the same kernel as the file has it is not device code a GPU build accepts."""
    from harness.backends.base import BuildError
    with pytest.raises(BuildError, match="lerp|operator"):
        emu.load(VECTORS.replace("CUDART_PI_F", "3.0f"))


def test_a_redeclared_math_function_is_cudas_own(verdicts, emu):
    """The file's declarations of `fabs` and `__saturatef` go (nvcc finds `fabs(float)` ambiguous with them);
    a declaration of the file's own function without a body stays (the adapter gives it a body). Negative
    control: as the file has it, nvcc refuses the kernel."""
    from harness.backends.base import BuildError
    assert verdicts["redeclared"]["verdict"] == "clean", verdicts["redeclared"]
    kept = gpuverify.without_api_redeclarations(REDECLARED)
    assert "fabs(float);" not in kept and "__saturatef(float);" not in kept and "twice(float);" in kept
    assert kept.count("\n") == REDECLARED.count("\n")
    with pytest.raises(BuildError, match="fabs"):
        emu.load(REDECLARED.replace("__device__ float twice(float);", ""))


def test_a_files_own_size_t_keeps_its_width(verdicts):
    rec = verdicts["own_size_t"]
    assert rec["verdict"] == "clean", rec
    code = gpuverify.own_platform_types(OWN_SIZE_T)
    assert "typedef unsigned int __qconform_gv_size_t;" in code and "sizeof(__qconform_gv_size_t)" in code
    assert gpuverify.own_platform_types("size_t n = 4;") == "size_t n = 4;"       # the platform's: left as it is


def test_a_body_balanced_only_as_built_and_a_repeated_static_run(verdicts):
    rec = verdicts["branches"]
    assert rec["verdict"] == "clean" and rec["requires_not_honoured"] == [], rec
    assert rec["scalars"]["k"]["n"] == 48           # the precondition was read from the body the build keeps
    once = gpuverify.single_storage_class(BRANCHES)
    assert "static __attribute__((always_inline))\n       __device__ int twice" in once
    assert "template<>      __device__        __attribute__((always_inline)) int sum<-1>" in once
    assert "template<int i> __device__ static __attribute__" in once      # the primary template keeps its own
    assert once.count("\n") == BRANCHES.count("\n")


def test_the_prefix_sum_precondition_is_honoured(verdicts):
    rec = verdicts["compact"]
    assert rec["verdict"] == "clean" and rec["requires_not_honoured"] == [], rec


def test_without_the_precondition_the_random_sums_collide(verdicts):
    """The negative control: seeded sums that are not a scan put two voxels at one place."""
    rec = verdicts["compact_unspecified"]
    assert rec["verdict"] == "race" and "'out'" in rec["kernels"]["compact"]["detail"], rec


def test_buffer_rules_read_the_preconditions():
    conds = ["__implies(tid < other_tid, scan[tid] + occupied[tid] <= scan[other_tid])",
             "__implies(tid < other_tid, __add_noovfl(scan[tid], occupied[tid]))",
             "__implies(tid < n, order[tid] == tid)", "order[tid] == tid + 1",
             "__implies(tid < other_tid, __add_noovfl(a[tid], b[tid]))"]
    source = "#define tid (blockIdx.x * blockDim.x + threadIdx.x)\n#define other_tid __other_int(tid)\n"
    rules, honoured = gpuverify.buffer_rules(conds, source, {"scan", "occupied", "order", "a", "b"})
    assert rules == {"scan": gpuverify.PREFIX_SUM + "occupied", "order": gpuverify.IDENTITY}
    assert sorted(honoured) == sorted(conds[:3])   # `== tid + 1` is not the identity; a sum of no prefix rule stays open


def test_prefix_sums_are_exclusive_and_must_fit():
    sig = type("Sig", (), {"params": (("unsigned*", "scan"), ("unsigned char*", "counts"))})()
    values = {"scan": gpuverify.PREFIX_SUM + "counts"}
    args = gpuverify.prefix_sums(sig, values, [np.zeros(5, np.uint32), np.array([3, 0, 2], np.uint8)])
    assert args[0].tolist() == [0, 3, 3, 5, 5] and args[0].dtype == np.uint32
    with pytest.raises(LookupError, match=r"parameter scan: the prefix sums of counts \(up to 510\) do not fit its uint8"):
        gpuverify.prefix_sums(sig, values, [np.zeros(3, np.uint8), np.array([255, 255], np.uint8)])


def test_saturate_of_cuda_5_clamps_to_the_unit_interval(emu):
    """volumeFiltering's header calls `saturate`, which CUDA 5's math_functions.h had and nvcc no longer does."""
    code = vector_math.with_vector_math("__global__ void k(const float4* v, const float* x, float* y) {\n"
                                        "  y[threadIdx.x] = saturate(x[threadIdx.x]);\n}\n", "kernel.cu")
    y = np.zeros(4, np.float32)
    emu.load(code).launch("k", (1,), (4,), 0, [np.zeros(4 * 4, np.float32),
                                               np.array([-1.0, 0.25, 2.0, np.nan], np.float32), y], [2])
    assert list(y) == [0.0, 0.25, 1.0, 0.0]
