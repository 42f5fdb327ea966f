// Included ahead of every source nvcc compiles here (host_libraries.nvcc_flags). CUB 3 (CCCL 3, the CUB of CUDA 13)
// dropped CUB 2's functors cub::Sum, cub::Max and cub::Min for cuda::std::plus, cuda::maximum and cuda::minimum,
// so a kernel written for CUDA 12 (`BlockReduce(t).Reduce(v, cub::Max())`) stops nvcc here while it builds with the
// toolkit it was written for. These are the same functors under their old names.
//
// This header includes nothing: a header of the toolkit's here would declare namespace cuda::std in every source,
// and inside a source's own `namespace cuda` (arrayfire's backend) `std::` would then be ambiguous. nvcc's own
// version macro tells the CUB: CUDA 13 ships CUB 3.
#pragma once
#if defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ >= 13
namespace cub {
namespace qconform_cub2 {
// the type a functor returns: its operands' common type, by value (CUB 2 returned common_type<T, U>)
template <class T> struct value_of { typedef T type; };
template <class T> struct value_of<T&> { typedef typename value_of<T>::type type; };
template <class T> struct value_of<T&&> { typedef typename value_of<T>::type type; };
template <class T> struct value_of<const T> { typedef typename value_of<T>::type type; };
template <class T> struct value_of<volatile T> { typedef typename value_of<T>::type type; };
template <class T> struct value_of<const volatile T> { typedef typename value_of<T>::type type; };
template <class T> T&& operand();
template <class T, class U>
using result = typename value_of<decltype(true ? operand<T>() : operand<U>())>::type;
}  // namespace qconform_cub2
struct Sum {
  template <class T, class U>
  __host__ __device__ __forceinline__ qconform_cub2::result<T, U> operator()(T&& a, U&& b) const { return a + b; }
};
struct Max {
  template <class T, class U>
  __host__ __device__ __forceinline__ qconform_cub2::result<T, U> operator()(T&& a, U&& b) const {
    return a < b ? b : a;
  }
};
struct Min {
  template <class T, class U>
  __host__ __device__ __forceinline__ qconform_cub2::result<T, U> operator()(T&& a, U&& b) const {
    return b < a ? b : a;
  }
};
}  // namespace cub
#endif
