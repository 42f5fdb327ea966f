"""The GPU backend's call sequence, isolation and fault handling, driven through a fake `pycuda` on the CPU.

The fake stands in for PyCUDA in this process and in the backend's worker process alike (see fake_pycuda);
the call log it writes, tagged with process ids, shows which process did what.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np
import pytest

from harness.backends import KernelCrash, OutOfBounds, ResourceExhausted, UnwrittenOutput, get_backend
from harness.backends import gpu
from harness.backends.base import GUARD_BYTES, POISON_BYTES, Buffer, BuildError, KernelTimeout
from harness.backends.device_lock import DeviceLock

from cudasrc.instantiations import instantiated
from cudasrc.host_code import Program

from .fake_pycuda import configure

SRC = """
__global__ void axpy(const float* x, float* y, int n, float a) { }
__global__ void overrun(const float* x, float* y, int n, float a) { }
__global__ void skip_last(const float* x, float* y, int n, float a) { }
__global__ void crash(const float* x, float* y, int n, float a) { }
__global__ void trap(const float* x, float* y, int n, float a) { }
__global__ void hang(const float* x, float* y, int n, float a) { }
__global__ void hang_in_driver(const float* x, float* y, int n, float a) { }
__global__ void refused(const float* x, float* y, int n, float a) { }
__global__ void bump(float* x, float* y, int n, float a) { }
__global__ void underrun(const float* x, float* y, int n, float a) { }
__global__ void flag(int* y, bool on) { }
__global__ void kv_write(float* cache, const float* row, int pos, int n) { }
"""
KERNELS = ("axpy", "overrun", "skip_last", "crash", "trap", "hang", "hang_in_driver", "refused", "bump", "underrun",
           "flag", "kv_write")


@pytest.fixture
def fake(monkeypatch, tmp_path):
    setup = configure(monkeypatch, tmp_path, device_count=2)
    monkeypatch.setattr(gpu, "find_nvcc", lambda: "/opt/fake/nvcc")
    monkeypatch.setattr(gpu, "nvcc_identity", lambda nvcc: "fake nvcc 13.0")
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("QCONFORM_GPU_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.delenv("QCONFORM_GPU", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return setup


@pytest.fixture
def backend(fake):
    be = gpu.GpuBackend(launch_timeout_s=5.0, warmup_ms=0.0, lock_wait_s=5.0)
    yield be
    be.close()


def _args(n=10):
    return [np.arange(n, dtype=np.float32), np.zeros(n, np.float32), np.int32(n), np.float32(3)]


def _expect(n=10):
    return 3 * np.arange(n, dtype=np.float32)


def _worker_calls(fake, since=0):
    """The calls made by processes other than this one: the worker processes."""
    import os
    return [c for c in fake.calls()[since:] if c[0] != os.getpid()]


def test_available_with_fake_and_backend_describes_device(fake):
    assert gpu.unavailable_reason() is None
    backend = get_backend("gpu")
    info = backend.describe()
    assert info["device"] == "Fake GPU 0" and info["compute_capability"] == "9.0" and info["driver"] == "13.0"
    assert info["worker_restarts"] == []
    assert get_backend("auto").name == "gpu"


def test_unavailable_reasons(fake):
    fake.set(init_error="cuInit failed: no CUDA-capable device is detected")
    assert "could not be initialised" in gpu.unavailable_reason()
    with pytest.raises(RuntimeError, match="unavailable.*could not be initialised"):
        gpu.GpuBackend()


def test_unavailable_without_devices_or_nvcc(fake, monkeypatch):
    fake.set(device_count=0)
    assert gpu.unavailable_reason() == "the CUDA driver reports no device"
    fake.set(device_count=1)
    monkeypatch.setattr(gpu, "find_nvcc", lambda: None)
    assert "nvcc was not found" in gpu.unavailable_reason()


def test_exclusive_and_prohibited_compute_modes_are_reported(fake):
    fake.set(compute_mode="EXCLUSIVE_PROCESS")
    assert "exclusive-process compute mode" in gpu.unavailable_reason()
    fake.set(compute_mode="PROHIBITED")
    assert "prohibited compute mode" in gpu.unavailable_reason()
    fake.set(compute_mode="DEFAULT")      # negative control
    assert gpu.unavailable_reason() is None


def test_the_caller_never_creates_a_context(backend, fake):
    mod = backend.load(SRC)
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    import os
    mine = [c for c in fake.calls() if c[0] == os.getpid()]
    assert mine and not [c for c in mine if c[1] in ("make_context", "mem_alloc", "launch")]
    assert [c[1] for c in _worker_calls(fake)].count("context_made") == 1


def test_failed_context_creation_is_reported_as_such(fake):
    fake.set(context_error="cuCtxCreate failed: out of memory")
    backend = gpu.GpuBackend()
    with pytest.raises(gpu.ContextFailure, match="could not create a CUDA context on device 0.*out of memory") as e:
        backend.load(SRC)
    assert "rejected the compiled module" not in str(e.value)
    backend.close()


def test_load_compiles_prepared_source_once_and_caches(backend, fake):
    mod = backend.load(SRC, flags=["-lineinfo"])
    assert mod.kernel_names == KERNELS
    compiles = [c for c in fake.calls() if c[1] == "compile"]
    assert len(compiles) == 1
    _, _, options, no_extern_c, arch, cache = compiles[0]
    from harness.toolchain import host_libraries
    assert no_extern_c is True and arch == "sm_90" and cache is False
    assert options == ["-lineinfo", *host_libraries.nvcc_flags()]     # the host libraries' declarations, searched last
    backend.load(SRC, flags=["-lineinfo"])
    assert fake.names().count("compile") == 1           # second load: from the cubin cache
    backend.load(SRC, flags=["-O3"])
    assert fake.names().count("compile") == 2           # other flags: another cubin


def test_a_changed_header_is_a_new_cubin(backend, fake, tmp_path):
    """The cubin cache's key covers the source's own headers (found through its -I folders): an edited header is
    compiled again, never served from the cubin of its old text."""
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "scale.h"
    header.write_text("#define SCALE 2\n")
    src = '#include "scale.h"\n' + SRC
    backend.load(src, flags=[f"-I{tmp_path / 'inc'}"])
    backend.load(src, flags=[f"-I{tmp_path / 'inc'}"])
    assert fake.names().count("compile") == 1
    header.write_text("#define SCALE 3\n")
    backend.load(src, flags=[f"-I{tmp_path / 'inc'}"])
    assert fake.names().count("compile") == 2


def test_a_parameter_list_with_conditionals_is_read_with_the_builds_macros(backend):
    src = "__global__ void k(float* y,\n#ifdef SCALED\n  float s,\n#endif\n  int n) { y[0] = n; }\n"
    assert [p for _, p in backend.load(src).signatures["k"].params] == ["y", "n"]
    assert [p for _, p in backend.load(src, flags=["-DSCALED"]).signatures["k"].params] == ["y", "s", "n"]


def test_compile_error_becomes_build_error(backend):
    with pytest.raises(BuildError, match="planted"):
        backend.load("#error nope\n__global__ void k(float* y) {}")


def test_launch_sequence_guards_poison_and_copy_back(backend, fake):
    mod = backend.load(SRC)
    args = _args()
    start = len(fake.calls())
    res = mod.launch("axpy", grid=(1,), block=(32,), shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect())
    assert np.array_equal(args[0], np.arange(10, dtype=np.float32))     # inputs come back unchanged
    calls = _worker_calls(fake, start)
    names = [c[1] for c in calls]
    # Plain device allocations with guard bands on both sides, one per array, reused by both poisoned runs.
    allocs = [c for c in calls if c[1] == "mem_alloc"]
    assert [c[3] for c in allocs] == [2 * GUARD_BYTES + 40] * 2
    launches = [c for c in calls if c[1] == "launch"]
    assert len(launches) == len(POISON_BYTES)
    assert [tuple(x) for x in launches[0][4:6]] == [(1, 1, 1), (32, 1, 1)] and launches[0][6] == 0
    assert launches[0][7] == ["uint64", "uint64", "int32", "float32"]   # pointers, then scalars by value
    # The const input crosses once; guards and poison are set on the device; each run reads back every
    # guard band (2 per buffer) and the data of the writable buffer only.
    assert names.count("memcpy_htod") == 1
    assert names.count("memset_d8") == 2 * 2 + len(POISON_BYTES)
    assert names.count("memcpy_dtoh") == len(POISON_BYTES) * (2 + 3)
    assert names.count("free") == 2
    assert res.elapsed_ms is None and res.notes == () and res.timing is None


def test_out_of_bounds_write_names_buffer_and_side(backend):
    mod = backend.load(SRC)
    with pytest.raises(OutOfBounds, match=r"args\[1\] \(y: float\*\) 1 byte\(s\) past its end \(element 10 of 10\) "
                                          r"at byte offset 40"):
        mod.launch("overrun", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))


def test_write_before_the_buffer_is_caught(backend):
    mod = backend.load(SRC)
    with pytest.raises(OutOfBounds, match=r"args\[1\].*before its start \(element -1\) at byte offset -1, 4 guard byte"):
        mod.launch("underrun", grid=1, block=32, shared_bytes=0, args=_args(), outputs=())


def test_empty_arrays_travel(backend):
    mod = backend.load(SRC)
    args = [np.zeros(0, np.float32), np.zeros(0, np.float32), np.int32(0), np.float32(1)]
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert args[1].size == 0


def test_unwritten_output_names_first_index(backend):
    mod = backend.load(SRC)
    with pytest.raises(UnwrittenOutput, match=r"args\[1\].*1 of 10.*index \(9,\)"):
        mod.launch("skip_last", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    # Negative control: without declaring the output, nothing is poisoned and nothing is reported.
    mod.launch("skip_last", grid=1, block=32, shared_bytes=0, args=_args(), outputs=())


def _pids(fake, call):
    return [c[0] for c in _worker_calls(fake) if c[1] == call]


@pytest.mark.parametrize("kernel, message", [("crash", "illegal memory access"),
                                             ("trap", "unspecified launch failure")])
def test_sticky_error_is_kernel_crash_and_the_next_case_runs_in_a_new_worker(backend, fake, kernel, message):
    mod = backend.load(SRC)
    with pytest.raises(KernelCrash, match=f"waiting for the kernel.*{message}.*sticky error.*restarted"):
        mod.launch(kernel, grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    first = _pids(fake, "context_made")
    assert len(first) == 1
    # The broken context is never used again, nor destroyed in that process: the process is killed.
    assert "detach" not in fake.names()
    args = _args()
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect())
    made = _pids(fake, "context_made")
    assert len(made) == 2 and made[1] != made[0]                         # a new worker with its own context
    assert made[1] in _pids(fake, "module_from_buffer")                  # the module reloaded into it
    assert set(_pids(fake, "launch")) == set(made)
    assert len(backend.describe()["worker_restarts"]) == 1


def test_hung_kernel_times_out_within_the_limit_and_the_next_case_runs(fake):
    backend = gpu.GpuBackend(launch_timeout_s=0.5, warmup_ms=0.0)
    mod = backend.load(SRC)
    t0 = time.monotonic()
    with pytest.raises(KernelTimeout, match=r"hang<<<.*still running after 0\.5 s.*killed"):
        mod.launch("hang", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    assert time.monotonic() - t0 < 0.5 + 5           # the limit, plus a worker start at most
    hung_pid = _pids(fake, "context_made")[0]
    args = _args()
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect())
    assert _pids(fake, "context_made")[-1] != hung_pid
    # No clean-up was tried in the hung process (a free or a context destroy would wait for the kernel).
    assert not [c for c in _worker_calls(fake) if c[0] == hung_pid and c[1] in ("free", "detach")]
    backend.close()


def test_a_driver_call_that_never_returns_is_cut_by_the_callers_limit(fake, monkeypatch):
    backend = gpu.GpuBackend(launch_timeout_s=0.2, lock_wait_s=0.2)
    mod = backend.load(SRC)
    monkeypatch.setattr(gpu, "REQUEST_SLACK_S", 1.0)
    with pytest.raises(KernelTimeout, match=r"did not answer within .*last step: the launch\)"):
        mod.launch("hang_in_driver", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    monkeypatch.setattr(gpu, "REQUEST_SLACK_S", 120.0)
    args = _args()
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect())
    backend.close()


def test_refused_launch_is_not_sticky_and_keeps_the_worker(backend, fake):
    mod = backend.load(SRC)
    with pytest.raises(gpu.LaunchRefused, match="too many resources.*not a sticky error"):
        mod.launch("refused", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    args = _args()
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect())
    assert len(_pids(fake, "context_made")) == 1 and backend.describe()["worker_restarts"] == []


def test_bool_scalar_travels_as_one_byte(backend):
    mod = backend.load(SRC)
    for on in (True, False):
        y = np.full(1, 7, np.int32)
        mod.launch("flag", grid=1, block=1, shared_bytes=0, args=[y, np.bool_(on)], outputs=(0,))
        assert y[0] == int(on)
    with pytest.raises(ValueError, match=r"args\[1\].*bool"):
        mod.launch("flag", grid=1, block=1, shared_bytes=0, args=[np.zeros(1, np.int32), np.uint8(1)], outputs=(0,))


def test_shared_memory_opt_in_counts_static_plus_dynamic(fake):
    fake.set(static_shared=40_000)
    backend = gpu.GpuBackend()
    mod = backend.load(SRC)
    mod.launch("axpy", grid=1, block=32, shared_bytes=10_000, args=_args(), outputs=(1,))
    sets = [c for c in fake.calls() if c[1] == "set_attribute"]
    assert sets and sets[-1][2:] == ["MAX_DYNAMIC_SHARED_SIZE_BYTES", 10_000]   # 40000 + 10000 > 48 KiB
    with pytest.raises(gpu.LaunchRefused, match="shared_bytes: 200000 dynamic \\+ 40000 static"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=200_000, args=_args(), outputs=(1,))
    backend.close()
    fake.set(static_shared=0)    # negative control: 10000 bytes alone need no opt-in
    backend = gpu.GpuBackend()
    mark = len(fake.calls())
    backend.load(SRC).launch("axpy", grid=1, block=32, shared_bytes=10_000, args=_args(), outputs=(1,))
    assert "set_attribute" not in fake.names(mark)
    backend.close()


def test_device_out_of_memory_is_a_per_case_error(fake):
    fake.set(oom_above=10_000)
    backend = gpu.GpuBackend()
    mod = backend.load(SRC)
    big = [np.zeros(5000, np.float32), np.zeros(5000, np.float32), np.int32(5000), np.float32(1)]
    with pytest.raises(ResourceExhausted, match=r"allocating args\[0\].*out of memory"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=big, outputs=(1,))
    args = _args()       # the next case runs, in the same worker
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect()) and len(_pids(fake, "context_made")) == 1
    backend.close()


def test_host_out_of_memory_is_a_per_case_error(fake):
    fake.set(host_oom_above=1000)
    backend = gpu.GpuBackend()
    mod = backend.load(SRC)
    big = [np.zeros(500, np.float32), np.zeros(500, np.float32), np.int32(500), np.float32(1)]
    with pytest.raises(ResourceExhausted, match=r"copying args\[1\].*back: the host is out of memory"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=big, outputs=(1,))
    args = _args()
    mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,))
    assert np.array_equal(args[1], _expect()) and len(_pids(fake, "context_made")) == 1
    backend.close()


def test_out_of_memory_makes_the_case_unchecked_in_the_judge():
    from harness.judging.core import UNCHECKED, verdict_for_fault
    assert verdict_for_fault(ResourceExhausted(None, "x")) == UNCHECKED
    assert verdict_for_fault(KernelCrash(None, "x")) != UNCHECKED


def test_timing_batches_launches_between_one_event_pair(fake):
    fake.set(event_times=[10.0, 2.0, 6.0])      # ms per batch of 4 launches: 2.5, 0.5, 1.5 per launch
    backend = gpu.GpuBackend(warmup_ms=0.0)
    mod = backend.load(SRC)
    mark = len(fake.calls())
    res = mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,), timing=(3, 4))
    assert res.elapsed_ms == 1.5
    assert res.timing["min_ms"] == 0.5 and res.timing["max_ms"] == 2.5 and res.timing["spread"] == pytest.approx(4 / 3)
    names = fake.names(mark)
    # Two checked runs, one warm-up launch, then 3 batches of 4 launches with no wait inside a batch.
    assert names.count("launch") == len(POISON_BYTES) + 1 + 3 * 4 and names.count("time_till") == 3
    # Each batch: its start event recorded, 4 launches with no host wait between them, its end event recorded.
    text = " ".join(names)
    assert text.count("Event Event record launch launch launch launch record") == 3
    assert any("median of 3 batches of 4" in n for n in res.notes)
    backend.close()


def test_timing_warm_up_lasts_its_duration(fake):
    backend = gpu.GpuBackend(warmup_ms=60.0)
    mod = backend.load(SRC)
    res = mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,), timing=(2, 3))
    assert res.timing["warmup_ms"] >= 60.0 and res.timing["warmup_launches"] >= 1
    backend.close()


def test_timing_is_skipped_with_the_reason_while_another_process_times(backend):
    mod = backend.load(SRC)
    lock = DeviceLock(backend.lock_key)    # this process plays the other test worker's timing window
    backend.lock_wait_s = 0.3
    with lock.held(exclusive=True, wait_s=1) as busy:
        assert busy is None
        args = _args()
        # the checked launch waits for the lock (shared), then goes ahead without it: only timing needs it
        res = mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=args, outputs=(1,), timing=(2, 2))
    lock.close()
    assert np.array_equal(args[1], _expect())
    assert res.elapsed_ms is None
    assert res.timing["skipped"].startswith("timing skipped: process ") and "more than 0.3 s" in res.timing["skipped"]
    assert res.notes[-1] == res.timing["skipped"]
    # Negative control: with the lock free, the same launch is timed.
    res = mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,), timing=(2, 2))
    assert res.elapsed_ms == 0.5


def test_copy_bandwidth_counts_read_plus_write_under_the_same_batching(fake):
    fake.set(event_times=[2.0])
    backend = gpu.GpuBackend(warmup_ms=0.0)
    result = backend.copy_bandwidth(nbytes=1 << 20, batches=3, copies=4)
    assert result["gbps"] == pytest.approx(2 * (1 << 20) / 0.5e-3 / 1e9)     # 2 ms per batch of 4 copies
    assert fake.names().count("memcpy_dtod") == 1 + 3 * 4
    assert backend.copy_bandwidth_gbps(nbytes=1 << 20, batches=3, copies=4) == result["gbps"]
    assert fake.names().count("memcpy_dtod") == 1 + 3 * 4            # measured once per backend
    with pytest.raises(ValueError, match="nbytes"):
        backend.copy_bandwidth_gbps(nbytes=10)
    backend.close()


def test_launch_argument_errors(backend, fake):
    mod = backend.load(SRC)
    with pytest.raises(ValueError, match="no kernel 'nope'"):
        mod.launch("nope", grid=1, block=32, shared_bytes=0, args=_args())
    # A block the compiled kernel cannot run is a failed launch (a KernelFault), not bad input, and not sticky.
    with pytest.raises(gpu.LaunchRefused, match="block: .*2048 threads.*at most 1024"):
        mod.launch("axpy", grid=1, block=(2048,), shared_bytes=0, args=_args())
    with pytest.raises(ValueError, match="shared_bytes"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=-1, args=_args())
    with pytest.raises(ValueError, match="grid"):
        mod.launch("axpy", grid=(0,), block=32, shared_bytes=0, args=_args())
    with pytest.raises(ValueError, match="timing"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=0, args=_args(), timing=(0, 5))
    assert len(_pids(fake, "context_made")) == 1


def test_a_template_kernel_launches_by_an_instantiation_only(backend):
    mod = backend.load(SRC + "template <int N> __global__ void tk(float* y) { }\n")
    with pytest.raises(ValueError, match="no kernel 'tk'.*template kernel launches by an instantiation"):
        mod.launch("tk", grid=1, block=32, shared_bytes=0, args=[np.zeros(4, np.float32)])
    mod.resolve("axpy")
    with pytest.raises(ValueError, match="no kernel 'tk<4>'.*instantiated"):
        mod.resolve("tk<4>")


TEMPLATE_SRC = """namespace moe {
template <int N> __global__ void taxpy(const float* x, float* y, int n, float a) { }
}
"""


def test_an_instantiation_launches_by_its_mangled_symbol(backend, fake, monkeypatch):
    """The instantiation `instantiated()` adds is found in the cubin by its demangled name (the fake's cubin is
    the source text, so the cubin's reading is stood in for here; tests/toolchain/test_cubin.py reads real ones),
    and the driver is asked for the mangled symbol."""
    asked = []

    def symbol(cubin, name, scope, params=None):
        asked.append((name, scope))
        return "_ZN3moe5taxpyILi4EEEvPKfPfif", ()

    monkeypatch.setattr(gpu, "kernel_symbol", symbol)
    mod = backend.load(instantiated(TEMPLATE_SRC, ["taxpy<4>"]))
    mod.resolve("taxpy<4>")
    x, y = np.arange(6, dtype=np.float32), np.zeros(6, np.float32)
    mod.launch("taxpy< 4 >", grid=1, block=32, shared_bytes=0, args=[x, y, np.int32(6), np.float32(2)], outputs=(1,))
    assert np.array_equal(y, 2 * x)          # however the name is spaced (launch_name)
    assert asked == [("taxpy<4>", "moe::")]            # read once per module
    assert "_ZN3moe5taxpyILi4EEEvPKfPfif" in {c[3] for c in _worker_calls(fake) if c[1] == "get_function"}


def test_a_headers_plain_kernel_is_asked_for_by_its_mangled_symbol(backend, monkeypatch, tmp_path):
    """A kernel of one of the source's own headers is compiled into the module but gets no `extern "C"` (only the
    source's kernels do): the driver is asked for its C++ symbol, read from the cubin (tests/toolchain/test_cubin.py
    reads real ones); the source's own plain kernels keep their names."""
    (tmp_path / "quant.cuh").write_text("#pragma once\nstatic __global__ void halve(float* y) { y[0] *= 0.5f; }\n")
    src = '#include "quant.cuh"\n__global__ void twice(float* y) { y[0] *= 2.0f; }\n'
    asked = []

    def symbol(cubin, name, scope, params=None):
        asked.append((name, scope))
        return ("_Z5halvePf" if name == "halve" else None), ()

    monkeypatch.setattr(gpu, "kernel_symbol", symbol)
    mod = backend.load(src, ["-I" + str(tmp_path)])
    assert mod.signatures["halve"].header == "quant.cuh" and mod.signatures["twice"].header == ""
    assert mod._symbol(mod.signatures["halve"]) == "_Z5halvePf" and mod._symbol(mod.signatures["twice"]) == "twice"
    assert asked == [("halve", "")]
    monkeypatch.setattr(gpu, "kernel_symbol", lambda cubin, name, scope, params=None: (None, ()))
    mod = backend.load(src + "\n", ["-I" + str(tmp_path)])
    with pytest.raises(BuildError, match=r"kernel 'halve' of quant.cuh: not among the compiled module's kernels"):
        mod._symbol(mod.signatures["halve"])


def test_an_instantiation_the_cubin_lacks_is_a_build_error(backend, monkeypatch):
    monkeypatch.setattr(gpu, "kernel_symbol",
                        lambda cubin, name, scope, params=None: (None, ("moe::taxpy<8>", "moe::taxpy<16>")))
    mod = backend.load(instantiated(TEMPLATE_SRC, ["taxpy<4>"]))
    with pytest.raises(BuildError, match=r"no instantiation spelled so \(it has moe::taxpy<8>, moe::taxpy<16>"):
        mod.launch("taxpy<4>", grid=1, block=32, shared_bytes=0,
                   args=[np.zeros(6, np.float32), np.zeros(6, np.float32), np.int32(6), np.float32(2)])


def test_in_place_inputs_are_uploaded_fresh_for_each_poisoned_run(backend):
    mod = backend.load(SRC)
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


# -- resident buffers -----------------------------------------------------------------------------------
def test_resident_buffers_alloc_write_read_free(backend, fake):
    mod = backend.load(SRC)
    assert mod.supports_resident_buffers
    x = mod.alloc("x", (6,), np.float32, init=np.arange(6, dtype=np.float32))
    assert isinstance(x, Buffer) and x.shape == (6,) and x.dtype == np.float32
    assert mod.read(x).tolist() == list(range(6))
    poisoned = mod.alloc("p", (2,), np.float32)
    assert mod.read(poisoned).view(np.uint8).tolist() == [POISON_BYTES[0]] * 8
    mod.write(x, np.full(6, 2, np.float32))
    assert mod.read(x).tolist() == [2.0] * 6
    with pytest.raises(ValueError, match=r"array: buffer 'x' \(6 float32\) takes a \(6,\) float32 array"):
        mod.write(x, np.zeros(5, np.float32))
    mod.free(x)
    with pytest.raises(ValueError, match="not a live resident buffer"):
        mod.read(x)


def test_resident_buffers_are_used_in_place_without_copies(backend, fake):
    mod = backend.load(SRC)
    x = mod.alloc("x", (6,), np.float32, init=np.zeros(6, np.float32))
    y = mod.alloc("y", (6,), np.float32)
    mark = len(fake.calls())
    mod.launch("bump", grid=1, block=32, shared_bytes=0, args=[x, y, np.int32(6), np.float32(1)], outputs=(1,))
    # In/out x: both poisoned runs start from its contents before the launch (x + 1, not x + 2).
    assert mod.read(x).tolist() == [1.0] * 6 and mod.read(y).tolist() == [1.0] * 6
    assert "memcpy_htod" not in fake.names(mark)[:fake.names(mark).index("launch")]


def test_resident_in_out_buffer_keeps_what_the_kernel_does_not_write(backend):
    mod = backend.load(SRC)
    cache = mod.alloc("kc", (4, 3), np.float32, init=np.full((4, 3), 9, np.float32))
    mod.launch("kv_write", grid=1, block=32, shared_bytes=0,
               args=[cache, np.array([1, 2, 3], np.float32), np.int32(2), np.int32(3)])
    want = np.full((4, 3), 9, np.float32)
    want[2] = [1, 2, 3]
    assert np.array_equal(mod.read(cache), want)


def test_resident_output_must_be_written_in_full_and_guards_apply(backend):
    mod = backend.load(SRC)
    x = mod.alloc("x", (10,), np.float32, init=np.arange(10, dtype=np.float32))
    y = mod.alloc("y", (10,), np.float32)
    with pytest.raises(UnwrittenOutput, match=r"resident buffer 'y'.*1 of 10.*index \(9,\)"):
        mod.launch("skip_last", grid=1, block=32, shared_bytes=0, args=[x, y, np.int32(10), np.float32(3)],
                   outputs=(1,))
    with pytest.raises(OutOfBounds, match=r"resident buffer 'y'.*past its end.*offset 40"):
        mod.launch("overrun", grid=1, block=32, shared_bytes=0, args=[x, y, np.int32(10), np.float32(3)],
                   outputs=(1,))
    with pytest.raises(ValueError, match=r"args\[1\].*float32"):
        mod.launch("axpy", grid=1, block=32, shared_bytes=0,
                   args=[x, mod.alloc("i", (10,), np.int32), np.int32(10), np.float32(3)])


def test_resident_buffers_of_a_killed_worker_are_reported_lost(backend):
    mod = backend.load(SRC)
    x = mod.alloc("x", (10,), np.float32, init=np.arange(10, dtype=np.float32))
    with pytest.raises(KernelCrash):
        mod.launch("crash", grid=1, block=32, shared_bytes=0, args=_args(), outputs=(1,))
    with pytest.raises(gpu.BufferLost, match=r"resident buffer 'x' \(10 float32\) was lost.*illegal memory access"):
        mod.read(x)
    fresh = mod.alloc("x2", (2,), np.float32, init=np.ones(2, np.float32))   # a new worker serves new buffers
    assert mod.read(fresh).tolist() == [1.0, 1.0]


def test_a_grid_group_is_refused_before_compiling(backend, fake):
    """grid.sync needs a cooperative launch, which this backend does not make; a comment naming it is no use."""
    src = ("#include <cooperative_groups.h>\n// this_grid() in a comment\n__global__ void k(float* y) {\n"
           "  cooperative_groups::this_grid().sync();\n  y[0] = 1.0f;\n}\n")
    with pytest.raises(gpu.UnsupportedConstruct, match=r"grid group \(line 4\): its grid\.sync needs a cooperative "
                                                       r"launch"):
        backend.load(src)
    assert "compile" not in fake.names()
    backend.load(SRC.replace("/*", "/* this_grid() */ /*", 1) if "/*" in SRC else "// grid_group\n" + SRC)


def test_pycudas_own_headers_folder_is_passed_to_nvcc(tmp_path, monkeypatch):
    """PyCUDA's compile() always adds its folder of device headers (pycuda-complex.hpp); qconform's confined nvcc,
    which replaced it, adds it too, so a source written for PyCUDA still builds (and that folder may be read)."""
    import sys
    package = tmp_path / "site" / "pycuda"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "pycuda", raising=False)
    assert gpu._pycuda_include() == [f"-I{package / 'cuda'}"]
    seen = []
    monkeypatch.setattr(gpu, "cubin_of", lambda text, nvcc, options: (seen.append(options), (b"\x7fELF", ""))[1])
    monkeypatch.delenv(gpu.DRIVER_ENV, raising=False)
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    backend = gpu.GpuBackend.__new__(gpu.GpuBackend)             # no device: only the compile step is used
    backend.nvcc = "/opt/fake/nvcc"
    backend.device = type("Sm90", (), {"compute_capability": lambda self: (9, 0)})()
    assert backend._cached_cubin("pycuda-include-test", "__global__ void k() {}", ("-O3",), {}, Program()) == b"\x7fELF"
    from harness.toolchain import host_libraries
    assert seen == [["-O3", *host_libraries.nvcc_flags(), f"-I{package / 'cuda'}", "-arch", "sm_90"]]
    monkeypatch.delitem(sys.modules, "pycuda", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "site")])
    assert gpu._pycuda_include() == []                            # no PyCUDA: nothing added


def test_nvcc_compiles_the_device_code_host_functions_dropped_from_the_source_and_its_headers(tmp_path, monkeypatch):
    """As on emu: a torch binding in the source and a host helper in its header are not compiled (nvcc would refuse
    `torch::Tensor`, whose headers are not here); the header is read from a copy without its host code, found first,
    and a message names it at its own path."""
    (tmp_path / "lib.cuh").write_text("#pragma once\n__device__ int twice(int x) { return 2 * x; }\n"
                                      "inline void sync_all() { c10::cuda::device_synchronize(); }\n")
    source = ('#include "lib.cuh"\n__global__ void k(int* y) { y[0] = twice(y[0]); }\n'
              "void bind(torch::Tensor& t) { k<<<1, 1>>>(t.data_ptr<int>()); }\n")
    seen = []

    def nvcc(text, nvcc_path, options):
        copy = next(o[2:] for o in options if o.startswith("-I") and "device-headers" in o)
        seen.append((text, options, (Path(copy) / "lib.cuh").read_text()))
        return None, f"{copy}/lib.cuh(2): error: planted"

    monkeypatch.setattr(gpu, "cubin_of", nvcc)
    monkeypatch.setattr(gpu, "nvcc_identity", lambda path: "fake nvcc 13.0")
    monkeypatch.delenv(gpu.DRIVER_ENV, raising=False)
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    backend = gpu.GpuBackend.__new__(gpu.GpuBackend)             # no device: only the compile step is used
    backend.nvcc = "/opt/fake/nvcc"
    backend.device = type("Sm90", (), {"compute_capability": lambda self: (9, 0)})()
    with pytest.raises(BuildError, match=re.escape(f"{tmp_path}/lib.cuh(2): error: planted")) as caught:
        backend.load(source, (f"-I{tmp_path}",))
    assert "device-headers" not in str(caught.value)
    text, options, header = seen[0]
    assert "torch" not in text and 'extern "C" __global__ void k' in text
    assert text.count("\n") >= source.count("\n") - 1                # lines keep their numbers
    assert "twice" in header and "c10" not in header
    copy = next(i for i, o in enumerate(options) if "device-headers" in o)
    assert options[copy + 1] == f"-I{tmp_path}"                      # the copy first, the original after it
