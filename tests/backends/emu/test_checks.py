"""Every check of the emu backend, each with a planted bug that must be reported and a correct twin that
must pass (the negative control of the check)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends import (BarrierDivergence, DataRace, Deadlock, KernelCrash, KernelTimeout, OutOfBounds,
                              RaceDetected, ResourceExhausted, UnwrittenOutput)
from harness.backends import UninitializedRead
from harness.backends.emu import guarded

SRC = r"""
__global__ void fill_ok(float* y, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) y[i]=1.0f; }
__global__ void fill_oob(float* y, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<=n) y[i]=1.0f; }
__global__ void fill_under(float* y, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n) y[i-1]=1.0f; }
__global__ void fill_short(float* y, int n){ int i=blockIdx.x*blockDim.x+threadIdx.x; if(i<n-1) y[i]=1.0f; }
__global__ void pair_ok(const float* x, float* y){ __shared__ float s[64]; s[threadIdx.x]=x[threadIdx.x];
  __syncthreads(); s[threadIdx.x]+=0.0f; __syncthreads(); y[threadIdx.x]=s[(threadIdx.x+1)%64]; }
__global__ void pair_race(const float* x, float* y){ __shared__ float s[64]; s[threadIdx.x]=x[threadIdx.x];
  __syncthreads(); s[threadIdx.x]+=s[(threadIdx.x+1)%64]; __syncthreads(); y[threadIdx.x]=s[threadIdx.x]; }
__global__ void half_init(float* y){ __shared__ float s[64]; if(threadIdx.x<32) s[threadIdx.x]=1.0f;
  __syncthreads(); y[threadIdx.x]=s[threadIdx.x]; }
__global__ void two_sites(float* y){ if(threadIdx.x<16){ __syncthreads(); }
  else { __syncthreads(); } y[threadIdx.x]=0.0f; }
__global__ void early_exit(float* y){ if(threadIdx.x==5) return; __syncthreads(); y[threadIdx.x]=0.0f; }
__global__ void shfl_exited(float* y){ if(threadIdx.x==7) return;
  y[threadIdx.x]=__shfl_down_sync(0xffffffffu, 1.0f, 1); }
__global__ void shfl_vs_bar(float* y){ if(threadIdx.x%32<16){ y[threadIdx.x]=__shfl_sync(0xffffffffu, 1.0f, 0); }
  else { __syncthreads(); } }
__global__ void crash(float* y){ float* p=y+(1L<<40); *p=1.0f; }
__global__ void spin(float* y){ while(y[0]==y[0]) {} }
__global__ void static_shared_oob(float* y){ __shared__ float s[32]; s[threadIdx.x]=1.0f; y[threadIdx.x]=0.0f; }
__global__ void dyn_ok(float* y){ extern __shared__ float sm[]; sm[threadIdx.x]=threadIdx.x; __syncthreads();
  y[threadIdx.x]=sm[blockDim.x-1-threadIdx.x]; }
__global__ void dyn_oob(float* y){ extern __shared__ float sm[]; sm[threadIdx.x+1]=threadIdx.x; y[threadIdx.x]=0.0f; }
__global__ void block_order(float* y){ y[0]=(float)blockIdx.x; }
__global__ void trap(float* y){ if(threadIdx.x==3) __trap(); y[threadIdx.x]=0.0f; }
__global__ void failed_assert(float* y){ assert(y[0] == 1.0f); y[0]=2.0f; }
__global__ void big_local(float* y){ volatile float a[400000]; for(int i=0;i<400000;++i) a[i]=i; y[0]=a[7]; }
__device__ __noinline__ float deep(float* y){ volatile float a[400000]; for(int i=0;i<400000;++i) a[i]=i; return a[7]; }
__global__ void one_deep(float* y){ float v = threadIdx.x == 37 ? deep(y) : 1.0f; y[threadIdx.x] = v; }
"""


@pytest.fixture(scope="module")
def mod(load):
    return load(SRC)


@pytest.fixture(scope="module")
def schedules_only():
    """The differential schedules alone (the race detector off): the second opinion on races."""
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=60, race_check=False)
    yield backend.load(SRC)
    backend.close()


def f32(n, fill=0.0):
    return np.full(n, fill, np.float32)


def test_correct_kernel_passes_and_copies_back(mod):
    y = f32(100)
    mod.launch("fill_ok", (2,), (64,), 0, [y, np.int32(100)], outputs=(0,))
    assert np.all(y == 1.0)


def test_write_past_end_is_out_of_bounds(mod):
    with pytest.raises(OutOfBounds, match=r"'y' .*past its end \(element 100 of 100\)") as e:
        mod.launch("fill_oob", (2,), (64,), 0, [f32(100), np.int32(100)], outputs=(0,))
    assert "fill_oob<<<2x1x1, 64x1x1, 0>>>" in str(e.value)


def test_write_before_start_is_out_of_bounds(mod):
    with pytest.raises(OutOfBounds, match=r"'y' .*before its start \(element -1\)"):
        mod.launch("fill_under", (1,), (64,), 0, [f32(64), np.int32(64)], outputs=(0,))


def test_unwritten_output_names_first_index(mod):
    with pytest.raises(UnwrittenOutput, match=r"1 of 64 elements of output 'y' .*index 63"):
        mod.launch("fill_short", (1,), (64,), 0, [f32(64), np.int32(64)], outputs=(0,))


def test_unwritten_needs_outputs_declared(mod):
    # Not named as an output: never poisoned, so the untouched element keeps the caller's value.
    y = f32(64, 7.0)
    mod.launch("fill_short", (1,), (64,), 0, [y, np.int32(64)])
    assert y[63] == 7.0 and np.all(y[:63] == 1.0)


def test_race_between_barriers_is_detected(mod, schedules_only):
    x = np.arange(64, dtype=np.float32)
    with pytest.raises(DataRace, match=r"__shared__ 's' .* index 1 .*read by .*thread \(0,0,0\).* and write by "
                                       r".*thread \(1,0,0\)"):
        mod.launch("pair_race", (1,), (64,), 0, [x, f32(64)], outputs=(1,))
    with pytest.raises(RaceDetected, match=r"'y' differs .* under forward.* under reverse"):
        schedules_only.launch("pair_race", (1,), (64,), 0, [x, f32(64)], outputs=(1,))


def test_race_free_twin_passes(mod, schedules_only):
    x = np.arange(64, dtype=np.float32)
    for m in (mod, schedules_only):
        y = f32(64)
        m.launch("pair_ok", (1,), (64,), 0, [x, y], outputs=(1,))
        assert np.array_equal(y, np.roll(x, -1))


def test_shared_memory_read_before_write(mod):
    with pytest.raises(UninitializedRead, match=r"'y' differs at 32 element\(s\); first at index 32"):
        mod.launch("half_init", (1,), (64,), 0, [f32(64)], outputs=(0,))


def test_barriers_at_different_lines(mod):
    with pytest.raises(BarrierDivergence, match=r"warp 0 lane 16 .*__syncthreads at line \d+ while 16 thread\(s\) "
                                                r"wait at __syncthreads at line \d+"):
        mod.launch("two_sites", (1,), (64,), 0, [f32(64)])


def test_exit_while_others_wait_at_barrier(mod):
    with pytest.raises(BarrierDivergence, match=r"block \(0,0,0\): 1 thread\(s\) exited \(first: warp 0 lane 5, "
                                                r"thread \(5,0,0\)\) while 63 wait at __syncthreads \(line \d+\)"):
        mod.launch("early_exit", (1,), (64,), 0, [f32(64)])


def test_shuffle_naming_exited_lane(mod):
    with pytest.raises(BarrierDivergence, match=r"warp 0 lane 7 .*exited while lane\(s\) 0-6 wait at "
                                                r"__shfl_down_sync"):
        mod.launch("shfl_exited", (1,), (32,), 0, [f32(32)])


def test_deadlock_reports_block_warp_and_line(mod):
    with pytest.raises(Deadlock, match=r"block \(0,0,0\): no thread can make progress; warp 0 lanes 0-15 wait at "
                                       r"__shfl_sync \(line \d+\) for lane\(s\) 16-31; warp 0 lanes 16-31 wait at "
                                       r"__syncthreads"):
        mod.launch("shfl_vs_bar", (1,), (64,), 0, [f32(64)])


def test_static_shared_overflow(mod):
    with pytest.raises(OutOfBounds, match=r"past the end of __shared__ 's' \(line \d+, 128 bytes\)"):
        mod.launch("static_shared_oob", (1,), (64,), 0, [f32(64)])


def test_dynamic_shared_bounds(mod):
    y = f32(64)
    mod.launch("dyn_ok", (1,), (64,), 256, [y], outputs=(0,))
    assert np.array_equal(y, np.arange(63, -1, -1, dtype=np.float32))
    with pytest.raises(OutOfBounds, match=r"past the end of the extern __shared__ area \(256 dynamic bytes"):
        mod.launch("dyn_oob", (1,), (64,), 256, [f32(64)])


def test_block_order_dependence_is_a_race(mod, schedules_only):
    with pytest.raises(DataRace, match=r"'y' index 0 .*block \(0,0,0\).* and write by block \(1,0,0\).*different blocks"):
        mod.launch("block_order", (4,), (1,), 0, [f32(1)], outputs=(0,))
    with pytest.raises(RaceDetected, match=r"'y' differs at 1 element"):
        schedules_only.launch("block_order", (4,), (1,), 0, [f32(1)], outputs=(0,))


def test_a_later_schedule_is_compared_with_run_0_as_judge_compares_it():
    """The worker keeps a later schedule's copies only while they differ from run 0 (large in-out buffers made
    five copies exhaust it); the one comparison decides both: the same array is no difference, a full run's
    every changed element is, and a sampled run's only where it changed what it started from."""
    from harness.backends.emu.runs import differing_from_first
    first = np.arange(8, dtype=np.float32)
    assert differing_from_first(first, first, False).size == 0
    run = first.copy()
    run[[2, 5]] = -1.0
    assert differing_from_first(first, run, False).tolist() == [2, 5]
    initial = first.copy()
    initial[5] = -1.0          # element 5 was outside the sample: it kept what the run started from
    assert differing_from_first(first, run, True, lambda: initial).tolist() == [2]


def test_crash_is_isolated(mod):
    with pytest.raises(KernelCrash, match=r"crash<<<1x1x1, 32x1x1, 0>>>: the worker process died with signal SIGSEGV"):
        mod.launch("crash", (1,), (32,), 0, [f32(32)])
    y = f32(10)     # the backend recovers: a fresh worker runs the next launch
    mod.launch("fill_ok", (1,), (32,), 0, [y, np.int32(10)], outputs=(0,))
    assert np.all(y == 1.0)


def test_a_wild_access_names_the_buffer_it_is_nearest_to(emu):
    """An index far past every buffer (beyond their guard pages) is a KernelCrash; its report names the buffer of
    the launch nearest to the address and how far, which points at the index that went wrong. A null pointer's
    fault names none (the control)."""
    mod = emu.load("__global__ void wild(float* y, long long far) { if (threadIdx.x == 0) y[far] = 1.0f; }\n"
                   "__global__ void null_write(float* y) { if (threadIdx.x == 0) *(volatile float*)0 = y[0]; }\n")
    far = 1 << 28      # 1 GiB past the start of a 128-byte buffer
    with pytest.raises(KernelCrash, match=r"SIGSEGV \(write at address 0x[0-9a-f]+, outside every device buffer of the "
                                          r"launch; the nearest is 'y' \(arg 0, \d+ x \w+\), (\d+) bytes after it\)") as info:
        mod.launch("wild", (1,), (32,), 0, [f32(32), np.int64(far)])
    distance = int(re.search(r"(\d+) bytes after it", str(info.value)).group(1))
    assert distance == far * 4 - 32 * 4
    with pytest.raises(KernelCrash, match=r"SIGSEGV \(write at address 0x0\)"):
        mod.launch("null_write", (1,), (32,), 0, [f32(32)])


def test_trap_and_device_assert_are_crashes(mod):
    with pytest.raises(KernelCrash, match=r"trap<<<1x1x1, 32x1x1, 0>>>: block \(0,0,0\) warp 0 lane 3 .*__trap\(\) at line \d+"):
        mod.launch("trap", (1,), (32,), 0, [f32(32)])
    with pytest.raises(KernelCrash, match=r"(?s)SIGABRT.*kernel.cu:\d+: void failed_assert\(float\*\): Assertion .y\[0\] == 1.0f. failed"):
        mod.launch("failed_assert", (1,), (1,), 0, [f32(1)])


OVERFLOW = (r"stack overflow: block \(0,0,0\) warp {warp} lane {lane} \(thread \({tid},0,0\)\) reached \d+ bytes "
            r"below the top of its 256 KiB fiber stack .*the tool's limit, not a verdict on the kernel "
            r"\(the worker process died with signal SIGSEGV")


def test_stack_overflow_is_named_and_unchecked(mod):
    # A frame far larger than the fiber stack used to leap over the stack's guard page into a buffer's guard
    # pages and be reported as OutOfBounds on that buffer. The stack is the emulator's (smaller than the local
    # memory a CUDA thread may have): its overflow is the tool's limit, named as such, never a buffer's fault.
    with pytest.raises(ResourceExhausted, match=r"big_local<<<1x1x1, 1x1x1, 0>>>: " + OVERFLOW.format(
            warp=0, lane=0, tid=0)) as err:
        mod.launch("big_local", (1,), (1,), 0, [f32(64)])
    assert err.value.tool_limit
    assert f"its {guarded.FIBER_STACK_BYTES // 1024} KiB fiber stack" in str(err.value)     # the mirror is true


def test_stack_overflow_names_the_thread(mod):
    with pytest.raises(ResourceExhausted, match=OVERFLOW.format(warp=1, lane=5, tid=37)):
        mod.launch("one_deep", (1,), (64,), 0, [f32(64)])


def test_stack_overflow_is_named_whichever_module_was_loaded_last(mod, load):
    # every module installs its fault reporter when loaded, but only the launching one knows its fibers
    mod.launch("fill_ok", (1,), (64,), 0, [f32(64), np.int32(64)])          # loaded in the worker first
    later = load(SRC + "\n// a module loaded and run after `mod`\n")
    later.launch("fill_ok", (1,), (64,), 0, [f32(64), np.int32(64)])
    with pytest.raises(ResourceExhausted, match=OVERFLOW.format(warp=0, lane=0, tid=0)):
        mod.launch("big_local", (1,), (1,), 0, [f32(64)])


def test_stack_overflow_under_address_sanitizer_is_not_out_of_bounds():
    # AddressSanitizer reports the overflow itself (`stack-overflow`, no thread named): the same verdict
    from harness.backends.emu.backend import EmuBackend
    asan = EmuBackend(sanitize=True, schedules=1, timeout_s=120)
    try:
        with pytest.raises(ResourceExhausted, match=r"big_local<<<1x1x1, 1x1x1, 0>>>: stack overflow: a thread "
                                                    r"\(AddressSanitizer: stack-overflow at kernel.cu:\d+\) ran "
                                                    r"past the end of its 256 KiB fiber stack .*the tool's limit"):
            asan.load(SRC).launch("big_local", (1,), (1,), 0, [f32(64)])
    finally:
        asan.close()


def test_stack_overflow_is_recognised_without_stack_probes(emu, monkeypatch):
    # Without -fstack-clash-protection (a compiler that lacks it) the frame's first access lands anywhere
    # below the stack; the reporter still knows it by the fiber's stack pointer.
    from harness.backends.emu import toolchain as tc
    monkeypatch.setattr(tc.Toolchain, "device_flags", lambda self: ())
    unprobed = emu.load(SRC + "\n// built without stack probes\n")
    with pytest.raises(ResourceExhausted, match=OVERFLOW.format(warp=0, lane=0, tid=0)):
        unprobed.launch("big_local", (1,), (1,), 0, [f32(64)])


def test_device_code_is_built_with_stack_probes(emu):
    from harness.backends.emu import toolchain as tc
    if not tc.accepts_flags(emu.toolchain.cxx, tc.STACK_PROBE_FLAGS):
        pytest.skip(f"{emu.toolchain.cxx_version} does not accept {' '.join(tc.STACK_PROBE_FLAGS)}")
    assert emu.toolchain.device_flags() == tc.STACK_PROBE_FLAGS


def test_schedule_count_option_and_env(monkeypatch):
    from harness.backends.emu.backend import SCHEDULES_ENV, EmuBackend
    monkeypatch.setenv(SCHEDULES_ENV, "2")
    assert EmuBackend().schedules == 2
    monkeypatch.setenv(SCHEDULES_ENV, "many")
    with pytest.raises(ValueError, match=SCHEDULES_ENV):
        EmuBackend()
    with pytest.raises(ValueError, match=r"schedules: expected an integer >= 1, got 0"):
        EmuBackend(schedules=0)


def test_single_schedule_skips_the_comparisons(emu):
    from harness.backends.emu.backend import EmuBackend
    one = EmuBackend(schedules=1, race_check=False)
    try:
        mod = one.load(SRC)
        x = np.arange(64, dtype=np.float32)
        mod.launch("pair_race", (1,), (64,), 0, [x, f32(64)], outputs=(1,))   # no second run to compare with
        with pytest.raises(OutOfBounds):                                       # guard bands still checked
            mod.launch("fill_oob", (2,), (64,), 0, [f32(100), np.int32(100)])
    finally:
        one.close()


def test_hang_times_out(emu):
    from harness.backends.emu.backend import EmuBackend
    quick = EmuBackend(timeout_s=2, schedules=2)
    try:
        mod = quick.load(SRC)
        with pytest.raises(KernelTimeout, match=r"spin<<<1x1x1, 32x1x1, 0>>>: a block did not finish within 2 s "
                                                r"\(last step: spin run 1/2.*CPU emulator's time limit") as err:
            mod.launch("spin", (1,), (32,), 0, [f32(32)])
        assert err.value.tool_limit is True
    finally:
        quick.close()


SLOW = r"""
__global__ void slow_blocks(float* y, int iters){
  float v = 0.0f;
  for(int i = 0; i < iters; ++i) v = v * 0.5f + 1.0f;
  y[blockIdx.x*blockDim.x + threadIdx.x] = v; }
"""


def test_a_long_launch_that_keeps_finishing_blocks_is_not_cut_short():
    """The limit bounds one block: a grid whose blocks each take a fraction of it runs to the end, even
    when the whole launch takes several times the limit."""
    import time
    from harness.backends.emu.backend import EmuBackend
    quick = EmuBackend(timeout_s=1.5, schedules=1)
    try:
        mod = quick.load(SLOW)
        y = f32(64 * 32)
        # calibrate: the iterations one block needs for about 0.1 s (wall time, so under the present load)
        mod.launch("slow_blocks", (1,), (32,), 0, [f32(32), np.int32(200_000)], outputs=(0,))
        per = mod.last_stats["kernel_ms"][0] / 1e3
        iters = max(1, int(200_000 * 0.1 / max(per, 1e-3)))
        for _ in range(3):      # a calibration run slowed by the load makes the launch short: recalibrate on it
            t0 = time.perf_counter()
            mod.launch("slow_blocks", (64,), (32,), 0, [y, np.int32(iters)], outputs=(0,))
            took = time.perf_counter() - t0
            if took > 2 * quick.timeout_s:
                break
            iters = int(iters * min(4.0, 0.1 / max(took / 64, 1e-4)))     # about 0.1 s a block, at most 4 x
        assert took > 2 * quick.timeout_s, f"calibration made the launch too short to show anything ({took:.2f} s)"
        assert np.all(y == y[0])
    finally:
        quick.close()
