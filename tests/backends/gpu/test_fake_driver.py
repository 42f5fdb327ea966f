"""The GPU backend's call sequence and fault handling, driven through a fake `pycuda` on the CPU."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from harness.backends import KernelCrash, OutOfBounds, UnwrittenOutput, get_backend
from harness.backends import gpu
from harness.backends.base import GUARD_BYTES, POISON_BYTES, BuildError, KernelTimeout

from .fake_pycuda import FakeDriver, LogicError

SRC = """
__global__ void axpy(const float* x, float* y, int n, float a) { }
__global__ void overrun(const float* x, float* y, int n, float a) { }
__global__ void skip_last(const float* x, float* y, int n, float a) { }
__global__ void crash(const float* x, float* y, int n, float a) { }
__global__ void hang(const float* x, float* y, int n, float a) { }
__global__ void bump(float* x, float* y, int n, float a) { }
__global__ void underrun(const float* x, float* y, int n, float a) { }
"""


def _axpy(drv, grid, block, x, y, n, a, *, write=None, extra=0):
    """y[i] = a * x[i] for the first `write` elements (default all), plus `extra` floats past the end."""
    n = int(n)
    xs, ys = drv.view(x, np.float32, n), drv.view(y, np.float32, n + extra)
    count = n if write is None else write
    ys[:count] = a * xs[:count]
    ys[n:n + extra] = 0


def _bump(drv, grid, block, x, y, n, a):
    """Updates its input in place (x += 1) and writes y = x."""
    xs, ys = drv.view(x, np.float32, int(n)), drv.view(y, np.float32, int(n))
    xs += 1
    ys[:] = xs


def _underrun(drv, grid, block, x, y, n, a):
    """Writes y[-1] (the byte range just before the buffer) and nothing else."""
    drv.view(int(y) - 4, np.float32, 1)[0] = 1.0


def _crash(drv, grid, block, *args):
    raise LogicError("cuCtxSynchronize failed: an illegal memory access was encountered")


@pytest.fixture
def fake(monkeypatch, tmp_path):
    drv = FakeDriver(device_count=2)
    drv.install(monkeypatch)
    drv.kernels.update({
        "axpy": _axpy,
        "overrun": lambda d, g, b, *a: _axpy(d, g, b, *a, extra=1),
        "skip_last": lambda d, g, b, x, y, n, a: _axpy(d, g, b, x, y, n, a, write=int(n) - 1),
        "crash": _crash,
        "hang": _axpy,
        "bump": _bump,
        "underrun": _underrun,
    })
    monkeypatch.setattr(gpu, "_SESSIONS", {})
    monkeypatch.setattr(gpu, "find_nvcc", lambda: "/opt/fake/nvcc")
    monkeypatch.setattr(gpu, "nvcc_identity", lambda nvcc: "fake nvcc 13.0")
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("QCONFORM_GPU", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return drv


def _args(n=10):
    return [np.arange(n, dtype=np.float32), np.zeros(n, np.float32), np.int32(n), np.float32(3)]


def _names(drv, since=0):
    return [c[0] for c in drv.calls[since:]]


def test_available_with_fake_and_backend_describes_device(fake):
    assert gpu.unavailable_reason() is None
    backend = get_backend("gpu")
    info = backend.describe()
    assert info["device"] == "Fake GPU 0" and info["compute_capability"] == "9.0" and info["driver"] == "13.0"
    assert get_backend("auto").name == "gpu"


def test_unavailable_reasons(fake, monkeypatch):
    fake.init_error = sys.modules["pycuda.driver"].RuntimeError("cuInit failed: no CUDA-capable device is detected")
    assert "could not be initialised" in gpu.unavailable_reason()
    with pytest.raises(RuntimeError, match="unavailable.*could not be initialised"):
        gpu.GpuBackend()


def test_unavailable_without_devices_or_nvcc(fake, monkeypatch):
    fake.device_count = 0
    assert gpu.unavailable_reason() == "the CUDA driver reports no device"
    fake.device_count = 1
    monkeypatch.setattr(gpu, "find_nvcc", lambda: None)
    assert "nvcc was not found" in gpu.unavailable_reason()


def test_load_compiles_prepared_source_once_and_caches(fake):
    backend = gpu.GpuBackend()
    mod = backend.load(SRC, flags=["-lineinfo"])
    assert mod.kernel_names == ("axpy", "overrun", "skip_last", "crash", "hang", "bump", "underrun")
    (text, options, no_extern_c, arch, cache), = fake.compiled
    assert no_extern_c is True and arch == "sm_90" and options == ("-lineinfo",) and cache is False
    assert text.count('extern "C" __global__') == 7
    backend.load(SRC, flags=["-lineinfo"])
    assert len(fake.compiled) == 1            # second load: from the cubin cache
    backend.load(SRC, flags=["-O3"])
    assert len(fake.compiled) == 2            # other flags: another cubin


def test_compile_error_becomes_build_error(fake):
    with pytest.raises(BuildError, match="planted"):
        gpu.GpuBackend().load("#error nope\n__global__ void k(float* y) {}")


def test_launch_sequence_guards_poison_and_copy_back(fake):
    mod = gpu.GpuBackend().load(SRC)
    args = _args()
    start = len(fake.calls)
    res = mod.launch("axpy", grid=(1,), block=(32,), shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], 3 * np.arange(10, dtype=np.float32))
    assert np.array_equal(args[0], np.arange(10, dtype=np.float32))     # inputs come back unchanged
    names = _names(fake, start)
    # Plain device allocations with guard bands on both sides, one per array, reused by both poisoned runs.
    allocs = [c for c in fake.calls[start:] if c[0] == "mem_alloc"]
    assert [c[2] for c in allocs] == [2 * GUARD_BYTES + 40] * 2
    launches = [c for c in fake.calls[start:] if c[0] == "launch"]
    assert len(launches) == len(POISON_BYTES)
    assert launches[0][3:6] == ((1, 1, 1), (32, 1, 1), 0)
    assert launches[0][6] == ("uint64", "uint64", "int32", "float32")   # pointers, then scalars by value
    # The const input crosses once; guards and poison are set on the device; each run reads back every
    # guard band (2 per buffer) and the data of the writable buffer only.
    assert names.count("memcpy_htod") == 1
    assert names.count("memset_d8") == 2 * 2 + len(POISON_BYTES)
    assert names.count("memcpy_dtoh") == len(POISON_BYTES) * (2 + 3)
    assert names.count("synchronize") == 2 and names.count("free") == 2
    assert names[0] == "push" and names[-1] == "pop"                   # context active only during the launch
    assert res.elapsed_ms is None and res.notes == ()


def test_out_of_bounds_write_names_buffer_and_side(fake):
    mod = gpu.GpuBackend().load(SRC)
    with pytest.raises(OutOfBounds, match=r"args\[1\] \(y: float\*\).*after the buffer.*offset 40"):
        mod.launch("overrun", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))


def test_write_before_the_buffer_is_caught(fake):
    mod = gpu.GpuBackend().load(SRC)
    with pytest.raises(OutOfBounds, match=r"args\[1\].*before the buffer.*offset -4"):
        mod.launch("underrun", grid=1, block=32, shared_bytes=0, args=_args(), outputs=())


def test_empty_arrays_travel(fake):
    mod = gpu.GpuBackend().load(SRC)
    args = [np.zeros(0, np.float32), np.zeros(0, np.float32), np.int32(0), np.float32(1)]
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert args[1].size == 0


def test_unwritten_output_names_first_index(fake):
    mod = gpu.GpuBackend().load(SRC)
    with pytest.raises(UnwrittenOutput, match=r"args\[1\].*1 of 10.*index \(9,\)"):
        mod.launch("skip_last", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    # Negative control: without declaring the output, nothing is poisoned and nothing is reported.
    mod.launch("skip_last", grid=1, block=32, shared_bytes=0, args=_args(), outputs=())


def test_sticky_error_is_kernel_crash_and_next_launch_uses_fresh_context(fake):
    backend = gpu.GpuBackend()
    mod = backend.load(SRC)
    with pytest.raises(KernelCrash, match="illegal memory access.*fresh one"):
        mod.launch("crash", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    broken = fake.contexts[-1]
    assert broken.sticky is not None and ("detach", broken.id) in fake.calls
    mark = len(fake.calls)
    args = _args()
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], 3 * np.arange(10, dtype=np.float32))
    fresh = fake.contexts[-1]
    assert fresh is not broken and len(fake.contexts) == 2
    after = fake.calls[mark:]
    assert ("module_from_buffer", fresh.id) in after                    # module reloaded into the new context
    assert not [c for c in after if len(c) > 1 and c[1] == broken.id]  # the failed context is never used again


def test_timeout_retires_context(fake, monkeypatch):
    backend = gpu.GpuBackend(launch_timeout_s=0.01)
    mod = backend.load(SRC)
    monkeypatch.setattr(sys.modules["pycuda.driver"].Event, "query", lambda self: False)   # never finishes
    with pytest.raises(KernelTimeout, match="still running"):
        mod.launch("hang", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    assert ("detach", fake.contexts[-1].id) in fake.calls


def test_timing_is_median_of_event_times(fake):
    fake.event_times = [5.0, 1.0, 3.0]
    mod = gpu.GpuBackend().load(SRC)
    mark = len(fake.calls)
    res = mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,), timing=(2, 3))
    assert res.elapsed_ms == 3.0
    assert _names(fake, mark).count("launch") == len(POISON_BYTES) + 2 + 3


def test_launch_argument_errors(fake):
    mod = gpu.GpuBackend().load(SRC)
    with pytest.raises(ValueError, match="no kernel 'nope'"):
        mod.launch("nope", grid=1, block=32, shared_bytes=0, args=_args())
    # A block the compiled kernel cannot run is a failed launch (a KernelFault), not bad input, and not sticky.
    with pytest.raises(gpu.LaunchRefused, match="block: .*2048 threads.*at most 1024"):
        mod.launch("axpy", grid=1, block=(2048,), shared_bytes=0, args=_args())
    assert not [c for c in fake.calls if c[0] == "detach"]
    with pytest.raises(ValueError, match="shared_bytes"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=-1, args=_args())
    with pytest.raises(ValueError, match="grid"):
        mod.launch("axpy", grid=(0,), block=32, shared_bytes=0, args=_args())


def test_large_dynamic_shared_memory_is_opted_into(fake):
    mod = gpu.GpuBackend().load(SRC)
    mod.launch("axpy", grid=1, block=32, shared_bytes=100_000, args=_args(), outputs=(1,))
    assert ("set_attribute", "MAX_DYNAMIC_SHARED_SIZE_BYTES", 100_000) in fake.calls
    with pytest.raises(gpu.LaunchRefused, match="shared_bytes: 300000"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=300_000, args=_args(), outputs=(1,))


def test_missing_kernel_symbol_is_build_error(fake):
    mod = gpu.GpuBackend().load(SRC + "template <int N> __global__ void tk(float* y) { }\n")
    fake.kernels["tk"] = _axpy
    with pytest.raises(BuildError, match="template or static"):
        mod.launch("tk", grid=1, block=32, shared_bytes=0, args=[np.zeros(4, np.float32)])
    mod.resolve("axpy")
    with pytest.raises(BuildError, match="template or static"):
        mod.resolve("tk")


def test_in_place_inputs_are_uploaded_fresh_for_each_poisoned_run(fake):
    mod = gpu.GpuBackend().load(SRC)
    args = [np.zeros(6, np.float32), np.zeros(6, np.float32), np.int32(6), np.float32(1)]
    mod.launch("bump", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    # Two runs (one per poison pattern), each from the caller's data: x comes back as x + 1, not x + 2.
    assert args[0].tolist() == [1.0] * 6 and args[1].tolist() == [1.0] * 6


def test_device_choice_follows_worker_and_override(fake, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert gpu.GpuBackend().device_index == 1
    monkeypatch.setenv("QCONFORM_GPU", "0")
    assert gpu.GpuBackend().device_index == 0
    with pytest.raises(ValueError, match="device"):
        gpu.GpuBackend(device=2)


def test_copy_bandwidth_uses_events_and_counts_read_plus_write(fake):
    fake.event_times = [2.0]
    gbps = gpu.GpuBackend().copy_bandwidth_gbps(nbytes=1 << 20, warmup=1, repeats=3)
    assert gbps == pytest.approx(2 * (1 << 20) / 2e-3 / 1e9)
    assert [c[0] for c in fake.calls].count("memcpy_dtod") == 4
    assert gpu.GpuBackend().copy_bandwidth_gbps(nbytes=1 << 20, warmup=1, repeats=3) == gbps
    assert [c[0] for c in fake.calls].count("memcpy_dtod") == 4          # measured once per process and device
    with pytest.raises(ValueError, match="nbytes"):
        gpu.GpuBackend().copy_bandwidth_gbps(nbytes=10)
