// qconform emu happens-before race detector (included once, by emu_runtime.cpp, after the scheduler state).
//
// Device code is compiled with g++ -fsanitize=thread, but linked WITHOUT libtsan: every load and store of the
// kernel calls one of the __tsan_read/__tsan_write entry points defined below. They look at accesses to the
// tracked ranges only (the launch's non-const device buffers, the module's writable __device__ variables,
// the static and dynamic shared areas; never stacks or locals) and keep, per byte, the last write and two reads (a
// shadow cell), and aside every further access that no later one stands for (g_more, below). Two
// accesses conflict when they touch the same byte, at least one writes and they are not two atomics of a common
// scope; a conflict
// is a race unless the CUDA memory model orders the two:
//   * same thread: program order;
//   * same block: a __syncthreads between them (each thread counts the barriers it has passed: its epoch);
//     within one barrier interval, lanes of one warp are ordered only by a warp collective naming both
//     (__syncwarp, shuffles, votes, the int8 mma): a vector clock over the 32 lanes of the warp, joined at
//     every collective over its mask. No implicit lock step: lanes of a warp are threads like any other;
//   * release and acquire (the PTX memory model's patterns, for threads of one block as for threads of different
//     blocks): a fence followed by an atomic on address A releases the thread's accesses before the fence (and
//     its block's before the current barrier interval, and what the thread or its block had acquired: releases
//     are cumulative); an atomic on A that reads after it (CUDA's atomics are read-modify-writes, so each
//     continues the release sequence before it: every release made to A so far), followed by a fence
//     of the reading thread, acquires them, for that thread and, after its next __syncthreads, for its whole
//     block. cuda::atomic operations with an acquire (release) memory order acquire (release) by themselves. A
//     fence alone orders nothing, and neither does an atomic alone: CUDA's atomicXxx functions are relaxed;
//   * scopes: an atomic or a fence of block scope (atomicXxx_block, __threadfence_block, cuda::atomic with
//     thread_scope_block) acts among the threads of its block only: two atomics on one address never race when
//     both are of device scope or both threads are in one block, and a release or an acquire reaches another
//     block only when its fence and its atomic are both of device scope;
//   * observation: an atomic write that an atomic read saw is ordered before whatever that read is ordered before
//     (PTX's causality order: observation order, then base causality order; observe / observed_before);
//   * barrier objects (arrive-wait barriers, named barriers): an arrival releases by itself into the object's log,
//     and a wait that saw phase k complete acquires the log up to phase k's end (phase_arrive / phase_acquire);
//   * a grid-wide barrier (grid.sync): every access before it is ordered before every access after it (each block
//     resumes as a new block run, and earlier runs count as ordered: race_grid_barrier).
// A race does not stop the launch (the emulator's state stays sound): every distinct race is recorded, distinct
// by (unordered pair of access sites, buffer or __shared__ variable), with the text of its first occurrence
// naming both accesses (block, thread, warp/lane, source line as a `{pc:0x..}` token the Python side resolves
// with the module's line tables, buffer or __shared__ variable, element index), how many accesses met it and
// the element range it covered. emu_race_report hands them over after the launch (harness/backends/emu/races.py);
// each new record is also written to stderr at once, so that a launch that then kills the worker still reports it.
// A record also says whether its values differ: a race stays `same` only while every conflict in it is two plain
// writes and each racing store left the bytes as they were (checked after the store: the next tracked access,
// the next block or the report compares the bytes the store overwrote with what it left). Reads, atomics and
// stores that changed a byte make it `differ`. GPUVerify and compute-sanitizer's racecheck treat same-value
// write-write races as benign; here they are still races, and the report says which they are. GPUVerify also
// calls a store that races a read benign when it writes the bytes the read saw, and a read that races a store
// when that store left the bytes as they were: a race whose every store kept the bytes its racing accesses saw,
// reads included, is `kept` (a store's bytes are compared only when it races; a read that races an earlier store
// not so compared counts as changed, never wrongly `kept`).
#pragma once
#include <dlfcn.h>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <deque>

namespace emu {

struct Access {            // one recorded access; bseq == 0: none
  uint32_t bseq;           // global sequence number of the block run (unique across launches)
  uint32_t epoch;          // barriers the thread had passed
  uint32_t clock;          // the thread's own warp clock at the access
  uint16_t thread;         // linear thread index in the block; kAtomicBit marks an atomic access
  uint16_t site;           // index into g_sites: the access's return address (or atomic source line)
};
constexpr uint16_t kAtomicBit = 0x8000;
constexpr uint16_t kBlockAtomicBit = 0x4000;         // with kAtomicBit: a block-scope atomic
constexpr uint16_t kReadsBit = 0x0400;               // with kAtomicBit: a read-modify-write (it read the value before it)
constexpr uint16_t kKeptBit = 0x2000;                // a plain store compared after it was done: it left its bytes
constexpr uintptr_t kLineSite = uintptr_t(1) << 63;   // a site given as a source line, not a return address
struct Cell { Access w, r[2]; };   // per byte: the last write, up to two reads not ordered before another

// atomic_window: after emu::atomic_access, the thread's next accesses to atomic_ptr belong to the atomic
// operation: one read (a load), or reads up to one write (a read-modify-write or a store).
// fence[s]: the thread's last fence of scope s (kScopeBlock, kScopeDevice) was at that epoch and warp clock (epoch 0
// and clock 0: none yet); its later atomics release what it did before.
struct FenceMark { uint32_t epoch, clock; bool set; };
struct RaceThread {
  uint32_t epoch;
  uint32_t vc[32];
  const volatile void* atomic_ptr;
  int atomic_window;
  FenceMark fence[kScopeDevice + 1];
  // The last atomic's address and the version of its release set then, and whether it acquired at once: a
  // spin that reads the address again takes nothing new.
  const volatile void* seen_ptr;
  uint32_t seen_version;
  bool seen_acquire;
};
constexpr int kLoadWindow = 1, kUpdateWindow = 2;

// A release through a fence and an atomic: the accesses of block run `bseq` in barrier intervals before `epoch`,
// and those of `thread` up to its warp clock `clock`, happen before whatever acquires it. `scope`: kScopeBlock
// (only threads of block run `bseq` can acquire it) or kScopeDevice.
struct Release { uint32_t bseq, epoch, clock; uint16_t thread; uint8_t scope; };

// Who acquired a release, which decides whether it counts for them: a release of another block counts only when
// it and the acquiring atomic (and the fence that completed the acquire) are of device scope.
struct Acquirer {
  uint32_t bseq;
  bool device;
  bool takes(const Release& r) const { return r.bseq == bseq || (r.scope == kScopeDevice && device); }
};

// The releases made to one atomic address in a launch, as an append-only log: a thread's releases only grow, so
// each entry supersedes the earlier ones of its (block run, thread, scope), and the set as it was at any moment
// is the log's prefix up to then. An acquire takes the prefix by reference (its length), not by copy: a hot
// address that every thread updates with a seq_cst cuda::atomic collects one release per thread of the grid, and
// copying them on every acquire cost the square of the threads. Indexed so that asking whether a prefix covers
// an access costs hash lookups (and a binary search only when the key moved on since), not a scan.
struct ReleaseLog {
  std::vector<Release> log;
  std::unordered_map<uint64_t, std::vector<uint32_t>> at;   // (bseq, thread, scope) -> its positions in `log`
  // bseq -> (position, epoch) each time the latest barrier epoch released of it rose: of any scope [0], of
  // device scope [1] (what another block can acquire)
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> max_epoch[2];

  // How far each other log's prefix was copied in by cumulative releases (release_into), per acquirer and scope.
  struct CopyKey {
    const ReleaseLog* from;
    uint32_t bseq;
    bool device;
    uint8_t scope;
    bool operator<(const CopyKey& o) const {
      return std::tie(from, bseq, device, scope) < std::tie(o.from, o.bseq, o.device, o.scope);
    }
  };
  std::map<CopyKey, uint32_t> copied;

  uint32_t version() const { return uint32_t(log.size()); }
  static uint64_t key(uint32_t bseq, uint16_t thread, uint8_t scope) {
    return uint64_t(bseq) << 32 | uint64_t(thread) << 8 | scope;
  }
  void add(const Release& r) {
    std::vector<uint32_t>& mine = at[key(r.bseq, r.thread, r.scope)];
    if (!mine.empty()) {
      const Release& x = log[mine.back()];
      if (!(r.epoch > x.epoch || (r.epoch == x.epoch && r.clock > x.clock))) return;
    }
    uint32_t pos = uint32_t(log.size());
    mine.push_back(pos);
    log.push_back(r);
    auto rise = [&](std::vector<std::pair<uint32_t, uint32_t>>& rises) {
      if (rises.empty() || r.epoch > rises.back().second) rises.emplace_back(pos, r.epoch);
    };
    rise(max_epoch[0][r.bseq]);
    if (r.scope == kScopeDevice) rise(max_epoch[1][r.bseq]);
  }
  // The last of `marks` (ascending positions, through `pos_of`) before position `len`, or nullptr.
  template <class V, class F>
  static const typename V::value_type* before(const V& marks, uint32_t len, F pos_of) {
    if (marks.empty() || pos_of(marks.front()) >= len) return nullptr;
    if (pos_of(marks.back()) < len) return &marks.back();
    auto it = std::partition_point(marks.begin(), marks.end(), [&](const auto& m) { return pos_of(m) < len; });
    return &*(it - 1);
  }
  // Whether a release among the first `len` of the log, taken by `who`, covers access `a`: an earlier barrier
  // interval of its block run, or the releasing thread's own accesses up to its release.
  bool covers(uint32_t len, const Acquirer& who, uint32_t bseq, uint32_t epoch, uint16_t thread, uint32_t clock) const {
    bool own_block = bseq == who.bseq;
    if (!own_block && !who.device) return false;
    auto e = max_epoch[own_block ? 0 : 1].find(bseq);
    if (e == max_epoch[own_block ? 0 : 1].end()) return false;
    const auto* rise = before(e->second, len, [](const std::pair<uint32_t, uint32_t>& m) { return m.first; });
    if (!rise) return false;
    if (epoch < rise->second) return true;
    for (uint8_t scope = own_block ? 1 : 2; scope <= 2; ++scope) {
      auto it = at.find(key(bseq, thread, scope));
      if (it == at.end()) continue;
      const uint32_t* pos = before(it->second, len, [](uint32_t m) { return m; });
      if (pos && log[*pos].epoch == epoch && clock <= log[*pos].clock) return true;
    }
    return false;
  }
};

// What a thread (or a block) acquired: prefixes of address logs, each with who acquired it. Acquiring from one
// address again only lengthens its prefix.
struct Acquired {
  struct Ref { const ReleaseLog* log; uint32_t len; Acquirer who; };
  std::vector<Ref> refs;

  void add(const ReleaseLog* log, uint32_t len, const Acquirer& who) {
    if (!len) return;
    for (Ref& r : refs)
      if (r.log == log && r.who.bseq == who.bseq && r.who.device == who.device) {
        r.len = std::max(r.len, len);
        return;
      }
    refs.push_back(Ref{log, len, who});
  }
  void add_all(const Acquired& other) {
    for (const Ref& r : other.refs) add(r.log, r.len, r.who);
  }
  bool covers(uint32_t bseq, uint32_t epoch, uint16_t thread, uint32_t clock) const {
    for (const Ref& r : refs)
      if (r.log->covers(r.len, r.who, bseq, epoch, thread, clock)) return true;
    return false;
  }
  void clear() { refs.clear(); }
};

// A tracked buffer's shadow is mapped a chunk at a time, when an access first reaches the chunk: a kernel that
// touches part of a large buffer (a grid over the first rows, a scatter, a sampled block) needs the cells of that
// part only, and 48 bytes of cells per byte of a whole 64 MiB buffer would be 3 GiB.
constexpr unsigned kChunkBits = 16;
constexpr uintptr_t kChunkBytes = uintptr_t(1) << kChunkBits;

struct Tracked {
  uintptr_t lo, hi;
  std::vector<Cell*> chunks;   // kChunkBytes of the buffer each; nullptr until an access reaches it
  std::string name;
  int elem;               // element size for the index in reports (0: unknown, the byte offset only)
  size_t chunk_cells(size_t k) const { return std::min<uintptr_t>(kChunkBytes, hi - lo - (uintptr_t(k) << kChunkBits)); }
};

bool g_race_on = false;
// The acquire rule (EmuBackend(acquire=...)): false, PTX's: a relaxed atomic acquires at its thread's next fence;
// true, the writer-side fence idiom's: every atomic that reads a release acquires it by itself.
bool g_atomic_acquires = false;
// What orders the lanes of a warp (EmuBackend(warp_order=...)): true, every warp collective naming both lanes
// (__syncwarp, shuffles, votes, matches, reductions, the int8 mma); false, __syncwarp alone (and a group's sync, which
// is one): the CUDA C++ Programming Guide promises memory ordering for __syncwarp only, the others exchange registers
// (the compiler may move a shared memory access across a shuffle), and compute-sanitizer's racecheck reports a store
// and a read that only a shuffle lies between.
bool g_collectives_order = true;
// Lock step (EmuBackend(lock_step=True), a reading's schedules): a thread yields after each access of memory
// outside its own stack, so the lanes of a warp take turns access by access, as lanes in lock step do.
bool g_lockstep = false;
// Whether an instrumented access does more than its alignment check: the detector is on or lock step is; the entry
// points test this one byte (refresh_access_hooks() after changing either).
bool g_access_hooks = false;
inline void refresh_access_hooks() { g_access_hooks = g_race_on || g_lockstep; }
uint32_t g_bseq = 0;                 // sequence number of the running block
uint32_t g_bseq_last = 0;            // the last one given out (a parked block keeps its own: grid.sync)
uint32_t g_launch_bseq0 = 1;         // first block sequence number of the tracked launch
uint32_t g_ordered_below = 1;        // block runs below it happen before the running one: g_launch_bseq0, or after
                                     // the launch's last grid-wide barrier, the first run after it
std::vector<uint64_t> g_bseq_block;  // linear block index by (bseq - g_launch_bseq0)
RaceThread g_race_thr[kMaxThreads];
std::vector<Tracked> g_tracked;      // device buffers of the launch
size_t g_tracked_shadow_bytes = 0;   // mapped so far, for the report when the next chunk does not fit
uintptr_t g_tracked_lo = UINTPTR_MAX, g_tracked_hi = 0;
Cell* g_shared_shadow = nullptr;     // shadow of the static __shared__ arena
Cell* g_dyn_shadow = nullptr;        // shadow of the dynamic area (guards included), g_dyn_cap cells
size_t g_dyn_shadow_cells = 0;
const char* g_dyn_name = nullptr;    // the first extern __shared__ name seen
int g_dyn_elem = 1;
// The other names the launch gave the same dynamic area (a library's `extern __shared__ int ids[];` and the
// caller's `extern __shared__ int data[];` alias), for the reports: the index counts in the first one's elements.
const char* g_dyn_aliases[3] = {nullptr, nullptr, nullptr};
uint64_t g_race_accesses = 0;        // tracked accesses checked (statistics)
std::unordered_map<uintptr_t, ReleaseLog> g_releases;   // per atomic address, in this launch (nodes never move)
// A barrier object (an mbarrier word, a named barrier): one release log for all its phases, and where each phase's
// arrivals end in it. Its arrivals are read-modify-writes of one object, so a wait that sees phase k complete is
// ordered after every arrival of phases up to k (they head release sequences that reach it), and after none of a
// later phase: it acquires the log's prefix up to phase k's end, however much later it looks. The ends are kept per
// block run: a block held while it spins keeps its barrier in shared memory at the address where the blocks run
// meanwhile keep theirs, and their phases must not move its phases' ends.
struct PhaseLog {
  ReleaseLog log;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> end;   // (block run, phase) -> the log's length when it completed
};
std::unordered_map<uintptr_t, PhaseLog> g_phase_logs;   // per barrier object, in this launch (nodes never move)
// The init of each arrive-wait barrier of the running block (emu_barrier.hpp): every later use of the barrier must
// happen after it. The barrier's own word cannot tell: a shadow cell keeps the last write only, and the initialising
// thread's own arrival, an atomic, replaces its init there before another thread's arrival comes to be checked.
std::unordered_map<uintptr_t, Access> g_barrier_inits;
Acquired g_block_acquired;                  // acquired by the running block before its barrier interval
Acquired g_thread_acquired[kMaxThreads];    // acquired by a thread within its barrier interval
Acquired g_thread_pending[kMaxThreads];     // read by a thread's atomics, acquired at its next fence

// Atomic writes that an atomic read observed (read the value of; the two morally strong). PTX's causality order
// puts such a write W before everything the read R is ordered before: observation order, then base causality
// order (R's thread's program order, fence or none; bar.sync and warp collectives; a release after R and whatever
// acquires it, in any block, cumulatively). So W is ordered before an access when some read that saw W is, which
// the detector decides as it does for any access (`ordered`). Only accesses to the written bytes can conflict with
// W, so the reads are kept by the address they start at, with their end and the write they saw; a bucket keeps
// the reads of the latest write observed there (an older one no cell holds any more) and, per thread, the earliest
// (a later read of the same thread is ordered after it). A lock word that the waiting block resets with a plain
// store after its acquire load saw the releasing block's atomic add is no race, nor is a third block's reset
// after it acquired what the waiting block released.
struct Observation { Access w, r; uintptr_t hi; };
// By first byte read, in this launch; in shared memory also by block run, for each block run has its own bytes at
// one address (a held block keeps its own while others run).
struct ObservedAt {
  uintptr_t addr;
  uint32_t bseq;          // 0 in global memory
  bool operator==(const ObservedAt& o) const { return addr == o.addr && bseq == o.bseq; }
};
struct ObservedAtHash {
  size_t operator()(const ObservedAt& k) const { return size_t((k.addr ^ uint64_t(k.bseq) << 40) * 0x9E3779B97F4A7C15ull >> 16); }
};
std::unordered_map<ObservedAt, std::vector<Observation>, ObservedAtHash> g_observations;
struct LastObserved { uintptr_t addr; Access w; };
LastObserved g_last_observed[kMaxThreads];   // a spin's repeated read of one write is not looked up again

// Accesses kept aside. A cell keeps the last write and two reads of its byte; where more than those must stay to
// be checked against later accesses, the others are kept here, per byte (in shared memory also per block run, as
// observations are): a third read that neither earlier read is ordered before (a partial __syncwarp may order a
// later store after two of three reading lanes, and the third lane's read still races it), and an access that the
// access after it cannot stand for though it is ordered before it (a plain store, then an atomic add of the same
// thread: another thread's atomic conflicts with the store, not with the add) or is not ordered before it at all
// without conflicting with it (two threads' atomics: a later plain read may be ordered after one and not the
// other). Kept in four lists, reads and writes, plain and atomic, so that a read looks at writes only and an atomic
// skips the atomics where all are morally strong with it. An access aside goes when one that stands for it comes, when it is stale, and when it
// has raced (reported: the first race of each byte is found; later pairs on that byte may be folded into it).
// Reads and writes of other block runs that cannot be ordered before anything of another block (their run made no
// device-scope release and is not held, so nothing can acquire them) are kept two of a kind from two runs: any
// later access of another block is unordered with one of them, which is all a race needs.
// A cell whose further accesses are aside has r[1] = {kAsideRun, index into g_more}: its reads other than r[0] are
// all in the lists there (a pool: no lookup by address on the hot path).
constexpr uint32_t kAsideRun = 0xFFFFFFFFu;
constexpr uint16_t kWriteBit = 0x0800;    // in an access aside: a write (a read otherwise)
struct MoreAccesses {
  // [atomic][write]: plain accesses at [0], atomics at [1]
  std::vector<Access> list[2][2];
  uint32_t block_scoped = 0;      // block-scope atomics ever put in list[1] since it was last emptied (an upper bound)
  // Every access in the lists is of block run `run` (kAsideRun: of several) and barrier interval <= `max_epoch`:
  // a later interval of that run is ordered after all of them at once.
  uint32_t run = 0, max_epoch = 0;
  uint32_t compacted[2][2] = {{0, 0}, {0, 0}};
  uintptr_t addr = 0;       // the byte it belongs to
  uint32_t bseq = 0;        // its block run in shared memory, 0 in global memory
  bool live = false;
  bool empty() const { return list[0][0].empty() && list[0][1].empty() && list[1][0].empty() && list[1][1].empty(); }
};
std::deque<MoreAccesses> g_more;          // stable references: entries are reused, never moved
std::vector<uint32_t> g_more_free;        // indices of g_more not live
std::vector<uint32_t> g_more_shared;      // indices given to shared memory's bytes (some freed since)
size_t g_more_live = 0;
std::unordered_set<uint32_t> g_released_runs;   // block runs that made a device-scope release in this launch
std::unordered_set<uint32_t> g_held_runs;       // block runs held (they may still release)

// Access sites: return addresses (or atomic lines, tagged) de-duplicated into 16-bit indices.
constexpr int kSiteBits = 16;
constexpr size_t kSites = size_t(1) << kSiteBits;
uintptr_t g_site_key[kSites];
uint16_t g_site_of[kSites];
uintptr_t g_sites[kSites];
uint32_t g_nsites = 1;               // site 0: unknown

uint16_t site_of(uintptr_t key) {
  size_t h = (key * 0x9E3779B97F4A7C15ull) >> (64 - kSiteBits);
  for (size_t n = 0; n < kSites; ++n, h = (h + 1) & (kSites - 1)) {
    if (g_site_key[h] == key) return g_site_of[h];
    if (g_site_key[h] == 0) {
      if (g_nsites >= kSites) return 0;
      g_site_key[h] = key;
      g_sites[g_nsites] = key;
      g_site_of[h] = uint16_t(g_nsites);
      return uint16_t(g_nsites++);
    }
  }
  return 0;
}

// nullptr (errno set) when the worker's address space cannot hold it: the caller reports the tool's limit.
Cell* map_shadow(size_t cells) {
  void* p = mmap(nullptr, cells * sizeof(Cell), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Cell*>(p);
}

void free_aside(uint32_t k) {
  MoreAccesses& m = g_more[k];
  for (auto& by_kind : m.list)
    for (auto& list : by_kind) list.clear();
  m.live = false;
  m.block_scoped = 0;
  g_more_free.push_back(k);
  --g_more_live;
}
void clear_aside() {
  g_more.clear();
  g_more_free.clear();
  g_more_shared.clear();
  g_more_live = 0;
  g_released_runs.clear();
  g_held_runs.clear();
}

// ---- scheduler events -----------------------------------------------------------------------------------
inline void settle_pending_stores_if_any();

void race_block_start() {
  g_bseq = ++g_bseq_last;
  if (!g_race_on) return;
  settle_pending_stores_if_any();      // before the new block's shared memory is poisoned
  g_bseq_block.push_back(uint64_t(g_block_idx.x) + uint64_t(g_grid_dim.x) * (g_block_idx.y +
                                                                            uint64_t(g_grid_dim.y) * g_block_idx.z));
  for (int i = 0; i < g_nthreads; ++i) {
    RaceThread& t = g_race_thr[i];
    t.epoch = 0;
    std::memset(t.vc, 0, sizeof t.vc);
    t.vc[i % 32] = 1;
    t.atomic_ptr = nullptr;
    t.atomic_window = 0;
    std::memset(t.fence, 0, sizeof t.fence);
    t.seen_ptr = nullptr;
    g_thread_acquired[i].clear();
    g_thread_pending[i].clear();
  }
  g_block_acquired.clear();
  g_barrier_inits.clear();
  for (int i = 0; i < g_nthreads; ++i) g_last_observed[i].addr = 0;
  // accesses aside in the shared memory of finished block runs: stale for every later run
  size_t held = 0;
  for (uint32_t k : g_more_shared)
    if (g_more[k].live && g_more[k].bseq) {
      if (g_held_runs.count(g_more[k].bseq)) g_more_shared[held++] = k;
      else free_aside(k);
    }
  g_more_shared.resize(held);
}

// A block held while it spins on another block's progress (emu_runtime.cpp, hold) resumes as the same
// block run: its threads keep their epochs, warp clocks, fences and what they acquired, and its shared memory's
// shadow comes back with its shared memory (the blocks that ran meanwhile left their own cells there).
struct RaceBlockState {
  uint32_t bseq = 0;
  std::vector<RaceThread> threads;
  std::vector<Acquired> acquired, pending;
  Acquired block_acquired;
  std::unordered_map<uintptr_t, Access> barrier_inits;
  std::vector<Cell> shared_cells, dyn_cells;
};

void race_hold_block(RaceBlockState& s, size_t shared_bytes, size_t dyn_bytes) {
  s.bseq = g_bseq;
  if (!g_race_on) return;
  g_held_runs.insert(g_bseq);
  settle_pending_stores_if_any();      // before another block's accesses reach these bytes
  s.threads.assign(g_race_thr, g_race_thr + g_nthreads);
  s.acquired.assign(g_thread_acquired, g_thread_acquired + g_nthreads);
  s.pending.assign(g_thread_pending, g_thread_pending + g_nthreads);
  s.block_acquired = g_block_acquired;
  s.barrier_inits = g_barrier_inits;
  s.shared_cells.assign(g_shared_shadow, g_shared_shadow + shared_bytes);
  s.dyn_cells.assign(g_dyn_shadow, g_dyn_shadow + dyn_bytes);
}

void race_resume_block(const RaceBlockState& s) {
  g_bseq = s.bseq;
  if (!g_race_on) return;
  g_held_runs.erase(s.bseq);
  settle_pending_stores_if_any();
  std::copy(s.threads.begin(), s.threads.end(), g_race_thr);
  std::copy(s.acquired.begin(), s.acquired.end(), g_thread_acquired);
  std::copy(s.pending.begin(), s.pending.end(), g_thread_pending);
  g_block_acquired = s.block_acquired;
  g_barrier_inits = s.barrier_inits;
  for (int i = 0; i < g_nthreads; ++i) g_last_observed[i].addr = 0;
  std::copy(s.shared_cells.begin(), s.shared_cells.end(), g_shared_shadow);
  std::copy(s.dyn_cells.begin(), s.dyn_cells.end(), g_dyn_shadow);
}

// A grid-wide barrier completed (grid.sync, emu_runtime.cpp): every access made before it, by any block, happens
// before every access after it. Each block resumes as a new block run (race_block_start), and the block runs before
// it count as ordered, as those of earlier launches do.
void race_grid_barrier() {
  g_ordered_below = g_bseq_last + 1;
  if (g_more_live)          // every access of global memory before it is stale now
    for (uint32_t k = 0; k < g_more.size(); ++k)
      if (g_more[k].live && !g_more[k].bseq) free_aside(k);
}

void race_barrier(int id) {            // thread `id` passes a __syncthreads: what it acquired, the block has
  if (!g_race_on) return;
  ++g_race_thr[id].epoch;
  Acquired& mine = g_thread_acquired[id];
  g_block_acquired.add_all(mine);
  mine.clear();
}

void race_warp_sync(int warp, unsigned mask) {   // the lanes of `mask` meet at a warp collective
  if (!g_race_on) return;
  uint32_t joined[32] = {0};
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u)
      for (int k = 0; k < 32; ++k) joined[k] = std::max(joined[k], g_race_thr[warp * 32 + l].vc[k]);
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u) {
      uint32_t* vc = g_race_thr[warp * 32 + l].vc;
      std::memcpy(vc, joined, sizeof joined);
      ++vc[l];
    }
}

// ---- the check -------------------------------------------------------------------------------------------
inline bool stale(const Access& a, bool shared) {
  return a.bseq == 0 || (shared ? a.bseq != g_bseq : a.bseq < g_ordered_below);
}

inline bool covers(const Acquired& rels, const Access& a) {
  return rels.covers(a.bseq, a.epoch, uint16_t(a.thread & 0x3ff), a.clock);
}

inline bool acquired(const Access& a, const Fiber* f) {
  return covers(g_block_acquired, a) || covers(g_thread_acquired[f->linear], a);
}

// Whether access `a` (not stale) happens before the running thread's current access.
inline bool ordered(const Access& a, const Fiber* f) {
  if (a.bseq != g_bseq) return acquired(a, f);      // another block: only through a release and an acquire
  int t = a.thread & 0x3ff;
  if (t == f->linear) return true;
  const RaceThread& me = g_race_thr[f->linear];
  if (a.epoch < me.epoch) return true;
  if (t / 32 == f->warp && a.clock <= me.vc[t % 32]) return true;
  return acquired(a, f);                             // a lock or a flag between threads of the block
}

// `ordered` without releases and acquires: program order, barriers, warp collectives (a cheap test that may say no
// where `ordered` says yes; used to drop accesses aside, where keeping one longer costs time only).
inline bool ordered_cheaply(const Access& a, const Fiber* f) {
  if (a.bseq != g_bseq) return false;
  int t = a.thread & 0x3ff;
  const RaceThread& me = g_race_thr[f->linear];
  return t == f->linear || a.epoch < me.epoch || (t / 32 == f->warp && a.clock <= me.vc[t % 32]);
}

// Two atomics are atomic with respect to each other when both are of device scope or both threads are in one
// block (`flags`: the current access's kAtomicBit and kBlockAtomicBit).
inline bool morally_strong(const Access& a, uint16_t flags) {
  return (a.thread & kAtomicBit) && (flags & kAtomicBit) &&
         (!((a.thread | flags) & kBlockAtomicBit) || a.bseq == g_bseq);
}

inline bool conflict(const Access& a, const Fiber* f, bool shared, uint16_t atomic) {
  return !stale(a, shared) && !morally_strong(a, atomic) && !ordered(a, f);
}

inline bool same_access(const Access& a, const Access& b) {
  return a.bseq == b.bseq && a.epoch == b.epoch && a.clock == b.clock && a.thread == b.thread && a.site == b.site;
}

// An atomic read `r` of [addr, addr + n) saw the atomic write `w` there (the caller checked both are morally strong).
[[gnu::cold, gnu::noinline]] void observe(const Fiber* f, uintptr_t addr, size_t n, const Access& w, const Access& r,
                                          bool shared) {
  LastObserved& last = g_last_observed[f->linear];
  if (last.addr == addr && same_access(last.w, w)) return;
  last = LastObserved{addr, w};
  std::vector<Observation>& reads = g_observations[ObservedAt{addr, shared ? g_bseq : 0}];
  bool kept = false;
  size_t out = 0;
  for (const Observation& o : reads) {
    if (!same_access(o.w, w) && o.hi <= addr + n) continue;       // a write these bytes no longer hold
    kept |= same_access(o.w, w) && o.r.bseq == r.bseq && (o.r.thread & 0x3ff) == (r.thread & 0x3ff) && o.hi >= addr + n;
    reads[out++] = o;
  }
  reads.resize(out);
  if (!kept) reads.push_back(Observation{w, r, addr + n});
}

// Whether the atomic write `w` at byte `a` is ordered before the running thread's access through an atomic read
// that saw it (observation order, then the order the detector checks). Accesses are at most 16 bytes.
[[gnu::cold, gnu::noinline]] bool observed_before(const Access& w, const Fiber* f, uintptr_t a, bool shared) {
  if (!(w.thread & kAtomicBit) || g_observations.empty()) return false;
  for (uintptr_t lo = a >= 15 ? a - 15 : 0; lo <= a; ++lo) {
    auto it = g_observations.find(ObservedAt{lo, shared ? g_bseq : 0});
    if (it == g_observations.end()) continue;
    for (const Observation& o : it->second)
      if (a < o.hi && same_access(o.w, w) && (stale(o.r, shared) || ordered(o.r, f))) return true;
  }
  return false;
}

// The source line of the call whose return address is `pc`, as a token the Python side resolves (sites.py).
std::string pc_token(uintptr_t pc) {
  Dl_info info;
  uintptr_t off = pc;
  if (dladdr(reinterpret_cast<void*>(pc), &info) && info.dli_fbase) off = pc - reinterpret_cast<uintptr_t>(info.dli_fbase);
  char buf[48];
  std::snprintf(buf, sizeof buf, "{pc:0x%lx}", (unsigned long)(off - 1));   // the call instruction
  return buf;
}

std::string describe_site(uint16_t site) {
  if (site == 0) return "an unknown line";
  uintptr_t key = g_sites[site];
  if (!(key & kLineSite)) return pc_token(key);
  char buf[64];
  std::snprintf(buf, sizeof buf, "line %lu", (unsigned long)(key & ~kLineSite));
  return buf;
}

std::string describe_access(const Access& a, bool write) {
  uint64_t lin = a.bseq >= g_launch_bseq0 && a.bseq - g_launch_bseq0 < g_bseq_block.size()
                     ? g_bseq_block[a.bseq - g_launch_bseq0] : 0;
  unsigned bx = unsigned(lin % g_grid_dim.x), by = unsigned(lin / g_grid_dim.x % g_grid_dim.y),
           bz = unsigned(lin / (uint64_t(g_grid_dim.x) * g_grid_dim.y));
  int t = a.thread & 0x3ff;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s%s by block (%u,%u,%u) thread (%u,%u,%u) (warp %d lane %d) at %s",
                a.thread & kAtomicBit ? "atomic " : "", write ? "write" : "read", bx, by, bz,
                unsigned(t % g_block_dim.x), unsigned(t / g_block_dim.x % g_block_dim.y),
                unsigned(t / (g_block_dim.x * g_block_dim.y)), t / 32, t % 32, describe_site(a.site).c_str());
  return buf;
}

// Where a raced byte lies: a region (one per buffer, __shared__ variable or area: races are distinct per region)
// and the element index and byte offset in it.
enum PlaceKind { kLabelOnly, kIndexed, kBytesOnly };
struct Place {
  uint32_t region;
  PlaceKind kind;
  long index, byte;
  const SharedSlot* slot;   // static __shared__ variable, or
  const Tracked* buffer;    // tracked buffer (both null: an area)
};
constexpr uint32_t kRegionSlot = 1u << 20, kRegionDyn = 2u << 20, kRegionStatic = 3u << 20, kRegionOther = 4u << 20;

Place locate(uintptr_t addr) {
  if (addr >= uintptr_t(g_shared) && addr < uintptr_t(g_shared) + kSharedArena) {
    for (int u = 0; u < g_nused; ++u) {
      const SharedSlot& s = g_slots[g_used_slots[u]];
      if (addr >= uintptr_t(s.ptr) && addr < uintptr_t(s.ptr) + s.bytes) {
        long off = long(addr - uintptr_t(s.ptr));
        return Place{kRegionSlot + uint32_t(g_used_slots[u]), kIndexed, off / s.elem, off, &s, nullptr};
      }
    }
    return Place{kRegionStatic, kLabelOnly, 0, 0, nullptr, nullptr};
  }
  if (addr >= uintptr_t(g_dyn) && addr < uintptr_t(g_dyn) + g_dyn_cap) {
    long off = long(addr - uintptr_t(dyn_shared()));
    return Place{kRegionDyn, kIndexed, off / g_dyn_elem, off, nullptr, nullptr};
  }
  for (const Tracked& t : g_tracked)
    if (addr >= t.lo && addr < t.hi) {
      long off = long(addr - t.lo);
      return Place{uint32_t(&t - g_tracked.data()), t.elem > 0 ? kIndexed : kBytesOnly, t.elem > 0 ? off / t.elem : off,
                   off, nullptr, &t};
    }
  return Place{kRegionOther, kLabelOnly, 0, 0, nullptr, nullptr};
}

std::string region_label(const Place& p) {
  char buf[512];
  if (p.slot) std::snprintf(buf, sizeof buf, "__shared__ '%s' (%s)", p.slot->name,
                            slot_place(p.slot->file, p.slot->line).c_str());
  else if (p.region == kRegionDyn) {
    std::string also;
    for (const char* a : g_dyn_aliases)
      if (a) also += std::string(also.empty() ? " (the same bytes as '" : "', '") + a;
    if (!also.empty()) also += "')";
    std::snprintf(buf, sizeof buf, "extern __shared__ '%s'%s", g_dyn_name ? g_dyn_name : "?", also.c_str());
  }
  else if (p.buffer) std::snprintf(buf, sizeof buf, p.kind == kIndexed ? "'%s'" : "%s", p.buffer->name.c_str());
  else return p.region == kRegionStatic ? "static __shared__ memory" : "device memory";
  return buf;
}

std::string describe_location(const Place& p) {
  char buf[64];
  if (p.kind == kLabelOnly) return region_label(p);
  if (p.kind == kIndexed) std::snprintf(buf, sizeof buf, " index %ld (byte %ld)", p.index, p.byte);
  else std::snprintf(buf, sizeof buf, " byte %ld", p.byte);
  return region_label(p) + buf;
}

// ---- the races of the launch ----------------------------------------------------------------------------
struct RaceRecord {
  uint64_t count;           // accesses that met an unordered access of the pair (one access over many bytes: once)
  uint64_t serial;          // the access counted last
  long lo, hi;              // element indices (byte offsets for a region without an element size) raced on
  const char* unit;         // "index", "byte" or "-" (a region without positions)
  std::string tail;         // the two sites, the region, the message of the first occurrence (detailed records only)
  bool differ;              // a conflict of it was not two plain writes of the same bytes
  bool changed;             // a conflict of it had an atomic, or a store that changed its bytes (or not compared)
  uint8_t scope;            // the widest of its conflicts: kWarpScope (lanes of one warp), kBlockScope, kGridScope
};
// What a conflict spans, which says what would order it: __syncwarp, __syncthreads, or atomics and fences.
enum : uint8_t { kWarpScope, kBlockScope, kGridScope };
const char* const kScopeNames[] = {"warp", "block", "grid"};
constexpr uint32_t kNoRace = UINT32_MAX;
// A plain store that raced, waiting to be compared once it has been done: where (and its shadow cells), the
// bytes it overwrote, and the races it took part in.
constexpr size_t kPendingBytes = 16, kPendingRaces = 8;
struct PendingStore {
  uintptr_t addr;
  Cell* cells;
  size_t n;
  uint8_t before[kPendingBytes];
  uint32_t races[kPendingRaces];
  size_t nraces;
};
constexpr size_t kPendingReserved = 64;  // stores waiting to be compared at once (one, in practice: see race_access)
constexpr size_t kRaceDetails = 256;     // records with their text (the Python side shows fewer, merged by line)
constexpr size_t kRaceKeys = 1 << 16;    // distinct races remembered at all; beyond, races are only counted
std::vector<RaceRecord> g_races;
std::unordered_map<uint64_t, uint32_t> g_race_index;   // (site pair, region) -> index into g_races
uint64_t g_races_unkeyed = 0;            // racing accesses met after kRaceKeys distinct races
std::string g_race_report;
std::vector<PendingStore> g_pending;     // stores done since the last check (at most one, in practice)
// g_pending is not empty, or last words were asked for (one load on the hot path, also set by a signal handler)
volatile bool g_have_pending = false;
// Last words (race_last_words) asked for by the parent: 0 not asked, 1 asked (the next tracked access gives them,
// once every store before it has been done), 2 given.
volatile sig_atomic_t g_last_words = 0;
void race_last_words(bool end);

inline void mark_changed(RaceRecord& r) { r.differ = r.changed = true; }

// Compare each pending store's bytes with those it overwrote: a change makes its races `differ`; a store that
// left them as they were is marked so in its cells (a later read that races it reads what was there before it).
[[gnu::cold, gnu::noinline]] void settle_pending_stores() {
  for (const PendingStore& p : g_pending) {
    if (std::memcmp(reinterpret_cast<const void*>(p.addr), p.before, p.n) != 0)
      for (size_t k = 0; k < p.nraces; ++k) mark_changed(g_races[p.races[k]]);
    else
      for (size_t i = 0; i < p.n; ++i) p.cells[i].w.thread |= kKeptBit;
  }
  g_pending.clear();
  g_have_pending = false;
  if (g_last_words == 1) {     // every store so far has been done and compared: exact last words
    g_last_words = 2;
    race_last_words(true);
    _exit(kLastWordsExit);     // the last: a race found after them would have no state (the parent kills anyway)
  }
}

inline void settle_pending_stores_if_any() {
  if (__builtin_expect(g_have_pending, 0)) settle_pending_stores();
}

// A record's values: same (two plain stores of the bytes already there), kept (every store of it left the bytes
// its racing accesses saw, reads included), differ.
const char* values_name(const RaceRecord& r) { return r.changed ? "differ" : r.differ ? "kept" : "same"; }

// One record as a tab-separated line (the fields races.py reads): count (0: not known), first and last index,
// unit, values (same, kept, differ, or ? while not known), scope (warp, block, grid, or ? while not known), the two
// sites, the region, the message of the first occurrence.
std::string record_line(const RaceRecord& r, uint64_t count, bool settled = true) {
  char head[128];
  std::snprintf(head, sizeof head, "%llu\t%ld\t%ld\t%s\t%s\t%s\t", (unsigned long long)count, r.lo, r.hi, r.unit,
                !settled ? "?" : values_name(r), !settled ? "?" : kScopeNames[r.scope]);
  return head + r.tail;
}

// What a conflict between `prev` and `now` spans.
uint8_t conflict_scope(const Access& prev, const Access& now) {
  if (prev.bseq != now.bseq) return kGridScope;
  return (prev.thread & 0x3ff) / 32 != (now.thread & 0x3ff) / 32 ? kBlockScope : kWarpScope;
}

std::string race_text(const Access& prev, bool prev_write, const Access& now, bool now_write, const Place& where) {
  std::string why;
  switch (conflict_scope(prev, now)) {
    case kGridScope:
      why = (prev.thread & now.thread & kAtomicBit) ? "different blocks, and a block-scope atomic is not atomic for "
                                                      "another block's threads"
                                                    : "different blocks, and not both atomic";
      break;
    case kBlockScope:
      why = "different warps in the same barrier interval (" +
            std::to_string(g_race_thr[now.thread & 0x3ff].epoch) + " __syncthreads passed)";
      break;
    default: why = g_collectives_order
                       ? "lanes of one warp in the same barrier interval with no __syncwarp, shuffle or vote naming both "
                         "between"
                       : "lanes of one warp in the same barrier interval with no __syncwarp naming both between (a "
                         "shuffle or vote exchanges registers and does not order memory: warp order syncwarp)";
  }
  // The common slip of a lock or a flag: the release was read, but not acquired (no fence after the atomic).
  if (covers(g_thread_pending[now.thread & 0x3ff], prev))
    why += "; an atomic of the second thread read what the first released, but no fence of the second thread "
           "followed that atomic, so it did not acquire it";
  return "data race on " + describe_location(where) + ": " + describe_access(prev, prev_write) + " and " +
         describe_access(now, now_write) + " are unordered (" + why + ")";
}

// A conflict the memory model leaves unordered: counted into the race of its (site pair, region), the first of
// each described. Cold: only racing accesses come here, and the launch goes on.
// Returns the record's index (kNoRace: past kRaceKeys, counted only).
[[gnu::cold, gnu::noinline]] uint32_t race_found(const Access& prev, bool prev_write, const Access& now,
                                                 bool now_write, uintptr_t addr) {
  Place where = locate(addr);
  uint16_t a = std::min(prev.site, now.site), b = std::max(prev.site, now.site);
  uint64_t key = uint64_t(a) << 48 | uint64_t(b) << 32 | where.region;
  auto it = g_race_index.find(key);
  if (it == g_race_index.end()) {
    if (g_race_index.size() >= kRaceKeys) { ++g_races_unkeyed; return kNoRace; }
    it = g_race_index.emplace(key, uint32_t(g_races.size())).first;
    const char* unit = where.kind == kIndexed ? "index" : where.kind == kBytesOnly ? "byte" : "-";
    if (g_races.capacity() < kRaceKeys) g_races.reserve(kRaceKeys);   // never moves: race_last_words reads it
    g_races.push_back(RaceRecord{0, 0, where.index, where.index, unit, {}, false, false, kWarpScope});
    if (g_races.size() <= kRaceDetails) {
      RaceRecord& r = g_races.back();
      r.tail = describe_site(prev.site) + "\t" + describe_site(now.site) + "\t" + region_label(where) + "\t" +
               race_text(prev, prev_write, now, now_write, where);
      // survives the worker if the launch dies; numbered, so that race_last_words can tell its final state
      std::string out = "\nemu-race: " + std::to_string(g_races.size() - 1) + "\t" + record_line(r, 0, false) + "\n";
      ssize_t ignored = write(2, out.data(), out.size());
      (void)ignored;
    }
  }
  RaceRecord& r = g_races[it->second];
  bool atomic = (prev.thread | now.thread) & kAtomicBit;
  if (atomic || !(prev_write && now_write)) r.differ = true;
  // an atomic, or a read after a store not known to have left its bytes (a store after a read, and two stores,
  // are compared once the store is done: race_access)
  if (atomic || (prev_write && !now_write && !(prev.thread & kKeptBit))) r.changed = true;
  r.scope = std::max(r.scope, conflict_scope(prev, now));
  if (r.serial == g_race_accesses) return it->second;     // this access was counted (another byte of it)
  r.serial = g_race_accesses;
  ++r.count;
  r.lo = std::min(r.lo, where.index);
  r.hi = std::max(r.hi, where.index);
  return it->second;
}

// The races of the launch for emu_race_report: one detailed record a line, then `more <distinct races without
// details> <racing accesses beyond the distinct races remembered>`.
const std::string& race_report() {
  settle_pending_stores_if_any();
  g_race_report.clear();
  for (size_t i = 0; i < g_races.size() && i < kRaceDetails; ++i) g_race_report += record_line(g_races[i], g_races[i].count) + "\n";
  if (g_races.size() > kRaceDetails || g_races_unkeyed)
    g_race_report += "more\t" + std::to_string(g_races.size() > kRaceDetails ? g_races.size() - kRaceDetails : 0) +
                     "\t" + std::to_string(g_races_unkeyed) + "\n";
  return g_race_report;
}

// Last words: the state of every announced record, for a launch that never reaches race_report because the
// worker is about to die (a memory fault, the CPU time limit) or to be killed (the parent's time limit, which
// asks for them with SIGUSR1 first; emu_signals.hpp). One `emu-race-state: <n> <count> <lo> <hi> <values>
// <scope>` line per record announced as `emu-race: <n> ...`, a `more` line, and when `end` (the parent waits for
// it) `emu-race-end`. May run in a signal handler, so it only reads: g_races and g_pending are reserved so that
// they never move, formatting is by hand, output is write(2). A store still waiting to be compared leaves its
// races `differ` when its bytes changed, and `?` when they did not: it may not have been done yet (the handler
// may have stopped the thread between the store's hook and the store; a store that faulted is never done).
void race_last_words(bool end) {
  char buf[192];
  auto num = [](char*& p, long long v) {      // the signal reporters' formatting (emu_signals.hpp), signed
    if (v < 0) *p++ = '-';
    sig_put_uint(p, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v, 10);
  };
  size_t shown = g_races.size() < kRaceDetails ? g_races.size() : kRaceDetails;
  for (size_t i = 0; i < shown && g_race_on; ++i) {
    const RaceRecord& r = g_races[i];
    const char* values = values_name(r);
    for (const PendingStore& ps : g_pending)
      for (size_t k = 0; k < ps.nraces && !r.changed; ++k)
        if (ps.races[k] == i)
          values = std::memcmp(reinterpret_cast<const void*>(ps.addr), ps.before, ps.n) != 0 ? "differ" : "?";
    char* p = buf;
    sig_put(p, "\nemu-race-state: ");
    num(p, (long long)i); *p++ = '\t';
    num(p, (long long)r.count); *p++ = '\t';
    num(p, r.lo); *p++ = '\t';
    num(p, r.hi); *p++ = '\t';
    sig_put(p, values); *p++ = '\t';
    sig_put(p, kScopeNames[r.scope]);
    ssize_t ignored = write(2, buf, size_t(p - buf));
    (void)ignored;
  }
  char* p = buf;
  if (g_race_on && (g_races.size() > kRaceDetails || g_races_unkeyed)) {
    sig_put(p, "\nemu-race-state: more\t");
    num(p, (long long)(g_races.size() > kRaceDetails ? g_races.size() - kRaceDetails : 0)); *p++ = '\t';
    num(p, (long long)g_races_unkeyed);
  }
  if (end) sig_put(p, "\nemu-race-end\n");
  ssize_t ignored = write(2, buf, size_t(p - buf));
  (void)ignored;
}

// The parent's SIGUSR1 (emu_signals.hpp): the first asks the next tracked access for exact last words; asked
// again (no tracked access came: a thread spinning on registers, or no launch), they are given at once.
void race_last_words_asked() {
  if (g_race_on && g_last_words == 0) {
    g_last_words = 1;
    g_have_pending = true;      // the hot path's one check leads the next access to settle_pending_stores
  } else if (g_last_words != 2) {
    g_last_words = 2;
    race_last_words(true);
    _exit(kLastWordsExit);
  }
}

void race_records_clear() {
  g_last_words = 0;
  g_pending.clear();
  g_have_pending = false;
  g_races.clear();
  g_race_index.clear();
  g_races_unkeyed = 0;
}

inline Tracked* tracked_range(uintptr_t a) {
  for (Tracked& t : g_tracked)
    if (a >= t.lo && a < t.hi) return &t;
  return nullptr;
}

// The cells of `addr` in its chunk of `t`, mapping the chunk on first use; when it cannot be mapped the launch
// ends with the tool's limit (unchecked), never a verdict on the kernel.
Cell* tracked_cells(Tracked& t, uintptr_t addr) {
  size_t k = size_t((addr - t.lo) >> kChunkBits);
  Cell*& chunk = t.chunks[k];
  if (__builtin_expect(chunk == nullptr, 0)) {
    size_t cells = t.chunk_cells(k);
    if (!(chunk = map_shadow(cells))) {
      char buf[320];
      std::snprintf(buf, sizeof buf, "the race detector's shadow of %s (bytes %llu.. of %llu tracked; %zu MiB of "
                    "shadow mapped) could not be mapped: %s; the tool's limit, not the kernel's (raise "
                    "memory_limit_mb)", t.name.c_str(), (unsigned long long)(uintptr_t(k) << kChunkBits),
                    (unsigned long long)(t.hi - t.lo), g_tracked_shadow_bytes >> 20, std::strerror(errno));
      fiber_fault(TOOL_LIMIT, buf);
    }
    g_tracked_shadow_bytes += cells * sizeof(Cell);
  }
  return chunk + ((addr - t.lo) & (kChunkBytes - 1));
}

// ---- accesses aside (g_more) ---------------------------------------------------------------------------
inline bool has_aside(const Cell& c) { return c.r[1].bseq == kAsideRun; }
inline Access bare(Access a) {             // an access without the bit of its list (kWriteBit)
  a.thread = uint16_t(a.thread & ~kWriteBit);
  return a;
}
inline bool device_atomic(uint16_t flags) { return (flags & kAtomicBit) && !(flags & kBlockAtomicBit); }
// 2 plain, 1 block-scope atomic, 0 device-scope atomic: what conflicts with an access of a lower rank (in the same
// block run) conflicts with one of a higher rank too.
inline int kind_rank(uint16_t flags) { return !(flags & kAtomicBit) ? 2 : (flags & kBlockAtomicBit) ? 1 : 0; }
// Whether every access that conflicts with `old` conflicts with `now` too, so that `now`, ordered after `old`, can
// stand for it: a write for anything, a read for reads only; a plain access for any kind, an atomic for atomics of
// its block run as strong as it or stronger.
inline bool stands_for(const Access& now, bool now_write, const Access& old, bool old_write) {
  if (old_write && !now_write) return false;
  int rn = kind_rank(now.thread), ro = kind_rank(old.thread);
  return rn == 2 || (ro != 2 && rn >= ro && now.bseq == old.bseq);
}
// Whether `a` happens before the running thread's current access, through an observation too (an atomic write).
inline bool ordered_before_now(const Access& a, bool write, const Fiber* f, uintptr_t addr, bool shared) {
  return ordered(a, f) || (write && (a.thread & kAtomicBit) && observed_before(a, f, addr, shared));
}
// Whether nothing of block run `bseq` can be ordered before an access of another block (see g_more).
inline bool unacquirable(uint32_t bseq) {
  return bseq != g_bseq && !g_released_runs.count(bseq) && !g_held_runs.count(bseq);
}

// The accesses aside of cell `c` (of the byte at `a`), or nullptr; an entry of another block run (shared memory) or
// one freed since (a grid-wide barrier) is dropped from the cell.
inline MoreAccesses* aside_of(Cell& c, uintptr_t a, bool shared) {
  if (!has_aside(c)) return nullptr;
  MoreAccesses& m = g_more[c.r[1].epoch];
  if (m.live && m.addr == a && m.bseq == (shared ? g_bseq : 0u)) return &m;
  c.r[1].bseq = 0;
  return nullptr;
}

inline void note_aside(MoreAccesses& m, const Access& e) {
  m.block_scoped += (e.thread & kBlockAtomicBit) != 0;
  if (m.run == kAsideRun - 1) m.run = e.bseq, m.max_epoch = e.epoch;
  else if (m.run != e.bseq) m.run = kAsideRun;
  else m.max_epoch = std::max(m.max_epoch, e.epoch);
}

// Cell `c` (of the byte at `a`) keeps its accesses beyond r[0] and w aside from now on: its read r[1] moves there.
[[gnu::noinline]] MoreAccesses& make_aside(Cell& c, uintptr_t a, bool shared) {
  uint32_t k;
  if (!g_more_free.empty()) {
    k = g_more_free.back();
    g_more_free.pop_back();
  } else {
    k = uint32_t(g_more.size());
    g_more.emplace_back();
  }
  MoreAccesses& m = g_more[k];
  if (shared) g_more_shared.push_back(k);
  m.addr = a;
  m.bseq = shared ? g_bseq : 0;
  m.live = true;
  for (auto& by_kind : m.compacted) by_kind[0] = by_kind[1] = 0;
  m.block_scoped = 0;
  ++g_more_live;
  const Access r1 = c.r[1];
  m.run = kAsideRun - 1;          // none yet
  if (!stale(r1, shared)) note_aside(m, r1), m.list[bool(r1.thread & kAtomicBit)][0].push_back(r1);
  c.r[1] = Access{kAsideRun, k, 0, 0, 0};
  return m;
}

// Drop what a list aside no longer needs, relative to the current access `now`: stale accesses, accesses `now`
// stands for that happen before it, each thread's accesses that a later one of the same thread stands for, and
// all but two (of two runs) of each kind's accesses of unacquirable block runs.
[[gnu::cold, gnu::noinline]] void compact_aside(std::vector<Access>& list, bool write, Fiber* f, const Access& now,
                                                bool now_write, bool shared) {
  std::vector<uint32_t> order(list.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {      // per (block run, thread), newest first
    const Access& p = list[x];
    const Access& q = list[y];
    uint16_t tp = p.thread & 0x3ff, tq = q.thread & 0x3ff;
    return p.bseq != q.bseq ? p.bseq < q.bseq : tp != tq ? tp < tq : x > y;
  });
  std::vector<char> keep(list.size(), 0);
  const Access* newest = nullptr;
  int unacquirable_kept[3] = {0, 0, 0};
  uint32_t unacquirable_run[3] = {0, 0, 0};
  for (uint32_t k = 0; k < order.size(); ++k) {
    const Access& e = list[order[k]];
    if (newest && !(newest->bseq == e.bseq && (newest->thread & 0x3ff) == (e.thread & 0x3ff))) newest = nullptr;
    if (stale(e, shared) || (stands_for(now, now_write, e, write) && ordered_cheaply(e, f))) continue;
    if (newest && stands_for(*newest, write, e, write)) continue;     // program order: the newer one stands for it
    if (unacquirable(e.bseq)) {
      int r = kind_rank(e.thread);
      if (unacquirable_kept[r] >= 2 || (unacquirable_kept[r] == 1 && unacquirable_run[r] == e.bseq)) continue;
      unacquirable_run[r] = e.bseq;
      ++unacquirable_kept[r];
    }
    keep[order[k]] = 1;
    if (!newest) newest = &e;
  }
  size_t out = 0;
  for (size_t i = 0; i < list.size(); ++i)
    if (keep[i]) list[out++] = list[i];
  list.resize(out);
}

// Keep `e` aside (a read, or a write: `write`) in `m`.
inline void put_aside(MoreAccesses& m, Access e, bool write, Fiber* f, const Access& now, bool now_write, bool shared) {
  bool atomic = e.thread & kAtomicBit;
  std::vector<Access>& list = m.list[atomic][write];
  e.thread = uint16_t((e.thread & ~kWriteBit) | (write ? kWriteBit : 0));
  if (!list.empty()) {      // the same thread's last access of the kind: the new one stands for it (program order)
    const Access& last = list.back();
    if (last.bseq == e.bseq && (last.thread & 0x3ff) == (e.thread & 0x3ff) && stands_for(e, write, last, write)) {
      list.back() = e;
      note_aside(m, e);
      return;
    }
  }
  list.push_back(e);
  note_aside(m, e);
  uint32_t& compacted = m.compacted[atomic][write];
  if (list.size() >= 64 && list.size() >= 2 * size_t(compacted)) {
    compact_aside(list, write, f, now, now_write, shared);
    compacted = uint32_t(list.size());
  }
}

// The accesses aside that the current access conflicts with: each a race (`on_race` gets it and whether it was a
// write). A read looks at writes only; an atomic skips the lists of atomics where all of them are morally strong
// with it (shared memory: one block; global memory: device scope throughout). A write also drops those it stands
// for and those that raced; of those morally strong with it, only its own thread's (no happens-before test: what
// is kept longer than needed costs time, never a verdict, and compact_aside drops it later).
template <class OnRace>
[[gnu::always_inline]] inline void check_aside(MoreAccesses& m, Fiber* f, bool write, bool shared, uint16_t atomic,
                                               uintptr_t a, const Access& now, OnRace on_race) {
  if (write && !atomic && m.run == g_bseq && m.max_epoch < g_race_thr[f->linear].epoch) {
    for (auto& by_kind : m.list)           // a plain store after a barrier that follows all of them: it stands for all
      for (auto& list : by_kind) list.clear();
    return;
  }
  for (int kind = 0; kind < 2; ++kind) {
    if (kind == 1 && atomic && (shared || (device_atomic(atomic) && !m.block_scoped))) continue;
    for (int w = write ? 0 : 1; w < 2; ++w) {
      std::vector<Access>& list = m.list[kind][w];
      size_t out = 0;
      for (size_t i = 0; i < list.size(); ++i) {
        Access e = bare(list[i]);
        bool drop;
        if (stale(e, shared)) {
          drop = write;
        } else if (morally_strong(e, atomic)) {
          drop = write && (e.thread & 0x3ff) == (now.thread & 0x3ff) && e.bseq == now.bseq &&
                 stands_for(now, true, e, w == 1);
        } else if (ordered_before_now(e, w == 1, f, a, shared)) {
          drop = write && stands_for(now, true, e, w == 1);
        } else {
          on_race(e, w == 1);
          drop = write;
        }
        if (!drop) list[out++] = list[i];
      }
      list.resize(out);
      if (write) m.compacted[kind][w] = std::min<uint32_t>(m.compacted[kind][w], uint32_t(out));
    }
  }
}

// Whether an atomic write `now` that did not race `e` must keep it: `e` is not stale, and `now` cannot stand for it
// or is not known to happen after it by program order, a barrier or a warp collective (ordered_cheaply), nor by
// observation: an atomic write that this thread's atomic read saw (a read-modify-write's own read: `e` is the cell's
// last write, which the read-modify-write read) precedes the thread's later accesses in PTX's causality order, and so
// do the writes before it in a chain of read-modify-writes, each of which saw the one before (observation order).
// Keeping such a write would make a race of a chain's first add and the last adder's later plain store, which the
// model orders (the last block of a reduction resetting its counter: ScoR's `reduction`). Dropping it loses its
// conflicts with block-scope atomics of `now`'s block, which `now` does not have (docs/KERNELS.md: a known miss).
inline bool kept_by_atomic(const Access& e, bool e_write, const Access& now, const Fiber* f, uintptr_t a,
                           bool shared) {
  if (stale(e, shared)) return false;
  if (e_write && (e.thread & kAtomicBit) && morally_strong(e, now.thread) &&
      kind_rank(now.thread) >= kind_rank(e.thread)) {
    if (now.thread & kReadsBit) return false;      // the read-modify-write read it: observation
    const LastObserved& last = g_last_observed[f->linear];    // an atomic load of this thread read it
    if (last.addr && a >= last.addr && a - last.addr < 16 && same_access(last.w, e)) return false;
  }
  return !(stands_for(now, true, e, e_write) && ordered_cheaply(e, f));
}

// The bytes [addr, addr + n) of one access, whose cells are `cells`: conflicts with what the cells (and the
// accesses aside) hold, then the access recorded in them. A plain store that raced waits for the comparison of its
// bytes (g_pending).
[[gnu::always_inline]] inline void check_cells(Cell* cells, size_t n, uintptr_t addr, Fiber* f, const Access& now,
                                               bool write, bool shared, uint16_t atomic) {
  // The bytes of one access usually share their history: a byte whose cell equals the first byte's cell as it
  // was takes the first byte's new cell (the same checks on the same state give the same outcome), unless its
  // accesses are aside (kept per byte).
  const Cell first = cells[0];
  PendingStore pending;          // filled only when a plain store races (not zeroed: the hot path stays as it was)
  pending.nraces = 0;
  // A plain store's race whose values are still open waits for the comparison once the store is done.
  auto compare_later = [&](uint32_t race) {
    if (race == kNoRace || g_races[race].changed) return;
    bool known = false;
    for (size_t k = 0; k < pending.nraces; ++k) known |= pending.races[k] == race;
    if (!known && pending.nraces < kPendingRaces && n <= kPendingBytes)
      pending.races[pending.nraces++] = race;
    else if (!known)
      mark_changed(g_races[race]);     // too much to keep: said to differ, never wrongly `same` or `kept`
  };
  if (atomic && !write && (first.w.thread & kAtomicBit) && !stale(first.w, shared) && morally_strong(first.w, atomic))
    observe(f, addr, n, first.w, now, shared);   // an atomic load saw this atomic write (the bytes share its cell)
  for (size_t i = 0; i < n; ++i) {
    Cell& c = cells[i];
    if (i && !has_aside(first) && !has_aside(cells[0]) && std::memcmp(&c, &first, sizeof(Cell)) == 0) {
      c = cells[0];
      continue;
    }
    MoreAccesses* more = __builtin_expect(has_aside(c), 0) ? aside_of(c, addr + i, shared) : nullptr;
    const Access w = c.w;
    bool w_raced = false;
    if (conflict(w, f, shared, atomic) && !observed_before(w, f, addr + i, shared)) {
      uint32_t race = race_found(w, true, now, write, addr + i);
      if (write && !atomic) compare_later(race);
      w_raced = true;
    }
    if (more)
      check_aside(*more, f, write, shared, atomic, addr + i, now, [&](const Access& e, bool e_write) {
        uint32_t race = race_found(e, e_write, now, write, addr + i);
        if (write && !atomic) compare_later(race);
      });
    if (write) {
      bool keep_r[2] = {false, false};
      for (int k = 0; k < 2; ++k) {
        if (k == 1 && has_aside(c)) break;
        const Access r = c.r[k];
        bool raced = conflict(r, f, shared, atomic);
        if (raced) {
          uint32_t race = race_found(r, false, now, true, addr + i);
          if (!atomic) compare_later(race);
        }
        // what an atomic cannot stand for stays: earlier plain reads, another thread's atomic reads
        keep_r[k] = atomic && !raced && kept_by_atomic(r, false, now, f, addr + i, shared);
      }
      bool keep_w = atomic && !w_raced && kept_by_atomic(w, true, now, f, addr + i, shared);
      c.w = now;
      if (!keep_r[0]) c.r[0].bseq = 0;
      if (more) {
        if (keep_w) put_aside(*more, w, true, f, now, true, shared);
        if (more->empty()) {                         // nothing aside any more: the cell takes two reads again
          free_aside(c.r[1].epoch);
          c.r[1].bseq = 0;
        }
      } else {
        if (!keep_r[1]) c.r[1].bseq = 0;
        if (__builtin_expect(keep_w, 0)) put_aside(make_aside(c, addr + i, shared), w, true, f, now, true, shared);
      }
    } else if (stale(c.r[0], shared) || (stands_for(now, false, c.r[0], false) && ordered_cheaply(c.r[0], f))) {
      c.r[0] = now;
    } else if (more) {
      put_aside(*more, now, false, f, now, false, shared);
    } else {
      const Access r1 = c.r[1];
      if (stale(r1, shared) || (stands_for(now, false, r1, false) && ordered_cheaply(r1, f)))
        c.r[1] = now;       // the two latest reads unordered with each other (one of another thread than any writer)
      else                  // a third read unordered with the other two: all but r[0] go aside
        put_aside(make_aside(c, addr + i, shared), now, false, f, now, false, shared);
    }
  }
  if (__builtin_expect(pending.nraces != 0, 0)) {
    pending.addr = addr;
    pending.cells = cells;
    pending.n = n;
    std::memcpy(pending.before, reinterpret_cast<const void*>(addr), n);
    if (g_pending.capacity() < kPendingReserved) g_pending.reserve(kPendingReserved);
    if (g_pending.size() < kPendingReserved) g_pending.push_back(pending);    // never moves: see race_last_words
    else for (size_t k = 0; k < pending.nraces; ++k) mark_changed(g_races[pending.races[k]]);   // never wrongly same
    g_have_pending = true;
  }
}

// `atomic`: 0 for a plain access, else kAtomicBit (with kBlockAtomicBit for a block-scope atomic).
void race_access(uintptr_t addr, size_t size, bool write, uintptr_t pc, uint16_t atomic = 0) {
  settle_pending_stores_if_any();      // the last racing store has been done
  Tracked* t = nullptr;
  Cell* cells;
  size_t n = size;
  bool shared;
  if (addr >= uintptr_t(g_shared) && addr < uintptr_t(g_shared) + kSharedArena) {
    cells = g_shared_shadow + (addr - uintptr_t(g_shared));
    n = std::min(n, uintptr_t(g_shared) + kSharedArena - addr);
    shared = true;
  } else if (g_dyn && addr >= uintptr_t(g_dyn) && addr < uintptr_t(g_dyn) + g_dyn_cap) {
    cells = g_dyn_shadow + (addr - uintptr_t(g_dyn));
    n = std::min(n, uintptr_t(g_dyn) + g_dyn_cap - addr);
    shared = true;
  } else if (addr < g_tracked_hi && addr + size > g_tracked_lo) {
    t = tracked_range(addr);
    if (!t) return;
    n = std::min(n, t->hi - addr);
    shared = false;
  } else {
    return;
  }
  Fiber* f = cur();
  RaceThread& me = g_race_thr[f->linear];
  if (!atomic && me.atomic_window) {     // the plain load/store an atomic operation is made of (already recorded)
    bool same = me.atomic_ptr == reinterpret_cast<const volatile void*>(addr);
    if (!same || write || me.atomic_window == kLoadWindow) me.atomic_window = 0;
    if (same) return;
  }
  ++g_race_accesses;
  Access now{g_bseq, me.epoch, me.vc[f->lane], uint16_t(f->linear | atomic), site_of(pc)};
  if (!t) {
    check_cells(cells, n, addr, f, now, write, shared, atomic);
    return;
  }
  for (uintptr_t a = addr, end = addr + n; a < end;) {     // chunk by chunk (more than one: a range, an unaligned access)
    size_t part = size_t(std::min<uintptr_t>(end - a, kChunkBytes - ((a - t->lo) & (kChunkBytes - 1))));
    check_cells(tracked_cells(*t, a), part, a, f, now, write, false, atomic);
    a += part;
  }
}

// ---- tracked ranges (from the launch driver) -------------------------------------------------------------
void race_untrack() {
  settle_pending_stores_if_any();      // its cells are about to go
  for (Tracked& t : g_tracked)
    for (size_t k = 0; k < t.chunks.size(); ++k)
      if (t.chunks[k]) munmap(t.chunks[k], t.chunk_cells(k) * sizeof(Cell));
  g_tracked.clear();
  g_tracked_shadow_bytes = 0;
  g_tracked_lo = UINTPTR_MAX;
  g_tracked_hi = 0;
}

// The shared areas' shadows live while the detector is on (emu_race_end releases them): a worker holds many
// modules, each with its own runtime, and 12 MiB kept per module would add up.
bool race_ensure_shared_shadow() {
  if (!g_shared_shadow && !(g_shared_shadow = map_shadow(kSharedArena))) return false;
  if (g_dyn_shadow_cells < g_dyn_cap) {
    settle_pending_stores_if_any();
    if (g_dyn_shadow) munmap(g_dyn_shadow, g_dyn_shadow_cells * sizeof(Cell));
    g_dyn_shadow_cells = 0;
    if (!(g_dyn_shadow = map_shadow(g_dyn_cap))) return false;
    g_dyn_shadow_cells = g_dyn_cap;
  }
  return true;
}

void race_release_shared_shadow() {
  settle_pending_stores_if_any();
  if (g_shared_shadow) munmap(g_shared_shadow, kSharedArena * sizeof(Cell));
  if (g_dyn_shadow) munmap(g_dyn_shadow, g_dyn_shadow_cells * sizeof(Cell));
  g_shared_shadow = g_dyn_shadow = nullptr;
  g_dyn_shadow_cells = 0;
}

}  // namespace emu

namespace emu {
void volatile_read_done(const volatile void* p);     // emu_runtime.cpp: a spin on a volatile load yields
void lockstep_turn(uintptr_t a);                     // emu_runtime.cpp: under lock step, the next lane's turn

// A misaligned access through an aligned entry point: the kernel's fault (emu_runtime.cpp).
[[gnu::cold, gnu::noinline]] void misaligned(uintptr_t a, size_t size, bool write, uintptr_t pc);
// Whether [a, a + n) may touch a tracked range: three unsigned range tests, kept inline in the entry points so
// the loads of untracked memory (const weights, locals) cost a call and these tests only.
inline bool maybe_tracked(uintptr_t a, size_t n) {
  return a - uintptr_t(g_shared) < kSharedArena || a - uintptr_t(g_dyn) < g_dyn_cap ||
         (a < g_tracked_hi && a + n > g_tracked_lo);
}
// What an instrumented access of [a, a + n) does when g_access_hooks is set; `filtered`: the entry point's access
// may be of untracked memory, which maybe_tracked tells before the detector is called.
inline void access_hooks(uintptr_t a, size_t n, bool write, uintptr_t pc, bool filtered) {
  if (g_race_on && (!filtered || maybe_tracked(a, n))) race_access(a, n, write, pc);
  if (g_lockstep) lockstep_turn(a);
}
}  // namespace emu

// ---- entry points of the compiler's instrumentation (-fsanitize=thread without libtsan) -------------------
#define EMU_TSAN_ACCESS(NAME, SIZE, WRITE, ALIGNED)                                                            \
  extern "C" void NAME(void* p) {                                                                             \
    uintptr_t a = reinterpret_cast<uintptr_t>(p);                                                             \
    if (ALIGNED && __builtin_expect(a & (SIZE - 1), 0))                                                        \
      ::emu::misaligned(a, SIZE, WRITE, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));           \
    if (__builtin_expect(::emu::g_access_hooks, 0))                                                            \
      ::emu::access_hooks(a, SIZE, WRITE, reinterpret_cast<uintptr_t>(__builtin_return_address(0)), true);   \
  }
#define EMU_TSAN_SIZES(KIND, WRITE)                                                                            \
  EMU_TSAN_ACCESS(__tsan_##KIND##1, 1, WRITE, true) EMU_TSAN_ACCESS(__tsan_##KIND##2, 2, WRITE, true)         \
  EMU_TSAN_ACCESS(__tsan_##KIND##4, 4, WRITE, true) EMU_TSAN_ACCESS(__tsan_##KIND##8, 8, WRITE, true)         \
  EMU_TSAN_ACCESS(__tsan_##KIND##16, 16, WRITE, true)                                                         \
  EMU_TSAN_ACCESS(__tsan_unaligned_##KIND##2, 2, WRITE, false)                                                \
  EMU_TSAN_ACCESS(__tsan_unaligned_##KIND##4, 4, WRITE, false)                                                \
  EMU_TSAN_ACCESS(__tsan_unaligned_##KIND##8, 8, WRITE, false)                                                \
  EMU_TSAN_ACCESS(__tsan_unaligned_##KIND##16, 16, WRITE, false)
EMU_TSAN_SIZES(read, false)
EMU_TSAN_SIZES(write, true)
// Volatile accesses race like plain ones; a volatile load may also be a spin on a flag, so it may yield.
#define EMU_TSAN_VOLATILE(SIZE)                                                                                \
  EMU_TSAN_ACCESS(__tsan_volatile_write##SIZE, SIZE, true, true)                                              \
  extern "C" void __tsan_volatile_read##SIZE(void* p) {                                                       \
    uintptr_t a = reinterpret_cast<uintptr_t>(p);                                                             \
    if (__builtin_expect(a & (SIZE - 1), 0))                                                                   \
      ::emu::misaligned(a, SIZE, false, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));           \
    if (__builtin_expect(::emu::g_access_hooks, 0))                                                            \
      ::emu::access_hooks(a, SIZE, false, reinterpret_cast<uintptr_t>(__builtin_return_address(0)), true);   \
    ::emu::volatile_read_done(p);                                                                             \
  }
EMU_TSAN_VOLATILE(1) EMU_TSAN_VOLATILE(2) EMU_TSAN_VOLATILE(4) EMU_TSAN_VOLATILE(8) EMU_TSAN_VOLATILE(16)
#undef EMU_TSAN_VOLATILE
#undef EMU_TSAN_SIZES
#undef EMU_TSAN_ACCESS
// -fsanitize=alignment's report (the layout is g++'s UBSan ABI): a typed load or store whose address breaks its
// type's alignment. Only loads and stores are the kernel's accesses: a member access or a reference bound through
// a misaligned float4* reads nothing by itself (its field's own load is checked at the field's alignment).
namespace emu {
struct UbsanLocation { const char* file; unsigned line, column; };
struct UbsanTypeMismatch { UbsanLocation loc; const void* type; unsigned char log_alignment, kind; };
}  // namespace emu
extern "C" void __ubsan_handle_type_mismatch_v1(void* data, void* p) {   // g++'s built-in declaration
  enum { kLoad = 0, kStore = 1 };
  const auto* d = static_cast<const ::emu::UbsanTypeMismatch*>(data);
  if (d->kind == kLoad || d->kind == kStore)
    ::emu::misaligned(reinterpret_cast<uintptr_t>(p), size_t(1) << d->log_alignment, d->kind == kStore,
                      reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}
extern "C" void __tsan_read_range(void* p, long n) {   // (the signatures are those g++ declares built in)
  if (__builtin_expect(::emu::g_access_hooks, 0))
    ::emu::access_hooks(reinterpret_cast<uintptr_t>(p), size_t(n), false, reinterpret_cast<uintptr_t>(__builtin_return_address(0)), false);
}
extern "C" void __tsan_write_range(void* p, long n) {
  if (__builtin_expect(::emu::g_access_hooks, 0))
    ::emu::access_hooks(reinterpret_cast<uintptr_t>(p), size_t(n), true, reinterpret_cast<uintptr_t>(__builtin_return_address(0)), false);
}
extern "C" void __tsan_init() {}
extern "C" void __tsan_func_entry(void*) {}
extern "C" void __tsan_func_exit(void*) {}
extern "C" void __tsan_vptr_update(void*, void*) {}
extern "C" void __tsan_vptr_read(void*) {}

namespace emu {
// What a release by the running thread puts into `rels`: through the thread's fences before it, or by itself
// (`by_itself`: a release order, a barrier arrival); and, cumulatively, what the thread (or its block, at a barrier)
// had acquired from other logs, within the narrower scope (copied: the scope changes; what came from `rels` is in it
// already).
void release_into(ReleaseLog& rels, Fiber* f, RaceThread& me, int scope, bool by_itself) {
  int released = 0;
  if (by_itself) {
    rels.add(Release{g_bseq, me.epoch, me.vc[f->lane], uint16_t(f->linear), uint8_t(scope)});
    ++me.vc[f->lane];      // the thread's later accesses are not released by it
    released = scope;
  } else {
    for (int s = kScopeBlock; s <= kScopeDevice; ++s)
      if (me.fence[s].set) {
        rels.add(Release{g_bseq, me.fence[s].epoch, me.fence[s].clock, uint16_t(f->linear),
                         uint8_t(std::min(s, scope))});
        released = std::max(released, std::min(s, scope));
      }
  }
  if (released == kScopeDevice) g_released_runs.insert(g_bseq);   // what another block may acquire
  if (released)
    for (const Acquired* got : {&g_thread_acquired[f->linear], &g_block_acquired})
      for (const Acquired::Ref& ref : got->refs) {
        // From `rels` itself only what a wider release now passes on (below); from another log everything taken.
        // What an earlier release copied from a log (for the same acquirer and scope) is in `rels` already: copying
        // only the rest keeps a long chain of phases or atomics linear, not quadratic.
        bool same = ref.log == &rels;
        if (same && released != kScopeDevice) continue;
        uint32_t& done = rels.copied[ReleaseLog::CopyKey{ref.log, ref.who.bseq, ref.who.device, uint8_t(released)}];
        for (uint32_t i = done; i < ref.len; ++i) {
          Release r = ref.log->log[i];
          if (!ref.who.takes(r) || (same && (r.bseq != g_bseq || r.scope == kScopeDevice))) continue;
          // narrowed to this release's scope; but what this thread acquired from its own block's threads (the
          // only ones a block-scope release of its block reaches it from) it passes on at its own scope: PTX's
          // causality order is transitive across a block-scope synchronization followed by a device-scope one
          r.scope = uint8_t(r.bseq == g_bseq ? released : std::min(int(r.scope), released));
          rels.add(r);
        }
        done = std::max(done, ref.len);
      }
}

// A barrier object's phases (emu_barrier.hpp, named barriers): an arrival releases the thread's accesses before it;
// the last arrival marks where the phase ends; a wait that saw phase k complete acquires the log up to there.
void phase_arrive(const volatile void* object, int scope) {
  if (!g_race_on) return;
  Fiber* f = cur();
  release_into(g_phase_logs[uintptr_t(object)].log, f, g_race_thr[f->linear], scope, true);
}
void phase_complete(const volatile void* object, uint64_t phase) {
  if (!g_race_on) return;
  PhaseLog& p = g_phase_logs[uintptr_t(object)];
  p.end[{g_bseq, phase}] = p.log.version();
}
// `thread` (of the running block) acquires; the scheduler acquires for each waiter it releases.
void phase_acquire_by(int thread, const volatile void* object, uint64_t phase, int scope) {
  if (!g_race_on) return;
  auto it = g_phase_logs.find(uintptr_t(object));
  if (it == g_phase_logs.end()) return;
  auto e = it->second.end.find({g_bseq, phase});
  uint32_t len = e == it->second.end.end() ? it->second.log.version() : e->second;
  g_thread_acquired[thread].add(&it->second.log, len, Acquirer{g_bseq, scope == kScopeDevice});
}
void phase_acquire(const volatile void* object, uint64_t phase, int scope) {
  phase_acquire_by(cur()->linear, object, phase, scope);
}

void race_barrier_init(const volatile void* bar, int line) {
  if (!g_race_on) return;
  Fiber* f = cur();
  const RaceThread& me = g_race_thr[f->linear];
  g_barrier_inits[uintptr_t(bar)] = Access{g_bseq, me.epoch, me.vc[f->lane], uint16_t(f->linear),
                                           site_of(uintptr_t(unsigned(line)) | kLineSite)};
}

// A use (an arrival or a wait) of a barrier whose init is not ordered before it: a race with the init.
void race_barrier_use(const volatile void* bar, int line) {
  if (!g_race_on) return;
  auto it = g_barrier_inits.find(uintptr_t(bar));
  if (it == g_barrier_inits.end() || it->second.bseq != g_bseq) return;
  Fiber* f = cur();
  if (ordered(it->second, f)) return;
  const RaceThread& me = g_race_thr[f->linear];
  Access now{g_bseq, me.epoch, me.vc[f->lane], uint16_t(f->linear | kAtomicBit | kBlockAtomicBit),
             site_of(uintptr_t(unsigned(line)) | kLineSite)};
  race_found(it->second, true, now, true, uintptr_t(bar));
}

// Every atomic operation of device code announces itself here before its plain load/store (emu_device.hpp):
// the access is recorded as atomic, and the load and store the operation is made of are not recorded again.
void atomic_access(const volatile void* p, size_t bytes, bool is_write, int line, int scope, int order) {
  if (!g_race_on) return;
  Fiber* f = cur();
  RaceThread& me = g_race_thr[f->linear];
  uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  ReleaseLog& rels = g_releases[addr];
  // What earlier atomics on this address released and this one can read (the log so far; a release of another
  // block counts only when both scopes span the two threads). Acquired now with an acquire order, else at the
  // thread's next fence. A thread that reads the address again before its log changed (a spin) has it already.
  bool acquire = (order & kAcquire) || g_atomic_acquires;
  if (me.seen_ptr != p || me.seen_version != rels.version() || me.seen_acquire < acquire)
    (acquire ? g_thread_acquired[f->linear] : g_thread_pending[f->linear])
        .add(&rels, rels.version(), Acquirer{g_bseq, scope == kScopeDevice});
  release_into(rels, f, me, scope, order & kRelease);
  me.seen_ptr = p;
  me.seen_version = rels.version();
  me.seen_acquire = acquire;
  me.atomic_window = 0;
  race_access(addr, bytes, is_write, uintptr_t(unsigned(line)) | kLineSite,
              uint16_t(kAtomicBit | (scope == kScopeBlock ? kBlockAtomicBit : 0) |
                       (order & kReadModifyWrite ? kReadsBit : 0)));
  me.atomic_ptr = p;
  me.atomic_window = is_write ? kUpdateWindow : kLoadWindow;
}

// __threadfence_block (scope kScopeBlock), __threadfence / __threadfence_system (kScopeDevice): the thread's
// accesses so far are released by its next atomics, and what its atomics so far read is acquired (of another
// block only with a device-scope fence). Its own clock moves on, so accesses after the fence are not released.
void fence(int scope) {
  if (!g_race_on) return;
  Fiber* f = cur();
  RaceThread& me = g_race_thr[f->linear];
  Acquired& pending = g_thread_pending[f->linear];
  // What its atomics read is acquired: another block's releases only through a device-scope fence. After a
  // block-scope fence the same reads stay pending for a later device-scope one.
  for (const Acquired::Ref& ref : pending.refs)
    g_thread_acquired[f->linear].add(ref.log, ref.len, Acquirer{ref.who.bseq, ref.who.device && scope == kScopeDevice});
  if (scope == kScopeDevice) pending.clear();
  me.seen_ptr = nullptr;      // what the thread acquires from now on no longer matches what it saw
  me.fence[scope] = FenceMark{me.epoch, me.vc[f->lane]++, true};
}
}  // namespace emu
