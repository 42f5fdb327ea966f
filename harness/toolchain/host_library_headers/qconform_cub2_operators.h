// Included ahead of every source nvcc compiles here (host_libraries.nvcc_flags). CUB 3 (CUDA 13) dropped CUB 2's
// functors cub::Sum, cub::Max and cub::Min for cuda::std::plus, cuda::maximum and cuda::minimum, so a kernel
// written for CUDA 12 (`BlockReduce(t).Reduce(v, cub::Max())`) stops nvcc here while it builds with the toolkit it
// was written for. These are the same functors under their old names, only where the toolkit's CUB lacks them.
#pragma once
#if defined(__has_include)
#if __has_include(<cub/version.cuh>)
#include <cub/version.cuh>
#if defined(CUB_VERSION) && CUB_VERSION >= 300000
#include <cuda/std/type_traits>
namespace cub {
// CUB 2.x's signatures: either argument's type, the result their common type (by value)
struct Sum {
  template <class T, class U>
  __host__ __device__ __forceinline__ typename ::cuda::std::common_type<T, U>::type operator()(T&& a, U&& b) const {
    return a + b;
  }
};
struct Max {
  template <class T, class U>
  __host__ __device__ __forceinline__ typename ::cuda::std::common_type<T, U>::type operator()(T&& a, U&& b) const {
    return a < b ? b : a;
  }
};
struct Min {
  template <class T, class U>
  __host__ __device__ __forceinline__ typename ::cuda::std::common_type<T, U>::type operator()(T&& a, U&& b) const {
    return b < a ? b : a;
  }
};
}  // namespace cub
#endif
#endif
#endif
