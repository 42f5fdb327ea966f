"""The happens-before race detector (emu_race.hpp): races by the CUDA memory model on ONE schedule, whatever
the values, each with a race-free twin that must stay clean (the negative control of every positive test)."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace
from harness.backends.emu.backend import EmuBackend
from harness.toolchain.rust_literals import CUDA_PRELUDE

from .seed_launches import build_launch

SEED_VALUE = 1      # the input seed of the seed-kernel launches; failures print it for replay

# Every kernel writes y[i] = x[i] (the output never shows the race); `fix` turns each race into its twin.
SOURCE = r"""
#include <cuda/atomic>
__global__ void shared_ww(const float* x, float* y, int fix) {
  __shared__ int flag;
  if (!fix || threadIdx.x == 0) flag = 1;              // every thread writes the slot (the same value)
  y[threadIdx.x] = x[threadIdx.x];
}

__global__ void warp_exchange(const float* x, float* y, int fix) {
  __shared__ float s[32];
  int lane = threadIdx.x & 31;
  s[lane] = x[threadIdx.x];
  if (fix) __syncwarp();                               // without it, lanes of one warp are unordered
  float v = s[(lane + 1) & 31];
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * v;
}

__global__ void warp_shuffle_orders(const float* x, float* y, int fix) {
  __shared__ float s[32];
  int lane = threadIdx.x & 31;
  s[lane] = x[threadIdx.x];
  float t = 1.0f;
  if (fix) t = __shfl_xor_sync(0xffffffffu, t, 1);
  else if (lane < 16) t = __shfl_xor_sync(0x0000ffffu, t, 1);   // orders lanes 0-15 only
  float v = s[(lane + 16) & 31];
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * v * t;
}

__global__ void blocks_flag(const float* x, float* y, int* done, int fix) {
  if (threadIdx.x == 0) {
    if (fix) atomicAdd(done, 1);                       // atomic against atomic: never a race
    else done[0] = 1;                                  // every block stores the same value
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i];
}

__global__ void blocks_mixed(const float* x, float* y, int* done, int fix) {
  if (threadIdx.x == 0) {
    if (fix || blockIdx.x == 0) atomicAdd(done, 1);
    else done[0] = done[0] + 1;                        // a plain read-modify-write against another block's atomic
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i];
}

// The last block sums what the others published (the CUDA samples' threadFenceReduction): a fence before the
// atomic counter releases each block's partial result, a fence after it acquires what the counter's earlier
// updates released (the PTX model's acquire pattern); without either, the last block's reads race. Fix 3 is
// the sample as written: the release without the acquire.
__global__ void last_block_sums(const float* x, float* y, float* partial, unsigned* count, int fix) {
  __shared__ int is_last;
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = x[blockIdx.x * blockDim.x];
    if (fix) __threadfence();
    is_last = atomicAdd(count, 1u) == gridDim.x - 1;
    if (fix == 1 || fix == 2) __threadfence();
  }
  __syncthreads();
  float s = 0.0f;
  if ((is_last || fix == 2) && threadIdx.x == 0)      // fix 2: every block reads, before the others published
    for (int b = 0; b < gridDim.x; ++b) s += partial[b];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i] + 0.0f * s;
}

__device__ int g_count;
__global__ void device_var(const float* x, float* y, int fix) {
  if (threadIdx.x == 0) {
    if (fix) atomicAdd(&g_count, 1);
    else g_count = g_count + 1;                        // a plain update of a module variable by every block
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i];
}

// Three lanes read a slot; lanes 0 and 2 meet at a __syncwarp and lane 2 overwrites it: lane 1's read still races
// the store (a shadow cell keeps two reads; the third goes aside). The twin's __syncwarp names lane 1 too.
__global__ void third_reader(const float* x, float* y, int fix) {
  __shared__ float s[1];
  int lane = threadIdx.x;
  if (lane == 0) s[0] = x[0];
  __syncthreads();
  float v = s[0];
  if (fix) __syncwarp(0x7u);
  else if (lane == 0 || lane == 2) __syncwarp(0x5u);
  if (lane == 2) s[0] = 2.0f * v;
  y[lane] = x[lane] + 0.0f * v;
}

// Thread 0 stores to a counter and adds to it; thread 1 only adds. The add of thread 1 races thread 0's plain store
// though thread 0's own add came between (an atomic cannot stand for the store it follows). The twin's store is
// ordered before both adds by a barrier.
__global__ void store_then_add(const float* x, float* y, int* count, int fix) {
  if (threadIdx.x == 0) count[0] = 0;
  if (fix) __syncthreads();
  if (threadIdx.x < 2) atomicAdd(count, 1);
  y[threadIdx.x] = x[threadIdx.x];
}

// Both threads store to a counter atomically; thread 1 then reads it plainly: ordered after its own store, not after
// thread 0's (two unordered atomic stores: the later one reads nothing, so it cannot stand for the earlier). The twin
// reads after a barrier. (Had thread 1 added, its add would have read thread 0's, and PTX's observation order would
// put thread 0's add before thread 1's read: no race, as the detector says.)
__global__ void store_then_read(const float* x, float* y, int* count, int fix) {
  if (threadIdx.x < 2) cuda::atomic_ref<int, cuda::thread_scope_device>(count[0]).store(1, cuda::memory_order_relaxed);
  if (fix) __syncthreads();
  int c = threadIdx.x == 1 ? count[0] : 0;
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * c;
}

// Each block counts itself in; the last one resets the counter with a plain store (CUDA's threadFenceReduction, ScoR's
// reduction): the chain of increments, each of which read the one before, orders every block's increment before the
// reset (observation order), so no race. In the racy twin block 0 resets it, before the other blocks' increments.
__global__ void last_block_resets(const float* x, float* y, unsigned* count, int fix) {
  if (threadIdx.x == 0) {
    unsigned ticket = atomicInc(count, gridDim.x);
    if (fix ? ticket == gridDim.x - 1 : blockIdx.x == 0) count[0] = 0;
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i];
}

// Both threads add, and thread 1 then reads plainly: its add read thread 0's (observation), so no race.
__global__ void add_then_read(const float* x, float* y, int* count, int fix) {
  if (threadIdx.x < 2) atomicAdd(count, 1);
  int c = threadIdx.x == 1 ? count[0] : 0;
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * c;
}

__global__ void barrier_orders(const float* x, float* y, int fix) {
  __shared__ float red[32];
  int wp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) red[wp] = x[threadIdx.x];
  __syncthreads();
  float mx = red[0];                                   // every warp reads the slot ...
  if (fix) __syncthreads();
  if (lane == 0) red[wp] = 2.0f * mx;                  // ... that warp 0 overwrites
  __syncthreads();
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * red[wp];
}
"""


def _line(text: str, kernel: str = "") -> int:
    """Line of SOURCE holding `text` (the first one in `kernel`): reports name source lines."""
    rows = SOURCE.split("\n")
    start = next(i for i, row in enumerate(rows) if f"void {kernel}" in row)
    return next(i for i, row in enumerate(rows[start:], start + 1) if text in row)


@pytest.fixture(scope="module")
def backend(detector):
    return detector


@pytest.fixture(scope="module")
def module(backend):
    return backend.load(SOURCE)


def _run(module, kernel, fix, grid=1, block=64, extra=()):
    n = grid * block
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    module.launch(kernel, (grid,), (block,), 0, [x, y, *extra, np.int32(fix)], outputs=(1,))
    assert np.array_equal(y, x), f"{kernel}: the output shows the race's values (it must not: the test is of the detector)"


def test_shared_write_write_race_whose_values_never_reach_an_output(module):
    with pytest.raises(DataRace, match=rf"__shared__ 'flag' \(line {_line('int flag')}\) index 0 .*: write by block \(0,0,0\) thread "
                                       rf"\(0,0,0\) \(warp 0 lane 0\) at line {_line('flag = 1')} and write by block \(0,0,0\) "
                                       rf"thread \(1,0,0\) \(warp 0 lane 1\) at line {_line('flag = 1')} are unordered"):
        _run(module, "shared_ww", 0)
    _run(module, "shared_ww", 1)


def test_intra_warp_race_without_syncwarp(module):
    # forward order: lane 0 runs to its end before lane 1 starts (a legal order without lock step)
    with pytest.raises(DataRace, match=rf"__shared__ 's' .* index 1 .*: read by .*thread \(0,0,0\) \(warp 0 lane 0\) "
                                       rf"at line {_line('(lane + 1) & 31')} and write by .*thread \(1,0,0\) "
                                       rf"\(warp 0 lane 1\) at line {_line('s[lane] = x[threadIdx.x];', 'warp_exchange')} "
                                       r".*lanes of one warp .*no __syncwarp"):
        _run(module, "warp_exchange", 0, block=32)
    _run(module, "warp_exchange", 1, block=32)


def test_a_shuffle_orders_only_the_lanes_of_its_mask(module):
    # lane l reads slot l+16: with the half-warp mask, lanes 0-15 never met lanes 16-31
    with pytest.raises(DataRace, match=r"__shared__ 's' .*lanes of one warp"):
        _run(module, "warp_shuffle_orders", 0, block=32)
    _run(module, "warp_shuffle_orders", 1, block=32)


def test_inter_block_race_on_global_memory(module):
    done = np.zeros(1, np.int32)
    line = _line("else done[0] = 1;")
    with pytest.raises(DataRace, match=rf"'done' index 0 .*write by block \(0,0,0\) thread \(0,0,0\) .* at line {line} "
                                       rf"and write by block \(1,0,0\) thread \(0,0,0\) .* at line {line} .*different "
                                       r"blocks, and not both atomic"):
        _run(module, "blocks_flag", 0, grid=4, extra=(done,))
    done[:] = 0
    _run(module, "blocks_flag", 1, grid=4, extra=(done,))
    assert done[0] == 4


def test_an_atomic_does_not_order_a_plain_access_of_another_block(module):
    done = np.zeros(1, np.int32)
    with pytest.raises(DataRace, match=rf"'done' index 0 .*atomic write by block \(0,0,0\) .* at line "
                                       rf"{_line('blockIdx.x == 0) atomicAdd')} and read by block \(1,0,0\) .* at line "
                                       rf"{_line('done[0] = done[0] + 1')}"):
        _run(module, "blocks_mixed", 0, grid=3, extra=(done,))
    _run(module, "blocks_mixed", 1, grid=3, extra=(done,))


def test_a_fence_and_an_atomic_order_blocks(module):
    def run(fix):
        partial, count = np.zeros(4, np.float32), np.zeros(1, np.uint32)
        _run(module, "last_block_sums", fix, grid=4, extra=(partial, count))
    with pytest.raises(DataRace, match=rf"'partial' index 0 .*write by block \(0,0,0\) thread \(0,0,0\) .* at line "
                                       rf"{_line('partial[blockIdx.x] = x')} and read by block \(3,0,0\) thread "
                                       rf"\(0,0,0\) .* at line {_line('s += partial[b]')} .*different blocks"):
        run(0)
    run(1)
    # the release covers only what the publishing block did before its fence: a block that reads every
    # partial result without being the last one reads some before they are written
    with pytest.raises(DataRace, match=rf"'partial' index 1 .*read by block \(0,0,0\) thread \(0,0,0\) .* at line "
                                       rf"{_line('s += partial[b]')} and write by block \(1,0,0\)"):
        run(2)
    # a release that the last block's atomic reads but no fence of it completes orders nothing
    with pytest.raises(DataRace, match=r"'partial' index 0 .*different blocks.*no fence of the second thread "
                                       r"followed that atomic"):
        run(3)


def test_inter_block_race_on_a_device_variable(module):
    with pytest.raises(DataRace, match=rf"__device__ variable 'g_count' byte 0: .*block \(0,0,0\) .* at line "
                                       rf"{_line('g_count = g_count + 1')} and read by block \(1,0,0\) .*different blocks"):
        _run(module, "device_var", 0, grid=2)
    _run(module, "device_var", 1, grid=2)


def test_a_slot_reused_before_every_warp_read_it(module):
    # every thread reads red[0] as the source says (the optimised build sank the load into `lane == 0`'s branch, and
    # its first race was warp 1's): the first race of this schedule is lane 1's, within warp 0; the widest, across warps
    with pytest.raises(DataRace, match=r"__shared__ 'red' .* index 0 .*across warps of one block") as err:
        _run(module, "barrier_orders", 0, block=64)
    report = str(err.value)     # the two accesses, in the order this schedule ran them
    assert f"write by block (0,0,0) thread (0,0,0) (warp 0 lane 0) at line {_line('= 2.0f * mx')}" in report
    assert f"read by block (0,0,0) thread (1,0,0) (warp 0 lane 1) at line {_line('float mx = red[0]')}" in report
    _run(module, "barrier_orders", 1, block=64)


def _racy_and_twin(module, kernel, match, block, counters=0):
    """`kernel` with fix=0 raises a DataRace matching `match`; with fix=1 it runs clean (fresh zeroed counters each)."""
    with pytest.raises(DataRace, match=match):
        _run(module, kernel, 0, block=block, extra=tuple(np.zeros(1, np.int32) for _ in range(counters)))
    _run(module, kernel, 1, block=block, extra=tuple(np.zeros(1, np.int32) for _ in range(counters)))


def test_a_third_reader_that_a_partial_syncwarp_leaves_out(module):
    _racy_and_twin(module, "third_reader", rf"__shared__ 's' .* index 0 .*: read by .*thread \(1,0,0\) \(warp 0 lane 1\) "
                                           rf"at line {_line('float v = s[0];', 'third_reader')} and write by .*thread "
                                           rf"\(2,0,0\) .*at line {_line('s[0] = 2.0f * v', 'third_reader')}", block=3)


def test_an_atomic_does_not_stand_for_the_plain_store_before_it(module):
    _racy_and_twin(module, "store_then_add", rf"'count' index 0 .*: write by .*thread \(0,0,0\) .*at line "
                                             rf"{_line('count[0] = 0;', 'store_then_add')} and atomic write by .*thread "
                                             rf"\(1,0,0\) .*at line {_line('atomicAdd(count, 1)', 'store_then_add')}",
                   block=2, counters=1)


def test_an_atomic_store_does_not_stand_for_another_threads_atomic_store(module):
    _racy_and_twin(module, "store_then_read", rf"'count' index 0 .*: atomic write by .*thread \(0,0,0\) .*at line "
                                              rf"{_line('atomic_ref<int', 'store_then_read')} and read by .*thread "
                                              rf"\(1,0,0\) .*at line {_line('count[0] : 0', 'store_then_read')}",
                   block=2, counters=1)


def test_a_chain_of_increments_orders_the_last_blocks_reset(module):
    line = _line("count[0] = 0;", "last_block_resets")
    count = np.zeros(1, np.uint32)
    with pytest.raises(DataRace, match=rf"'count' index 0 .*: write by block \(0,0,0\) .*at line {line} and atomic "
                                       rf"write by block \(1,0,0\) .*different blocks"):
        _run(module, "last_block_resets", 0, grid=4, block=32, extra=(count,))
    count[:] = 0
    _run(module, "last_block_resets", 1, grid=4, block=32, extra=(count,))
    assert count[0] == 0


def test_a_read_modify_write_stands_for_the_atomic_it_read(module):
    # thread 1's add read thread 0's: observation order puts thread 0's add before thread 1's later read
    count = np.zeros(1, np.int32)
    _run(module, "add_then_read", 0, block=2, extra=(count,))
    assert count[0] == 2


def test_detector_off_misses_what_the_values_hide():
    # The negative control for the detector itself: one schedule without it passes every racy kernel above.
    be = EmuBackend(schedules=1, timeout_s=60, race_check=False)
    try:
        mod = be.load(SOURCE)
        _run(mod, "shared_ww", 0)
        _run(mod, "warp_exchange", 0, block=32)
        _run(mod, "blocks_flag", 0, grid=4, extra=(np.zeros(1, np.int32),))
    finally:
        be.close()


# ---- the seed's shared-slot races (docs/KERNELS.md, section 3) ------------------------------------------------
# The twin of each adds the missing barrier after the block maximum is read.
SEED_RACES = [("GEN_DEVICE_KERNELS", "gk_attn", "__syncthreads(); float mx=red[0];"),
              ("GEN_DEVICE_KERNELS", "gk_fused_attn", "__syncthreads(); float mx=red[0];"),
              ("MOE_ROUTER_TOPK_KERNELS", "moe_topk_idx", "__syncthreads();\n  float mx=red[0];")]


def _kernel_source(code: str, kernel: str) -> str:
    """The one kernel's definition out of a set (the fix is applied to it alone)."""
    start = code.index(f"void {kernel}(")
    end = code.index("\n}", start) + 2
    return code[start:end]


@pytest.mark.parametrize("set_name,kernel,read", SEED_RACES)
def test_the_seeds_red0_race_on_a_single_schedule(seed_sets, backend, set_name, kernel, read):
    from .seed_launches import S
    code = CUDA_PRELUDE + seed_sets[set_name].code
    body = _kernel_source(code, kernel)
    assert body.count(read) == 1, f"{kernel}: the seed changed; the read of the block max was not found"
    grid, block, shared, args, outputs = build_launch(set_name, kernel, SEED_VALUE)
    if kernel == "moe_topk_idx":    # one warp orders its lanes by the shuffles: the race needs a second warp
        assert block == S.n_expert and block <= 32
        grid, block, shared, args, outputs = _topk_two_warps(args)
    with pytest.raises(DataRace, match=r"__shared__ 'red' \(line \d+\) index 0 .*read by block \(0,0,0\) thread "
                                       r"\(\d+,0,0\) \(warp [1-9]\d* lane \d+\) at line \d+ and write by block \(0,0,0\) "
                                       r"thread \(0,0,0\) \(warp 0 lane 0\) at line \d+ .*different warps") as race:
        backend.load(code).launch(kernel, grid, block, shared, args, outputs)
    assert race.value.scope == "block", str(race.value)       # a __syncthreads orders it; a __syncwarp would not
    fixed = code.replace(body, body.replace(read, read + " __syncthreads();"))
    grid, block, shared, args, outputs = build_launch(set_name, kernel, SEED_VALUE)
    if kernel == "moe_topk_idx":
        grid, block, shared, args, outputs = _topk_two_warps(args)
    backend.load(fixed).launch(kernel, grid, block, shared, args, outputs)


def _topk_two_warps(args):
    """moe_topk_idx over 64 experts (the tails shape): two warps."""
    e, k = 64, int(args[4])
    logits = (np.random.default_rng(SEED_VALUE).permutation(e) * 0.37 - 5).astype(np.float32)
    return 1, e, 0, [logits, np.zeros(k, np.int32), np.zeros(k, np.float32), np.int32(e), np.int32(k)], (1, 2)


def test_an_instrumentation_entry_point_the_runtime_lacks_is_named(backend, ungated):
    # g++'s __atomic builtins are host functions to nvcc: past the device-code gate, as where nvcc is absent
    from harness.backends import UnsupportedConstruct
    src = "__global__ void k(int* y){ __atomic_fetch_add(y, 1, __ATOMIC_RELAXED); }"
    with pytest.raises(UnsupportedConstruct, match=r"needs __tsan_atomic32_fetch_add.*race_check=False"):
        backend.load(src)
    plain = EmuBackend(schedules=1, race_check=False)     # the control: the same source builds without the detector
    try:
        y = np.zeros(1, np.int32)
        plain.load(src).launch("k", (1,), (4,), 0, [y])
        assert y[0] == 4
    finally:
        plain.close()


def test_race_check_option_and_env(monkeypatch):
    from harness.backends.emu.backend import RACE_CHECK_ENV
    monkeypatch.delenv(RACE_CHECK_ENV, raising=False)
    assert EmuBackend().race_check is True                         # on by default
    assert EmuBackend(sanitize=True).race_check is False           # AddressSanitizer's build cannot carry it
    with pytest.raises(ValueError, match=r"race_check: .*cannot be combined with sanitize"):
        EmuBackend(sanitize=True, race_check=True)
    monkeypatch.setenv(RACE_CHECK_ENV, "0")
    assert EmuBackend().race_check is False and EmuBackend(race_check=True).race_check is True
    assert EmuBackend().spawn_config()[1]["race_check"] is False   # -j workers build the same backend
    monkeypatch.setenv(RACE_CHECK_ENV, "yes")
    with pytest.raises(ValueError, match=r"QCONFORM_EMU_RACE_CHECK: expected 0 or 1, got 'yes'"):
        EmuBackend()


# Accesses the optimised build drops, and one that g++'s instrumentation misses at -O0 (toolchain.ACCESS_FLAGS):
# each races with thread 31's store unless `fix` puts a barrier between; the output never shows it.
DROPPED_ACCESSES = r"""
#include <cuda_fp16.h>
__global__ void dead_load(const float* x, float* y, int fix) {
  __shared__ int offset;
  if (threadIdx.x == 31) offset = 7;
  if (fix) __syncthreads();
  int unused = offset;                                   // read, never used
  (void)unused;
  y[threadIdx.x] = x[threadIdx.x];
}

__global__ void same_value_store(const float* x, float* y, int fix) {
  __shared__ int s[64];
  s[threadIdx.x] = 1;
  __syncthreads();
  int v = s[threadIdx.x];
  s[threadIdx.x] = v;                                    // stores the value it holds
  if (fix) __syncthreads();
  int next = s[(threadIdx.x + 31) & 63];
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * next;
}

__global__ void half2_argument(const float* x, float* y, int fix) {
  __shared__ half h[64];
  float2 f = __half22float2(((const half2*) h)[threadIdx.x & 31]);     // a struct passed by value from memory
  if (fix) __syncthreads();
  if (threadIdx.x == 31) h[0] = __float2half(x[0]);
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * f.x;
}
"""


@pytest.fixture(scope="module")
def compiled_accesses():
    backend = EmuBackend(schedules=1, timeout_s=60, accesses="compiled")
    yield backend
    backend.close()


@pytest.mark.parametrize("kernel, where, compiled_sees_it", [
    ("dead_load", "int unused = offset", False), ("same_value_store", "s[threadIdx.x] = v;", False),
    ("half2_argument", "__half22float2", True)])
def test_every_access_of_the_source(detector, compiled_accesses, kernel, where, compiled_sees_it):
    # HeCBench's marchingCubes race (docs/KERNELS.md) is the dead load's: the optimised build drops what nvcc's drops,
    # so only accesses="source" (the default) sees the races of the CUDA C++ abstract machine there.
    assert detector.accesses == "source"
    line = next(n for n, row in enumerate(DROPPED_ACCESSES.split("\n"), 1) if where in row)
    module = detector.load(DROPPED_ACCESSES)
    with pytest.raises(DataRace, match=rf"__shared__ .* at line {line}\b"):
        _run(module, kernel, 0)
    _run(module, kernel, 1)                                     # the negative control: the barrier orders them
    compiled = compiled_accesses.load(DROPPED_ACCESSES)
    if compiled_sees_it:
        with pytest.raises(DataRace, match=rf"at line {line}\b"):
            _run(compiled, kernel, 0)
    else:
        _run(compiled, kernel, 0)                               # the documented limit of the default build


def test_accesses_option(monkeypatch):
    from harness.backends.emu.backend import ACCESSES_ENV
    monkeypatch.delenv(ACCESSES_ENV, raising=False)
    backend = EmuBackend(accesses="compiled")
    assert backend.describe()["accesses"] == "compiled" and backend.spawn_config()[1]["accesses"] == "compiled"
    assert EmuBackend().accesses == "source"                    # the default with g++
    with pytest.raises(ValueError, match=r"accesses: expected one of compiled, source, got 'O0'"):
        EmuBackend(accesses="O0")
    monkeypatch.setenv(ACCESSES_ENV, "compiled")                 # every command's switch (check, report, ...)
    assert EmuBackend().accesses == "compiled" and EmuBackend(accesses="source").accesses == "source"
    monkeypatch.setenv(ACCESSES_ENV, "all")
    with pytest.raises(ValueError, match=r"QCONFORM_EMU_ACCESSES: expected one of compiled, source, got 'all'"):
        EmuBackend()
    from harness.backends.emu.toolchain import Toolchain
    with pytest.raises(ValueError, match=r"accesses: 'source' turns off g\+\+'s optimisation passes by name, and "
                                         r"clang\+\+ is 'Debian clang version 16.0.6'"):
        Toolchain("clang++", "Debian clang version 16.0.6", "asm").access_flags("source")
    assert Toolchain("clang++", "Debian clang version 16.0.6", "asm").default_accesses() == "compiled"


def test_a_line_of_emus_own_unit_is_never_taken_for_a_kernel_line():
    # An access inside a header function the compiler did not inline resolves to frames in emu's headers and in the
    # unit emu compiles (its own code); before, that unit's line (550 for a __pipeline_wait_prior) was reported as
    # the kernel's. Kernel file names cannot take the unit's name ('+' is not in [A-Za-z0-9_.-]).
    from harness.backends.emu.rewrite import rewrite
    from harness.backends.emu.sites import MODULE_UNIT, _source_frame
    scratch = "/cache/emu/.scratch.1/"
    assert _source_frame([(scratch + MODULE_UNIT, "550"), ("/pkg/emu/emu_device.hpp", "602")], set()) is None
    assert _source_frame([(scratch + MODULE_UNIT, "550"), (scratch + "kernel.cu", "9")], set()) == "line 9"
    assert f'#line 1 "{MODULE_UNIT}"' not in rewrite("__global__ void k(int* y) { y[0] = 1; }\n", MODULE_UNIT).source


INLINED = r"""
static __device__ __attribute__((always_inline)) void step(int* a) {
  unsigned lane = threadIdx.x % 32;
  if (lane >= 1) a[threadIdx.x] = a[threadIdx.x - 1] + a[threadIdx.x];
  if (lane >= 2) a[threadIdx.x] = a[threadIdx.x - 2] + a[threadIdx.x];
}
__global__ void scan(int* a) {
  int t[32];
  step(a);
  __syncthreads();
  if (threadIdx.x % 32 == 31) t[threadIdx.x / 32] = a[threadIdx.x];
  __syncthreads();
  if (threadIdx.x < 32) step(t);
  a[threadIdx.x] += t[threadIdx.x / 32];
}
"""


def test_a_race_inside_an_inlined_device_function_names_the_access_line(detector):
    """The access's own line (4), not the call site's (9): with DWARF 5 line tables binutils' addr2line named the
    inlined frame's file wrongly, and the report fell back to the caller's line (found on GPUVerify's
    warpsync/intragroup_scan, whose report had moved from its line 11 to 23)."""
    with pytest.raises(DataRace, match=r"write by .* at line 4 and read by .* at line 4 are unordered"):
        detector.load(INLINED).launch("scan", (1,), (64,), 0, [np.arange(64, dtype=np.int32)], outputs=(0,))


ALIASED_DYNAMIC = r"""
__device__ void stage_ids(int* out) {
  extern __shared__ int ids_shared[];            // a library's view of the dynamic area
  ids_shared[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = ids_shared[(threadIdx.x + 1) % blockDim.x];
}
__global__ void aliased(int* out) {
  extern __shared__ int data_shared[];           // the kernel's view: the same bytes
  stage_ids(out);
  data_shared[threadIdx.x] = 7;                  // overwrites what another warp may still be reading
}
__global__ void one_name(int* out) {
  extern __shared__ int data_shared[];
  data_shared[threadIdx.x] = threadIdx.x;
  out[threadIdx.x] = data_shared[(threadIdx.x + 32) % blockDim.x];      // no barrier between
}
"""


def test_a_race_on_the_dynamic_area_names_every_name_it_was_given(detector):
    module = detector.load(ALIASED_DYNAMIC)
    with pytest.raises(DataRace, match=r"extern __shared__ '(ids_shared|data_shared)' \(the same bytes as "
                                       r"'(data_shared|ids_shared)'\) index"):
        module.launch("aliased", (1,), (64,), 256, [np.zeros(64, np.int32)], outputs=(0,))
    with pytest.raises(DataRace, match=r"extern __shared__ 'data_shared' index"):       # one name: no aliases
        module.launch("one_name", (1,), (64,), 256, [np.zeros(64, np.int32)], outputs=(0,))


PER_INSTANTIATION = r"""
__device__ float max_of(float a, float b) { return fmaxf(a, b); }
__device__ float sum_of(float a, float b) { return a + b; }
template <float (*op)(float, float)>
__device__ float block_reduce(float v) {       // llm.c's blockReduce: no barrier after the last read of `partial`
  __shared__ float partial[32];
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x % 32 < blockDim.x / 32 ? partial[threadIdx.x % 32] : 0.0f;
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__global__ void two_reductions(const float* x, float* y, int same) {
  float m = block_reduce<max_of>(x[threadIdx.x]);
  float s = same ? block_reduce<max_of>(x[threadIdx.x] - m) : block_reduce<sum_of>(x[threadIdx.x] - m);
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * s;
}
"""


def test_a_shared_variable_of_a_function_template_is_one_per_instantiation(detector):
    """CUDA gives each instantiation of a function its own `__shared__` locals, as C++ gives it its own static locals:
    llm.c's fused classifier reduces with blockReduce<warpReduceMax> and then blockReduce<warpReduceSum>, with no
    barrier between, and is race-free for it. emu had one slot per declaration and reported a race between the two.
    The negative control: the same instantiation twice reuses its buffer before every warp has read it."""
    module = detector.load(PER_INSTANTIATION)
    x = np.arange(128, dtype=np.float32)
    y = np.zeros(128, np.float32)
    module.launch("two_reductions", (1,), (128,), 0, [x, y, np.int32(0)], outputs=(1,))
    assert np.array_equal(y, x)
    with pytest.raises(DataRace, match=r"__shared__ 'partial' \(line 6\) index \d+ .*different warps in the same "
                                       r"barrier interval"):
        module.launch("two_reductions", (1,), (128,), 0, [x, y, np.int32(1)], outputs=(1,))


MANAGED_AND_SHADOWED = r"""
__managed__ __device__ int launches;            // the host reads it without a copy (host code, never run here)
__shared__ extern float staged[];               // the keyword first: HeCBench's hungarian spells it so
__global__ void count(const float* x, float* y, int fix) {
  if (threadIdx.x == 0) {
    if (fix) atomicAdd(&launches, 1);
    else launches = launches + 1;                // a plain update of a managed variable by every block
  }
  staged[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[blockIdx.x * blockDim.x + threadIdx.x] = staged[(threadIdx.x + 1) % blockDim.x];
}
__global__ void own_buffer(const float* x, float* y, int fix) {
  __shared__ float staged[64];                  // hides the file-scope one, as in C++
  staged[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = staged[(threadIdx.x + 1) % 64];
}
"""


def test_a_managed_variable_is_a_module_variable_and_a_local_shared_hides_the_file_scopes(detector):
    """`__managed__` variables were refused; they are module variables to device code, so two blocks' plain updates
    race (the atomic update is the negative control). A kernel's own `__shared__` of the name of a file-scope one
    hides it (emu declared both and the build failed), and `__shared__ extern` reads as `extern __shared__`."""
    module = detector.load(MANAGED_AND_SHADOWED)
    x, y = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    module.launch("count", (2,), (64,), 256, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y[:64], np.roll(x[:64], -1))
    with pytest.raises(DataRace, match=r"data race on __device__ variable 'launches' .*different blocks"):
        module.launch("count", (2,), (64,), 256, [x, y, np.int32(0)], outputs=(1,))
    y = np.zeros(64, np.float32)
    module.launch("own_buffer", (1,), (64,), 0, [x[:64], y, np.int32(0)], outputs=(1,))
    assert np.array_equal(y, np.roll(x[:64], -1))


# OpenMM's common compute framework writes its kernels through marker macros (its CUDA platform's common.cu).
PORTABLE = r"""
#define KERNEL extern "C" __global__
#define LOCAL __shared__
#define LOCAL_ARG
#define GLOBAL
#define SYNC_THREADS __syncthreads();
KERNEL void sum_twice(GLOBAL const float* x, GLOBAL float* out, int fix) {
  LOCAL volatile float temp[64];
  float total = 0.0f;
  for (int pass = 0; pass < 2; pass++) {
    if (fix) { SYNC_THREADS }
    temp[threadIdx.x] = x[threadIdx.x] * (pass + 1);
    SYNC_THREADS
    total += temp[(threadIdx.x + 32) % 64];           // the other warp's slot: read again in the next pass
  }
  out[threadIdx.x] = total;
}
"""


def test_marker_macros_a_header_defines_mark_the_sources_kernel_and_arrays(detector, tmp_path):
    """OpenMM's platforms put the markers in a file of their own (its CUDA platform's common.cu): `KERNEL` and
    `LOCAL` defined by a header the source includes mark the source's kernel and make its array one per block, so
    the race is seen; the twin with a barrier is clean."""
    header, body = PORTABLE.split("KERNEL void", 1)
    (tmp_path / "common.cuh").write_text(header)
    module = detector.load('#include "common.cuh"\nKERNEL void' + body, (f"-I{tmp_path}",))
    args = lambda fix: [np.arange(64, dtype=np.float32), np.zeros(64, np.float32), np.int32(fix)]
    with pytest.raises(DataRace, match=r"__shared__ 'temp' "):
        module.launch("sum_twice", (1,), (64,), 0, args(0), outputs=(1,))
    module.launch("sum_twice", (1,), (64,), 0, args(1), outputs=(1,))


def test_a_kernel_and_a_shared_array_marked_by_macros(detector):
    """`KERNEL` and `LOCAL` stand for `extern "C" __global__` and `__shared__`: the kernel is found and its array is
    one per block, so the next pass's store races with the other warp's read of the last (the reader saw no kernel
    before; a per-thread array would hide the race). The twin's barrier at each pass's start makes it clean."""
    module = detector.load(PORTABLE)
    args = lambda fix: [np.arange(64, dtype=np.float32), np.zeros(64, np.float32), np.int32(fix)]
    with pytest.raises(DataRace, match=r"__shared__ 'temp' .* index (3[2-9]|[4-5]\d|6[0-3]|[0-9]|[12]\d|3[01]) "):
        module.launch("sum_twice", (1,), (64,), 0, args(0), outputs=(1,))
    out = args(1)
    module.launch("sum_twice", (1,), (64,), 0, out, outputs=(1,))
    assert np.array_equal(out[1], 3 * ((np.arange(64) + 32) % 64).astype(np.float32))


# mshadow's reduction (2017): `__syncwarp()` is a real barrier of the warp only where the program includes cuda.h,
# whose CUDA_VERSION turns off the empty CUDA 8 fallback; without cuda.h the test reads 0 and the steps race.
VERSIONED_REDUCTION = r"""{include}
#if CUDA_VERSION < 9000
#define __syncwarp()
#endif
__global__ void warp_sum(const float* x, float* y) {{
  volatile __shared__ float buf[32];
  int tid = threadIdx.x;
  buf[tid] = x[tid];
  __syncwarp();
  for (int half = 16; half > 0; half >>= 1) {{
    if (tid < half) buf[tid] = buf[tid] + buf[tid + half];
    __syncwarp();
  }}
  y[tid] = x[tid] + 0.0f * buf[0];
}}
"""


@pytest.mark.parametrize("include, racy", [("#include <cuda.h>", False), ("#include <cuda_runtime.h>", True)])
def test_cuda_version_comes_with_cuda_h_as_a_toolkit_defines_it(backend, include, racy):
    module = backend.load(VERSIONED_REDUCTION.format(include=include))
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    if racy:
        with pytest.raises(DataRace, match=r"__shared__ 'buf' .*lanes of one warp .*no __syncwarp"):
            module.launch("warp_sum", (1,), (32,), 0, [x, y], outputs=(1,))
    else:
        module.launch("warp_sum", (1,), (32,), 0, [x, y], outputs=(1,))
        assert np.array_equal(y, x)


# flashinfer's vector type has a two-argument member `memcpy`: the race build's memcpy macro must leave it alone and
# still watch the C library's three-argument copies (the same file's race through one, and its twin)
MEMBER_MEMCPY = r"""
struct vec4 {
  float v[4];
  __device__ static void memcpy(float* dst, const float* src) { for (int i = 0; i < 4; ++i) dst[i] = src[i]; }
};
__global__ void copies(const float* x, float* y, int fix) {
  __shared__ float s[8];
  vec4::memcpy(&y[4 * threadIdx.x], &x[4 * threadIdx.x]);
  if (threadIdx.x == 0 || !fix) memcpy(s, x, 8 * sizeof(float));     // every thread copies into s: a race
}
"""


def test_a_two_argument_member_memcpy_is_not_the_c_librarys(backend):
    module = backend.load(MEMBER_MEMCPY)
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    module.launch("copies", (1,), (16,), 0, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y, x)
    with pytest.raises(DataRace, match=r"__shared__ 's' .* write by .* and write by"):
        module.launch("copies", (1,), (16,), 0, [x, y, np.int32(0)], outputs=(1,))


# flashinfer's way with the dynamic shared area: `reinterpret_cast<Storage&>(smem)` and `&smem` are the area itself
# (emu once made `smem` a pointer, whose own bytes such a cast would have named); races through the cast are seen
DYNAMIC_AS_STRUCT = r"""
struct Pair { float sum; int count; };
__global__ void through_struct(const float* x, float* y, int fix) {
  extern __shared__ __align__(alignof(Pair)) unsigned char smem[];
  auto& pair = reinterpret_cast<Pair&>(smem);
  float* after = reinterpret_cast<float*>(&smem) + 2;
  if (threadIdx.x == 0 || !fix) { pair.sum = 1.5f; pair.count = 3; }
  after[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = after[threadIdx.x] + 0.0f * pair.sum + reinterpret_cast<const float*>(smem)[0] - 1.5f;
}
"""


def test_a_dynamic_shared_area_cast_to_a_struct_is_the_area(backend):
    module = backend.load(DYNAMIC_AS_STRUCT)
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    module.launch("through_struct", (1,), (32,), 8 + 4 * 32, [x, y, np.int32(1)], outputs=(1,))
    assert np.array_equal(y, x)            # smem[0..3] holds pair.sum: the cast and the array are one place
    with pytest.raises(DataRace, match=r"'smem'.*write by .* and write by"):
        module.launch("through_struct", (1,), (32,), 8 + 4 * 32, [x, y, np.int32(0)], outputs=(1,))
