// Resolves `#include <cooperative_groups.h>` in kernel source: the thread-block subset of cooperative groups
// on the emu runtime. A thread_block is the CUDA block (sync = __syncthreads); a thread_block_tile<N> is a
// group of N consecutive threads inside one warp: shuffles and votes stay within the tile (width N). The runtime
// rendezvouses a whole warp at a time, so the tiles of one warp sync, shuffle and vote together (over the
// warp's live lanes): code where the tiles of a warp take different paths to a tile collective is reported as
// divergence, and a sub-warp tile's sync orders the whole warp. The grid group's sync is a grid-wide barrier; coalesced groups are not provided.
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
  // The lanes that rendezvous: the tile itself for a full warp, else every live lane of the warp (see above).
  unsigned coll() const { return N == 32 ? 0xffffffffu : ::emu::activemask(); }
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

}  // namespace cooperative_groups
