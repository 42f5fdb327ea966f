"""Blocks that wait for each other (emu_runtime.cpp, "spinning"): emu runs blocks one after another, so a block that
spins on progress only a block after it can make is held (its threads, shared memory and race-detector state kept)
while the later blocks run, then resumes where it stopped, as on a GPU whose grid is resident at once (a caveat
says so). The detector's rules hold across the hold: a release and an acquire order the blocks, their absence is
a race; an atomic write that an atomic read saw is ordered before what the reading thread (and, after a barrier,
its block) does next (PTX's observation order: Marlin's lock reset). Each racy kernel has a race-free twin."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace
from harness.backends.base import Deadlock
from harness.backends.emu.backend import EmuBackend

SOURCE = r"""
// Block 0 waits for block 1's data. fix bit 0: the consumer fences after its atomic read (an acquire); bit 1: the
// producer fences before its atomic write (a release).
__global__ void handoff(int* flag, float* data, float* out, int fix) {
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      while (atomicAdd(flag, 0) == 0) {}
      if (fix & 1) __threadfence();
    }
    __syncthreads();
    out[threadIdx.x] = data[threadIdx.x];
  } else {
    data[threadIdx.x] = threadIdx.x + 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
      if (fix & 2) __threadfence();
      atomicExch(flag, 1);
    }
  }
}

// Marlin's serial reduction between blocks: block 1 adds its part and releases the lock (fence, relaxed red);
// block 0 waits with an acquire load until the lock counts one, adds its part, and resets the lock with a plain
// store. The reset is ordered after block 1's red when the thread that saw it stores, or (fix) another thread
// after a barrier; without the barrier thread 32's store races it.
__device__ __forceinline__ int load_acquire(int* p) {
  int v;
  asm volatile("ld.global.acquire.gpu.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}
__global__ void lock_reset(int* lock, float* acc, int fix) {
  if (blockIdx.x == 1) {
    acc[threadIdx.x] += 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("fence.acq_rel.gpu;\n");
      asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;\n" : : "l"(lock), "r"(1));
    }
  } else {
    if (threadIdx.x == 0) while (load_acquire(lock) != 1) {}
    if (fix) __syncthreads();
    acc[threadIdx.x] += 2.0f;
    if (threadIdx.x == (fix == 2 ? 0 : 32)) lock[0] = 0;
  }
}

// An observation carried through a release to a third block: block 2 raises flags[0] with an atomic; block 1 sees
// it with a relaxed atomic load and raises flags[1]; block 0 sees that and resets both flags with plain stores.
// flags[0]'s reset is ordered after block 2's write (observation, then block 1's release, then block 0's acquire)
// only when block 1 fences after its load (bit 0) or raises flags[1] with a release red (bit 3), and block 0 fences
// after its own load (bit 1). Bit 2 moves block 1's fence before its load, where it releases nothing it saw.
__device__ __forceinline__ int load_relaxed(int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}
__global__ void relay_reset(int* flags, int fix) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 2) {
    atomicExch(&flags[0], 1);
  } else if (blockIdx.x == 1) {
    if (fix & 4) __threadfence();
    while (load_relaxed(&flags[0]) != 1) {}
    if (fix & 1) __threadfence();
    if (fix & 8) asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" : : "l"(&flags[1]), "r"(1));
    else atomicExch(&flags[1], 1);
  } else {
    while (load_relaxed(&flags[1]) != 1) {}
    if (fix & 2) __threadfence();
    flags[0] = 0;
    flags[1] = 0;
  }
}

// The same along a chain: the last block raises its flag; each block before it waits for the next one's flag and
// raises its own (through a barrier, `via_barrier`: thread 0 waits and acquires, thread 32 fences and raises);
// block 0 resets the first flag raised, which only block gridDim.x - 2 saw (releases are cumulative).
__global__ void relay_chain(int* flags, int via_barrier) {
  int b = blockIdx.x, last = gridDim.x - 1;
  int raiser = via_barrier ? 32 : 0;
  if (b == last) {
    if (threadIdx.x == 0) atomicExch(&flags[b], 1);
    return;
  }
  if (threadIdx.x == 0) {
    while (load_relaxed(&flags[b + 1]) != 1) {}
    __threadfence();
  }
  if (via_barrier) __syncthreads();
  if (threadIdx.x == raiser) {
    __threadfence();
    if (b > 0) atomicExch(&flags[b], 1);
    else flags[last] = 0;
  }
}

// A held block's arrive-wait barrier and the next block's, at one shared address: block 0 completes phase 0, writes
// `data` and completes phase 1, then spins until block 1 (which completes its own phases 0 and 1 meanwhile) raises
// the flag. Thread 32 of block 0 then waits for phase 0 (a race with the write: it came after that phase's
// arrival) or, fixed, for phase 1 by parity. A wait acquires its own block's phase, not the later block's.
__device__ __forceinline__ unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ unsigned long long arrive(unsigned long long* bar) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1];" : "=l"(state) : "r"(smem(bar)) : "memory");
  return state;
}
__global__ void held_phases(int* flag, float* out, int fix) {
  __shared__ __align__(8) unsigned long long bar;
  __shared__ unsigned long long phase0;
  __shared__ float data;
  int t = threadIdx.x;
  if (t == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(smem(&bar)), "r"(1));
    phase0 = arrive(&bar);
  }
  __syncthreads();
  if (blockIdx.x == 1) {
    if (t == 0) {
      arrive(&bar);
      atomicExch(flag, 1);
    }
    return;
  }
  if (t == 0) {
    data = 5.0f;
    arrive(&bar);
    while (atomicAdd(flag, 0) == 0) {}
  } else if (t == 32) {
    while (atomicAdd(flag, 0) == 0) {}
    unsigned done = 0;
    while (!done) {
      if (fix)
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(smem(&bar)), "r"(1) : "memory");
      else
        asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(smem(&bar)), "l"(phase0) : "memory");
    }
    out[0] = data;
  }
}

// A shared word's observation kept across a hold: in each block thread 32 raises `ready` in shared memory with an
// atomic and thread 0 sees it with a relaxed atomic load, then resets it with a plain store (ordered: the load saw
// the write). Block 0 does its reset only after a hold, while block 1 saw its own `ready` at the same address;
// `fix` 0: thread 0 resets without having looked (a race with thread 32's atomic).
__device__ __forceinline__ int load_relaxed_cta(int* p) {
  int v;
  asm volatile("ld.relaxed.cta.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(smem(p)));
  return v;
}
__global__ void shared_flag_across_hold(int* flag, int* out, int fix) {
  __shared__ int ready;
  int t = threadIdx.x;
  if (t == 0) ready = 0;
  __syncthreads();
  if (t == 32) atomicExch(&ready, 1);
  if (t != 0) return;
  if (fix) while (load_relaxed_cta(&ready) != 1) {}
  if (blockIdx.x == 0) while (atomicAdd(flag, 0) == 0) {}
  else atomicExch(flag, 1);
  ready = 0;
  out[blockIdx.x] = 1;
}

// A held block keeps its shared memory and its detector state: thread 32 writes s[0] before block 0 is held,
// block 1 uses the same shared bytes meanwhile, and thread 0 reads s[0] after the hold: ordered by the barrier
// (fix), else a race within block 0 that the hold must not hide.
__global__ void shared_across_hold(int* flag, int* out, int fix) {
  __shared__ int s[2];
  if (blockIdx.x == 0) {
    if (threadIdx.x == 32) s[0] = 7;
    if (fix) __syncthreads();
    if (threadIdx.x == 0) {
      while (atomicAdd(flag, 0) == 0) {}
      out[0] = s[0];
    }
  } else if (threadIdx.x == 0) {
    s[0] = 9;
    out[1] = s[0];
    atomicExch(flag, 1);
  }
}

// Each block waits for the block before it, then publishes its prefix (a decoupled look-back at its simplest).
__global__ void chain(int* flags, int* prefix, int fix) {
  int b = blockIdx.x;
  if (threadIdx.x == 0) {
    int before = 0;
    if (b > 0) {
      while (atomicAdd(&flags[b - 1], 0) == 0) {}
      __threadfence();
      before = prefix[b - 1];
    }
    prefix[b] = before + b + 1;
    __threadfence();
    atomicExch(&flags[b], 1);
  }
}

// Two blocks hand a token back and forth: each waits for the other `rounds` times.
__global__ void ping_pong(int* turn, int* log, int rounds) {
  if (threadIdx.x != 0) return;
  int me = blockIdx.x;
  for (int r = 0; r < rounds; ++r) {
    while (atomicAdd(turn, 0) != 2 * r + me) {}
    __threadfence();
    log[2 * r + me] = me + 1;
    __threadfence();
    atomicAdd(turn, 1);
  }
}

// A software grid barrier: every block counts itself in and waits until all have.
__global__ void counted_barrier(unsigned* count, unsigned* seen, int fix) {
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(count, 1u);
    while (atomicAdd(count, 0u) < gridDim.x) {}
    __threadfence();
    seen[blockIdx.x] = atomicAdd(count, 0u);
  }
}

// No block ever sets the flag: with every block run, a GPU waits for ever.
__global__ void nobody_sets(int* flag, int* out, int fix) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    while (atomicAdd(flag, 0) == fix) {}
    out[0] = 1;
  }
}
"""


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def _handoff(module, fix):
    flag, data, out = np.zeros(1, np.int32), np.zeros(64, np.float32), np.zeros(64, np.float32)
    result = module.launch("handoff", (2,), (64,), 0, [flag, data, out, np.int32(fix)], outputs=(2,))
    return result, out


def test_a_block_held_for_a_later_blocks_data_reads_it_when_released_and_acquired(module):
    result, out = _handoff(module, 3)
    np.testing.assert_array_equal(out, np.arange(1, 65, dtype=np.float32))
    [caveat] = [c for c in result.caveats if "spun until blocks that ran after them" in c]
    assert "block (0,0,0) warp 0 lane 0" in caveat and "spins on an atomic that keeps reading 0" in caveat


@pytest.mark.parametrize("fix, missing", [(2, "no fence of the second thread followed that atomic"),
                                          (1, "")], ids=["no-acquire-fence", "no-release-fence"])
def test_negative_control_a_handoff_without_its_fences_races(module, fix, missing):
    with pytest.raises(DataRace, match=r"'data' index \d+ .*write by block \(1,0,0\).*read by block \(0,0,0\)") as err:
        _handoff(module, fix)
    assert missing in str(err.value)


@pytest.fixture(scope="module")
def writer_side_module():
    backend = EmuBackend(schedules=1, timeout_s=60, acquire="atomic")
    yield backend.load(SOURCE)
    backend.close()


def test_the_writer_side_fence_reading_takes_an_atomic_that_saw_the_release_as_its_acquire(writer_side_module):
    result, out = _handoff(writer_side_module, 2)          # no fence after the consumer's atomic: PTX's race
    np.testing.assert_array_equal(out, np.arange(1, 65, dtype=np.float32))


def test_negative_control_the_writer_side_fence_reading_still_needs_the_writers_fence(writer_side_module):
    with pytest.raises(DataRace, match=r"'data' index \d+ .*write by block \(1,0,0\).*read by block \(0,0,0\)"):
        _handoff(writer_side_module, 1)


def test_an_unknown_acquire_rule_is_named():
    with pytest.raises(ValueError, match=r"acquire: expected one of \('fence', 'atomic'\), got 'consume'"):
        EmuBackend(acquire="consume")


def _lock_reset(module, fix):
    lock, acc = np.full(2, 0, np.int32), np.zeros(64, np.float32)
    module.launch("lock_reset", (2,), (64,), 0, [lock, acc, np.int32(fix)], outputs=())
    return lock, acc


@pytest.mark.parametrize("fix", [1, 2], ids=["reset-after-a-barrier", "reset-by-the-thread-that-saw-it"])
def test_a_lock_reset_after_the_acquire_load_saw_the_release_is_no_race(module, fix):
    lock, acc = _lock_reset(module, fix)
    assert lock[0] == 0
    np.testing.assert_array_equal(acc, np.full(64, 3.0, np.float32))


def test_negative_control_a_lock_reset_by_a_thread_the_acquire_does_not_order_races(module):
    with pytest.raises(DataRace) as err:
        _lock_reset(module, 0)
    across = [r for r in err.value.races if "'lock' index 0" in r and "across blocks" in r]
    assert len(across) == 1 and "block (0,0,0) thread (32,0,0)" in across[0] and \
        "atomic write by block (1,0,0) thread (0,0,0)" in across[0], err.value.races


def _relay_reset(module, fix):
    flags = np.zeros(2, np.int32)
    module.launch("relay_reset", (3,), (32,), 0, [flags, np.int32(fix)], outputs=())
    return flags


@pytest.mark.parametrize("fix", [3, 10], ids=["fence-after-the-load", "release-red"])
def test_an_observed_write_is_ordered_before_what_a_third_block_does_after_acquiring_from_the_observer(module, fix):
    assert list(_relay_reset(module, fix)) == [0, 0]


@pytest.mark.parametrize("fix, why", [(2, "the relay does not release"), (1, "the last block does not acquire"),
                                      (6, "the relay's fence comes before its load")],
                         ids=["no-relay-fence", "no-acquire-fence", "fence-before-the-load"])
def test_negative_control_an_observation_not_carried_by_a_release_and_acquire_races(module, fix, why):
    with pytest.raises(DataRace) as err:
        _relay_reset(module, fix)
    races = err.value.races
    assert all("'flags' index 0" in r and "block (0,0,0) thread (0,0,0)" in r for r in races), (why, races)
    assert any("atomic write by block (2,0,0) thread (0,0,0)" in r for r in races), (why, races)


@pytest.mark.parametrize("via_barrier", [0, 1], ids=["one-thread", "through-a-barrier"])
@pytest.mark.parametrize("blocks", [3, 5])
def test_an_observation_travels_along_a_chain_of_releases_and_acquires(module, blocks, via_barrier):
    flags = np.zeros(blocks, np.int32)
    module.launch("relay_chain", (blocks,), (64,), 0, [flags, np.int32(via_barrier)], outputs=())
    assert list(flags) == [0] + [1] * (blocks - 2) + [0]


def _held_phases(module, fix):
    flag, out = np.zeros(1, np.int32), np.zeros(1, np.float32)
    result = module.launch("held_phases", (2,), (64,), 0, [flag, out, np.int32(fix)], outputs=(1,))
    return result, out


def test_a_held_blocks_wait_acquires_its_own_phase_not_the_later_blocks(module):
    result, out = _held_phases(module, 1)
    assert out[0] == 5.0
    assert any("spun until blocks that ran after them" in c for c in result.caveats), result.caveats


def test_negative_control_a_wait_for_an_earlier_phase_races_with_a_write_after_its_arrival_across_a_hold(module):
    with pytest.raises(DataRace, match=r"__shared__ 'data'.*block \(0,0,0\) thread \(0,0,0\).*block \(0,0,0\) "
                                       r"thread \(32,0,0\)"):
        _held_phases(module, 0)


def test_a_held_blocks_shared_observation_survives_the_next_blocks_at_the_same_address(module):
    flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    result = module.launch("shared_flag_across_hold", (2,), (64,), 0, [flag, out, np.int32(1)], outputs=(1,))
    assert list(out) == [1, 1]
    assert any("spun until blocks that ran after them" in c for c in result.caveats), result.caveats


def test_negative_control_a_shared_reset_without_looking_races_with_the_atomic(module):
    flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    with pytest.raises(DataRace, match=r"__shared__ 'ready'.*atomic write by block \(\d,0,0\) thread \(32,0,0\)"):
        module.launch("shared_flag_across_hold", (2,), (64,), 0, [flag, out, np.int32(0)], outputs=(1,))


def _shared_across_hold(module, fix):
    flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    module.launch("shared_across_hold", (2,), (64,), 0, [flag, out, np.int32(fix)], outputs=(1,))
    return out


def test_a_held_block_keeps_its_shared_memory_and_its_order(module):
    assert list(_shared_across_hold(module, 1)) == [7, 9]          # each block its own s[0], across the hold


def test_negative_control_a_race_within_a_held_block_is_found_across_the_hold(module):
    with pytest.raises(DataRace, match=r"__shared__ 's' .*index 0 .*block \(0,0,0\) thread \(32,0,0\).*block "
                                       r"\(0,0,0\) thread \(0,0,0\)|__shared__ 's' .*index 0 .*block \(0,0,0\) "
                                       r"thread \(0,0,0\).*block \(0,0,0\) thread \(32,0,0\)") as err:
        _shared_across_hold(module, 0)
    assert "block (1,0,0)" not in str(err.value)


def test_a_spin_that_no_block_of_the_grid_ends_is_a_deadlock(module):
    flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    with pytest.raises(Deadlock, match=r"spins on an atomic that keeps reading 0.*no block runs after it"):
        module.launch("nobody_sets", (4,), (32,), 0, [flag, out, np.int32(0)], outputs=(1,))


def test_a_hold_costs_nothing_where_no_block_waits():
    """Negative control of the caveat: blocks that never wait are not held, and no caveat is given."""
    be = EmuBackend(timeout_s=60)
    try:
        flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
        result = be.load(SOURCE).launch("nobody_sets", (4,), (32,), 0, [flag, out, np.int32(1)], outputs=())
        assert out[0] == 1 and not result.caveats
    finally:
        be.close()


@pytest.mark.parametrize("schedule", ["reverse", None], ids=["reverse", "every-schedule"])
def test_a_chain_of_blocks_each_waiting_for_the_one_before_runs_in_any_block_order(schedule):
    """In reverse order every block but the last one run waits: 31 blocks held, each resumed once the word it
    spins on changed (one resume each, not a round of all of them after every block). Every schedule: the runs
    that would sample 6 of the 32 blocks run on all of them, as a sampled block waits for one left out."""
    be = EmuBackend(schedules=1 if schedule else None, schedule=schedule, timeout_s=120)
    try:
        flags, prefix = np.zeros(32, np.int32), np.zeros(32, np.int32)
        result = be.load(SOURCE).launch("chain", (32,), (32,), 0, [flags, prefix, np.int32(0)], outputs=())
        b = np.arange(32)
        np.testing.assert_array_equal(prefix, (b + 1) * (b + 2) // 2)
        if schedule:
            assert any("31 block(s) spun until" in c for c in result.caveats), result.caveats
        else:   # a sampled run whose block waits for a block left out runs again on every block
            assert "5 schedule(s) on all 32 blocks" in result.notes[0], result.notes
            assert not any("not compared" in n for n in result.notes), result.notes
    finally:
        be.close()


@pytest.mark.parametrize("schedule", ["forward", "reverse"])
def test_two_blocks_that_wait_for_each_other_in_turn_take_every_turn(schedule):
    """Block 0 holds the token first; each block waits for the other three times, so each is held and resumed
    more than once, whatever order emu starts them in."""
    be = EmuBackend(schedules=1, schedule=schedule, timeout_s=120)
    try:
        turn, log = np.zeros(1, np.int32), np.zeros(6, np.int32)
        result = be.load(SOURCE).launch("ping_pong", (2,), (32,), 0, [turn, log, np.int32(3)], outputs=())
        assert list(log) == [1, 2, 1, 2, 1, 2] and turn[0] == 6
        assert any("spun until" in c for c in result.caveats), result.caveats
    finally:
        be.close()


def test_a_software_grid_barrier_holds_every_block_but_the_last_until_all_arrived(module):
    """Each block's arrival changes the word every held block watches, so each is resumed at every arrival: a
    resumed block that still waits goes back after 16 yields, not 4096 (64 blocks, racescan's whole run of 5
    schedules: 1.3 s, and 8.1 s when it went back after 4096)."""
    count, seen = np.zeros(1, np.uint32), np.zeros(64, np.uint32)
    result = module.launch("counted_barrier", (64,), (32,), 0, [count, seen, np.int32(0)], outputs=())
    assert list(seen) == [64] * 64
    assert any("63 block(s) spun until" in c for c in result.caveats), result.caveats
