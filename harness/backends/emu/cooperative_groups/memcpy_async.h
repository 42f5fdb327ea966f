// Resolves `#include <cooperative_groups/memcpy_async.h>` in kernel source: a group's collective memcpy_async and
// its waits, over each thread's asynchronous copies (emu_device.hpp). The group's threads share the copy's 16-, 8- or
// 4-byte pieces round-robin by rank; wait / wait_prior<N> land the thread's copies of every batch but the newest N
// (the latest moment a GPU may complete them) and then sync the group, which orders every thread's copies before
// every thread's reads.
#pragma once
#include "../cooperative_groups.h"
#include "../cuda/barrier"

namespace cooperative_groups {
template <class Group>
inline void memcpy_async(const Group& g, void* dst, const void* src, size_t size, int line = __builtin_LINE()) {
  ::cuda::emu_detail::issue_pieces(dst, src, size, ::cuda::emu_detail::group_share(g), line);
  __pipeline_commit();
}
template <class Group, size_t N>
inline void memcpy_async(const Group& g, void* dst, const void* src, ::cuda::aligned_size_t<N> size,
                         int line = __builtin_LINE()) {
  memcpy_async(g, dst, src, size.value, line);
}
template <class Group>
inline void wait(const Group& g, int line = __builtin_LINE()) {
  __pipeline_wait_prior(0);
  g.sync(line);
}
template <unsigned N, class Group>
inline void wait_prior(const Group& g, int line = __builtin_LINE()) {
  __pipeline_wait_prior(N);
  g.sync(line);
}
}  // namespace cooperative_groups
