// Resolves `#include <cooperative_groups.h>` in kernel source: cooperative groups on the emu runtime. A
// thread_block is the CUDA block (sync = __syncthreads); a thread_block_tile<N> is a group of N consecutive
// threads inside one warp: its syncs, shuffles and votes are collectives of the tile's live lanes alone, so the
// tiles of a warp go their own ways and a tile's sync orders only its lanes. The grid group's sync is a grid-wide
// barrier. A
// coalesced group is the set of lanes that converge at coalesced_threads() (emu's convergence, emu_runtime.cpp:
// converged) or a partition of it; its collectives name exactly its lanes.
#pragma once
#include "emu_device.hpp"

namespace cooperative_groups {

class thread_block {
 public:
  void sync(int line = __builtin_LINE()) const { ::emu::syncthreads(line); }
  unsigned thread_rank() const {
    return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  }
  unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
  unsigned num_threads() const { return size(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};

inline thread_block this_thread_block() { return thread_block(); }
inline void sync(const thread_block& g, int line = __builtin_LINE()) { g.sync(line); }

// The whole grid (a cooperative launch on a GPU): sync is a grid-wide barrier (emu_runtime.cpp, grid_sync).
class grid_group {
 public:
  void sync(int line = __builtin_LINE()) const { ::emu::grid_sync(line); }
  bool is_valid() const { return true; }
  unsigned long long num_blocks() const { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
  unsigned long long block_rank() const {
    return ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  }
  unsigned long long num_threads() const { return num_blocks() * blockDim.x * blockDim.y * blockDim.z; }
  unsigned long long size() const { return num_threads(); }
  unsigned long long thread_rank() const {
    return block_rank() * (blockDim.x * blockDim.y * blockDim.z) + this_thread_block().thread_rank();
  }
  dim3 group_dim() const { return gridDim; }
  dim3 dim_blocks() const { return gridDim; }
  dim3 block_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
};
inline grid_group this_grid() { return grid_group(); }
inline void sync(const grid_group& g, int line = __builtin_LINE()) { g.sync(line); }

template <unsigned N>
class thread_block_tile {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "thread_block_tile size must be a power of two <= 32");

 public:
  // The lanes of this thread's tile within its warp.
  unsigned mask() const {
    unsigned lane = ::emu::g_cur->lane;
    unsigned base = N == 32 ? 0xffffffffu : ((1u << N) - 1u);
    return base << (lane / N * N);
  }
  // The lanes that meet at the tile's collectives: the whole warp for a full-warp tile (a missing lane is then a
  // fault), else the tile's live lanes.
  unsigned coll() const { return N == 32 ? 0xffffffffu : mask() & ::emu::activemask(); }
  void sync(int line = __builtin_LINE()) const { ::emu::syncwarp(coll(), line); }
  unsigned thread_rank() const { return unsigned(::emu::g_cur->lane) % N; }
  unsigned size() const { return N; }
  unsigned num_threads() const { return N; }
  unsigned meta_group_rank() const { return unsigned(::emu::g_cur->linear) / N; }
  unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + N - 1) / N; }
  template <class T> T shfl(T v, int src, int line = __builtin_LINE()) const {
    return ::emu::shfl(::emu::W_SHFL_IDX, coll(), v, src, int(N), line);
  }
  template <class T> T shfl_down(T v, unsigned d, int line = __builtin_LINE()) const {
    return ::emu::shfl(::emu::W_SHFL_DOWN, coll(), v, int(d), int(N), line);
  }
  template <class T> T shfl_up(T v, unsigned d, int line = __builtin_LINE()) const {
    return ::emu::shfl(::emu::W_SHFL_UP, coll(), v, int(d), int(N), line);
  }
  template <class T> T shfl_xor(T v, unsigned m, int line = __builtin_LINE()) const {
    return ::emu::shfl(::emu::W_SHFL_XOR, coll(), v, int(m), int(N), line);
  }
  unsigned ballot(int pred, int line = __builtin_LINE()) const {
    return (::emu::vote(::emu::W_BALLOT, coll(), pred, line) & mask()) >> (unsigned(::emu::g_cur->lane) / N * N);
  }
  bool any(int pred, int line = __builtin_LINE()) const { return ballot(pred, line) != 0; }
  bool all(int pred, int line = __builtin_LINE()) const { return ballot(pred, line) == (N == 32 ? 0xffffffffu : (1u << N) - 1u); }
};

template <unsigned N>
inline thread_block_tile<N> tiled_partition(const thread_block&) { return thread_block_tile<N>(); }

// The lanes of a warp that converged (or a partition of them); ranks count its lanes from the lowest. Shuffles
// take and give ranks; ballot and match give rank bits, as CUDA's do.
class coalesced_group {
 public:
  explicit coalesced_group(unsigned lanes, unsigned meta_rank = 0, unsigned meta_size = 1)
      : lanes_(lanes), meta_rank_(meta_rank), meta_size_(meta_size) {}
  unsigned get_mask() const { return lanes_; }
  unsigned num_threads() const { return unsigned(__builtin_popcount(lanes_)); }
  unsigned size() const { return num_threads(); }
  unsigned thread_rank() const { return unsigned(__builtin_popcount(lanes_ & ((1u << lane()) - 1u))); }
  unsigned meta_group_rank() const { return meta_rank_; }
  unsigned meta_group_size() const { return meta_size_; }
  bool is_valid() const { return lanes_ != 0; }
  void sync(int line = __builtin_LINE()) const { ::emu::syncwarp(lanes_, line); }
  // A rank past the group names no lane: its shuffle reads a lane outside the mask (reported, as undefined).
  template <class T> T shfl(T v, int src_rank, int line = __builtin_LINE()) const {
    return ::emu::shfl(::emu::W_SHFL_IDX, lanes_, v, int(__fns(lanes_, 0, src_rank + 1) & 31u), 32, line);
  }
  // Up and down move by ranks; a lane with no group member that far away gets its own value.
  template <class T> T shfl_down(T v, unsigned delta, int line = __builtin_LINE()) const {
    return shfl_lane(v, __fns(lanes_, unsigned(lane()), int(delta) + 1), line);
  }
  template <class T> T shfl_up(T v, unsigned delta, int line = __builtin_LINE()) const {
    return shfl_lane(v, __fns(lanes_, unsigned(lane()), -(int(delta) + 1)), line);
  }
  unsigned ballot(int pred, int line = __builtin_LINE()) const {
    return to_ranks(::emu::vote(::emu::W_BALLOT, lanes_, pred, line));
  }
  bool any(int pred, int line = __builtin_LINE()) const { return ::emu::vote(::emu::W_ANY, lanes_, pred, line) != 0; }
  bool all(int pred, int line = __builtin_LINE()) const { return ::emu::vote(::emu::W_ALL, lanes_, pred, line) != 0; }
  template <class T> unsigned match_any(T v, int line = __builtin_LINE()) const {
    return to_ranks(::emu::match(::emu::W_MATCH_ANY, lanes_, v, line));
  }
  template <class T> unsigned match_all(T v, int& pred, int line = __builtin_LINE()) const {
    unsigned r = ::emu::match(::emu::W_MATCH_ALL, lanes_, v, line);
    pred = r != 0;
    return to_ranks(r);
  }

 private:
  static int lane() { return ::emu::g_cur->lane; }
  template <class T> T shfl_lane(T v, unsigned src_lane, int line) const {
    return ::emu::shfl(::emu::W_SHFL_IDX, lanes_, v, int(src_lane < 32 ? src_lane : unsigned(lane())), 32, line);
  }
  // Lane bits to rank bits: bit r of the result is the group's r-th lane.
  unsigned to_ranks(unsigned lane_bits) const {
    unsigned out = 0, rank = 0;
    for (unsigned m = lanes_; m; m &= m - 1, ++rank)
      if (lane_bits >> __builtin_ctz(m) & 1u) out |= 1u << rank;
    return out;
  }
  unsigned lanes_, meta_rank_, meta_size_;
};

inline coalesced_group coalesced_threads(int line = __builtin_LINE()) { return coalesced_group(__activemask(line)); }
inline void sync(const coalesced_group& g, int line = __builtin_LINE()) { g.sync(line); }

// Tiles of `tile` consecutive ranks (a power of two <= 32); the caller's tile. No lanes meet: nothing to wait for.
inline coalesced_group tiled_partition(const coalesced_group& g, unsigned tile, int line = __builtin_LINE()) {
  if (tile == 0 || tile > 32 || (tile & (tile - 1))) ::emu::bad_width(::emu::W_SYNCWARP, int(tile), line);
  unsigned first = g.thread_rank() / tile * tile, lanes = 0;
  for (unsigned r = first; r < first + tile && r < g.size(); ++r) lanes |= 1u << __fns(g.get_mask(), 0, int(r) + 1);
  return coalesced_group(lanes, g.thread_rank() / tile, (g.size() + tile - 1) / tile);
}
// The group's lanes that pass the same label (labeled_partition) or predicate (binary_partition) as the caller.
template <class Label>
inline coalesced_group labeled_partition(const coalesced_group& g, Label label, int line = __builtin_LINE()) {
  return coalesced_group(::emu::match(::emu::W_MATCH_ANY, g.get_mask(), label, line));
}
template <unsigned N, class Label>
inline coalesced_group labeled_partition(const thread_block_tile<N>& g, Label label, int line = __builtin_LINE()) {
  return coalesced_group(::emu::match(::emu::W_MATCH_ANY, g.coll(), label, line) & g.mask());
}
inline coalesced_group binary_partition(const coalesced_group& g, bool pred, int line = __builtin_LINE()) {
  return labeled_partition(g, int(pred), line);
}
template <unsigned N>
inline coalesced_group binary_partition(const thread_block_tile<N>& g, bool pred, int line = __builtin_LINE()) {
  return labeled_partition(g, int(pred), line);
}

// The type-erased group a function takes to serve any group: the block, a tile or a coalesced group (grid_group
// does not convert, as in CUDA). A group of lanes is kept as its lanes; its rank counts them from the lowest.
class thread_group {
 public:
  thread_group(const thread_block&) : lanes_(0), size_(blockDim.x * blockDim.y * blockDim.z) {}
  template <unsigned N>
  thread_group(const thread_block_tile<N>& t) : lanes_(t.mask()), size_(N) {}
  thread_group(const coalesced_group& g) : lanes_(g.get_mask()), size_(g.size()) {}
  thread_group(unsigned lanes, unsigned size) : lanes_(lanes), size_(size) {}
  bool is_block() const { return lanes_ == 0; }
  unsigned get_mask() const { return lanes_; }
  unsigned long long size() const { return size_; }
  unsigned long long num_threads() const { return size_; }
  unsigned long long thread_rank() const {
    return is_block() ? thread_block().thread_rank()
                      : unsigned(__builtin_popcount(lanes_ & ((1u << ::emu::g_cur->lane) - 1u)));
  }
  void sync(int line = __builtin_LINE()) const {
    if (is_block()) ::emu::syncthreads(line);
    else ::emu::syncwarp(lanes_ & ::emu::activemask(), line);
  }

 private:
  unsigned lanes_, size_;
};
inline void sync(const thread_group& g, int line = __builtin_LINE()) { g.sync(line); }

// tiled_partition(parent, n) with the size at run time: the caller's tile of n consecutive ranks of the parent
// (a power of two <= 32).
inline thread_group tiled_partition(const thread_group& parent, unsigned tile, int line = __builtin_LINE()) {
  if (tile == 0 || tile > 32 || (tile & (tile - 1))) ::emu::bad_width(::emu::W_SYNCWARP, int(tile), line);
  if (parent.is_block()) {
    unsigned lane = unsigned(::emu::g_cur->lane);
    return thread_group(((tile == 32 ? 0xffffffffu : (1u << tile) - 1u) << (lane / tile * tile)), tile);
  }
  coalesced_group g = tiled_partition(coalesced_group(parent.get_mask()), tile, line);
  return thread_group(g.get_mask(), g.size());
}
inline thread_group tiled_partition(const thread_block& parent, unsigned tile, int line = __builtin_LINE()) {
  return tiled_partition(thread_group(parent), tile, line);
}

// <cooperative_groups/reduce.h> and <cooperative_groups/scan.h> over a tile: a butterfly of shfl_xor for reduce
// (every lane gets the result), a Hillis-Steele ladder of shfl_up for the scans. CUDA does not specify the order in
// which cg::reduce combines the lanes, so a float sum here may differ from a GPU's in the last bits.
template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

template <unsigned N, class T, class Op>
inline T reduce(const thread_block_tile<N>& g, T v, Op op, int line = __builtin_LINE()) {
  for (unsigned o = N / 2; o > 0; o /= 2) v = op(v, g.shfl_xor(v, o, line));
  return v;
}
template <unsigned N, class T, class Op>
inline T inclusive_scan(const thread_block_tile<N>& g, T v, Op op, int line = __builtin_LINE()) {
  for (unsigned o = 1; o < N; o *= 2) {
    T t = g.shfl_up(v, o, line);
    if (g.thread_rank() >= o) v = op(t, v);
  }
  return v;
}
template <unsigned N, class T>
inline T inclusive_scan(const thread_block_tile<N>& g, T v, int line = __builtin_LINE()) {
  return inclusive_scan(g, v, plus<T>(), line);
}
// Exclusive: the inclusive scan moved up one lane; lane 0's value is unspecified in CUDA (T() here).
template <unsigned N, class T, class Op>
inline T exclusive_scan(const thread_block_tile<N>& g, T v, Op op, int line = __builtin_LINE()) {
  T in = inclusive_scan(g, v, op, line), up = g.shfl_up(in, 1, line);
  return g.thread_rank() == 0 ? T() : up;
}
template <unsigned N, class T>
inline T exclusive_scan(const thread_block_tile<N>& g, T v, int line = __builtin_LINE()) {
  return exclusive_scan(g, v, plus<T>(), line);
}
template <unsigned N>
inline void sync(const thread_block_tile<N>& g, int line = __builtin_LINE()) { g.sync(line); }

// Over a coalesced group of any size: a shfl_up ladder in rank space, its last rank's value broadcast for reduce.
template <class T, class Op>
inline T inclusive_scan(const coalesced_group& g, T v, Op op, int line = __builtin_LINE()) {
  for (unsigned o = 1; o < g.size(); o *= 2) {
    T t = g.shfl_up(v, o, line);
    if (g.thread_rank() >= o) v = op(t, v);
  }
  return v;
}
template <class T>
inline T inclusive_scan(const coalesced_group& g, T v, int line = __builtin_LINE()) {
  return inclusive_scan(g, v, plus<T>(), line);
}
template <class T, class Op>
inline T exclusive_scan(const coalesced_group& g, T v, Op op, int line = __builtin_LINE()) {
  T in = inclusive_scan(g, v, op, line), up = g.shfl_up(in, 1, line);
  return g.thread_rank() == 0 ? T() : up;
}
template <class T>
inline T exclusive_scan(const coalesced_group& g, T v, int line = __builtin_LINE()) {
  return exclusive_scan(g, v, plus<T>(), line);
}
template <class T, class Op>
inline T reduce(const coalesced_group& g, T v, Op op, int line = __builtin_LINE()) {
  return g.shfl(inclusive_scan(g, v, op, line), int(g.size()) - 1, line);
}

}  // namespace cooperative_groups
