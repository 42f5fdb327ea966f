// Resolves `#include <cub/cub.cuh>` (and the block, warp, thread and util headers beside it) in kernel source: the
// collectives of CUB that inference kernels use, on the emu runtime. Their barriers, shuffles and shared-memory
// accesses are emu's own, so the race detector sees them as it sees the kernel's: the temporary storage is the
// kernel's __shared__ object, and reusing it without a __syncthreads() in between is a race, as CUB's documentation
// says it is on a GPU.
//
// - WarpReduce<T, LOGICAL_WARP_THREADS>: Reduce/Sum (also over the first valid_items lanes); the result is defined in
//   the logical warp's lane 0 only. A ladder of shfl_down with offsets 1, 2, 4..., CUB's shuffle order.
// - BlockReduce<T, BLOCK_DIM_X, ALGORITHM, BLOCK_DIM_Y, BLOCK_DIM_Z>: Reduce/Sum of one item, of an array of items
//   per thread, or of the first num_valid threads; defined in thread 0 only. Each warp reduces, then thread 0 folds
//   the warps' totals in order (CUB's BLOCK_REDUCE_WARP_REDUCTIONS; its raking algorithms fold in another order, so a
//   float result may differ from a GPU's in the last bits whichever ALGORITHM is named).
// - BlockScan<T, BLOCK_DIM_X, ALGORITHM, BLOCK_DIM_Y, BLOCK_DIM_Z>: Exclusive/InclusiveSum and Exclusive/InclusiveScan
//   of one item or an array of items per thread, with the block's aggregate or a prefix callback. Warp scans by
//   shfl_up, then each thread folds the totals of the warps before its own.
// - BlockLoad<T, BLOCK_DIM_X, ITEMS_PER_THREAD, ALGORITHM, BLOCK_DIM_Y, BLOCK_DIM_Z> and BlockStore: a tile to and from
//   a blocked arrangement (thread t holds items t*N .. t*N+N-1; STRIPED: items t, t+threads, ...), whole or guarded by
//   valid_items (with an out-of-bounds default). TRANSPOSE exchanges through the storage with a __syncthreads() between
//   its stores and its loads, WARP_TRANSPOSE(_TIMESLICED) through each warp's part of it with a __syncwarp(), as CUB's
//   BlockExchange does; so a storage reused without a barrier races as it does on a GPU. DIRECT, STRIPED and
//   VECTORIZE need no storage. And the free functions Load/StoreDirectBlocked, ...Striped<BLOCK_THREADS> and
//   ...WarpStriped.
// - ShuffleIndex<LOGICAL_WARP_THREADS>(input, src_lane, member_mask), CUB's broadcast within a logical warp.
// - ArgMax, ArgMin, KeyValuePair; Sum, Max and Min (CUB 2's operators: CUB 3 dropped them for cuda::std::plus and
//   <cuda/functional>'s cuda::maximum and cuda::minimum, which this header includes, as CUB's does).
// - BlockRadixSort<KeyT, BLOCK_DIM_X, ITEMS_PER_THREAD, ValueT, ...>: Sort and SortDescending of keys (and values)
//   held blocked, over the key bits [begin_bit, end_bit) as CUB orders them (signed integers by their sign, floating
//   point by value, -0 before +0), stably; the result blocked, or striped (...BlockedToStriped). The items go through
//   the storage one exchange at a time (keys, then values), as CUB's do, with a __syncthreads() between each phase, so
//   a storage reused without a barrier races as it does on a GPU. Thread 0 orders the gathered keys.
// - BlockExchange<T, BLOCK_DIM_X, ITEMS_PER_THREAD, ...>: StripedToBlocked, BlockedToStriped and their warp-striped
//   forms, in place or into an output array, through the tile with a __syncthreads() (a __syncwarp() for the warp's).
// - BlockAdjacentDifference<T, BLOCK_DIM_X, ...>: SubtractLeft/Right, with a tile's neighbour item or without (CUB 3
//   has no FlagHeads/FlagTails here); a thread's neighbour item goes through the storage with a __syncthreads().
// A block of another size than the template's is a trap, as it would compute garbage on a GPU. What is missing here
// (BlockHistogram, BlockDiscontinuity, the device-wide algorithms...) stops the build, which reports it as emu's limit.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include "emu_device.hpp"
#include "../cuda/functional"

// Every function here is inlined into the kernel, so that a race report names the kernel's line of the call (and
// the place in this file after it).
#define EMU_CUB_INLINE __attribute__((always_inline)) inline

namespace cub {

struct Sum {
  template <class T> EMU_CUB_INLINE T operator()(const T& a, const T& b) const { return a + b; }
};
struct Max {
  template <class T> EMU_CUB_INLINE T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};
struct Min {
  template <class T> EMU_CUB_INLINE T operator()(const T& a, const T& b) const { return b < a ? b : a; }
};

template <class K, class V>
struct KeyValuePair {
  typedef K Key;
  typedef V Value;
  K key;
  V value;
  KeyValuePair() = default;
  KeyValuePair(const K& k, const V& v) : key(k), value(v) {}
  bool operator!=(const KeyValuePair& o) const { return value != o.value || key != o.key; }
};

// The larger (smaller) value; of equal values, the smaller key.
struct ArgMax {
  template <class T, class K>
  EMU_CUB_INLINE KeyValuePair<K, T> operator()(const KeyValuePair<K, T>& a, const KeyValuePair<K, T>& b) const {
    return (b.value > a.value || (b.value == a.value && b.key < a.key)) ? b : a;
  }
};
struct ArgMin {
  template <class T, class K>
  EMU_CUB_INLINE KeyValuePair<K, T> operator()(const KeyValuePair<K, T>& a, const KeyValuePair<K, T>& b) const {
    return (b.value < a.value || (b.value == a.value && b.key < a.key)) ? b : a;
  }
};

enum BlockReduceAlgorithm { BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY, BLOCK_REDUCE_RAKING, BLOCK_REDUCE_WARP_REDUCTIONS };
enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_RAKING_MEMOIZE, BLOCK_SCAN_WARP_SCANS };
enum BlockLoadAlgorithm { BLOCK_LOAD_DIRECT, BLOCK_LOAD_STRIPED, BLOCK_LOAD_VECTORIZE, BLOCK_LOAD_TRANSPOSE,
                          BLOCK_LOAD_WARP_TRANSPOSE, BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED };
enum BlockStoreAlgorithm { BLOCK_STORE_DIRECT, BLOCK_STORE_STRIPED, BLOCK_STORE_VECTORIZE, BLOCK_STORE_TRANSPOSE,
                           BLOCK_STORE_WARP_TRANSPOSE, BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED };

namespace emu_detail {

// The line of the kernel's call, for emu's reports: a default argument of a type no int converts to, so that CUB's own
// optional int arguments (valid_items, num_valid) keep their meaning.
struct Line {
  int n;
  explicit Line(int n = __builtin_LINE()) : n(n) {}
};

// A shuffle of any trivially copyable T, eight bytes at a time (the runtime's shuffles carry 64 bits).
template <class T>
EMU_CUB_INLINE T shuffle(int kind, unsigned mask, const T& v, int b, int width, int line) {
  static_assert(std::is_trivially_copyable<T>::value, "qconform-emu: CUB's collectives here need a trivially "
                                                      "copyable item type");
  constexpr int kWords = int((sizeof(T) + 7) / 8);
  uint64_t in[kWords] = {}, out[kWords];
  std::memcpy(in, &v, sizeof(T));
  for (int i = 0; i < kWords; ++i) out[i] = ::emu::shfl(kind, mask, in[i], b, width, line);
  T r;
  std::memcpy(&r, out, sizeof(T));
  return r;
}

EMU_CUB_INLINE unsigned linear_tid() {
  return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}

// The lanes of the calling thread's logical warp of `width` lanes.
EMU_CUB_INLINE unsigned logical_mask(int width) {
  unsigned lane = unsigned(::emu::g_cur->lane);
  unsigned base = width == 32 ? 0xffffffffu : ((1u << width) - 1u);
  return base << (lane / unsigned(width) * unsigned(width));
}

// Logical lane 0 gets the reduction of the first `valid` lanes of a logical warp of `width` lanes (every lane of it
// takes part); `mask`: the lanes that meet.
template <class T, class Op>
EMU_CUB_INLINE T warp_reduce(T v, Op op, int width, int valid, unsigned mask, int line) {
  int lane = ::emu::g_cur->lane % width;
  for (int offset = 1; offset < width; offset *= 2) {
    T other = shuffle(::emu::W_SHFL_DOWN, mask, v, offset, width, line);
    if (lane + offset < valid) v = op(v, other);
  }
  return v;
}

// Each lane gets the inclusive scan of its warp's lanes up to itself (all 32 lanes that exist take part).
template <class T, class Op>
EMU_CUB_INLINE T warp_inclusive_scan(T v, Op op, unsigned mask, int line) {
  int lane = ::emu::g_cur->lane;
  for (int offset = 1; offset < 32; offset *= 2) {
    T other = shuffle(::emu::W_SHFL_UP, mask, v, offset, 32, line);
    if (lane >= offset) v = op(other, v);
  }
  return v;
}

// The lanes of the calling thread's warp that exist in a block of `threads` threads.
EMU_CUB_INLINE unsigned warp_lanes(int threads) {
  int first = ::emu::g_cur->warp * 32, n = threads - first;
  return n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
}

EMU_CUB_INLINE void check_block(int threads, const char* what, int line) {
  int have = int(blockDim.x * blockDim.y * blockDim.z);
  if (have != threads) {
    char why[200];
    std::snprintf(why, sizeof why, "was built for blocks of %d threads, and this block has %d", threads, have);
    ::emu::library_fault(what, why, line);
  }
}

// What a block collective knows of its block: its threads (the template's) and its warps.
template <int X, int Y, int Z>
struct BlockShape {
  static constexpr int kThreads = X * Y * Z;
  static constexpr int kWarps = (kThreads + 31) / 32;
};

template <class T, int N>
struct alignas(T) Storage {        // uninitialised room for N items (a TempStorage may share a union with others)
  unsigned char bytes[sizeof(T) * N];
  T* items() { return reinterpret_cast<T*>(bytes); }
};

}  // namespace emu_detail

// CUB's ShuffleIndex: lane `src_lane` of each logical warp of LOGICAL_WARP_THREADS lanes to every lane of it, for
// any trivially copyable T (bitsandbytes broadcasts a warp's maximum so)
template <int LOGICAL_WARP_THREADS, class T>
EMU_CUB_INLINE T ShuffleIndex(T input, int src_lane, unsigned member_mask, emu_detail::Line line = emu_detail::Line()) {
  return emu_detail::shuffle(::emu::W_SHFL_IDX, member_mask, input, src_lane, LOGICAL_WARP_THREADS, line.n);
}

template <class T, int LOGICAL_WARP_THREADS = 32, int LEGACY_PTX_ARCH = 0>
class WarpReduce {
  using Line = emu_detail::Line;     // the kernel's line, for emu's reports
  static_assert(LOGICAL_WARP_THREADS >= 1 && LOGICAL_WARP_THREADS <= 32 &&
                    (LOGICAL_WARP_THREADS & (LOGICAL_WARP_THREADS - 1)) == 0,
                "qconform-emu: cub::WarpReduce here takes a power-of-two logical warp of at most 32 lanes");

 public:
  struct TempStorage {
    unsigned char unused;          // the shuffles need none
  };
  explicit WarpReduce(TempStorage&) {}
  template <class Op>
  EMU_CUB_INLINE T Reduce(T input, Op op, Line line = Line()) {
    return Reduce(input, op, LOGICAL_WARP_THREADS, line);
  }
  template <class Op>
  EMU_CUB_INLINE T Reduce(T input, Op op, int valid_items, Line line = Line()) {
    return emu_detail::warp_reduce(input, op, LOGICAL_WARP_THREADS, valid_items,
                                   emu_detail::logical_mask(LOGICAL_WARP_THREADS), line.n);
  }
  EMU_CUB_INLINE T Sum(T input, Line line = Line()) { return Reduce(input, cub::Sum(), LOGICAL_WARP_THREADS, line); }
  EMU_CUB_INLINE T Sum(T input, int valid_items, Line line = Line()) {
    return Reduce(input, cub::Sum(), valid_items, line);
  }
};

template <class T, int BLOCK_DIM_X, BlockReduceAlgorithm ALGORITHM = BLOCK_REDUCE_WARP_REDUCTIONS,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockReduce : emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z> {
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kThreads;
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kWarps;
  using Line = emu_detail::Line;     // the kernel's line, for emu's reports

 public:
  struct TempStorage {
    emu_detail::Storage<T, kWarps> warp_totals;
  };
  explicit BlockReduce(TempStorage& storage) : s_(storage) {}

  template <class Op>
  EMU_CUB_INLINE T Reduce(T input, Op op, Line line = Line()) {
    return reduce(input, op, kThreads, line);
  }
  template <int N, class Op>
  EMU_CUB_INLINE T Reduce(T (&inputs)[N], Op op, Line line = Line()) {
    T v = inputs[0];
    for (int i = 1; i < N; ++i) v = op(v, inputs[i]);
    return reduce(v, op, kThreads, line);
  }
  template <class Op>
  EMU_CUB_INLINE T Reduce(T input, Op op, int num_valid, Line line = Line()) {
    return reduce(input, op, num_valid, line);
  }
  EMU_CUB_INLINE T Sum(T input, Line line = Line()) { return reduce(input, cub::Sum(), kThreads, line); }
  template <int N>
  EMU_CUB_INLINE T Sum(T (&inputs)[N], Line line = Line()) { return Reduce(inputs, cub::Sum(), line); }
  EMU_CUB_INLINE T Sum(T input, int num_valid, Line line = Line()) {
    return reduce(input, cub::Sum(), num_valid, line);
  }

 private:
  template <class Op>
  EMU_CUB_INLINE T reduce(T v, Op op, int num_valid, Line line) {
    emu_detail::check_block(kThreads, "cub::BlockReduce", line.n);
    int warp = ::emu::g_cur->warp;
    int valid = num_valid - warp * 32;
    valid = valid < 0 ? 0 : (valid > 32 ? 32 : valid);
    v = emu_detail::warp_reduce(v, op, 32, valid, emu_detail::warp_lanes(kThreads), line.n);
    T* totals = s_.warp_totals.items();
    if (::emu::g_cur->lane == 0 && valid > 0) totals[warp] = v;
    ::emu::syncthreads(line.n);
    if (emu_detail::linear_tid() == 0) {
      int warps = (num_valid + 31) / 32;
      for (int w = 1; w < warps && w < kWarps; ++w) v = op(v, totals[w]);
    }
    return v;
  }
  TempStorage& s_;
};

template <class T, int BLOCK_DIM_X, BlockScanAlgorithm ALGORITHM = BLOCK_SCAN_RAKING, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockScan : emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z> {
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kThreads;
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kWarps;
  using Line = emu_detail::Line;     // the kernel's line, for emu's reports

 public:
  struct TempStorage {
    emu_detail::Storage<T, kWarps + 1> items;       // the warps' totals, then the callback's prefix
  };
  explicit BlockScan(TempStorage& storage) : s_(storage) {}

  // ---- one item per thread
  EMU_CUB_INLINE void ExclusiveSum(T input, T& output, Line line = Line()) {
    T aggregate;
    ExclusiveScan(input, output, T(), cub::Sum(), aggregate, line);
  }
  EMU_CUB_INLINE void ExclusiveSum(T input, T& output, T& block_aggregate, Line line = Line()) {
    ExclusiveScan(input, output, T(), cub::Sum(), block_aggregate, line);
  }
  template <class Callback, class = decltype(std::declval<Callback&>()(std::declval<T>()))>
  EMU_CUB_INLINE void ExclusiveSum(T input, T& output, Callback& prefix_op, Line line = Line()) {
    ExclusiveScan(input, output, cub::Sum(), prefix_op, line);
  }
  EMU_CUB_INLINE void InclusiveSum(T input, T& output, Line line = Line()) {
    T aggregate;
    InclusiveScan(input, output, cub::Sum(), aggregate, line);
  }
  EMU_CUB_INLINE void InclusiveSum(T input, T& output, T& block_aggregate, Line line = Line()) {
    InclusiveScan(input, output, cub::Sum(), block_aggregate, line);
  }
  template <class Callback, class = decltype(std::declval<Callback&>()(std::declval<T>()))>
  EMU_CUB_INLINE void InclusiveSum(T input, T& output, Callback& prefix_op, Line line = Line()) {
    InclusiveScan(input, output, cub::Sum(), prefix_op, line);
  }
  // Without an initial value thread 0's output is undefined in CUB; here it is T().
  template <class Op>
  EMU_CUB_INLINE void ExclusiveScan(T input, T& output, Op op, Line line = Line()) {
    T inclusive, exclusive, aggregate;
    scan(input, op, inclusive, exclusive, aggregate, line);
    output = exclusive;
  }
  template <class Op>
  EMU_CUB_INLINE void ExclusiveScan(T input, T& output, T initial, Op op, Line line = Line()) {
    T aggregate;
    ExclusiveScan(input, output, initial, op, aggregate, line);
  }
  template <class Op>
  EMU_CUB_INLINE void ExclusiveScan(T input, T& output, T initial, Op op, T& block_aggregate, Line line = Line()) {
    T inclusive, exclusive;
    scan(input, op, inclusive, exclusive, block_aggregate, line);
    output = emu_detail::linear_tid() == 0 ? initial : op(initial, exclusive);
  }
  template <class Op, class Callback, class = decltype(std::declval<Callback&>()(std::declval<T>()))>
  EMU_CUB_INLINE void ExclusiveScan(T input, T& output, Op op, Callback& prefix_op, Line line = Line()) {
    T inclusive, exclusive, aggregate;
    scan(input, op, inclusive, exclusive, aggregate, line);
    T prefix = block_prefix(prefix_op, aggregate, line);
    output = emu_detail::linear_tid() == 0 ? prefix : op(prefix, exclusive);
  }
  template <class Op>
  EMU_CUB_INLINE void InclusiveScan(T input, T& output, Op op, Line line = Line()) {
    T aggregate;
    InclusiveScan(input, output, op, aggregate, line);
  }
  template <class Op>
  EMU_CUB_INLINE void InclusiveScan(T input, T& output, Op op, T& block_aggregate, Line line = Line()) {
    T exclusive;
    scan(input, op, output, exclusive, block_aggregate, line);
  }
  template <class Op, class Callback, class = decltype(std::declval<Callback&>()(std::declval<T>()))>
  EMU_CUB_INLINE void InclusiveScan(T input, T& output, Op op, Callback& prefix_op, Line line = Line()) {
    T inclusive, exclusive, aggregate;
    scan(input, op, inclusive, exclusive, aggregate, line);
    output = op(block_prefix(prefix_op, aggregate, line), inclusive);
  }

  // ---- N items per thread (a blocked arrangement: thread t holds items t*N .. t*N+N-1)
  template <int N>
  EMU_CUB_INLINE void ExclusiveSum(T (&input)[N], T (&output)[N], Line line = Line()) {
    T aggregate;
    ExclusiveScan(input, output, T(), cub::Sum(), aggregate, line);
  }
  template <int N>
  EMU_CUB_INLINE void ExclusiveSum(T (&input)[N], T (&output)[N], T& block_aggregate, Line line = Line()) {
    ExclusiveScan(input, output, T(), cub::Sum(), block_aggregate, line);
  }
  template <int N>
  EMU_CUB_INLINE void InclusiveSum(T (&input)[N], T (&output)[N], Line line = Line()) {
    T aggregate;
    InclusiveScan(input, output, cub::Sum(), aggregate, line);
  }
  template <int N>
  EMU_CUB_INLINE void InclusiveSum(T (&input)[N], T (&output)[N], T& block_aggregate, Line line = Line()) {
    InclusiveScan(input, output, cub::Sum(), block_aggregate, line);
  }
  template <int N, class Op>
  EMU_CUB_INLINE void ExclusiveScan(T (&input)[N], T (&output)[N], T initial, Op op, Line line = Line()) {
    T aggregate;
    ExclusiveScan(input, output, initial, op, aggregate, line);
  }
  template <int N, class Op>
  EMU_CUB_INLINE void ExclusiveScan(T (&input)[N], T (&output)[N], T initial, Op op, T& block_aggregate,
                     Line line = Line()) {
    T total = input[0];
    for (int i = 1; i < N; ++i) total = op(total, input[i]);
    T before;
    ExclusiveScan(total, before, initial, op, block_aggregate, line);
    T run = before;
    for (int i = 0; i < N; ++i) {
      T item = input[i];           // input and output may be the same array
      output[i] = run;
      run = op(run, item);
    }
  }
  template <int N, class Op>
  EMU_CUB_INLINE void InclusiveScan(T (&input)[N], T (&output)[N], Op op, Line line = Line()) {
    T aggregate;
    InclusiveScan(input, output, op, aggregate, line);
  }
  template <int N, class Op>
  EMU_CUB_INLINE void InclusiveScan(T (&input)[N], T (&output)[N], Op op, T& block_aggregate, Line line = Line()) {
    T total = input[0];
    for (int i = 1; i < N; ++i) total = op(total, input[i]);
    T inclusive, exclusive;
    scan(total, op, inclusive, exclusive, block_aggregate, line);
    bool first = emu_detail::linear_tid() == 0;
    T run = exclusive;
    for (int i = 0; i < N; ++i) {
      run = (first && i == 0) ? input[0] : op(run, input[i]);
      output[i] = run;
    }
  }

 private:
  // Each thread's inclusive and exclusive scan over the block (thread 0's exclusive is T()) and the block's total.
  template <class Op>
  EMU_CUB_INLINE void scan(T v, Op op, T& inclusive, T& exclusive, T& aggregate, Line line) {
    emu_detail::check_block(kThreads, "cub::BlockScan", line.n);
    int warp = ::emu::g_cur->warp, lane = ::emu::g_cur->lane;
    unsigned lanes = emu_detail::warp_lanes(kThreads);
    T in_warp = emu_detail::warp_inclusive_scan(v, op, lanes, line.n);
    T* totals = s_.items.items();
    int last = 31 - __builtin_clz(lanes);
    if (lane == last) totals[warp] = in_warp;
    ::emu::syncthreads(line.n);
    T before = T();
    aggregate = totals[0];
    for (int w = 1; w < kWarps; ++w) {
      if (w == warp) before = aggregate;
      aggregate = op(aggregate, totals[w]);
    }
    inclusive = warp == 0 ? in_warp : op(before, in_warp);
    T up = emu_detail::shuffle(::emu::W_SHFL_UP, lanes, inclusive, 1, 32, line.n);
    exclusive = lane > 0 ? up : before;
  }
  // The prefix the callback returns in thread 0 (the first warp calls it with the block's total), to every thread.
  template <class Callback>
  EMU_CUB_INLINE T block_prefix(Callback& prefix_op, const T& aggregate, Line line) {
    T* prefix = s_.items.items() + kWarps;
    if (::emu::g_cur->warp == 0) {
      T p = prefix_op(aggregate);
      if (::emu::g_cur->lane == 0) *prefix = p;
    }
    ::emu::syncthreads(line.n);
    return *prefix;
  }
  TempStorage& s_;
};

// ---- direct loads and stores: item i of a thread is element offset(i) of the tile, counted from the iterator
namespace emu_detail {
// Thread t's item i: blocked t*N + i; striped i*threads + t; warp-striped, within its warp's N*32 items, i*32 + lane.
EMU_CUB_INLINE int blocked_at(int tid, int n, int i) { return tid * n + i; }
EMU_CUB_INLINE int striped_at(int tid, int threads, int i) { return i * threads + tid; }
EMU_CUB_INLINE int warp_striped_at(int tid, int n, int i) { return (tid / 32) * 32 * n + i * 32 + tid % 32; }

template <class T, int N, class It, class At>
EMU_CUB_INLINE void load_items(It itr, T (&items)[N], At at, int valid, const T* oob) {
  for (int i = 0; i < N; ++i) {
    int k = at(i);
    if (k < valid) items[i] = itr[k];
    else if (oob) items[i] = *oob;
  }
}
template <class T, int N, class It, class At>
EMU_CUB_INLINE void store_items(It itr, T (&items)[N], At at, int valid) {
  for (int i = 0; i < N; ++i) {
    int k = at(i);
    if (k < valid) itr[k] = items[i];
  }
}
constexpr int kAll = 0x7fffffff;      // no guard
}  // namespace emu_detail

template <class T, int N, class It>
EMU_CUB_INLINE void LoadDirectBlocked(int tid, It itr, T (&items)[N]) {
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::blocked_at(tid, N, i); }, emu_detail::kAll,
                         (const T*)nullptr);
}
template <class T, int N, class It>
EMU_CUB_INLINE void LoadDirectBlocked(int tid, It itr, T (&items)[N], int valid) {
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::blocked_at(tid, N, i); }, valid,
                         (const T*)nullptr);
}
template <class T, class D, int N, class It>
EMU_CUB_INLINE void LoadDirectBlocked(int tid, It itr, T (&items)[N], int valid, D oob) {
  T dflt = T(oob);
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::blocked_at(tid, N, i); }, valid, &dflt);
}
template <int THREADS, class T, int N, class It>
EMU_CUB_INLINE void LoadDirectStriped(int tid, It itr, T (&items)[N]) {
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::striped_at(tid, THREADS, i); },
                         emu_detail::kAll, (const T*)nullptr);
}
template <int THREADS, class T, int N, class It>
EMU_CUB_INLINE void LoadDirectStriped(int tid, It itr, T (&items)[N], int valid) {
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::striped_at(tid, THREADS, i); }, valid,
                         (const T*)nullptr);
}
template <int THREADS, class T, class D, int N, class It>
EMU_CUB_INLINE void LoadDirectStriped(int tid, It itr, T (&items)[N], int valid, D oob) {
  T dflt = T(oob);
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::striped_at(tid, THREADS, i); }, valid, &dflt);
}
template <class T, int N, class It>
EMU_CUB_INLINE void LoadDirectWarpStriped(int tid, It itr, T (&items)[N]) {
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::warp_striped_at(tid, N, i); },
                         emu_detail::kAll, (const T*)nullptr);
}
template <class T, int N, class It>
EMU_CUB_INLINE void LoadDirectWarpStriped(int tid, It itr, T (&items)[N], int valid) {
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::warp_striped_at(tid, N, i); }, valid,
                         (const T*)nullptr);
}
template <class T, class D, int N, class It>
EMU_CUB_INLINE void LoadDirectWarpStriped(int tid, It itr, T (&items)[N], int valid, D oob) {
  T dflt = T(oob);
  emu_detail::load_items(itr, items, [&](int i) { return emu_detail::warp_striped_at(tid, N, i); }, valid, &dflt);
}
template <class T, int N, class It>
EMU_CUB_INLINE void StoreDirectBlocked(int tid, It itr, T (&items)[N], int valid = emu_detail::kAll) {
  emu_detail::store_items(itr, items, [&](int i) { return emu_detail::blocked_at(tid, N, i); }, valid);
}
template <int THREADS, class T, int N, class It>
EMU_CUB_INLINE void StoreDirectStriped(int tid, It itr, T (&items)[N], int valid = emu_detail::kAll) {
  emu_detail::store_items(itr, items, [&](int i) { return emu_detail::striped_at(tid, THREADS, i); }, valid);
}
template <class T, int N, class It>
EMU_CUB_INLINE void StoreDirectWarpStriped(int tid, It itr, T (&items)[N], int valid = emu_detail::kAll) {
  emu_detail::store_items(itr, items, [&](int i) { return emu_detail::warp_striped_at(tid, N, i); }, valid);
}

namespace emu_detail {
// Where thread t's items lie in global memory (blocked, striped or warp-striped), and how the tile turns them into
// the blocked arrangement and back (no exchange; through the block's tile with a __syncthreads(), CUB's
// BlockExchange of the TRANSPOSE algorithms; through the warp's part of it with a __syncwarp(), its WARP_TRANSPOSE).
enum TileLayout { kBlockedLayout, kStripedLayout, kWarpStripedLayout };
enum TileExchange { kNoExchange, kBlockExchange, kWarpExchange };

// What BlockLoad and BlockStore share: the block's shape, the storage (none where nothing is exchanged), the items'
// places in global memory and the exchange. Nothing orders a later use of the tile after an exchange's loads: that is
// the caller's barrier, as CUB's documentation says.
template <class T, int X, int Y, int Z, int N, TileLayout LAYOUT, TileExchange EXCHANGE>
class TileMover : protected BlockShape<X, Y, Z> {
 protected:
  using BlockShape<X, Y, Z>::kThreads;
  static_assert(EXCHANGE != kWarpExchange || kThreads % 32 == 0,
                "qconform-emu: cub::BlockLoad's and BlockStore's warp transposes need a block of whole warps, as CUB's do");

 public:
  struct TempStorage {
    typename std::conditional<EXCHANGE == kNoExchange, unsigned char, Storage<T, kThreads * N>>::type tile;
  };

 protected:
  explicit TileMover(TempStorage& storage) : s_(storage) {}

  // Where item i of thread `tid` lies in the tile of global memory.
  static EMU_CUB_INLINE int at(int tid, int i) {
    return LAYOUT == kStripedLayout ? striped_at(tid, kThreads, i)
           : LAYOUT == kWarpStripedLayout ? warp_striped_at(tid, N, i) : blocked_at(tid, N, i);
  }
  // The items as loaded (to_blocked) to the blocked arrangement, or the blocked items to the arrangement to store.
  EMU_CUB_INLINE void exchange(T (&items)[N], bool to_blocked, int tid, int line) {
    if (EXCHANGE == kNoExchange) return;
    T* tile = reinterpret_cast<T*>(&s_.tile);
    int base = EXCHANGE == kWarpExchange ? (tid / 32) * 32 * N : 0;
    auto loaded = [&](int i) { return EXCHANGE == kWarpExchange ? base + i * 32 + tid % 32 : striped_at(tid, kThreads, i); };
    auto blocked = [&](int i) { return EXCHANGE == kWarpExchange ? base + (tid % 32) * N + i : blocked_at(tid, N, i); };
    for (int i = 0; i < N; ++i) tile[to_blocked ? loaded(i) : blocked(i)] = items[i];
    if (EXCHANGE == kBlockExchange) ::emu::syncthreads(line);
    else ::emu::syncwarp(0xffffffffu, line);
    for (int i = 0; i < N; ++i) items[i] = tile[to_blocked ? blocked(i) : loaded(i)];
  }
  TempStorage& s_;
};

constexpr TileLayout layout_of(bool striped, bool warp) {
  return warp ? kWarpStripedLayout : striped ? kStripedLayout : kBlockedLayout;
}
constexpr TileExchange exchange_of(bool transpose, bool warp) {
  return warp ? kWarpExchange : transpose ? kBlockExchange : kNoExchange;
}
}  // namespace emu_detail

template <class T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, BlockLoadAlgorithm ALGORITHM = BLOCK_LOAD_DIRECT,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockLoad : public emu_detail::TileMover<
    T, BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z, ITEMS_PER_THREAD,
    emu_detail::layout_of(ALGORITHM == BLOCK_LOAD_STRIPED || ALGORITHM == BLOCK_LOAD_TRANSPOSE,
                          ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE || ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED),
    emu_detail::exchange_of(ALGORITHM == BLOCK_LOAD_TRANSPOSE,
                            ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE || ALGORITHM == BLOCK_LOAD_WARP_TRANSPOSE_TIMESLICED)> {
  using Mover = typename BlockLoad::TileMover;
  using Line = emu_detail::Line;     // the kernel's line, for emu's reports
  static constexpr int N = ITEMS_PER_THREAD;

 public:
  using typename Mover::TempStorage;
  explicit BlockLoad(TempStorage& storage) : Mover(storage) {}

  template <class It>
  EMU_CUB_INLINE void Load(It itr, T (&items)[N], Line line = Line()) { load(itr, items, emu_detail::kAll, nullptr, line); }
  template <class It>
  EMU_CUB_INLINE void Load(It itr, T (&items)[N], int valid_items, Line line = Line()) {
    load(itr, items, valid_items, nullptr, line);
  }
  template <class It, class D>
  EMU_CUB_INLINE void Load(It itr, T (&items)[N], int valid_items, D oob_default, Line line = Line()) {
    T dflt = T(oob_default);
    load(itr, items, valid_items, &dflt, line);
  }

 private:
  template <class It>
  EMU_CUB_INLINE void load(It itr, T (&items)[N], int valid, const T* oob, Line line) {
    emu_detail::check_block(Mover::kThreads, "cub::BlockLoad", line.n);
    int tid = int(emu_detail::linear_tid());
    emu_detail::load_items(itr, items, [&](int i) { return Mover::at(tid, i); }, valid, oob);
    Mover::exchange(items, true, tid, line.n);
  }
};

template <class T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, BlockStoreAlgorithm ALGORITHM = BLOCK_STORE_DIRECT,
          int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockStore : public emu_detail::TileMover<
    T, BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z, ITEMS_PER_THREAD,
    emu_detail::layout_of(ALGORITHM == BLOCK_STORE_STRIPED || ALGORITHM == BLOCK_STORE_TRANSPOSE,
                          ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE || ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED),
    emu_detail::exchange_of(ALGORITHM == BLOCK_STORE_TRANSPOSE, ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE ||
                                                                ALGORITHM == BLOCK_STORE_WARP_TRANSPOSE_TIMESLICED)> {
  using Mover = typename BlockStore::TileMover;
  using Line = emu_detail::Line;     // the kernel's line, for emu's reports
  static constexpr int N = ITEMS_PER_THREAD;

 public:
  using typename Mover::TempStorage;
  explicit BlockStore(TempStorage& storage) : Mover(storage) {}

  template <class It>
  EMU_CUB_INLINE void Store(It itr, T (&items)[N], Line line = Line()) { store(itr, items, emu_detail::kAll, line); }
  template <class It>
  EMU_CUB_INLINE void Store(It itr, T (&items)[N], int valid_items, Line line = Line()) {
    store(itr, items, valid_items, line);
  }

 private:
  template <class It>
  EMU_CUB_INLINE void store(It itr, T (&input)[N], int valid, Line line) {
    emu_detail::check_block(Mover::kThreads, "cub::BlockStore", line.n);
    int tid = int(emu_detail::linear_tid());
    T items[N];
    for (int i = 0; i < N; ++i) items[i] = input[i];
    Mover::exchange(items, false, tid, line.n);
    emu_detail::store_items(itr, items, [&](int i) { return Mover::at(tid, i); }, valid);
  }
};

struct NullType {};

namespace emu_detail {
// A key's bits in the order CUB's radix sort gives them: unsigned as they are, signed with the sign bit flipped,
// floating point (float, double, half, bfloat16) with every bit flipped where negative and the sign bit where not.
template <class K>
EMU_CUB_INLINE uint64_t radix_order(const K& key) {
  static_assert(sizeof(K) <= 8 && std::is_trivially_copyable<K>::value,
                "qconform-emu: cub::BlockRadixSort here sorts keys of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &key, sizeof(K));
  constexpr uint64_t sign = uint64_t(1) << (sizeof(K) * 8 - 1);
  constexpr uint64_t all = sizeof(K) == 8 ? ~uint64_t(0) : (uint64_t(1) << (sizeof(K) * 8)) - 1;
  if (std::is_integral<K>::value) return std::is_signed<K>::value ? bits ^ sign : bits;
  return (bits & sign) ? (~bits & all) : (bits | sign);
}
}  // namespace emu_detail

template <class KeyT, int BLOCK_DIM_X, int ITEMS_PER_THREAD, class ValueT = NullType, int RADIX_BITS = 4,
          bool MEMOIZE_OUTER_SCAN = true, BlockScanAlgorithm INNER_SCAN_ALGORITHM = BLOCK_SCAN_WARP_SCANS,
          cudaSharedMemConfig SMEM_CONFIG = cudaSharedMemBankSizeFourByte, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1,
          int LEGACY_PTX_ARCH = 0>
class BlockRadixSort : emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z> {
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kThreads;
  using Line = emu_detail::Line;
  static constexpr int N = ITEMS_PER_THREAD;
  static constexpr int kItems = kThreads * N;
  static constexpr bool kValues = !std::is_same<ValueT, NullType>::value;
  using V = typename std::conditional<kValues, ValueT, KeyT>::type;
  static constexpr size_t kBytes = sizeof(KeyT) > sizeof(V) ? sizeof(KeyT) : sizeof(V);
  static constexpr size_t kAlign = alignof(KeyT) > alignof(V) ? alignof(KeyT) : alignof(V);

 public:
  struct TempStorage {
    alignas(kAlign) unsigned char exchange[kBytes * kItems];     // one exchange at a time: keys, then values
  };
  explicit BlockRadixSort(TempStorage& storage) : s_(storage) {}

  EMU_CUB_INLINE void Sort(KeyT (&keys)[N], int begin_bit = 0, int end_bit = int(sizeof(KeyT) * 8),
                           Line line = Line()) {
    sort(keys, nullptr, begin_bit, end_bit, false, false, line.n);
  }
  EMU_CUB_INLINE void Sort(KeyT (&keys)[N], V (&values)[N], int begin_bit = 0,
                           int end_bit = int(sizeof(KeyT) * 8), Line line = Line()) {
    sort(keys, values, begin_bit, end_bit, false, false, line.n);
  }
  EMU_CUB_INLINE void SortDescending(KeyT (&keys)[N], int begin_bit = 0, int end_bit = int(sizeof(KeyT) * 8),
                                     Line line = Line()) {
    sort(keys, nullptr, begin_bit, end_bit, true, false, line.n);
  }
  EMU_CUB_INLINE void SortDescending(KeyT (&keys)[N], V (&values)[N], int begin_bit = 0,
                                     int end_bit = int(sizeof(KeyT) * 8), Line line = Line()) {
    sort(keys, values, begin_bit, end_bit, true, false, line.n);
  }
  EMU_CUB_INLINE void SortBlockedToStriped(KeyT (&keys)[N], int begin_bit = 0,
                                           int end_bit = int(sizeof(KeyT) * 8), Line line = Line()) {
    sort(keys, nullptr, begin_bit, end_bit, false, true, line.n);
  }
  EMU_CUB_INLINE void SortBlockedToStriped(KeyT (&keys)[N], V (&values)[N], int begin_bit = 0,
                                           int end_bit = int(sizeof(KeyT) * 8), Line line = Line()) {
    sort(keys, values, begin_bit, end_bit, false, true, line.n);
  }
  EMU_CUB_INLINE void SortDescendingBlockedToStriped(KeyT (&keys)[N], int begin_bit = 0,
                                                     int end_bit = int(sizeof(KeyT) * 8), Line line = Line()) {
    sort(keys, nullptr, begin_bit, end_bit, true, true, line.n);
  }
  EMU_CUB_INLINE void SortDescendingBlockedToStriped(KeyT (&keys)[N], V (&values)[N], int begin_bit = 0,
                                                     int end_bit = int(sizeof(KeyT) * 8), Line line = Line()) {
    sort(keys, values, begin_bit, end_bit, true, true, line.n);
  }

 private:
  template <class T>
  EMU_CUB_INLINE T* slots() { return reinterpret_cast<T*>(s_.exchange); }

  // Thread 0's room for every item of the block (malloc'd: the C++ library's containers call host code that device
  // code cannot, and a block's items may not fit a fiber's stack).
  template <class T>
  struct Room {
    T* at = nullptr;
    explicit Room(bool mine) : at(mine ? static_cast<T*>(std::malloc(sizeof(T) * kItems)) : nullptr) {
      if (mine && !at) ::emu::library_fault("cub::BlockRadixSort", "could not allocate the block's items", 0);
    }
    ~Room() { std::free(at); }
  };

  // The items of every thread to thread 0 through the storage, blocked (thread t's are items t*N..t*N+N-1). Thread t
  // stores them in thread t+1's slots: a sort's first stores then meet what another thread read last of the
  // storage, as CUB's first stores (its ranking's digit counters) do, so a reuse without a barrier races here too.
  template <class T>
  EMU_CUB_INLINE void gather(const T* items, T* all, int tid, int line) {
    int slot = (tid + 1) % kThreads;
    for (int i = 0; i < N; ++i) slots<T>()[emu_detail::blocked_at(slot, N, i)] = items[i];
    ::emu::syncthreads(line);
    if (tid == 0)
      for (int t = 0; t < kThreads; ++t)
        for (int i = 0; i < N; ++i)
          all[emu_detail::blocked_at(t, N, i)] = slots<T>()[emu_detail::blocked_at((t + 1) % kThreads, N, i)];
    ::emu::syncthreads(line);
  }
  // Thread 0's items in sorted order back to every thread, blocked or striped.
  template <class T>
  EMU_CUB_INLINE void scatter(T* items, const T* all, const int* order, bool striped, int tid, int line) {
    if (tid == 0)
      for (int k = 0; k < kItems; ++k) slots<T>()[k] = all[order[k]];
    ::emu::syncthreads(line);
    for (int i = 0; i < N; ++i)
      items[i] = slots<T>()[striped ? emu_detail::striped_at(tid, kThreads, i) : emu_detail::blocked_at(tid, N, i)];
  }

  EMU_CUB_INLINE void sort(KeyT (&keys)[N], V* values, int begin_bit, int end_bit, bool descending, bool striped,
                           int line) {
    emu_detail::check_block(kThreads, "cub::BlockRadixSort", line);
    int tid = int(emu_detail::linear_tid());
    Room<KeyT> all_keys(tid == 0);
    Room<V> all_values(tid == 0 && values);
    Room<uint64_t> digit(tid == 0);
    Room<int> order(tid == 0);
    gather(keys, all_keys.at, tid, line);
    if (values) gather(values, all_values.at, tid, line);
    if (tid == 0) {
      int width = end_bit - begin_bit;
      uint64_t mask = width >= 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
      for (int k = 0; k < kItems; ++k) {
        digit.at[k] = (emu_detail::radix_order(all_keys.at[k]) >> begin_bit) & mask;
        order.at[k] = k;
      }
      const uint64_t* d = digit.at;      // stable: equal digits keep the order the items came in
      std::sort(order.at, order.at + kItems, [d, descending](int a, int b) {
        return d[a] != d[b] ? (descending ? d[a] > d[b] : d[a] < d[b]) : a < b;
      });
    }
    scatter(keys, all_keys.at, order.at, striped, tid, line);
    if (values) {
      ::emu::syncthreads(line);              // every thread has read its keys before the values take the storage
      scatter(values, all_values.at, order.at, striped, tid, line);
    }
  }
  TempStorage& s_;
};

template <class T, int BLOCK_DIM_X, int BLOCK_DIM_Y = 1, int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockAdjacentDifference : emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z> {
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kThreads;
  using Line = emu_detail::Line;

 public:
  struct TempStorage {
    emu_detail::Storage<T, kThreads> first;     // each thread's first item, for the thread before it
    emu_detail::Storage<T, kThreads> last;      // each thread's last item, for the thread after it
  };
  explicit BlockAdjacentDifference(TempStorage& storage) : s_(storage) {}

  // output[i] = op(input[i], the item before it); thread 0's first item is copied (or uses tile_predecessor_item)
  template <int N, class Out, class Op>
  EMU_CUB_INLINE void SubtractLeft(T (&input)[N], Out (&output)[N], Op op, Line line = Line()) {
    left(input, output, [&](const T& item, const T& before) { return Out(op(item, before)); },
         [&](const T& item) { return Out(item); }, line.n);
  }
  template <int N, class Out, class Op>
  EMU_CUB_INLINE void SubtractLeft(T (&input)[N], Out (&output)[N], Op op, T tile_predecessor_item,
                                   Line line = Line()) {
    left(input, output, [&](const T& item, const T& before) { return Out(op(item, before)); },
         [&](const T& item) { return Out(op(item, tile_predecessor_item)); }, line.n);
  }
  // output[i] = op(input[i], the item after it); the last thread's last item is copied (or uses tile_successor_item)
  template <int N, class Out, class Op>
  EMU_CUB_INLINE void SubtractRight(T (&input)[N], Out (&output)[N], Op op, Line line = Line()) {
    right(input, output, [&](const T& item, const T& after) { return Out(op(item, after)); },
          [&](const T& item) { return Out(item); }, line.n);
  }
  template <int N, class Out, class Op>
  EMU_CUB_INLINE void SubtractRight(T (&input)[N], Out (&output)[N], Op op, T tile_successor_item,
                                    Line line = Line()) {
    right(input, output, [&](const T& item, const T& after) { return Out(op(item, after)); },
          [&](const T& item) { return Out(op(item, tile_successor_item)); }, line.n);
  }

 private:
  // The thread before's last item through the storage (a barrier between its store and the read), then each item
  // with the one before it; `edge` for the block's first item.
  template <int N, class Out, class With, class Edge>
  EMU_CUB_INLINE void left(T (&input)[N], Out (&output)[N], With with, Edge edge, int line) {
    emu_detail::check_block(kThreads, "cub::BlockAdjacentDifference", line);
    int tid = int(emu_detail::linear_tid());
    s_.last.items()[tid] = input[N - 1];
    ::emu::syncthreads(line);
    T before = tid > 0 ? s_.last.items()[tid - 1] : input[0];
    T items[N];
    for (int i = 0; i < N; ++i) items[i] = input[i];       // output may be input itself
    for (int i = N - 1; i > 0; --i) output[i] = with(items[i], items[i - 1]);
    output[0] = tid > 0 ? with(items[0], before) : edge(items[0]);
  }
  template <int N, class Out, class With, class Edge>
  EMU_CUB_INLINE void right(T (&input)[N], Out (&output)[N], With with, Edge edge, int line) {
    emu_detail::check_block(kThreads, "cub::BlockAdjacentDifference", line);
    int tid = int(emu_detail::linear_tid());
    s_.first.items()[tid] = input[0];
    ::emu::syncthreads(line);
    T after = tid < kThreads - 1 ? s_.first.items()[tid + 1] : input[N - 1];
    T items[N];
    for (int i = 0; i < N; ++i) items[i] = input[i];
    for (int i = 0; i < N - 1; ++i) output[i] = with(items[i], items[i + 1]);
    output[N - 1] = tid < kThreads - 1 ? with(items[N - 1], after) : edge(items[N - 1]);
  }
  TempStorage& s_;
};

template <class T, int BLOCK_DIM_X, int ITEMS_PER_THREAD, bool WARP_TIME_SLICING = false, int BLOCK_DIM_Y = 1,
          int BLOCK_DIM_Z = 1, int LEGACY_PTX_ARCH = 0>
class BlockExchange : emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z> {
  using emu_detail::BlockShape<BLOCK_DIM_X, BLOCK_DIM_Y, BLOCK_DIM_Z>::kThreads;
  using Line = emu_detail::Line;
  static constexpr int N = ITEMS_PER_THREAD;

 public:
  struct TempStorage {
    emu_detail::Storage<T, kThreads * N> tile;
  };
  explicit BlockExchange(TempStorage& storage) : s_(storage) {}

  // Each method rearranges the block's items, in place or into `output`: blocked (thread t holds ranks t*N..t*N+N-1),
  // striped (ranks t, t+threads, ...), warp-striped (within each warp's N*32 ranks, lane l holds l, l+32, ...).
  template <class Out>
  EMU_CUB_INLINE void StripedToBlocked(T (&input)[N], Out (&output)[N], Line line = Line()) {
    move(input, output, kStriped, kBlocked, line.n);
  }
  EMU_CUB_INLINE void StripedToBlocked(T (&items)[N], Line line = Line()) {
    move(items, items, kStriped, kBlocked, line.n);
  }
  template <class Out>
  EMU_CUB_INLINE void BlockedToStriped(T (&input)[N], Out (&output)[N], Line line = Line()) {
    move(input, output, kBlocked, kStriped, line.n);
  }
  EMU_CUB_INLINE void BlockedToStriped(T (&items)[N], Line line = Line()) {
    move(items, items, kBlocked, kStriped, line.n);
  }
  template <class Out>
  EMU_CUB_INLINE void WarpStripedToBlocked(T (&input)[N], Out (&output)[N], Line line = Line()) {
    move(input, output, kWarpStriped, kWarpBlocked, line.n);
  }
  EMU_CUB_INLINE void WarpStripedToBlocked(T (&items)[N], Line line = Line()) {
    move(items, items, kWarpStriped, kWarpBlocked, line.n);
  }
  template <class Out>
  EMU_CUB_INLINE void BlockedToWarpStriped(T (&input)[N], Out (&output)[N], Line line = Line()) {
    move(input, output, kWarpBlocked, kWarpStriped, line.n);
  }
  EMU_CUB_INLINE void BlockedToWarpStriped(T (&items)[N], Line line = Line()) {
    move(items, items, kWarpBlocked, kWarpStriped, line.n);
  }

 private:
  enum Arrangement { kBlocked, kStriped, kWarpBlocked, kWarpStriped };
  static EMU_CUB_INLINE int rank(Arrangement a, int tid, int i) {
    int base = (tid / 32) * 32 * N, lane = tid % 32;
    return a == kBlocked ? emu_detail::blocked_at(tid, N, i) : a == kStriped ? emu_detail::striped_at(tid, kThreads, i)
           : a == kWarpBlocked ? base + lane * N + i : base + i * 32 + lane;
  }
  // through the tile: stores at the items' ranks, a barrier (the warp's own part: a __syncwarp), loads at the new ranks
  template <class Out>
  EMU_CUB_INLINE void move(T (&input)[N], Out (&output)[N], Arrangement from, Arrangement to, int line) {
    emu_detail::check_block(kThreads, "cub::BlockExchange", line);
    int tid = int(emu_detail::linear_tid());
    T* tile = s_.tile.items();
    for (int i = 0; i < N; ++i) tile[rank(from, tid, i)] = input[i];
    if (from == kWarpBlocked || from == kWarpStriped) ::emu::syncwarp(0xffffffffu, line);
    else ::emu::syncthreads(line);
    for (int i = 0; i < N; ++i) output[i] = Out(tile[rank(to, tid, i)]);
  }
  TempStorage& s_;
};

}  // namespace cub
