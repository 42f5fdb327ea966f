// Arrive-wait barriers for the emu backend: ONE mechanism behind PTX's mbarrier (ptx.py), libcu++'s cuda::barrier
// (<cuda/barrier>) and the block-scope cuda::pipeline (<cuda/pipeline>). Included by emu_device.hpp in kernel code.
//
// A barrier is a 64-bit word, as a GPU's mbarrier is: the arrivals its current phase still needs, the count every
// phase expects, the phase's number and a mark that says init ran. Arrivals are atomic read-modify-writes of the
// word, so a waiting thread spins and yields like any atomic spin (emu_runtime.cpp) and a wait no arrival can end is
// reported. Each arrival releases what its thread did before it, the last one of a phase marks where the phase ends,
// and a wait that sees its phase complete acquires every arrival up to that end and none of a later phase
// (phase_arrive / phase_complete / phase_acquire, emu_race.hpp): the happens-before edges the CUDA memory model gives
// an arrive-wait barrier, whose arrivals are read-modify-writes of one object, with no more ordering than that.
#pragma once

namespace emu {
namespace mbar {
constexpr int kExpectedShift = 21, kPhaseShift = 42;
constexpr uint64_t kCountMask = (uint64_t(1) << 21) - 1;     // a 21-bit field: room for counts up to kMaxCount
constexpr uint64_t kMaxCount = (uint64_t(1) << 20) - 1;      // the PTX ISA's largest expected count
constexpr uint64_t kPhaseMask = (uint64_t(1) << 20) - 1;
constexpr uint64_t kMark = uint64_t(1) << 62, kMarkMask = uint64_t(3) << 62;
inline uint32_t pending(uint64_t w) { return uint32_t(w & kCountMask); }
inline uint32_t expected(uint64_t w) { return uint32_t(w >> kExpectedShift & kCountMask); }
inline uint64_t phase(uint64_t w) { return w >> kPhaseShift & kPhaseMask; }
inline uint64_t make(uint64_t phase, uint32_t expected, uint32_t pending) {
  return kMark | (phase & kPhaseMask) << kPhaseShift | uint64_t(expected) << kExpectedShift | pending;
}
}  // namespace mbar

// A barrier in global memory (zeroed) carries no mark until init writes it; one in shared memory is checked
// against the block's inits (barrier_use), since its poison may look like a mark.
inline uint64_t mbarrier_checked(uint64_t w, const volatile void* bar, const char* op, int line) {
  if ((w & mbar::kMarkMask) != mbar::kMark) barrier_fault(bar, op, "on a barrier that was never initialised", line);
  return w;
}
inline uint64_t mbarrier_read(uint64_t* bar, int scope, const char* op, int line) {
  barrier_use(bar, op, line);
  return mbarrier_checked(atomic_load(bar, line, scope, kRelaxed), bar, op, line);
}

// mbarrier.init / cuda::barrier's init: a plain store, so that an arrival that does not happen after it (no
// __syncthreads between) is a race the detector reports.
inline void mbarrier_init(uint64_t* bar, uint64_t count, int line) {
  if (count == 0 || count > mbar::kMaxCount)
    barrier_fault(bar, "init", "with an expected count outside 1 .. 2^20-1", line);
  *bar = mbar::make(0, uint32_t(count), uint32_t(count));
  barrier_init_seen(bar, line);
}

// mbarrier.inval: the word is no barrier any more (a later use traps until it is initialised again).
inline void mbarrier_inval(uint64_t* bar) {
  *bar = 0;
  barrier_invalidated(bar);
}

// An arrival of `count` on the current phase, `drop` also lowering the count every later phase expects. The last
// arrival completes the phase: `on_complete` (cuda::barrier's completion function) runs first, in the last arriving
// thread, and the next phase begins with the expected count. Returns the word before the arrival (PTX's state,
// libcu++'s arrival token), which names the phase arrived on.
template <class F>
inline uint64_t mbarrier_arrive(uint64_t* bar, uint32_t count, bool drop, int scope, int line, F&& on_complete) {
  bool completes = false;
  barrier_use(bar, drop ? "arrive_drop" : "arrive", line);
  uint64_t before = atomic_rmw(bar, [&](uint64_t w) -> uint64_t {
    mbarrier_checked(w, bar, drop ? "arrive_drop" : "arrive", line);
    uint32_t pending = mbar::pending(w), expected = mbar::expected(w);
    if (count == 0 || count > pending || (drop && count > expected))
      barrier_fault(bar, drop ? "arrive_drop" : "arrive",
                    "with more arrivals than its phase still needs (count exceeds the pending count)", line);
    uint32_t next_expected = drop ? expected - count : expected;
    if (pending > count) return mbar::make(mbar::phase(w), next_expected, pending - count);
    completes = true;
    return mbar::make(mbar::phase(w), next_expected, 0);    // every arrival is in; the phase completes below
  }, line, scope, kRelaxed);
  phase_arrive(bar, scope);
  if (completes) {
    phase_complete(bar, mbar::phase(before));
    phase_acquire(bar, mbar::phase(before), scope);          // the completion function sees every arrival's work
    on_complete();
    phase_arrive(bar, scope);                                 // what the completion function did, released too
    phase_complete(bar, mbar::phase(before));
    atomic_rmw(bar, [](uint64_t w) { return mbar::make(mbar::phase(w) + 1, mbar::expected(w), mbar::expected(w)); },
               line, scope, kRelaxed);
  }
  return before;
}
inline uint64_t mbarrier_arrive(uint64_t* bar, uint32_t count, bool drop, int scope, int line) {
  return mbarrier_arrive(bar, count, drop, scope, line, [] {});
}

// mbarrier.test_wait with a state: whether the phase `state` names has completed; if so, its arrivals are acquired.
inline bool mbarrier_test_wait(uint64_t* bar, uint64_t state, int scope, int line) {
  uint64_t w = mbarrier_read(bar, scope, "test_wait", line);
  if (mbar::phase(w) == mbar::phase(state)) return false;
  phase_acquire(bar, mbar::phase(state), scope);
  return true;
}
// mbarrier.test_wait.parity: whether the last phase of parity `parity` has completed, i.e. the current phase's
// parity differs from it (a barrier fresh from init has phase 0, and parity 1 counts as completed).
inline bool mbarrier_test_wait_parity(uint64_t* bar, uint32_t parity, int scope, int line) {
  uint64_t w = mbarrier_read(bar, scope, "test_wait.parity", line);
  uint64_t now = mbar::phase(w);
  if ((now & 1) == (parity & 1)) return false;
  if (now) phase_acquire(bar, now - 1, scope);
  return true;
}
inline void mbarrier_wait(uint64_t* bar, uint64_t state, int scope, int line) {
  while (!mbarrier_test_wait(bar, state, scope, line)) {}
}
inline void mbarrier_wait_parity(uint64_t* bar, uint32_t parity, int scope, int line) {
  while (!mbarrier_test_wait_parity(bar, parity, scope, line)) {}
}
inline uint32_t mbarrier_pending_count(uint64_t state) { return mbar::pending(state); }

// cp.async.mbarrier.arrive(.noinc), and libcu++'s memcpy_async on a barrier or a block-scope pipeline: the thread's
// pending asynchronous copies complete (the earliest moment a GPU may complete them; async_land, emu_device.hpp),
// and with `counts` the completion is one of the phase's arrivals (.noinc), else it only releases the copies to it.
__attribute__((always_inline)) inline void mbarrier_async_arrive(uint64_t* bar, bool counts, int scope, int line) {
  async_land(kAllAsync);
  if (counts) {
    mbarrier_arrive(bar, 1, false, scope, line);
  } else {
    (void)mbarrier_read(bar, scope, "cp.async.mbarrier.arrive", line);
    phase_arrive(bar, scope);
  }
}
}  // namespace emu
