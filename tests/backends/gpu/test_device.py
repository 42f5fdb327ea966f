"""The GPU backend on a real CUDA device (`pytest -m gpu`); skipped with the reason where there is none."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from harness.backends import KernelCrash, OutOfBounds, UnwrittenOutput, get_backend, gpu_unavailable_reason
from harness.backends.gpu import DRIVER_ENV, timing_note
from harness.toolchain.rust_literals import kernel_sets
from tests.seed import seed_source

pytestmark = pytest.mark.gpu

SRC = """
__global__ void scale(const float* x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
__global__ void scale_past_end(const float* x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = a * x[i < n ? i : 0];
}
__global__ void scale_before_start(const float* x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i - 1] = a * x[i];
}
__global__ void scale_skip_last(const float* x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) y[i] = a * x[i];
}
__global__ void wild_write(const float* x, float* y, int n, float a) {
    *(volatile float*)(y + (1ll << 40)) = a;
}
__global__ void trap(const float* x, float* y, int n, float a) {
    __trap();
}
__global__ void to_half(const float* x, __half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half_rn(x[i]);
}
__global__ void dp4a_rows(const int* a, const int* b, int* out, int words) {
    int row = blockIdx.x, acc = 0;
    for (int w = threadIdx.x; w < words; w += 32) acc = __dp4a(a[row * words + w], b[w], acc);
    for (int o = 16; o; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) out[row] = acc;
}
__global__ void reverse_shared(const float* x, float* y, int n) {
    extern __shared__ float tile[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = tile[n - 1 - i];
}
"""
N = 1000     # not a multiple of the block size: the tail guard in each kernel matters
SEED = 20261202


@pytest.fixture(scope="module")
def backend():
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    return get_backend("gpu")


@pytest.fixture(scope="module")
def module(backend):
    return backend.load(SRC)


def scale_args(n=N):
    rng = np.random.default_rng(SEED)
    return [rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32), np.int32(n), np.float32(0.75)]


def launch_scale(module, kernel, args, **kw):
    return module.launch(kernel, grid=(math.ceil(N / 256),), block=(256,), shared_bytes=0, args=args,
                         outputs=(1,), **kw)


def test_describe_and_copy_bandwidth(backend):
    info = backend.describe()
    assert info["device"] and info["compute_capability"] and info["driver"]
    gbps = backend.copy_bandwidth_gbps()
    print(f"\n{info}\ndevice-to-device copy: {gbps:.0f} GB/s (read + write)")
    assert math.isfinite(gbps) and gbps > 0


def test_scale_is_exact_and_timed(module):
    args = scale_args()
    res = launch_scale(module, "scale", args, timing=(3, 10))
    # One float32 multiply per element: correctly rounded on both sides, so equal bit for bit (seed SEED).
    assert np.array_equal(args[1], np.float32(0.75) * args[0])
    if "skipped" in res.timing:      # another test worker held the device's timing lock throughout
        pytest.skip(res.timing["skipped"])
    assert res.elapsed_ms is not None and math.isfinite(res.elapsed_ms) and res.elapsed_ms > 0
    assert res.timing["batches"] == 3 and res.timing["launches_per_batch"] == 10
    assert res.timing["min_ms"] <= res.elapsed_ms <= res.timing["max_ms"]
    assert res.notes == (timing_note(res.timing),)


def test_resident_buffers_on_the_device(module):
    x = scale_args()[0]
    xb = module.alloc("x", x.shape, x.dtype, init=x)
    yb = module.alloc("y", x.shape, np.float32)
    module.launch("scale", grid=(math.ceil(N / 256),), block=(256,), shared_bytes=0,
                  args=[xb, yb, np.int32(N), np.float32(0.75)], outputs=(1,))
    assert np.array_equal(module.read(yb), np.float32(0.75) * x)
    with pytest.raises(OutOfBounds, match="resident buffer 'y'"):
        module.launch("scale_past_end", grid=(math.ceil(N / 256),), block=(256,), shared_bytes=0,
                      args=[xb, yb, np.int32(N), np.float32(0.75)], outputs=(1,))
    module.free(xb)
    module.free(yb)


@pytest.mark.parametrize("kernel, side", [("scale_past_end", "past its end"), ("scale_before_start", "before its start")])
def test_out_of_bounds_write_is_caught(module, kernel, side):
    # the shared guard-band message (harness/backends/guards.py) names the side and the element
    with pytest.raises(OutOfBounds, match=rf"args\[1\] \(y: float\*\).*{side}"):
        launch_scale(module, kernel, scale_args())


def test_unwritten_output_is_caught(module):
    with pytest.raises(UnwrittenOutput, match=rf"1 of {N} element.*index \({N - 1},\)"):
        launch_scale(module, "scale_skip_last", scale_args())


@pytest.mark.parametrize("kernel", ["wild_write", "trap"])
def test_sticky_error_fails_the_case_and_the_next_launch_runs(module, kernel):
    with pytest.raises(KernelCrash):
        launch_scale(module, kernel, scale_args())
    args = scale_args()
    launch_scale(module, "scale", args)          # a fresh context, the same module reloaded into it
    assert np.array_equal(args[1], np.float32(0.75) * args[0])


def test_half_conversion_with_added_header(module):
    x = np.random.default_rng(SEED).standard_normal(N).astype(np.float32) * 1000
    y = np.zeros(N, np.float16)
    module.launch("to_half", grid=(4,), block=(256,), shared_bytes=0, args=[x, y, np.int32(N)], outputs=(1,))
    assert np.array_equal(y, x.astype(np.float16))     # both round to nearest even


def test_dp4a_rows_match_integer_reference(module):
    rng = np.random.default_rng(SEED)
    rows, k = 37, 4 * 67
    a = rng.integers(-128, 128, (rows, k), dtype=np.int8)
    b = rng.integers(-128, 128, k, dtype=np.int8)
    out = np.zeros(rows, np.int32)
    module.launch("dp4a_rows", grid=(rows,), block=(32,), shared_bytes=0,
                  args=[a.view(np.int32).copy(), b.view(np.int32).copy(), out, np.int32(k // 4)], outputs=(2,))
    assert np.array_equal(out, a.astype(np.int32) @ b.astype(np.int32))


def test_large_dynamic_shared_memory(module):
    n = 16384        # 64 KiB of floats: above the 48 KiB default, so the backend must opt in
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    module.launch("reverse_shared", grid=(1,), block=(512,), shared_bytes=4 * n, args=[x, y, np.int32(n)],
                  outputs=(1,))
    assert np.array_equal(y, x[::-1])


def test_scalar_type_mismatch_is_refused(module):
    args = scale_args()
    args[2] = np.int64(N)
    with pytest.raises(ValueError, match=r"args\[2\].*int32"):
        launch_scale(module, "scale", args)


def test_seed_kernel_sets_load_on_the_device(backend):
    """Every filled kernel set of the seed compiles for this device and each kernel is found by name."""
    sets = [ks for ks in kernel_sets(seed_source(), {"i": 0, "nt": 2}) if not ks.unfilled]
    assert sets
    for ks in sets:
        mod = backend.load(ks.code)
        assert set(ks.kernels) <= set(mod.kernel_names), ks.name
        for name in ks.kernels:
            mod.resolve(name)    # BuildError if the cubin lacks the plain name


def test_static_and_overloaded_kernels_launch_by_their_cpp_symbols(backend):
    """GPUMD's kernels: `static void __global__`, `__global__ static` and two overloads of one name keep C++
    linkage (prepare_source) and launch through their mangled symbols, each overload by its parameter types."""
    if os.environ.get(DRIVER_ENV):       # gpu-check's dry run: the fake's cubin is the source text, with no symbols
        pytest.skip(f"${DRIVER_ENV} names a stand-in driver, whose cubin has no C++ symbols to read")
    mod = backend.load("static void __global__ fill(int* y, int v) { y[threadIdx.x] = v; }\n"
                       "__global__ static void fill(int* y, const int* __restrict__ x) "
                       "{ y[threadIdx.x] = 2 * x[threadIdx.x]; }\n"
                       "__global__ static void once(int* y) { y[threadIdx.x] = 7; }\n")
    y = np.zeros(32, np.int32)
    mod.launch("fill(int*,int)", grid=(1,), block=(32,), shared_bytes=0, args=[y, np.int32(5)], outputs=(0,))
    assert np.array_equal(y, np.full(32, 5))
    x = np.arange(32, dtype=np.int32)
    mod.launch("fill(int*,const int*)", grid=(1,), block=(32,), shared_bytes=0, args=[y, x], outputs=(0,))
    assert np.array_equal(y, 2 * x)
    mod.launch("once", grid=(1,), block=(32,), shared_bytes=0, args=[y], outputs=(0,))
    assert np.array_equal(y, np.full(32, 7))
