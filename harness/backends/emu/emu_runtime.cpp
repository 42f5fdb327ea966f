// qconform emu runtime: the fiber scheduler, barriers, warp collectives and the checks behind
// emu_device.hpp. Compiled once per toolchain and flag set, then linked into every module (hidden
// visibility: each module .so keeps its own copy of this state).
#define EMU_RUNTIME_IMPL
#include "emu_device.hpp"

#include <algorithm>
#include <string>
#include <cstring>
#include <vector>
#include <unordered_set>
#include <cerrno>
#include <sys/mman.h>

#include "emu_signals.hpp"

#if defined(EMU_FIBER_BOOST)
#include <boost/context/detail/fcontext.hpp>
#elif defined(EMU_FIBER_ASM)
#if !defined(__x86_64__)
#error "EMU_FIBER_ASM: the hand-written context switch exists for x86-64 only"
#endif
#else
#include <ucontext.h>
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/asan_interface.h>
// AddressSanitizer must be told about every stack switch, or it reports the fibers' stacks as overflows;
// an abandoned or exited fiber leaves redzone poison on its stack, cleared before the stack is reused.
#define EMU_START_SWITCH(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define EMU_FINISH_SWITCH(save, bottom, size) __sanitizer_finish_switch_fiber(save, bottom, size)
#define EMU_CLEAN_STACK(p, n) __asan_unpoison_memory_region(p, n)
#else
#define EMU_START_SWITCH(save, bottom, size) ((void)0)
#define EMU_FINISH_SWITCH(save, bottom, size) ((void)0)
#define EMU_CLEAN_STACK(p, n) ((void)0)
#endif

namespace emu {

// ---------------------------------------------------------------------------------------------------
// Fault codes (mirrored in harness/emu/native.py).
enum FaultCode : int {
  OK = 0, BARRIER_DIVERGENCE = 1, DEADLOCK = 2, SHARED_OOB = 3, UNSUPPORTED = 4, TRAP = 5, BAD_LAUNCH = 6,
  LAUNCH_REFUSED = 7,   // more static __shared__ memory than any GPU gives a block: no device could launch it
  TOOL_LIMIT = 8,   // the tool's own memory (shadow, stacks) could not be had: unchecked, never the kernel's fault
  LATER_BLOCK_WAIT = 9,   // a block spins on progress only a block emu runs after it could make: unchecked
  PARKED = 10,   // internal, never returned by a launch: every live thread of the block waits at grid.sync
  HELD = 11,     // internal, never returned by a launch: the block spins on progress of a block not running now
};
// WARP_GREEDY: forward order, but a warp released from a collective runs on at once, so each warp reaches the
// next block barrier before the next warp starts: a legal GPU order that exposes races between warps inside
// one barrier interval (a warp overwriting shared data that a later warp has yet to read).
enum Policy : int { FORWARD = 0, REVERSE = 1, RANDOM = 2, WARP_GREEDY = 3 };
const char* const kWaitName[] = {"-", "__syncthreads", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                 "__shfl_xor_sync", "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp",
                                 "mma.sync", "__reduce_add_sync", "__reduce_min_sync", "__reduce_max_sync",
                                 "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync", "__match_any_sync",
                                 "__match_all_sync", "ldmatrix.sync", "stmatrix.sync", "bar.sync", "grid.sync",
                                 "__activemask"};
enum State : int { READY = 0, WAIT_BAR, WAIT_WARP, DONE };

constexpr int kMaxThreads = 1024;
#ifndef EMU_STACK_BYTES
#define EMU_STACK_BYTES (256 * 1024)
#endif
constexpr size_t kStackBytes = EMU_STACK_BYTES;
constexpr size_t kPage = 4096;
constexpr int kSharedGuard = 64;                 // sentinel bytes after every shared variable
constexpr unsigned char kSentinel = 0xC3;
constexpr size_t kSharedArena = 256 * 1024;      // > any GPU's shared memory per block
// Both shared areas are page-aligned, in host memory and in the shared window (kSharedArena is a multiple of the
// page, the dynamic area starts at kDynWindow): kernels that swizzle absolute shared addresses or ask __align__(1024)
// of a shared array get what a GPU gives. The dynamic area's data follows kDynLead bytes, the last kSharedGuard of
// them a sentinel band.
constexpr size_t kDynLead = 4096;
constexpr uint32_t kDynWindow = 2 * kSharedArena;
constexpr size_t kStaticSharedLimit = 48 * 1024;  // ptxas: "uses too much shared data (..., 0xc000 max)"
constexpr int kMaxSharedSites = 512;              // __shared__ declarations of a source (the rewrite's limit)
constexpr int kMaxSharedSlots = 2 * kMaxSharedSites;  // and as many more instantiations of the declaring functions
constexpr size_t kMaxParkedBlocks = 4096;        // blocks held at one grid.sync (a GPU holds fewer resident)
constexpr size_t kHeldBytes = size_t(4) << 30;     // what blocks held while they spin may keep (stacks, shadows)

// The saved machine state of a suspended fiber (or of the scheduler).
#if defined(EMU_FIBER_BOOST)
using Context = boost::context::detail::fcontext_t;
#elif defined(EMU_FIBER_ASM)
using Context = void*;            // the suspended stack pointer; the registers are saved on that stack
#else
using Context = ucontext_t;
#endif

// A thread's pending asynchronous copies, each with the batch it belongs to (the open batch is `async_open`).
struct AsyncQueue {
  AsyncCopy copy[kMaxAsyncCopies];
  unsigned batch[kMaxAsyncCopies];
  int count;
  unsigned open;
};

struct Fiber : FiberHead {
  int state;
  int wait_line, wait_kind;
  unsigned wait_id;    // the named barrier a thread waits at (W_NAMED)
  Context ctx;
  char* stack;    // lowest usable address (a guard page sits below it)
  // Spinning (atomic_done): the address and value the thread's atomics keep reading, how many times in a row,
  // the block's progress count when it last yielded, and its yields since the block last made progress.
  const volatile void* spin_ptr;
  uint64_t spin_seen, spin_progress;
  int spin_reads, spin_idle;
  // Spinning on a volatile load (volatile_read_done): the address read last and how many times in a row.
  const volatile void* volatile_ptr;
  int volatile_reads;
  bool spin_yielded;   // back in the ready queue because it spins (not on its way to a convergence point)
  unsigned bar_count;  // the true predicates of the named-barrier phase it last completed (bar.red)
  unsigned converged;  // the lanes that converged with it at its last __activemask (converged())
  AsyncQueue async;
};

inline Fiber* cur() { return static_cast<Fiber*>(g_cur); }

// A warp collective in progress: the lanes it names and those that have arrived. Several can be in progress in one
// warp (the groups of a partition each shuffle among themselves; a tile shuffles while lanes of its group already wait
// at the group's next collective). Two that wait for each other's lanes are divergence, reported at the arrival
// that closes the cycle; longer cycles end as a deadlock when no thread can run.
struct Meet { unsigned arrived, mask; int kind, line; };

struct Warp {
  unsigned exists, exited;
  unsigned converging;   // lanes waiting at __activemask for the warp's other lanes to stop (converged())
  int nmeets;            // (the fields each arrival reads share the first cache line with meets[0])
  // The collective that completes, while compute_warp works out its results.
  unsigned mask;
  int kind, line;
  Meet meets[32];
  uint64_t val[32];
  int bval[32], cval[32];
  uint64_t res[32];
  uint32_t mat_in[32][10];   // the registers each lane hands to a matrix instruction, and gets back
  uint32_t mat_out[32][4];
};

struct SharedSlot {
  unsigned char* ptr; size_t bytes; const char* name; int line; int elem; const char* file;
  const void* instance;     // the declaring function's instantiation that owns the slot (null: file scope), for good
};
// Where a __shared__ variable is declared, for messages: "line 12" in the source, "tiles.cuh:40" in a header.
std::string slot_place(const char* file, int line) {
  return file ? std::string(file) + ":" + std::to_string(line) : "line " + std::to_string(line);
}

// ---- per-module state -----------------------------------------------------------------------------
Fiber* g_fibers = nullptr;          // kMaxThreads fibers, stacks mapped once
FiberHead* g_cur = nullptr;        // the running fiber (read by threadIdx)
Warp g_warps[kMaxThreads / 32];
uint3 g_block_idx;
dim3 g_block_dim, g_grid_dim;
int g_nthreads = 0, g_nwarps = 0, g_exited = 0, g_bar_count = 0, g_bar_line = 0;
// __syncthreads() is PTX's bar.sync, an `.aligned` barrier: every thread of the block must execute the same barrier
// instruction. Threads waiting at two call sites are a BarrierDivergence, unless the user asks for the count the
// hardware keeps (emu_set_barrier_sites(1): the barrier completes when every thread has arrived, wherever), which
// kernels such as llama.cpp's flash attention rely on; such phases are counted for a note.
int g_bar_any_site = 0, g_bar_mixed_now = 0, g_bar_mixed_lines[2] = {0, 0};
unsigned long long g_bar_mixed = 0;
int g_first_exit = -1;              // first thread of the block to exit (named in divergence reports)
int g_policy = FORWARD;
uint64_t g_rng = 1;
unsigned char g_poison = 0xA5;
int g_fault = OK;
char g_err[2048];
void (*g_thunk)(void**) = nullptr;
void** g_args = nullptr;
uint64_t g_switches = 0;
std::vector<int> g_ready;
size_t g_ready_head = 0;
std::vector<int> g_order;           // scratch for batch releases
unsigned char* g_shared = nullptr;  // static __shared__ arena
size_t g_shared_top = 0;
size_t g_static_shared = 0;         // the block's static __shared__ bytes so far, without emu's guards
SharedSlot g_slots[kMaxSharedSlots];
int g_used_slots[kMaxSharedSlots];  // the slots placed in this block, in order (reset and checked per block)
int g_nused = 0;
int g_more_instances = 0;           // slots from kMaxSharedSites on, each another instantiation's (for the module's life)
unsigned char* g_dyn = nullptr;     // dynamic (extern) __shared__ area: [lead, its last kSharedGuard a guard][bytes][guard]
size_t g_dyn_bytes = 0, g_dyn_cap = 0;
std::string g_printf;
bool g_capture_printf = false;
uint64_t g_clock = 0;
// Events that can end another thread's wait: an atomic that changed memory, a barrier or warp collective that
// released its threads, a thread that exited. A spinning thread that yields many times while it stays the
// same is waiting for something no thread of its block will do.
uint64_t g_progress = 0;
uint64_t g_blocks_after = 0;         // blocks of the launch that run after the running one
// A block that spins on progress only another block can make is held (like a block at grid.sync) while the blocks
// after it run, then resumed (atomic_done, emu_launch). g_hold: the running block asks to be held, and why.
bool g_hold = false;
std::string g_hold_why;
bool g_resumed = false;              // the running block was held and resumed (it spins on other blocks)
// The word the thread that asked for the hold kept reading, and the value it read: the block is worth resuming
// once the word changed (other words may release it too: before a deadlock is called, every held block resumes).
struct Watch { const volatile void* ptr; uint64_t seen; unsigned bytes; };
Watch g_hold_watch{nullptr, 0, 0};
bool watched_changed(const Watch& w) {
  if (!w.ptr || !w.bytes) return true;
  uint64_t now = 0;
  std::memcpy(&now, const_cast<const void*>(w.ptr), w.bytes < 8 ? w.bytes : 8);
  return now != w.seen;
}
uint64_t g_held = 0;                 // blocks held now
bool g_grid_parked = false;          // blocks wait at grid.sync now (the two holds do not mix)
unsigned long long g_later_waits = 0;   // blocks that finished only after blocks emu ran after them (a caveat)
std::string g_later_wait_first;
// __syncthreads_count/_and/_or: the predicates of the threads arriving at the barrier are summed; the release
// publishes the sum (every released thread reads it before it can reach the next barrier) and starts anew.
int g_pred_sum = 0, g_pred_result = 0;

Context g_sched_ctx;                 // the scheduler (run_block) while a fiber runs
const void* g_main_bottom = nullptr;   // the scheduler's stack, for the sanitizer's switch annotations
size_t g_main_size = 0;
bool g_from_sched = false;             // the running fiber was resumed by the scheduler, not by another fiber

uint64_t rng_next() {  // splitmix64: small, seedable, reproducible across platforms
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ---- faults -----------------------------------------------------------------------------------------
void switch_to_sched(bool final = false);

std::string where(const Fiber* f) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "block (%u,%u,%u) warp %d lane %d (thread (%u,%u,%u))", g_block_idx.x,
                g_block_idx.y, g_block_idx.z, f->warp, f->lane, f->__tid.x, f->__tid.y, f->__tid.z);
  return buf;
}

void set_fault(int code, const std::string& msg) {
  if (g_fault) return;
  g_fault = code;
  std::snprintf(g_err, sizeof g_err, "%s", msg.c_str());
}

[[noreturn]] void fiber_fault(int code, const std::string& msg) {
  set_fault(code, msg);
  cur()->state = DONE;
  switch_to_sched(true);
  std::abort();  // never resumed
}

std::string lane_list(unsigned m) {
  std::string s;
  int i = 0;
  while (i < 32) {
    if (!(m >> i & 1u)) { ++i; continue; }
    int j = i;
    while (j + 1 < 32 && (m >> (j + 1) & 1u)) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(i);
    if (j > i) s += "-" + std::to_string(j);
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

}  // namespace emu
#include "emu_race.hpp"
namespace emu {

// ---- fibers -----------------------------------------------------------------------------------------
// The fiber stacks come from one pool the worker maps once and lends to every module it loads (emu_use_stacks):
// only one launch runs at a time, and a reservation per module (260 MiB) would exhaust the worker's address space
// after a few dozen modules. A module given no pool maps its own.
char* g_stack_pool = nullptr;
constexpr size_t kStackPoolBytes = (kStackBytes + kPage) * kMaxThreads;

bool ensure_fibers() {
  if (g_fibers) return true;
  char* base = g_stack_pool;
  if (!base) {
    void* p = mmap(nullptr, kStackPoolBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) return false;
    base = static_cast<char*>(p);
  }
  Fiber* fibers = static_cast<Fiber*>(std::calloc(kMaxThreads, sizeof(Fiber)));
  g_shared = static_cast<unsigned char*>(std::aligned_alloc(kPage, kSharedArena));
  if (!fibers || !g_shared) { std::free(fibers); return false; }
  // The lowest page of each stack is a PROT_NONE guard (overflow -> SIGSEGV).
  size_t per = kStackBytes + kPage;
  for (int i = 0; i < kMaxThreads; ++i) {
    mprotect(base + i * per, kPage, PROT_NONE);
    fibers[i].stack = base + i * per + kPage;
  }
  g_fibers = fibers;
  return true;
}

// True while a fiber of this module runs (between run_fiber's switch to it and the scheduler's return): the
// SIGSEGV reporter then knows whose stack a fault's stack pointer belongs to.
volatile bool g_on_fiber = false;

// Async-signal-safe (called by memory_fault, emu_signals.hpp). A running fiber whose stack pointer lies below
// its stack, or which touched its guard page, overflowed its stack, however far below the access landed.
bool report_stack_overflow(char*& p, unsigned long long sp, unsigned long long addr) {
  if (!g_on_fiber || !g_fibers) return false;
  const Fiber* f = cur();
  const unsigned long long lo = reinterpret_cast<uintptr_t>(f->stack), top = lo + kStackBytes;
  const bool sp_below = sp != 0 && sp < lo, on_guard = addr < lo && addr + kPage >= lo;
  if (!sp_below && !on_guard) return false;
  const unsigned long long deepest = sp_below && sp < addr ? sp : addr;
  sig_put(p, "\nemu-stack-overflow: block (");
  const unsigned coords[] = {g_block_idx.x, g_block_idx.y, g_block_idx.z, unsigned(f->warp), unsigned(f->lane),
                             f->__tid.x, f->__tid.y, f->__tid.z};
  const char* const seps[] = {",", ",", ") warp ", " lane ", " (thread (", ",", ",", ")) "};
  for (int i = 0; i < 8; ++i) { sig_put_uint(p, coords[i], 10); sig_put(p, seps[i]); }
  sig_put(p, "stack ");
  sig_put_uint(p, kStackBytes, 10);
  sig_put(p, " reached ");
  sig_put_uint(p, top - deepest, 10);
  sig_put(p, "\n");
  return true;
}

void thread_exit();

// ---- context switches --------------------------------------------------------------------------------
// jump(save, target) suspends the running context into *save and resumes *target. Three implementations:
// Boost.Context's fcontext, a hand-written x86-64 switch (the same idea: push the callee-saved registers,
// swap stack pointers, pop; no system call), and glibc's swapcontext (portable, but every switch is a
// sigprocmask system call).
void fiber_main();

#if defined(EMU_FIBER_BOOST)
namespace bctx = boost::context::detail;
// Whoever resumes a context passes where the suspended side's context must be stored (transfer_t.data).
inline void jump(Context* save, Context* target) {
  bctx::transfer_t t = bctx::jump_fcontext(*target, save);
  *static_cast<Context*>(t.data) = t.fctx;
}
void boost_entry(bctx::transfer_t t) {
  *static_cast<Context*>(t.data) = t.fctx;
  fiber_main();
}
inline void make_context(Context* c, char* stack, size_t bytes) {
  *c = bctx::make_fcontext(stack + bytes, bytes, boost_entry);
}
#elif defined(EMU_FIBER_ASM)
}  // namespace emu
// emu_ctx_jump(void** save_sp, void* target_sp): System V x86-64. Saves rbp, rbx, r12-r15, MXCSR and the x87
// control word on the running stack, stores the stack pointer in *save_sp, loads target_sp and restores the
// same frame from there. `ret` then continues where the target was suspended (or enters a new fiber).
// Hidden: every module carries its own copy, like the rest of the runtime.
asm(R"(
  .text
  .p2align 4
  .globl emu_ctx_jump
  .hidden emu_ctx_jump
  .type emu_ctx_jump, @function
emu_ctx_jump:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_ctx_jump, .-emu_ctx_jump
)");
extern "C" void emu_ctx_jump(void** save_sp, void* target_sp);
namespace emu {
inline void jump(Context* save, Context* target) { emu_ctx_jump(save, *target); }
// A new fiber's stack holds the frame emu_ctx_jump pops: FP control words, six registers, then the return
// address fiber_main (entered with the stack aligned as after a call; it never returns).
inline void make_context(Context* c, char* stack, size_t bytes) {
  uint64_t* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15));
  uint64_t* sp = top - 9;
  uint32_t mxcsr; uint16_t fpucw;
  asm volatile("stmxcsr %0; fnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
  sp[0] = uint64_t(mxcsr) | (uint64_t(fpucw) << 32);
  for (int i = 1; i <= 6; ++i) sp[i] = 0;       // r15 r14 r13 r12 rbx rbp
  sp[7] = reinterpret_cast<uint64_t>(&fiber_main);
  sp[8] = 0;                                    // fiber_main's (never used) return address
  *c = sp;
}
#else
inline void jump(Context* save, Context* target) { swapcontext(save, target); }
inline void make_context(Context* c, char* stack, size_t bytes) {
  getcontext(c);
  c->uc_stack.ss_sp = stack;
  c->uc_stack.ss_size = bytes;
  c->uc_link = nullptr;
  makecontext(c, fiber_main, 0);
}
#endif

inline void prepare_fiber(Fiber* f) {
  EMU_CLEAN_STACK(f->stack, kStackBytes);
  // Stack tops 4 KiB apart would all fall into the same L1 cache sets; a per-fiber offset spreads the hot
  // frames of consecutive fibers over the cache.
  size_t stagger = (size_t(f->linear) * 320) % 4096;
  make_context(&f->ctx, f->stack, kStackBytes - stagger);
}

int pop_ready();

// A fiber that blocks (or exits: `final`) hands over directly to the next ready fiber, so a rendezvous costs
// one switch instead of two through the scheduler; the scheduler regains control when nothing is ready or
// a fault was raised. The order is the ready queue's, exactly as when every switch went through run_block.
void release_converged(int warp);
int g_converging = 0;     // lanes of the block waiting at __activemask (one load on every switch's path)

void switch_to_sched(bool final) {
  Fiber* self = cur();
  if (g_converging && g_warps[self->warp].converging && (self->state != READY || self->spin_yielded))
    release_converged(self->warp);
  int next = g_fault || g_hold ? -1 : pop_ready();      // a fault or a hold goes back to the scheduler
  if (next >= 0 && &g_fibers[next] == self) return;      // released again before anyone else ran
  ++g_switches;
  void* fake = nullptr;
  if (next >= 0) {
    Fiber* n = &g_fibers[next];
    g_cur = n;
    g_from_sched = false;
    EMU_START_SWITCH(final ? nullptr : &fake, n->stack, kStackBytes);
    jump(&self->ctx, &n->ctx);
  } else {
    EMU_START_SWITCH(final ? nullptr : &fake, g_main_bottom, g_main_size);
    jump(&self->ctx, &g_sched_ctx);
  }
  EMU_FINISH_SWITCH(fake, nullptr, nullptr);
}

void fiber_main() {
  // Under the sanitizer, learn the scheduler's stack from the first fiber it starts directly.
  const void* from_bottom = nullptr;
  size_t from_size = 0;
  EMU_FINISH_SWITCH(nullptr, &from_bottom, &from_size);
  if (g_from_sched) { g_main_bottom = from_bottom; g_main_size = from_size; }
  g_thunk(g_args);
  thread_exit();
}

inline void run_fiber(Fiber* f) {
  ++g_switches;
  g_from_sched = true;
  void* fake = nullptr;
  EMU_START_SWITCH(&fake, f->stack, kStackBytes);
  g_on_fiber = true;
  jump(&g_sched_ctx, &f->ctx);
  g_on_fiber = false;
  EMU_FINISH_SWITCH(fake, nullptr, nullptr);
}

// ---- ready queue: the schedule policy decides the order of every batch made ready ------------------
inline void push_ready(int id) { g_fibers[id].state = READY; g_ready.push_back(id); }

void order_batch(std::vector<int>& ids) {
  if (g_policy == REVERSE) std::reverse(ids.begin(), ids.end());
  else if (g_policy == RANDOM)
    for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rng_next() % i]);
}

int pop_ready() {
  if (g_ready_head >= g_ready.size()) return -1;
  if (g_policy == RANDOM && !g_lockstep) {  // any ready fiber may run next (under lock step, turns stay in order)
    size_t n = g_ready.size() - g_ready_head;
    std::swap(g_ready[g_ready_head], g_ready[g_ready_head + rng_next() % n]);
  }
  int id = g_ready[g_ready_head++];
  if (g_ready_head > 4096 && g_ready_head * 2 > g_ready.size()) {
    g_ready.erase(g_ready.begin(), g_ready.begin() + g_ready_head);
    g_ready_head = 0;
  }
  return id;
}

// ---- block barrier ----------------------------------------------------------------------------------
void release_barrier() {
  ++g_progress;
  g_pred_result = g_pred_sum;
  g_pred_sum = 0;
  g_order.clear();
  for (int i = 0; i < g_nthreads; ++i)
    if (g_fibers[i].state == WAIT_BAR && g_fibers[i].wait_kind == W_BAR) { g_order.push_back(i); race_barrier(i); }
  order_batch(g_order);
  for (int id : g_order) push_ready(id);
  g_bar_count = 0;
  if (g_bar_mixed_now) { ++g_bar_mixed; g_bar_mixed_now = 0; }
}

void barrier_exit_fault(int line) {
  char buf[256];
  const Fiber& e = g_fibers[g_first_exit];
  std::snprintf(buf, sizeof buf, "block (%u,%u,%u): %d thread(s) exited (first: warp %d lane %d, thread (%u,%u,%u)) "
                "while %d wait at __syncthreads (line %d)", g_block_idx.x, g_block_idx.y, g_block_idx.z, g_exited,
                e.warp, e.lane, e.__tid.x, e.__tid.y, e.__tid.z, g_bar_count, line);
  set_fault(BARRIER_DIVERGENCE, buf);
}

[[gnu::cold, gnu::noinline, noreturn]] void barrier_line_fault(Fiber* f, int line) {
  fiber_fault(BARRIER_DIVERGENCE, where(f) + ": reached __syncthreads at line " + std::to_string(line) +
              " while " + std::to_string(g_bar_count) + " thread(s) wait at __syncthreads at line " +
              std::to_string(g_bar_line) + " (bar.sync is .aligned in PTX: all threads of the block must execute the "
              "same barrier instruction; barrier_sites='any' completes it when every thread has arrived, as "
              "current GPUs count)");
}

void syncthreads(int line) {
  Fiber* f = cur();
  if (g_bar_count == 0) g_bar_line = line;
  else if (__builtin_expect(g_bar_line != line, 0)) {
    if (!g_bar_any_site) barrier_line_fault(f, line);
    if (!g_bar_mixed_now) { g_bar_mixed_now = 1; g_bar_mixed_lines[0] = g_bar_line; g_bar_mixed_lines[1] = line; }
  }
  ++g_bar_count;
  f->state = WAIT_BAR;
  f->wait_line = line;
  f->wait_kind = W_BAR;
  if (g_bar_count + g_exited == g_nthreads) {
    if (g_exited) { barrier_exit_fault(line); f->state = DONE; switch_to_sched(true); std::abort(); }
    release_barrier();
  }
  switch_to_sched();
}

// ---- named barriers (PTX bar.sync / bar.arrive with an id) ---------------------------------------------------
// Barriers 1 to 15, for the threads that name them: the first arrival of a phase sets its thread count, and the
// phase completes when that many threads have arrived (bar.arrive counts without waiting: a producer signals
// consumers). Each arrival releases to its phase and each waiter acquires the phase it waited for (emu_race.hpp),
// so a producer that arrives again without waiting is not taken to be ordered before the earlier phase's waiters.
// Threads count one by one, as on sm_70 and later; the count must be a multiple of the warp size (the PTX ISA).
constexpr unsigned kNamedBarriers = 16;
struct NamedBarrier { unsigned count, arrived, preds; uint64_t phase; int line; };
NamedBarrier g_named[kNamedBarriers];

[[gnu::cold, gnu::noinline, noreturn]] void named_barrier_fault(int code, Fiber* f, unsigned id, int line,
                                                                const std::string& why) {
  fiber_fault(code, where(f) + ": bar.sync/bar.arrive on barrier " + std::to_string(id) + " at line " +
              std::to_string(line) + " " + why);
}

// `pred`: this thread's predicate for bar.red; the count of true ones among the phase's threads is returned to each
// thread that waits (each gets its own copy: a later phase may complete before a released thread runs).
unsigned named_barrier(unsigned id, unsigned count, bool wait, int line, bool pred) {
  Fiber* f = cur();
  if (id == 0 && wait && (count == 0 || count == unsigned(g_nthreads))) return unsigned(syncthreads_count(pred, line));
  if (id >= kNamedBarriers) named_barrier_fault(TRAP, f, id, line, "names a barrier outside 0..15");
  if (id == 0)
    named_barrier_fault(UNSUPPORTED, f, id, line, "uses barrier 0 for part of the block or without waiting; emu "
                        "keeps barrier 0 for __syncthreads (give the partial barrier an id from 1 to 15)");
  if (count == 0) count = unsigned(g_nthreads);
  if (count % 32 != 0 && count != unsigned(g_nthreads))
    named_barrier_fault(TRAP, f, id, line, "with a thread count of " + std::to_string(count) +
                        ", which is not a multiple of the warp size (the PTX ISA requires one)");
  if (count > unsigned(g_nthreads))
    named_barrier_fault(BARRIER_DIVERGENCE, f, id, line, "with a thread count of " + std::to_string(count) +
                        ", more than the block's " + std::to_string(g_nthreads) + " threads: it can never complete");
  NamedBarrier& b = g_named[id];
  if (b.arrived == 0) { b.count = count; b.line = line; }
  else if (b.count != count)
    named_barrier_fault(BARRIER_DIVERGENCE, f, id, line, "with a thread count of " + std::to_string(count) +
                        " while " + std::to_string(b.arrived) + " thread(s) arrived with a count of " +
                        std::to_string(b.count) + " (line " + std::to_string(b.line) + ")");
  phase_arrive(&b, kScopeBlock);
  b.preds += pred;
  if (++b.arrived < b.count) {
    if (!wait) return 0;
    f->state = WAIT_BAR;
    f->wait_kind = W_NAMED;
    f->wait_line = line;
    f->wait_id = id;
    switch_to_sched();
    return f->bar_count;
  }
  ++g_progress;
  uint64_t done = b.phase++;
  phase_complete(&b, done);
  unsigned preds = b.preds;
  b.arrived = 0;
  b.preds = 0;
  g_order.clear();
  for (int i = 0; i < g_nthreads; ++i) {
    Fiber& w = g_fibers[i];
    if (w.state == WAIT_BAR && w.wait_kind == W_NAMED && w.wait_id == id) {
      phase_acquire_by(i, &b, done, kScopeBlock);
      w.bar_count = preds;
      g_order.push_back(i);
    }
  }
  if (wait) phase_acquire_by(f->linear, &b, done, kScopeBlock);
  order_batch(g_order);
  for (int i : g_order) push_ready(i);
  return preds;
}

// PTX bar.red: a named barrier that also reduces the threads' predicates (popc: how many are true; and; or).
unsigned barrier_reduce(unsigned id, unsigned count, int op, bool pred, int line) {
  unsigned trues = named_barrier(id, count, true, line, pred);
  unsigned threads = count ? count : unsigned(g_nthreads);
  return op == kBarPopc ? trues : op == kBarAnd ? unsigned(trues == threads) : unsigned(trues != 0);
}

// The arrive-wait barriers initialised in the running block: shared memory starts poisoned, and a poison byte
// may look like an initialised word, so the word alone cannot say whether init ran.
std::unordered_set<uintptr_t> g_live_barriers;

void barrier_init_seen(const volatile void* bar, int line) {
  g_live_barriers.insert(uintptr_t(bar));
  race_barrier_init(bar, line);
}
void barrier_invalidated(const volatile void* bar) { g_live_barriers.erase(uintptr_t(bar)); }
void barrier_use(const volatile void* bar, const char* op, int line) {
  if (is_shared(const_cast<const void*>(bar)) && !g_live_barriers.count(uintptr_t(bar)))
    barrier_fault(bar, op, "on a barrier that was never initialised", line);
  race_barrier_use(bar, line);
}

// ---- grid-wide barrier (cooperative groups' grid.sync) ------------------------------------------------------
// emu runs blocks one after another. A block whose every live thread waits at grid.sync is parked: the used part
// of its threads' stacks, its shared memory and its scheduler and race-detector state are saved, and the next block
// runs. When every block of the launch is parked, the barrier completes: each block is restored in turn and runs on
// to the next grid.sync or to its end. For the race detector each block resumes as a new block run, and every access
// before the barrier, of any block, happens before every access after it (race_grid_barrier). As on a GPU, every
// block must be resident, so the grid must not be sampled.
int g_grid_waiting = 0, g_grid_line = 0;  // threads of the running block waiting at grid.sync, and the line
bool g_grid_sampled = false;              // the launch runs a sample of its blocks

void grid_sync(int line) {
  Fiber* f = cur();
#if defined(__SANITIZE_ADDRESS__)
  fiber_fault(UNSUPPORTED, where(f) + ": grid.sync at line " + std::to_string(line) + " under AddressSanitizer "
              "(emu parks a block by copying its threads' stacks, which the sanitizer's stack poisoning forbids)");
#endif
  if (g_grid_sampled)
    fiber_fault(TOOL_LIMIT, where(f) + ": grid.sync at line " + std::to_string(line) + " while only a sample of "
                "the grid's blocks runs: a grid-wide barrier needs every block");
  if (g_grid_waiting == 0) g_grid_line = line;
  ++g_grid_waiting;
  f->state = WAIT_BAR;
  f->wait_kind = W_GRID;
  f->wait_line = line;
  switch_to_sched();
}

inline uintptr_t suspended_sp(const Fiber& f) {
#if defined(EMU_FIBER_BOOST) || defined(EMU_FIBER_ASM)
  return reinterpret_cast<uintptr_t>(f.ctx);
#else
  return uintptr_t(f.ctx.uc_mcontext.gregs[REG_RSP]);
#endif
}

struct ParkedBlock {
  uint3 idx;
  std::vector<int> ready;                     // a held block's ready threads, in queue order
  RaceBlockState race;                        // a held block's detector state (a grid.sync resumes as a new run)
  std::string why;                            // a held block: which thread spun, on what
  Watch watch{nullptr, 0, 0};                 // a held block: the word it spun on
  size_t bytes = 0;                           // a held block: what holding it keeps
  std::vector<Fiber> fibers;
  std::vector<std::vector<char>> stacks;      // [suspended stack pointer, top) of each waiting thread
  std::vector<Warp> warps;
  std::vector<unsigned char> shared, dyn;
  std::vector<std::pair<int, unsigned char*>> slots;
  size_t shared_top, static_shared;
  int exited, first_exit, waiting, line;
  int bar_count, bar_line, pred_sum, pred_result, bar_mixed_now, converging;   // a block barrier under way
  NamedBarrier named[kNamedBarriers];
  std::unordered_set<uintptr_t> live_barriers;
};

void park(ParkedBlock& p) {
  p.idx = g_block_idx;
  p.fibers.assign(g_fibers, g_fibers + g_nthreads);
  p.stacks.resize(g_nthreads);
  for (int i = 0; i < g_nthreads; ++i) {
    const Fiber& f = g_fibers[i];
    if (f.state == DONE) { p.stacks[i].clear(); continue; }
    const char* sp = reinterpret_cast<const char*>(suspended_sp(f));
    p.stacks[i].assign(sp, static_cast<const char*>(f.stack + kStackBytes));
  }
  p.warps.assign(g_warps, g_warps + g_nwarps);
  p.shared.assign(g_shared, g_shared + g_shared_top);
  p.dyn.assign(g_dyn, g_dyn + kDynLead + g_dyn_bytes + kSharedGuard);
  p.slots.clear();
  for (int u = 0; u < g_nused; ++u) p.slots.emplace_back(g_used_slots[u], g_slots[g_used_slots[u]].ptr);
  p.shared_top = g_shared_top; p.static_shared = g_static_shared;
  p.exited = g_exited; p.first_exit = g_first_exit; p.waiting = g_grid_waiting; p.line = g_grid_line;
  p.bar_count = g_bar_count; p.bar_line = g_bar_line; p.pred_sum = g_pred_sum; p.pred_result = g_pred_result;
  p.bar_mixed_now = g_bar_mixed_now; p.converging = g_converging;
  std::copy(g_named, g_named + kNamedBarriers, p.named);
  p.live_barriers = g_live_barriers;
  p.ready.clear();
}

// A held block keeps its place: its ready threads (the spinning one among them) and its race detector state.
void hold(ParkedBlock& p) {
  park(p);
  p.ready.assign(g_ready.begin() + long(g_ready_head), g_ready.end());
  race_hold_block(p.race, g_shared_top, kDynLead + g_dyn_bytes + kSharedGuard);
  p.why = std::move(g_hold_why);
  p.watch = g_hold_watch;
  p.bytes = p.shared.size() + p.dyn.size() + p.fibers.size() * sizeof(Fiber) +
            (p.race.shared_cells.size() + p.race.dyn_cells.size()) * sizeof(Cell) +
            p.race.threads.size() * sizeof(RaceThread);
  for (const auto& st : p.stacks) p.bytes += st.size();
}

void unpark(const ParkedBlock& p) {
  g_block_idx = p.idx;
  for (int u = 0; u < g_nused; ++u) g_slots[g_used_slots[u]].ptr = nullptr;
  g_nused = 0;
  for (const auto& slot : p.slots) { g_slots[slot.first].ptr = slot.second; g_used_slots[g_nused++] = slot.first; }
  g_shared_top = p.shared_top; g_static_shared = p.static_shared;
  std::copy(p.shared.begin(), p.shared.end(), g_shared);
  std::copy(p.dyn.begin(), p.dyn.end(), g_dyn);
  std::copy(p.warps.begin(), p.warps.end(), g_warps);
  for (int i = 0; i < g_nthreads; ++i) {
    g_fibers[i] = p.fibers[i];
    if (!p.stacks[i].empty())
      std::memcpy(g_fibers[i].stack + kStackBytes - p.stacks[i].size(), p.stacks[i].data(), p.stacks[i].size());
  }
  g_exited = p.exited; g_first_exit = p.first_exit; g_grid_waiting = p.waiting; g_grid_line = p.line;
  g_bar_count = p.bar_count; g_bar_line = p.bar_line; g_pred_sum = p.pred_sum; g_pred_result = p.pred_result;
  g_bar_mixed_now = p.bar_mixed_now; g_converging = p.converging;
  std::copy(p.named, p.named + kNamedBarriers, g_named);
  g_live_barriers = p.live_barriers;
  g_ready.clear(); g_ready_head = 0;
}

void resume_held(const ParkedBlock& p) {
  unpark(p);
  g_resumed = true;
  race_resume_block(p.race);
  for (int i = 0; i < g_nthreads; ++i) { g_fibers[i].spin_idle = 0; g_fibers[i].spin_reads = 0; }
  g_ready.assign(p.ready.begin(), p.ready.end());
}

// The barrier completes for the restored block: its waiting threads are ready to run.
void release_grid_waiters() {
  g_order.clear();
  for (int i = 0; i < g_nthreads; ++i) {
    const Fiber& w = g_fibers[i];
    if (w.state == WAIT_BAR && w.wait_kind == W_GRID) g_order.push_back(i);
  }
  g_grid_waiting = 0;
  order_batch(g_order);
  for (int id : g_order) push_ready(id);
}

// ---- warp collectives --------------------------------------------------------------------------------
void compute_warp(Warp& w);

// Arrive at a warp collective; returns when every lane of `mask` has arrived and the result is ready.
// The diagnosis of a collective that cannot complete, out of line: the hot path of every rendezvous then keeps
// a small stack frame (fibers' frames compete for the L1 cache at every switch).
// `other`: the collective in progress whose lanes the call names, if any.
[[gnu::cold, gnu::noinline, noreturn]] void warp_arrive_fault(Fiber* f, Warp& w, const Meet* other, int kind,
                                                              unsigned mask, int line) {
  unsigned bit = 1u << f->lane;
  const char* name = kWaitName[kind];
  if (!(mask & bit))
    fiber_fault(BARRIER_DIVERGENCE, where(f) + ": " + name + " at line " + std::to_string(line) +
                " with a mask (0x" + [&] { char b2[16]; std::snprintf(b2, 16, "%08x", mask); return std::string(b2); }() +
                ") that does not name the calling lane");
  if (mask & ~w.exists)
    fiber_fault(BARRIER_DIVERGENCE, where(f) + ": " + name + " at line " + std::to_string(line) +
                " names lane(s) " + lane_list(mask & ~w.exists) + " that do not exist (block has " +
                std::to_string(g_nthreads) + " threads)");
  if (mask & w.exited)
    fiber_fault(BARRIER_DIVERGENCE, where(f) + ": " + name + " at line " + std::to_string(line) +
                " names lane(s) " + lane_list(mask & w.exited) + " that have exited");
  fiber_fault(BARRIER_DIVERGENCE, where(f) + ": reached " + name + " at line " + std::to_string(line) +
              " while lane(s) " + lane_list(other->arrived) + " wait at " + kWaitName[other->kind] + " at line " +
              std::to_string(other->line) + (other->mask != mask ? " (masks differ)" : ""));
}

// The collective in progress that names lane(s) of `mask`, or null.
inline Meet* meet_naming(Warp& w, unsigned mask) {
  for (int i = 0; i < w.nmeets; ++i)
    if (w.meets[i].mask & mask) return &w.meets[i];
  return nullptr;
}
// The collective where lane(s) of `lanes` wait, or null.
inline const Meet* meet_holding(const Warp& w, unsigned lanes) {
  for (int i = 0; i < w.nmeets; ++i)
    if (w.meets[i].arrived & lanes) return &w.meets[i];
  return nullptr;
}

void warp_arrive(int kind, unsigned mask, int line, uint64_t v, int b, int c) {
  Fiber* f = cur();
  Warp& w = g_warps[f->warp];
  unsigned bit = 1u << f->lane;
  if (__builtin_expect(!(mask & bit) || (mask & ~w.exists) || (mask & w.exited), 0))
    warp_arrive_fault(f, w, nullptr, kind, mask, line);
  Meet* m = nullptr;
  if (__builtin_expect(w.nmeets == 1, 1) && w.meets[0].kind == kind && w.meets[0].line == line &&
      w.meets[0].mask == mask) {
    m = &w.meets[0];              // the common case: the warp's one collective in progress
  } else {
    for (int i = 0; i < w.nmeets; ++i) {
      Meet& x = w.meets[i];
      if (x.kind == kind && x.line == line && x.mask == mask) m = &x;
      // X waits for this lane, and this collective for a lane that waits at X: neither can complete
      else if (__builtin_expect((x.arrived & mask) && (x.mask & bit), 0)) warp_arrive_fault(f, w, &x, kind, mask, line);
    }
    if (!m) {                     // at most 32 in progress: each holds a lane
      m = &w.meets[w.nmeets++];
      *m = Meet{0, mask, kind, line};
    }
  }
  w.val[f->lane] = v; w.bval[f->lane] = b; w.cval[f->lane] = c;
  m->arrived |= bit;
  f->wait_kind = kind;
  f->wait_line = line;
  if (m->arrived == m->mask) {
    ++g_progress;
    w.mask = mask; w.kind = kind; w.line = line;
    *m = w.meets[--w.nmeets];
    compute_warp(w);
    if (kind == W_SYNCWARP || g_collectives_order) race_warp_sync(f->warp, mask);
    g_order.clear();
    for (int l = 0; l < 32; ++l)
      if (mask >> l & 1u) g_order.push_back(f->warp * 32 + l);
    order_batch(g_order);
    if (g_policy == WARP_GREEDY) {   // the released warp goes to the front of the queue
      for (int id : g_order) g_fibers[id].state = READY;
      g_ready.insert(g_ready.begin() + g_ready_head, g_order.begin(), g_order.end());
    } else {
      for (int id : g_order) push_ready(id);
    }
  } else {
    f->state = WAIT_WARP;
  }
  switch_to_sched();
}

[[gnu::cold, gnu::noinline]] void shfl_lane_fault(const Warp& w, int mode, int lane, int j) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "block (%u,%u,%u) warp %d lane %d: %s at line %d reads lane %d, which is not in "
                "the mask 0x%08x (undefined value on a GPU)", g_block_idx.x, g_block_idx.y, g_block_idx.z,
                int(&w - g_warps), lane, kWaitName[mode], w.line, j, w.mask);
  set_fault(BARRIER_DIVERGENCE, buf);
}

// PTX shfl.sync semantics: c packs the segment mask (bits 12:8) and the clamp value (bits 4:0).
void compute_shfl(Warp& w, int mode) {
  for (int lane = 0; lane < 32; ++lane) {
    if (!(w.mask >> lane & 1u)) continue;
    int b = w.bval[lane] & 0x1f, c = w.cval[lane];   // PTX uses b[4:0]
    int segmask = (c >> 8) & 0x1f;
    int maxLane = (lane & segmask) | ((c & 0x1f) & ~segmask);
    int minLane = lane & segmask;
    int j; bool p;
    switch (mode) {
      case W_SHFL_UP: j = lane - b; p = j >= maxLane; break;
      case W_SHFL_DOWN: j = lane + b; p = j <= maxLane; break;
      case W_SHFL_XOR: j = lane ^ b; p = j <= maxLane; break;
      default: j = minLane | (b & ~segmask); p = j <= maxLane; break;
    }
    if (!p) j = lane;
    j &= 31;
    if (__builtin_expect(!(w.mask >> j & 1u), 0)) {
      shfl_lane_fault(w, mode, lane, j);
      return;
    }
    // PTX's `shfl.sync d|p` also wants the predicate (bit 16 of c, set by ptx.py): it comes back in bit 32
    w.res[lane] = c >> 16 & 1 ? (w.val[j] & 0xffffffffull) | uint64_t(p) << 32 : w.val[j];
  }
}

// ---- matrix instructions ---------------------------------------------------------------------------------
// An element of an mma.sync operand, exactly (every type here is exact in double).
double matrix_element(int type, uint32_t bits) {
  switch (type) {
    case MT_S8: return double(int8_t(bits));
    case MT_U8: return double(uint8_t(bits));
    case MT_F16: return HalfBits::value((unsigned short)bits);
    case MT_BF16: return Bf16Bits::value((unsigned short)bits);
    case MT_E4M3: return fp8_value((unsigned char)bits, __NV_E4M3);
    case MT_E5M2: return fp8_value((unsigned char)bits, __NV_E5M2);
    case MT_S32: return double(int32_t(bits));
    default: return double(__builtin_bit_cast(float, bits));
  }
}

// mma.sync.aligned.m16n8kK.row.col with the PTX ISA's fragment layouts (docs/KERNELS.md, "Tensor-core
// instructions"). Lane = 4*group + t. A (16 x K, row major): register r of a lane holds 32/bits consecutive elements
// of row group + 8*(r&1), from column t*per + 4*per*(r>>1); B (K x 8, column major): register r holds rows
// t*per + 4*per*r onwards of column group; C and D: element j at row group + 8*(j>>1), column 2t + (j&1), one per
// register (32-bit types) or two (f16x2).
void compute_mma(Warp& w) {
  int code = w.bval[0];
  int ta = code & 15, tb = code >> 4 & 15, tc = code >> 8 & 15, td = code >> 12 & 15, K = code >> 16 & 63;
  bool satfinite = code >> 24 & 1;
  int bits = (ta == MT_F16 || ta == MT_BF16) ? 16 : 8, per = 32 / bits;
  int na = K / (2 * per), nb = K / (4 * per), nc = tc == MT_F16 ? 2 : 4;
  uint32_t emask = bits == 16 ? 0xffffu : 0xffu;
  double A[16][32], B[32][8], C[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    int group = lane >> 2, t = lane & 3;
    const uint32_t* in = w.mat_in[lane];
    for (int r = 0; r < na; ++r)
      for (int i = 0; i < per; ++i)
        A[group + 8 * (r & 1)][t * per + i + 4 * per * (r >> 1)] = matrix_element(ta, in[r] >> (bits * i) & emask);
    for (int r = 0; r < nb; ++r)
      for (int i = 0; i < per; ++i)
        B[t * per + i + 4 * per * r][group] = matrix_element(tb, in[na + r] >> (bits * i) & emask);
    for (int j = 0; j < 4; ++j) {
      uint32_t reg = nc == 2 ? in[na + nb + (j >> 1)] >> (16 * (j & 1)) & 0xffffu : in[na + nb + j];
      C[group + 8 * (j >> 1)][2 * t + (j & 1)] = matrix_element(tc, reg);
    }
  }
  bool integer = td == MT_S32;
  for (int lane = 0; lane < 32; ++lane) {
    int group = lane >> 2, t = lane & 3;
    uint32_t d[4];
    for (int j = 0; j < 4; ++j) {
      int row = group + 8 * (j >> 1), col = 2 * t + (j & 1);
      if (integer) {      // exact in double: |products| <= 2^16, K <= 32, |C| < 2^31
        double s = C[row][col];
        for (int k = 0; k < K; ++k) s += A[row][k] * B[k][col];
        int64_t v = int64_t(s);
        if (satfinite) v = std::min<int64_t>(std::max<int64_t>(v, INT32_MIN), INT32_MAX);
        d[j] = uint32_t(v);           // without .satfinite the s32 sum wraps
        continue;
      }
      __float128 s = dot_to_odd(&A[row][0], 1, &B[0][col], 8, K, C[row][col]);
      d[j] = td == MT_F16 ? __builtin_bit_cast(unsigned short, (_Float16)s) : __builtin_bit_cast(uint32_t, (float)s);
    }
    uint32_t* out = w.mat_out[lane];
    if (td == MT_F16) {
      out[0] = d[0] | d[1] << 16;
      out[1] = d[2] | d[3] << 16;
    } else {
      for (int j = 0; j < 4; ++j) out[j] = d[j];
    }
  }
}

// ldmatrix: lane 8m+r handed in row r of matrix m (four words); lane 4r+c receives word c of row r of each matrix,
// or with .trans the two halves at column r of rows 2c and 2c+1.
void compute_ldmatrix(Warp& w) {
  int num = w.bval[0] & 7;
  bool trans = w.bval[0] >> 4 & 1;
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < num; ++m) {
      const uint32_t(*rows)[10] = w.mat_in + 8 * m;
      int r = lane >> 2, c = lane & 3;
      if (!trans) {
        w.mat_out[lane][m] = rows[r][c];
      } else {
        uint32_t lo = rows[2 * c][r >> 1] >> (16 * (r & 1)) & 0xffffu;
        uint32_t hi = rows[2 * c + 1][r >> 1] >> (16 * (r & 1)) & 0xffffu;
        w.mat_out[lane][m] = lo | hi << 16;
      }
    }
}

// stmatrix: the inverse of ldmatrix; lane 8m+r gets the four words of row r of matrix m, to store.
void compute_stmatrix(Warp& w) {
  int num = w.bval[0] & 7;
  bool trans = w.bval[0] >> 4 & 1;
  for (int m = 0; m < num; ++m)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 4; ++c) {
        uint32_t word;
        if (!trans) {
          word = w.mat_in[4 * r + c][m];
        } else {   // element (r, col) sits in half r&1 of lane 4*col + r/2's register
          uint32_t lo = w.mat_in[4 * (2 * c) + (r >> 1)][m] >> (16 * (r & 1)) & 0xffffu;
          uint32_t hi = w.mat_in[4 * (2 * c + 1) + (r >> 1)][m] >> (16 * (r & 1)) & 0xffffu;
          word = lo | hi << 16;
        }
        w.mat_out[8 * m + r][c] = word;
      }
}

// redux.sync: one 32-bit result for every lane of the mask (add wraps; min/max signed where the lanes said so).
void compute_reduce(Warp& w) {
  uint32_t acc = 0;
  bool first = true, is_signed = false;
  for (int l = 0; l < 32; ++l) {
    if (!(w.mask >> l & 1u)) continue;
    uint32_t v = uint32_t(w.val[l]);
    is_signed = w.bval[l] != 0;
    if (first) { acc = v; first = false; continue; }
    switch (w.kind) {
      case W_REDUCE_ADD: acc += v; break;
      case W_REDUCE_MIN: acc = is_signed ? uint32_t(std::min(int32_t(acc), int32_t(v))) : std::min(acc, v); break;
      case W_REDUCE_MAX: acc = is_signed ? uint32_t(std::max(int32_t(acc), int32_t(v))) : std::max(acc, v); break;
      case W_REDUCE_AND: acc &= v; break;
      case W_REDUCE_OR: acc |= v; break;
      default: acc ^= v; break;
    }
  }
  for (int l = 0; l < 32; ++l) w.res[l] = acc;
}

// match.sync: any, the lanes of the mask whose value equals this lane's; all, the mask where every value is equal,
// else 0.
void compute_match(Warp& w) {
  for (int l = 0; l < 32; ++l) {
    unsigned peers = 0;
    for (int j = 0; j < 32; ++j)
      if ((w.mask >> j & 1u) && w.val[j] == w.val[l]) peers |= 1u << j;
    w.res[l] = w.kind == W_MATCH_ANY ? peers : (peers == w.mask ? w.mask : 0u);
  }
}

void compute_warp(Warp& w) {
  switch (w.kind) {
    case W_SHFL_IDX: case W_SHFL_UP: case W_SHFL_DOWN: case W_SHFL_XOR: compute_shfl(w, w.kind); break;
    case W_BALLOT: case W_ANY: case W_ALL: {
      unsigned bal = 0;
      for (int l = 0; l < 32; ++l)
        if ((w.mask >> l & 1u) && w.val[l]) bal |= 1u << l;
      uint64_t r = w.kind == W_BALLOT ? bal : w.kind == W_ANY ? (bal != 0) : (bal == w.mask);
      for (int l = 0; l < 32; ++l) w.res[l] = r;
      break;
    }
    case W_MMA: compute_mma(w); break;
    case W_LDMATRIX: compute_ldmatrix(w); break;
    case W_STMATRIX: compute_stmatrix(w); break;
    case W_REDUCE_ADD: case W_REDUCE_MIN: case W_REDUCE_MAX: case W_REDUCE_AND: case W_REDUCE_OR: case W_REDUCE_XOR:
      compute_reduce(w);
      break;
    case W_MATCH_ANY: case W_MATCH_ALL: compute_match(w); break;
    default: break;
  }
}


void matrix_collective(int kind, int code, const uint32_t* in, int nin, uint32_t* out, int nout, int line) {
  Warp& w = g_warps[cur()->warp];
  int lane = cur()->lane;
  std::memcpy(w.mat_in[lane], in, sizeof(uint32_t) * nin);
  warp_arrive(kind, 0xffffffffu, line, 0, code, 0);
  std::memcpy(out, w.mat_out[lane], sizeof(uint32_t) * nout);
}

void* warp_scratch() {
  static unsigned char* scratch = static_cast<unsigned char*>(std::malloc(kWarpScratch * (kMaxThreads / 32)));
  if (!scratch) fiber_fault(TOOL_LIMIT, where(cur()) + ": no memory for the warp scratch of WMMA's mma_sync");
  return scratch + size_t(cur()->warp) * kWarpScratch;
}

unsigned char* matrix_row(uint64_t address, bool shared_space, int line) {
  unsigned char* p = shared_space ? static_cast<unsigned char*>(shared_generic(address, line))
                                  : reinterpret_cast<unsigned char*>(address);
  char buf[200];
  if (!is_shared(p)) {
    std::snprintf(buf, sizeof buf, ": the matrix row address %p at line %d is not shared memory (ldmatrix/stmatrix)",
                  (void*)p, line);
    fiber_fault(TRAP, where(cur()) + buf);
  }
  if (uintptr_t(p) % 16) {
    std::snprintf(buf, sizeof buf, ": the matrix row address at line %d (shared-space 0x%x) is not 16-byte aligned "
                  "(ldmatrix/stmatrix)", line, shared_window(p, line));
    fiber_fault(TRAP, where(cur()) + buf);
  }
  return p;
}

// ---- thread exit ---------------------------------------------------------------------------------------
void thread_exit() {
  Fiber* f = cur();
  Warp& w = g_warps[f->warp];
  unsigned bit = 1u << f->lane;
  f->state = DONE;
  ++g_progress;
  if (g_exited++ == 0) g_first_exit = f->linear;
  w.exited |= bit;
  if (const Meet* m = meet_naming(w, bit)) {
    set_fault(BARRIER_DIVERGENCE, where(f) + ": exited while lane(s) " + lane_list(m->arrived) + " wait at " +
              kWaitName[m->kind] + " (line " + std::to_string(m->line) + ") with a mask naming it");
  } else if (g_bar_count && g_bar_count + g_exited == g_nthreads) {
    barrier_exit_fault(g_bar_line);
  }
  switch_to_sched(true);
  std::abort();  // an exited fiber is never resumed
}

// ---- shared memory -------------------------------------------------------------------------------------
// The slot of declaration `id` in `instance` (an instantiation of the function that declares it): the first one met
// owns slot `id`, each other one a slot of its own from kMaxSharedSites on, kept for the module's life so that a
// held block finds its slots again.
int instance_slot(int id, const void* instance, const char* name, int line, const char* file) {
  if (!g_slots[id].instance) g_slots[id].instance = instance;
  if (g_slots[id].instance == instance) return id;
  for (int k = kMaxSharedSites; k < kMaxSharedSites + g_more_instances; ++k)
    if (g_slots[k].instance == instance) return k;
  if (kMaxSharedSites + g_more_instances >= kMaxSharedSlots)
    fiber_fault(LAUNCH_REFUSED, where(cur()) + ": __shared__ '" + name + "' (" + slot_place(file, line) + ") is "
                "declared in more instantiations of its functions than emu holds (" +
                std::to_string(kMaxSharedSlots - kMaxSharedSites) + " beyond the first of each)");
  int k = kMaxSharedSites + g_more_instances++;
  g_slots[k].instance = instance; g_slots[k].name = name; g_slots[k].line = line;
  return k;
}

unsigned char* shared_slot(int id, size_t bytes, size_t align, const char* name, int line, int elem, const char* file,
                           const void* instance) {
  if (instance) id = instance_slot(id, instance, name, line, file);
  SharedSlot& s = g_slots[id];
  if (s.ptr) return s.ptr;
  size_t off = (g_shared_top + align - 1) / align * align;
  g_static_shared = (g_static_shared + align - 1) / align * align + bytes;
  if (g_static_shared > kStaticSharedLimit || off + bytes + kSharedGuard > kSharedArena)
    fiber_fault(LAUNCH_REFUSED, where(cur()) + ": static __shared__ '" + name + "' (" + slot_place(file, line) +
                ", " + std::to_string(bytes) + " bytes) brings the kernel's static __shared__ memory to " +
                std::to_string(g_static_shared) + " bytes, over the " + std::to_string(kStaticSharedLimit) +
                " bytes ptxas accepts per kernel (0xc000: no GPU build of it exists)");
  s.ptr = g_shared + off; s.bytes = bytes; s.name = name; s.line = line; s.elem = elem; s.file = file;
  g_used_slots[g_nused++] = id;
  std::memset(s.ptr, g_poison, bytes);                 // poisoned at every block start
  std::memset(s.ptr + bytes, kSentinel, kSharedGuard);
  g_shared_top = off + bytes + kSharedGuard;
  return s.ptr;
}


bool check_shared_guards() {
  for (int u = 0; u < g_nused; ++u) {
    SharedSlot& s = g_slots[g_used_slots[u]];
    for (int k = 0; k < kSharedGuard; ++k)
      if (s.ptr[s.bytes + k] != kSentinel) {
        char buf[320];
        std::snprintf(buf, sizeof buf, "block (%u,%u,%u): write %d byte(s) past the end of __shared__ '%s' "
                      "(%s, %zu bytes)", g_block_idx.x, g_block_idx.y, g_block_idx.z, k + 1, s.name,
                      slot_place(s.file, s.line).c_str(), s.bytes);
        set_fault(SHARED_OOB, buf);
        return false;
      }
  }
  for (int k = 0; k < kSharedGuard; ++k) {
    bool before = g_dyn[kDynLead - kSharedGuard + k] != kSentinel, after = g_dyn[kDynLead + g_dyn_bytes + k] != kSentinel;
    if (before || after) {
      char buf[320];
      std::snprintf(buf, sizeof buf, "block (%u,%u,%u): write %s the extern __shared__ area (%zu dynamic bytes "
                    "requested at launch)", g_block_idx.x, g_block_idx.y, g_block_idx.z,
                    before ? "before the start of" : "past the end of", g_dyn_bytes);
      set_fault(SHARED_OOB, buf);
      return false;
    }
  }
  return true;
}

// ---- block execution ------------------------------------------------------------------------------------
std::string describe_stuck() {
  std::string s;
  for (int wi = 0; wi < g_nwarps; ++wi) {
    // Group this warp's blocked lanes by (kind, line).
    std::vector<std::pair<std::pair<int, int>, unsigned>> groups;
    for (int l = 0; l < 32; ++l) {
      int id = wi * 32 + l;
      if (id >= g_nthreads) break;
      const Fiber& f = g_fibers[id];
      if (f.state != WAIT_BAR && f.state != WAIT_WARP) continue;
      auto key = std::make_pair(f.wait_kind, f.wait_line);
      bool found = false;
      for (auto& g : groups)
        if (g.first == key) { g.second |= 1u << l; found = true; }
      if (!found) groups.push_back({key, 1u << l});
    }
    for (auto& g : groups) {
      s += "; warp " + std::to_string(wi) + " lanes " + lane_list(g.second) + " wait at " +
           kWaitName[g.first.first] + " (line " + std::to_string(g.first.second) + ")";
      if (g.first.first == W_NAMED) {
        const NamedBarrier& b = g_named[g_fibers[wi * 32 + __builtin_ctz(g.second)].wait_id];
        s += " on barrier " + std::to_string(&b - g_named) + " (" + std::to_string(b.arrived) + " of " +
             std::to_string(b.count) + " threads arrived)";
      } else if (g.first.first != W_BAR && g.first.first != W_GRID && g.first.first != W_CONVERGE) {
        const Meet* m = meet_holding(g_warps[wi], g.second);
        unsigned missing = m ? m->mask & ~m->arrived : 0u;
        if (missing) s += " for lane(s) " + lane_list(missing);
      }
    }
  }
  return s;
}

int run_ready();

int run_block(unsigned bx, unsigned by, unsigned bz) {
  g_block_idx = uint3{bx, by, bz};
  g_resumed = false;
  g_exited = 0; g_bar_count = 0; g_bar_line = 0; g_first_exit = -1; g_bar_mixed_now = 0;
  g_pred_sum = 0; g_pred_result = 0;
  for (NamedBarrier& b : g_named) b = NamedBarrier{0, 0, 0, 0, 0};
  g_live_barriers.clear();
  g_ready.clear(); g_ready_head = 0;
  g_shared_top = 0;
  g_static_shared = 0;
  race_block_start();
  for (int u = 0; u < g_nused; ++u) g_slots[g_used_slots[u]].ptr = nullptr;
  g_nused = 0;
  std::memset(g_dyn + kDynLead - kSharedGuard, kSentinel, kSharedGuard);
  std::memset(g_dyn + kDynLead, g_poison, g_dyn_bytes);
  std::memset(g_dyn + kDynLead + g_dyn_bytes, kSentinel, kSharedGuard);
  for (int wi = 0; wi < g_nwarps; ++wi) {
    Warp& w = g_warps[wi];
    int live = std::min(32, g_nthreads - wi * 32);
    w.exists = live == 32 ? 0xffffffffu : ((1u << live) - 1u);
    w.exited = 0; w.nmeets = 0; w.mask = 0; w.converging = 0;
  }
  g_order.clear();
  for (int i = 0; i < g_nthreads; ++i) {
    Fiber* f = &g_fibers[i];
    f->linear = i;
    f->__tid = uint3{unsigned(i % g_block_dim.x), unsigned(i / g_block_dim.x % g_block_dim.y),
                   unsigned(i / (g_block_dim.x * g_block_dim.y))};
    f->warp = i / 32; f->lane = i % 32;
    f->wait_kind = W_NONE; f->wait_line = 0;
    f->spin_ptr = nullptr; f->spin_reads = 0; f->spin_idle = 0;
    f->volatile_ptr = nullptr; f->volatile_reads = 0;
    f->spin_yielded = false; f->converged = 0;
    f->async.count = 0; f->async.open = 0;
    prepare_fiber(f);
    g_order.push_back(i);
  }
  order_batch(g_order);
  for (int id : g_order) push_ready(id);
  g_grid_waiting = 0;
  g_converging = 0;
  return run_ready();
}

// Runs the block's ready threads until none is: OK when every thread has exited, PARKED when every live one waits
// at grid.sync, else the fault.
int run_ready() {
  for (;;) {
    int id = pop_ready();
    if (id < 0) break;
    g_cur = &g_fibers[id];
    run_fiber(&g_fibers[id]);
    if (g_fault) return g_fault;
    if (g_hold) { g_hold = false; return HELD; }
  }
  if (g_exited != g_nthreads) {
    if (g_grid_waiting + g_exited == g_nthreads && !g_exited) return PARKED;
    char buf[160];
    std::snprintf(buf, sizeof buf, "block (%u,%u,%u): no thread can make progress", g_block_idx.x, g_block_idx.y,
                  g_block_idx.z);
    std::string why = buf;
    if (g_grid_waiting + g_exited == g_nthreads)
      why += " (" + std::to_string(g_exited) + " thread(s) exited while the others wait at grid.sync (line " +
             std::to_string(g_grid_line) + "): a grid-wide barrier needs every thread of every block)";
    set_fault(g_grid_waiting + g_exited == g_nthreads ? BARRIER_DIVERGENCE : DEADLOCK, why + describe_stuck());
    return g_fault;
  }
  if (!check_shared_guards()) return g_fault;
  return OK;
}

uint64_t warp_collective(int kind, unsigned mask, int line, uint64_t v, int b, int c) {
  warp_arrive(kind, mask, line, v, b, c);
  return g_warps[cur()->warp].res[cur()->lane];
}

// ---- spinning ------------------------------------------------------------------------------------------
// Fibers switch only at barriers, warp collectives and exits, so a thread that waits in a loop for a lock or a
// flag another thread releases would keep the fiber forever. After every atomic (emu_device.hpp), a thread whose
// atomics kept reading the same value at the same address kSpinReads times in a row yields: it goes to the back
// of the ready queue and the block's other threads run. When it has yielded kStuckYields times with no progress
// anywhere in its block (g_progress), no thread of the block will release it: a deadlock when no block runs
// after this one (the kernel's fault: nothing else could), else the emulator's limit, since emu runs blocks one
// after another and the wait may be for a later block. Then the block is held (HELD): the launch runs the blocks
// after it and resumes the held block once the word it spun on changed (emu_launch): the blocks are resident
// together, as on a GPU whose grid fits at once (a caveat says so). Where it cannot be held (under the
// sanitizer, beside grid.sync) the wait is emu's limit (LATER_BLOCK_WAIT: unchecked).
constexpr int kSpinReads = 8, kStuckYields = 4096;
// A held block that resumed is known to wait on other blocks: when it spins again with no progress, it goes back
// sooner (a software grid barrier resumes every held block each time a block arrives).
constexpr int kStuckYieldsResumed = 16;

bool can_hold() {
#if defined(__SANITIZE_ADDRESS__)
  return false;           // holding copies the threads' stacks, which the sanitizer's stack poisoning forbids
#else
  return (g_blocks_after > 0 || g_held > 0) && !g_grid_parked && g_grid_waiting == 0 && g_held < kMaxParkedBlocks;
#endif
}

void atomic_done(const volatile void* p, bool changed, uint64_t seen, unsigned bytes) {
  Fiber* f = cur();
  if (changed) { ++g_progress; f->spin_reads = 0; f->spin_idle = 0; return; }
  if (p != f->spin_ptr || seen != f->spin_seen) {
    f->spin_ptr = p; f->spin_seen = seen; f->spin_reads = 1; f->spin_idle = 0; f->spin_progress = g_progress;
    return;
  }
  if (++f->spin_reads < kSpinReads) return;
  f->spin_reads = 0;
  if (f->spin_progress != g_progress) { f->spin_progress = g_progress; f->spin_idle = 0; }
  if (++f->spin_idle > (g_resumed ? kStuckYieldsResumed : kStuckYields)) {
    char buf[200];
    std::snprintf(buf, sizeof buf, ": spins on an atomic that keeps reading %llu and that no thread of its block "
                  "changes", (unsigned long long)seen);
    if (can_hold()) {     // let the other blocks run; this one resumes where it is
      f->spin_idle = 0;
      g_hold = true;
      g_hold_why = where(f) + buf;
      g_hold_watch = Watch{p, seen, bytes};
    } else if (g_blocks_after == 0 && !g_grid_sampled) {
      fiber_fault(DEADLOCK, where(f) + buf + ", and no block runs after it: the wait cannot end");
    } else {
      fiber_fault(LATER_BLOCK_WAIT, where(f) + buf + "; it may wait for one of the " + std::to_string(g_blocks_after) +
                " block(s) that emu runs after it (emu runs blocks one after another, a GPU may run them at once)" +
                (g_grid_sampled ? std::string(" or for a block the sample leaves out") : std::string()));
    }
  }
  f->spin_yielded = true;
  push_ready(f->linear);
  switch_to_sched();
  f->spin_yielded = false;
}

// The compiler calls an aligned entry point (__tsan_read4, not __tsan_unaligned_read4) where the type says the
// address is a multiple of the access's size; on a GPU such an access at another address stops the kernel
// (cudaErrorMisalignedAddress), where an x86 CPU would go on.
void misaligned(uintptr_t a, size_t size, bool write, uintptr_t pc) {
  if (!g_on_fiber) return;                 // a module's static initialisers: not device code
  char buf[200];
  std::snprintf(buf, sizeof buf, ": misaligned address: a %zu-byte %s of 0x%lx at ", size, write ? "write" : "read",
                (unsigned long)a);
  char why[160];
  std::snprintf(why, sizeof why, " (the address must be a multiple of %zu; a GPU stops the kernel with "
                "cudaErrorMisalignedAddress)", size);
  fiber_fault(TRAP, where(cur()) + buf + pc_token(pc) + why);
}

// A volatile load of the race build (emu_race.hpp: g++ gives volatile accesses entry points of their own). A thread
// that reads one volatile address kSpinReads times in a row with no other volatile load between yields, as after
// atomics: `while (*flag == 0) {}` lets the thread that sets the flag run. Unlike an atomic spin it is never taken
// for a deadlock: a plain store that would end the wait is not seen as progress, so a wait that never ends runs
// into the time limit (unchecked). The yield alone is harmless where it is no spin: it is one more legal order.
void volatile_read_done(const volatile void* p) {
  if (!g_on_fiber) return;                 // a module's static initialisers run on the worker's own stack
  Fiber* f = cur();
  if (p != f->volatile_ptr) { f->volatile_ptr = p; f->volatile_reads = 1; return; }
  if (++f->volatile_reads < kSpinReads) return;
  f->volatile_reads = 0;
  f->spin_yielded = true;
  push_ready(f->linear);
  switch_to_sched();
  f->spin_yielded = false;
}

// Lock step: after each access of memory outside its own stack a thread goes to the back of the ready queue, so
// the lanes of a warp take turns access by access: every lane makes its k-th access before any makes its
// (k+1)-th, as lanes in lock step execute one instruction together (a lane whose path skips an access drops out
// of that turn). Where the lanes' paths differ, the turns interleave them, one order of many.
void lockstep_turn(uintptr_t a) {
  if (!g_on_fiber) return;                 // a module's static initialisers run on the worker's own stack
  Fiber* f = cur();
  if (a - uintptr_t(f->stack) < kStackBytes) return;    // its own locals: no other lane sees them
  push_ready(f->linear);
  switch_to_sched();
}

// ---- the shared window ----------------------------------------------------------------------------------
// A shared-space address (what __cvta_generic_to_shared gives and inline PTX's shared operands hold): the offset
// in the static arena, or kSharedArena plus the offset in the dynamic area (guard bands included).
uint32_t shared_window(const void* p, int line) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  if (c >= g_shared && c < g_shared + kSharedArena) return uint32_t(c - g_shared);
  if (g_dyn && c >= g_dyn && c < g_dyn + g_dyn_cap) return uint32_t(kDynWindow - kDynLead + (c - g_dyn));
  char buf[128];
  std::snprintf(buf, sizeof buf, ": a shared-space address of %p at line %d, which is not shared memory", p, line);
  fiber_fault(TRAP, where(cur()) + buf);
}

void* shared_generic(uint64_t a, int line) {
  if (a < kSharedArena) return g_shared + a;
  if (g_dyn && a >= kDynWindow - kDynLead && a - (kDynWindow - kDynLead) < g_dyn_cap)
    return g_dyn + (a - (kDynWindow - kDynLead));
  char buf[128];
  std::snprintf(buf, sizeof buf, ": shared-space address 0x%llx at line %d lies outside the block's shared memory",
                (unsigned long long)a, line);
  fiber_fault(TRAP, where(cur()) + buf);
}

bool is_shared(const void* p) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  return (c >= g_shared && c < g_shared + kSharedArena) || (g_dyn && c >= g_dyn && c < g_dyn + g_dyn_cap);
}

// ---- asynchronous copies --------------------------------------------------------------------------------
void async_enqueue(void* dst, const void* src, size_t bytes, size_t zfill, int line) {
  Fiber* f = cur();
  const char* bad = nullptr;
  if (bytes != 4 && bytes != 8 && bytes != 16) bad = "a size of 4, 8 or 16 bytes";
  else if (zfill > bytes) bad = "a zero fill no larger than the size (cp.async: a source size no larger than the copy)";
  else if ((uintptr_t(dst) | uintptr_t(src)) % bytes) bad = "source and destination aligned to the size";
  if (bad) {
    char buf[256];
    std::snprintf(buf, sizeof buf, ": __pipeline_memcpy_async at line %d with size %zu and zero fill %zu needs %s",
                  line, bytes, zfill, bad);
    fiber_fault(TRAP, where(f) + buf);
  }
  AsyncQueue& q = f->async;
  if (q.count == kMaxAsyncCopies)
    fiber_fault(UNSUPPORTED, where(f) + ": more than " + std::to_string(kMaxAsyncCopies) +
                " asynchronous copies pending in one thread (emu's limit) at line " + std::to_string(line));
  q.copy[q.count] = AsyncCopy{dst, src, unsigned(bytes), unsigned(zfill)};
  q.batch[q.count++] = q.open;
}

void async_commit() { ++cur()->async.open; }

int async_ready(size_t keep, AsyncCopy* out) {
  AsyncQueue& q = cur()->async;
  // committed batches are 0 .. open-1; the newest `keep` of them stay pending
  unsigned done = keep == kAllAsync ? q.open + 1 : q.open > keep ? q.open - unsigned(keep) : 0u;
  int n = 0, kept = 0;
  for (int i = 0; i < q.count; ++i) {
    if (q.batch[i] < done) {
      out[n++] = q.copy[i];
    } else {
      q.copy[kept] = q.copy[i];
      q.batch[kept++] = q.batch[i];
    }
  }
  q.count = kept;
  return n;
}

void bad_width(int kind, int width, int line) {
  fiber_fault(BARRIER_DIVERGENCE, where(cur()) + ": " + kWaitName[kind] + " at line " + std::to_string(line) +
              " with width " + std::to_string(width) + " (must be a power of two <= 32)");
}

unsigned char* dyn_shared(const char* name, int elem) {
  if (name && !g_dyn_name) {
    g_dyn_name = name;
    g_dyn_elem = elem;
  } else if (name && name != g_dyn_name && std::strcmp(name, g_dyn_name) != 0) {
    for (const char*& a : g_dyn_aliases) {
      if (a == nullptr) { a = name; break; }
      if (a == name || std::strcmp(a, name) == 0) break;
    }
  }
  return g_dyn + kDynLead;
}

int device_printf(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (g_capture_printf && g_printf.size() < (1u << 20)) g_printf += buf;
  return n;
}

void barrier_fault(const volatile void*, const char* op, const char* why, int line) {
  char buf[320];
  std::snprintf(buf, sizeof buf, ": barrier %s at line %d %s", op, line, why);
  fiber_fault(TRAP, where(cur()) + buf);
}

void library_fault(const char* what, const char* why, int line) {
  fiber_fault(TRAP, where(cur()) + ": " + what + " at line " + std::to_string(line) + " " + why);
}

void unsupported_asm(const char* what) {
  fiber_fault(UNSUPPORTED, where(cur()) + ": " + what);
}

void device_assert(const char* what, int line) {
  fiber_fault(TRAP, where(cur()) + ": " + what + " at line " + std::to_string(line) + " (CUDA asserts against it)");
}

void trap(int line) {
  fiber_fault(TRAP, where(cur()) + ": __trap() at line " + std::to_string(line));
}

void assumption_false(const char* condition, const char* file, int line) {
  const char* base = strrchr(file, '/');           // a header's build copy lies in a folder of the cache
  fiber_fault(TRAP, where(cur()) + ": __builtin_assume(" + condition + ") at " + (base ? base + 1 : file) + ":" +
                        std::to_string(line) +
                        " is false in this launch; the compiler may take it as true, so the kernel's behaviour is "
                        "undefined");
}

unsigned activemask() {
  const Warp& w = g_warps[cur()->warp];
  return w.exists & ~w.exited;
}

// ---- convergence: __activemask and coalesced groups ------------------------------------------------------
// Since Volta, which lanes of a warp execute an instruction together is the hardware's choice; CUDA promises only
// that the calling lane is among them. emu gives the largest set a GPU gives when the warp reconverges before the
// call: a lane at __activemask waits until no other lane of its warp is still running (each has exited, waits at
// a barrier or collective, spins, or waits at __activemask too); the lanes waiting at the same line then converge
// and get their set. Groups at different lines are released one at a time, the first line first (each group's
// collectives then meet apart from the others': warp_arrive).
unsigned converged(int line) {
  Fiber* f = cur();
  f->state = WAIT_WARP;
  f->wait_kind = W_CONVERGE;
  f->wait_line = line;
  g_warps[f->warp].converging |= 1u << f->lane;
  ++g_converging;
  switch_to_sched();
  return f->converged;
}

void release_converged(int warp) {
  Warp& w = g_warps[warp];
  unsigned live = w.exists & ~w.exited & ~w.converging;
  for (unsigned m = live; m; m &= m - 1) {
    const Fiber& f = g_fibers[warp * 32 + __builtin_ctz(m)];
    if (f.state == READY && !f.spin_yielded) return;     // still on its way: it may reach the same line
  }
  // The group at the first line of the source goes first: lanes that went ahead (past the end of an if, say) then
  // wait where the others, released in turn, join them. Any order is legal; this one gives the reconverged sets
  // of structured code on every schedule.
  int line = INT_MAX;
  for (unsigned m = w.converging; m; m &= m - 1) line = std::min(line, g_fibers[warp * 32 + __builtin_ctz(m)].wait_line);
  unsigned group = 0;
  for (unsigned m = w.converging; m; m &= m - 1) {
    int l = __builtin_ctz(m);
    if (g_fibers[warp * 32 + l].wait_line == line) group |= 1u << l;
  }
  w.converging &= ~group;
  g_converging -= __builtin_popcount(group);
  ++g_progress;
  g_order.clear();
  for (unsigned m = group; m; m &= m - 1) {
    Fiber& f = g_fibers[warp * 32 + __builtin_ctz(m)];
    f.converged = group;
    g_order.push_back(f.linear);
  }
  order_batch(g_order);
  for (int id : g_order) push_ready(id);
}

long long clock_tick() { return (long long)(++g_clock); }

int syncthreads_count(int pred, int line) {
  g_pred_sum += pred != 0;
  syncthreads(line);
  return g_pred_result;
}

}  // namespace emu

// ---- launch entry points (called from Python through ctypes) -------------------------------------------
// `only` (when not null) lists the linear indices of the blocks to run, `nonly` of them; null runs the grid.
EMU_EXPORT int emu_launch(const void* kernel, void** args, const unsigned* grid, const unsigned* block,
                          unsigned long long shared_bytes, int policy, unsigned long long seed, int poison,
                          int capture_printf, const unsigned long long* only, unsigned long long nonly,
                          volatile unsigned long long* progress, char* err, int errlen) {
  using namespace emu;
  const KernelEntry* k = static_cast<const KernelEntry*>(kernel);
  if (!ensure_fibers()) {
    std::snprintf(err, errlen, "the emulator could not map its fiber stacks (%zu MiB): %s", kStackPoolBytes >> 20,
                  std::strerror(errno));
    return TOOL_LIMIT;
  }
  install_memory_fault_reporter();      // the reporter that knows this module's fibers (emu_signals.hpp)
  g_fault = OK; g_err[0] = 0;
  g_policy = policy; g_rng = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  g_poison = (unsigned char)poison;
  g_capture_printf = capture_printf != 0;
  g_printf.clear();
  g_block_dim = dim3(block[0], block[1], block[2]);
  g_grid_dim = dim3(grid[0], grid[1], grid[2]);
  g_nthreads = int(block[0] * block[1] * block[2]);
  if (g_nthreads < 1 || g_nthreads > kMaxThreads || shared_bytes > kSharedArena) {
    std::snprintf(err, errlen, "block of %d threads / %llu dynamic shared bytes is outside the CUDA limits "
                  "(1024 threads)", g_nthreads, shared_bytes);
    return BAD_LAUNCH;
  }
  g_nwarps = (g_nthreads + 31) / 32;
  if (g_dyn_cap < kDynLead + shared_bytes + kSharedGuard) {
    std::free(g_dyn);
    g_dyn_cap = (kDynLead + shared_bytes + kSharedGuard + kPage - 1) / kPage * kPage;
    g_dyn = static_cast<unsigned char*>(std::aligned_alloc(kPage, g_dyn_cap));
    if (!g_dyn) {
      g_dyn_cap = 0;
      std::snprintf(err, errlen, "the emulator could not allocate %llu bytes of dynamic shared memory",
                    (unsigned long long)(kDynLead + shared_bytes + kSharedGuard));
      return TOOL_LIMIT;
    }
  }
  g_dyn_bytes = shared_bytes;
  if (g_race_on && !race_ensure_shared_shadow()) {
    std::snprintf(err, errlen, "the race detector could not map the shadow of shared memory: %s",
                  std::strerror(errno));
    return TOOL_LIMIT;
  }
  g_thunk = k->call;
  g_args = args;
  uint64_t nblocks = uint64_t(grid[0]) * grid[1] * grid[2];
  std::vector<uint64_t> order;
  if (only) {
    for (uint64_t i = 0; i < nonly; ++i)
      if (only[i] >= nblocks) {
        std::snprintf(err, errlen, "block %llu of the sample is outside the grid of %llu blocks", only[i],
                      (unsigned long long)nblocks);
        return BAD_LAUNCH;
      }
    order.assign(only, only + nonly);
  } else {
    order.resize(nblocks);
    for (uint64_t i = 0; i < nblocks; ++i) order[i] = i;
  }
  nblocks = order.size();
  if (policy == REVERSE) std::reverse(order.begin(), order.end());
  else if (policy == RANDOM)
    for (uint64_t i = nblocks; i > 1; --i) std::swap(order[i - 1], order[rng_next() % i]);
  int rc = OK;
  g_blocks_after = nblocks;
  g_grid_sampled = nblocks < uint64_t(grid[0]) * grid[1] * grid[2];
  std::vector<ParkedBlock> parked;       // blocks waiting at grid.sync, in the order they run
  std::vector<ParkedBlock> held;         // blocks spinning on another block's progress, in the order they were held
  g_held = 0; g_grid_parked = false; g_hold = false;
  size_t held_bytes = 0;
  g_later_waits = 0; g_later_wait_first.clear();
  uint64_t finished = 0;
  auto settle = [&](int block_rc, ParkedBlock* reuse, bool was_held) {   // after a block ran until it ended or waits
    if (block_rc == PARKED || block_rc == HELD) {
      if (parked.size() + held.size() >= kMaxParkedBlocks) {
        set_fault(TOOL_LIMIT, std::string(block_rc == PARKED ? "grid.sync" : "blocks that wait for each other") +
                  " in a launch of more than " + std::to_string(kMaxParkedBlocks) + " blocks: emu holds at most "
                  "that many blocks at once");
        return g_fault;
      }
      if (block_rc == PARKED && !held.empty()) {
        set_fault(TOOL_LIMIT, "a block reached grid.sync while " + std::to_string(held.size()) + " block(s) spin "
                  "on another block's progress: emu holds blocks for one of the two at a time");
        return g_fault;
      }
      ParkedBlock p;
      if (reuse) p = std::move(*reuse);
      if (block_rc == PARKED) {
        park(p);
        parked.push_back(std::move(p));
        g_grid_parked = true;
      } else {
        hold(p);
        held_bytes += p.bytes;
        if (held_bytes > kHeldBytes) {
          set_fault(TOOL_LIMIT, std::to_string(held.size() + 1) + " blocks that spin on later blocks' progress "
                    "would keep more than " + std::to_string(kHeldBytes >> 20) + " MiB held (stacks, shared memory, "
                    "the race detector's shadow): emu's limit (" + p.why + ")");
          return g_fault;
        }
        held.push_back(std::move(p));
      }
      return int(OK);
    }
    if (block_rc == OK) {
      ++finished;
      if (progress) ++*progress;    // the parent's watchdog: a launch that keeps finishing blocks is alive
      if (was_held && !g_later_waits++) g_later_wait_first = reuse->why;
    }
    return block_rc;
  };
  // A held block resumes when the word it spun on changed; once every block of the order has run, each held block
  // resumes in turn, round after round, while a round moves anything (a block finished or was held at another
  // point, memory changed by an atomic, a barrier released): what is still held then waits for ever.
  auto resume_held_blocks = [&](bool every) {
    while (!held.empty()) {
      uint64_t progress0 = g_progress, finished0 = finished;
      std::vector<ParkedBlock> round = std::move(held);
      held.clear();
      bool resumed = false;
      for (size_t i = 0; i < round.size(); ++i) {
        if (!every && !watched_changed(round[i].watch)) {
          held.push_back(std::move(round[i]));
          continue;
        }
        resumed = true;
        g_held = round.size() - i - 1 + held.size();      // the others: one of them may release this one
        held_bytes -= round[i].bytes;
        resume_held(round[i]);
        int rc = settle(run_ready(), &round[i], true);
        if (rc != OK) return rc;
      }
      if (!resumed || (g_progress == progress0 && finished == finished0)) break;
    }
    return int(OK);
  };
  for (uint64_t b : order) {
    --g_blocks_after;
    g_held = held.size();
    rc = settle(run_block(unsigned(b % grid[0]), unsigned(b / grid[0] % grid[1]),
                          unsigned(b / (uint64_t(grid[0]) * grid[1]))), nullptr, false);
    if (rc == OK) rc = resume_held_blocks(false);
    if (rc != OK) break;
  }
  if (rc == OK) rc = resume_held_blocks(true);
  if (rc == OK && !held.empty()) {    // every block ran and the held ones still spin: nothing else can release them
    set_fault(g_grid_sampled ? LATER_BLOCK_WAIT : DEADLOCK, std::to_string(held.size()) + " block(s) spin on "
              "progress that no block of the launch makes (" + held.front().why + ")" +
              (g_grid_sampled ? ": only a sample of the grid's blocks ran, and the wait may be for one left out"
                              : ": every block ran, so a GPU that holds them all waits for ever"));
    rc = g_fault;
  }
  while (rc == OK && !parked.empty()) {
    if (finished) {        // a block ended while others wait for it at grid.sync: a GPU waits forever
      set_fault(DEADLOCK, std::to_string(parked.size()) + " block(s) wait at grid.sync (line " +
                std::to_string(parked.front().line) + ", first block (" + std::to_string(parked.front().idx.x) + "," +
                std::to_string(parked.front().idx.y) + "," + std::to_string(parked.front().idx.z) + ")) while " +
                std::to_string(finished) + " block(s) of the launch finished without reaching it: a grid-wide "
                "barrier waits for every block");
      rc = g_fault;
      break;
    }
    race_grid_barrier();
    std::vector<ParkedBlock> round = std::move(parked);
    parked.clear();
    g_grid_parked = false;
    g_blocks_after = round.size();
    for (ParkedBlock& p : round) {
      --g_blocks_after;
      unpark(p);
      g_resumed = false;
      race_block_start();      // a new block run: what came before the barrier is ordered before it
      release_grid_waiters();
      rc = settle(run_ready(), &p, false);
      if (rc != OK) break;
    }
  }
  if (rc != OK) std::snprintf(err, errlen, "%s", g_err);
  return rc;
}

// The race detector for the next launches: begin (every later block is checked), track each device buffer
// the kernel may write (name and element size for reports), end (shadow memory released).
EMU_EXPORT void emu_use_stacks(void* pool, unsigned long long bytes) {   // before the first launch
  if (!emu::g_fibers && bytes >= emu::kStackPoolBytes) emu::g_stack_pool = static_cast<char*>(pool);
}
EMU_EXPORT unsigned long long emu_stack_pool_bytes() { return emu::kStackPoolBytes; }
EMU_EXPORT void emu_race_begin() {
  using namespace emu;
  race_untrack();
  g_race_on = true;
  refresh_access_hooks();
  g_releases.clear();
  g_observations.clear();
  g_phase_logs.clear();
  clear_aside();
  g_launch_bseq0 = g_ordered_below = g_bseq_last + 1;
  g_bseq_block.clear();
  g_dyn_name = nullptr;
  for (const char*& a : g_dyn_aliases) a = nullptr;
  g_race_accesses = 0;
  race_records_clear();
}
// Returns 0, or ENOMEM when the buffer's chunk table could not be had. The shadow itself (sizeof(Cell) bytes per
// tracked byte) is mapped chunk by chunk as accesses reach it (tracked_cells, emu_race.hpp).
EMU_EXPORT int emu_race_track(const void* p, unsigned long long nbytes, const char* name, int elem) {
  using namespace emu;
  if (!nbytes) return 0;
  uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + uintptr_t(nbytes);
  try {
    g_tracked.push_back(Tracked{lo, hi, std::vector<Cell*>(size_t((nbytes + kChunkBytes - 1) >> kChunkBits)), name,
                                elem > 0 ? elem : 0});
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  }
  g_tracked_lo = std::min(g_tracked_lo, lo);
  g_tracked_hi = std::max(g_tracked_hi, hi);
  return 0;
}
EMU_EXPORT unsigned long long emu_race_end() {
  using namespace emu;
  race_untrack();
  race_release_shared_shadow();
  g_releases.clear();
  g_observations.clear();
  g_phase_logs.clear();
  clear_aside();
  race_records_clear();
  g_race_on = false;
  refresh_access_hooks();
  return g_race_accesses;
}
// The distinct races of the launch so far (before emu_race_end): see race_report in emu_race.hpp.
EMU_EXPORT const char* emu_race_report() { return emu::race_report().c_str(); }
EMU_EXPORT unsigned long long emu_switches() { return emu::g_switches; }
EMU_EXPORT unsigned long long emu_int_divisions_by_zero() { return emu::g_int_divisions_by_zero; }
EMU_EXPORT void emu_set_barrier_sites(int any) { emu::g_bar_any_site = any != 0; }
EMU_EXPORT void emu_set_atomic_acquire(int by_itself) { emu::g_atomic_acquires = by_itself != 0; }
EMU_EXPORT void emu_set_collectives_order(int on) { emu::g_collectives_order = on != 0; }
EMU_EXPORT void emu_set_lockstep(int on) { emu::g_lockstep = on != 0; emu::refresh_access_hooks(); }
EMU_EXPORT unsigned long long emu_mixed_barriers() { return emu::g_bar_mixed; }
// The last launch's blocks that finished only after blocks emu ran after them (held while they spun), and the first.
EMU_EXPORT unsigned long long emu_later_block_waits() { return emu::g_later_waits; }
EMU_EXPORT const char* emu_later_block_wait_first() { return emu::g_later_wait_first.c_str(); }
EMU_EXPORT int emu_mixed_barrier_line(int which) { return emu::g_bar_mixed_lines[which != 0]; }
EMU_EXPORT const char* emu_printf_output() { return emu::g_printf.c_str(); }
EMU_EXPORT void* emu_malloc(unsigned long long n) { return std::malloc(n ? n : 1); }
EMU_EXPORT void emu_free(void* p) { std::free(p); }
