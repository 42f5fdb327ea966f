"""Scopes, locks and flags in the happens-before detector (emu_race.hpp) and spinning threads in the scheduler
(emu_runtime.cpp): block-scope atomics and fences act within their block only, a release is acquired only by
an atomic followed by a fence (or an acquire-order cuda::atomic), releases are cumulative along a chain, and a
thread that spins on a lock or a flag yields so that the thread holding it can run. Each racy kernel has a
race-free twin (`fix`), the negative control."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace
from harness.backends.base import Deadlock, LaterBlockWait
from harness.backends.emu.backend import EmuBackend
from harness.racescan import classify

SOURCE = r"""
#include <cuda/atomic>
__device__ int lock_word = 0;
__device__ int flag = 0;
__device__ int flag2 = 0;

// Two blocks exchange one word with atomics: of block scope they are not atomic for each other.
__global__ void scoped_exchange(unsigned* data, int fix) {
  if (fix) atomicExch(&data[0], blockIdx.x + 1u);
  else atomicExch_block(&data[0], blockIdx.x + 1u);
}

// Lane 0 of every warp takes a block-scope spin lock and adds to a counter. The fence after taking the lock
// acquires what the last holder released (fix); without it the previous holder's update races.
__global__ void warp_lock(unsigned* data, int fix) {
  if (threadIdx.x % 32 == 0) {
    while (atomicCAS_block(&lock_word, 0, 1) != 0) {}
    if (fix) __threadfence_block();
    data[0] += 1;
    __threadfence_block();
    atomicExch_block(&lock_word, 0);
  }
}

// A chain across blocks: block 0 thread 0 publishes, block 0 thread 32 passes it on through a second flag,
// block 1 reads. The middle thread's release carries what it acquired (cumulativity); without its fence (fix 0)
// it neither acquires nor releases. Fix 2: the publishing fence is of block scope, which reaches the middle thread
// (its block) and, through its device-scope release, block 1 (PTX's causality order is transitive). Fix 3: the
// middle thread's fence is of block scope too, which no other block can acquire.
__global__ void relay(unsigned* data, int fix) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    data[0] = 7;
    if (fix >= 2) __threadfence_block(); else __threadfence();
    atomicExch(&flag, 1);
  } else if (blockIdx.x == 0 && threadIdx.x == 32) {
    while (atomicAdd(&flag, 0) != 1) {}
    if (fix == 3) __threadfence_block(); else if (fix) __threadfence();
    atomicExch(&flag2, 1);
  } else if (blockIdx.x == 1 && threadIdx.x == 0) {
    while (atomicAdd(&flag2, 0) != 1) {}
    __threadfence();
    data[1] = data[0];
  }
}

// The same chain through one flag (ScoR's norace_interwarp-block_fence-atom_hrd-indirect): the middle thread's
// device-scope release passes on what it acquired from the flag's block-scope release. Fix 0: its fence is of block
// scope, which no other block can acquire.
__global__ void relay_one_flag(unsigned* data, int fix) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    data[0] = 7;
    __threadfence_block();
    atomicExch(&flag, 1);
  } else if (blockIdx.x == 0 && threadIdx.x == 32) {
    while (atomicAdd(&flag, 0) != 1) {}
    if (fix) __threadfence(); else __threadfence_block();
    atomicExch(&flag, 2);
  } else if (blockIdx.x == 1 && threadIdx.x == 0) {
    while (atomicAdd(&flag, 0) != 2) {}
    __threadfence();
    data[1] = data[0];
  }
}

// libcu++ atomics: release and acquire orders synchronize without fences; relaxed ones do not (fix 0).
__global__ void ordered_flag(unsigned* data, int fix) {
  cuda::atomic_ref<int, cuda::thread_scope_device> f(flag);
  if (threadIdx.x == 0) {
    data[0] = 5;
    f.store(1, fix ? cuda::memory_order_release : cuda::memory_order_relaxed);
  } else if (threadIdx.x == 32) {
    while (f.load(fix ? cuda::memory_order_acquire : cuda::memory_order_relaxed) != 1) {}
    data[1] = data[0];
  }
}

// Block 1 waits for block 0's flag: emu runs the blocks in some order, one after another.
__global__ void wait_for_block(unsigned* data, int fix) {
  if (blockIdx.x == 0) {
    data[0] = 3;
    __threadfence();
    atomicExch(&flag, 1);
  } else {
    while (atomicAdd(&flag, 0) != 1) {}
    __threadfence();
    data[1] = data[0];
  }
}

// Thread 0 waits on a volatile flag thread 32 sets. Volatile accesses are plain ones to the detector (no
// atomicity, no ordering), so the flag races; the point is that the wait ends: the spinning thread yields.
__global__ void volatile_wait(unsigned* data, int fix) {
  volatile unsigned* ready = data + 1;
  if (threadIdx.x == 0) {
    while (*ready == 0) {}
    data[2] = *ready + 1;
  } else if (threadIdx.x == 32) {
    *ready = 5;
  }
}

// An acquire takes what was released before it, not what is released later: thread 32 acquires x[0]'s release,
// lets thread 0 go on, and sees the flag of x[1]'s release with an atomic; without a fence after that atomic
// (fix 0) it acquired nothing more, so its read of x[1] races. data: x[0], x[1], out[0], out[1], flag, go.
__global__ void acquired_before(unsigned* data, int fix) {
  unsigned *x = data, *out = data + 2, *flag = data + 4, *go = data + 5;
  if (threadIdx.x == 0) {
    x[0] = 1;
    __threadfence();
    atomicAdd(flag, 1u);                              // release 1
    while (atomicAdd(go, 0u) == 0) {}
    x[1] = 2;
    __threadfence();
    atomicAdd(flag, 1u);                              // release 2
  } else if (threadIdx.x == 32) {
    while (atomicAdd(flag, 0u) < 1) {}
    __threadfence();                                  // acquires release 1
    out[0] = x[0];
    atomicExch(go, 1u);
    while (atomicAdd(flag, 0u) < 2) {}
    if (fix) __threadfence();                         // acquires release 2
    out[1] = x[1];
  }
}

// A lock no one ever releases: the second taker waits for ever, on a GPU too.
__global__ void never_released(unsigned* data, int fix) {
  if (threadIdx.x % 32 == 0) {
    while (atomicCAS(&lock_word, 0, 1) != 0) {}
    __threadfence();
    data[0] += 1;
  }
}
"""


@pytest.fixture(scope="module")
def backend(detector):
    return detector


@pytest.fixture(scope="module")
def module(backend):
    return backend.load(SOURCE)


def _launch(module, kernel, fix, grid=1, block=64):
    data = np.zeros(4, np.uint32)
    module.launch(kernel, (grid,), (block,), 0, [data, np.int32(fix)], outputs=())
    return data


def test_block_scope_atomics_of_different_blocks_race(module):
    with pytest.raises(DataRace, match=r"'data' index 0 .*atomic write by block \(0,0,0\).*atomic write by block "
                                       r"\(1,0,0\).*a block-scope atomic is not atomic for another block"):
        _launch(module, "scoped_exchange", 0, grid=2, block=1)
    _launch(module, "scoped_exchange", 1, grid=2, block=1)


def test_a_spin_lock_between_warps_runs_and_orders_its_critical_sections(module):
    with pytest.raises(DataRace, match=r"'data' index 0 .*different warps.*no fence of the second thread followed"):
        _launch(module, "warp_lock", 0, block=128)
    data = _launch(module, "warp_lock", 1, block=128)
    assert data[0] == 4, "every warp's lane 0 took the lock once"


def test_releases_are_cumulative_along_a_chain_and_scoped(module):
    with pytest.raises(DataRace, match=r"'data' index 0 .*write by block \(0,0,0\) thread \(0,0,0\).*read by block "
                                       r"\(1,0,0\) thread \(0,0,0\)"):
        _launch(module, "relay", 0, grid=2)
    with pytest.raises(DataRace, match=r"'data' index 0 .*different blocks"):
        _launch(module, "relay", 3, grid=2)
    for fix in (1, 2):
        data = _launch(module, "relay", fix, grid=2)
        assert data[1] == 7


def test_a_wider_release_passes_on_what_was_acquired_from_the_same_flag(module):
    with pytest.raises(DataRace, match=r"'data' index 0 .*write by block \(0,0,0\) thread \(0,0,0\).*read by block "
                                       r"\(1,0,0\) thread \(0,0,0\).*different blocks"):
        _launch(module, "relay_one_flag", 0, grid=2)
    assert _launch(module, "relay_one_flag", 1, grid=2)[1] == 7


def test_an_acquire_takes_only_what_was_released_before_it(module):
    def run(fix):
        data = np.zeros(6, np.uint32)
        module.launch("acquired_before", (1,), (64,), 0, [data, np.int32(fix)], outputs=())
        return data
    with pytest.raises(DataRace) as err:
        run(0)
    assert err.value.distinct == 1 and "'data' index 1 " in err.value.races[0], str(err.value)   # x[1] only
    assert "no fence of the second thread followed that atomic" in err.value.races[0]
    assert list(run(1)[:4]) == [1, 2, 1, 2]


def test_libcu_memory_orders_synchronize_without_fences(module):
    with pytest.raises(DataRace, match=r"'data' index 0 .*write by block \(0,0,0\) thread \(0,0,0\).*read by block "
                                       r"\(0,0,0\) thread \(32,0,0\)"):
        _launch(module, "ordered_flag", 0)
    data = _launch(module, "ordered_flag", 1)
    assert data[1] == 5


def test_a_block_that_waits_on_a_block_run_later_is_held_until_that_block_ran():
    be = EmuBackend(schedules=1, schedule="reverse", timeout_s=60)     # block 1 first: it waits for block 0
    try:
        data = np.zeros(4, np.uint32)
        result = be.load(SOURCE).launch("wait_for_block", (2,), (1,), 0, [data, np.int32(0)], outputs=())
        assert data[1] == 3
        [caveat] = [c for c in result.caveats if "spun until blocks that ran after them" in c]
        assert "block (1,0,0)" in caveat and "resident at once" in caveat
    finally:
        be.close()


def test_under_the_sanitizer_a_wait_on_a_later_block_stays_the_tools_limit():
    """Holding a block copies its threads' stacks, which AddressSanitizer's stack poisoning forbids."""
    be = EmuBackend(schedules=1, schedule="reverse", timeout_s=60, sanitize=True)
    try:
        with pytest.raises(LaterBlockWait, match=r"block \(1,0,0\).*spins on an atomic.*1 block\(s\) that emu runs "
                                                 r"after it") as info:
            _launch(be.load(SOURCE), "wait_for_block", 0, grid=2, block=1)
        assert classify(info.value, True).kind == "unchecked"
    finally:
        be.close()


def test_every_block_order_runs_and_is_compared_when_blocks_wait_on_each_other():
    be = EmuBackend(timeout_s=60)                     # all schedules: reverse and random orders hold block 1
    try:
        module = be.load(SOURCE)
        data = np.zeros(4, np.uint32)
        result = module.launch("wait_for_block", (2,), (1,), 0, [data, np.int32(0)], outputs=())
        assert data[1] == 3
        assert not any("not compared" in n for n in result.notes), result.notes
        assert any("spun until blocks that ran after them" in c for c in result.caveats), result.caveats
    finally:
        be.close()


def test_a_spin_no_thread_can_end_is_a_deadlock(module):
    with pytest.raises(Deadlock, match=r"spins on an atomic that keeps reading 1 .*no block runs after it"):
        _launch(module, "never_released", 0, block=64)


def test_a_spin_on_a_volatile_load_yields_and_its_flag_races(module):
    with pytest.raises(DataRace, match=r"'data' index 1 .*write by block \(0,0,0\) thread \(32,0,0\).*read by "
                                       r"block \(0,0,0\) thread \(0,0,0\)|'data' index 1 .*read by block \(0,0,0\) "
                                       r"thread \(0,0,0\).*write by block \(0,0,0\) thread \(32,0,0\)") as info:
        _launch(module, "volatile_wait", 0)
    assert "index 2" not in str(info.value), "the value read after the wait is thread 0's own"


def test_volatile_rereads_that_are_no_spin_yield_harmlessly_on_every_schedule():
    """Every thread rereads one volatile input 64 times (a yield every 8 reads): a legal order each time, so
    the five schedules agree and the sums are exact."""
    src = r"""
__global__ void reread(const unsigned* in, unsigned* out) {
  const volatile unsigned* v = in;
  unsigned s = 0;
  for (int i = 0; i < 64; ++i) s += *v + i;
  out[threadIdx.x] = s;
}"""
    be = EmuBackend(timeout_s=60)
    try:
        out = np.zeros(64, np.uint32)
        module = be.load(src)
        module.launch("reread", (1,), (64,), 0, [np.array([3], np.uint32), out], outputs=(1,))
        assert (out == 64 * 3 + 63 * 64 // 2).all()
        assert module.last_stats["switches"][0] >= 64 * 64 // 8, module.last_stats
    finally:
        be.close()
