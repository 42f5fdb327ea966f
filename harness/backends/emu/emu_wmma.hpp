// <mma.h>'s WMMA API (nvcuda::wmma) for the emu backend: fragments, fill_fragment, load_matrix_sync,
// store_matrix_sync, mma_sync, for the shapes and types of CUDA's dense WMMA: 16x16x16, 32x8x16 and 8x32x16 with half
// or bfloat16 operands (float or half accumulators) and signed or unsigned char operands (int accumulators,
// .satf with satf = true), 16x16x8 with tf32 operands, 8x8x4 with double.
//
// CUDA leaves the mapping of a fragment's elements to the lanes unspecified; emu's: x[i] of lane l is element l + 32 i
// of the fragment's matrix in row-major order (A: M x K, B: K x N, accumulators: M x N), so code that only touches
// x[] element-wise (scaling an accumulator) works, as on a GPU. Loads and stores are the lane's own elements, read or
// written by that lane (the race detector sees them as its accesses); mma_sync is a warp collective: the lanes put
// their elements in the warp's scratch, meet, each computes its own elements of D, and meet again.
//
// Numerics as for mma.sync (docs/KERNELS.md, "Tensor-core instructions"): each product exact, the sum in binary128, C
// joining it rounded to odd, one rounding to D's type; integers exact, wrapping or saturating with satf. tf32 operands
// are read with their low 13 mantissa bits ignored, as the tensor cores read them; __float_to_tf32 rounds to nearest,
// ties away from zero (cvt.rna.tf32.f32).
#pragma once

namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };
namespace precision { struct tf32 {}; }

// The element a fragment stores for an operand type T.
template <class T> struct storage { using type = T; };
template <> struct storage<precision::tf32> { using type = float; };

template <class Use, int M, int N, int K> struct rows_cols;
template <int M, int N, int K> struct rows_cols<matrix_a, M, N, K> { static constexpr int rows = M, cols = K; };
template <int M, int N, int K> struct rows_cols<matrix_b, M, N, K> { static constexpr int rows = K, cols = N; };
template <int M, int N, int K> struct rows_cols<accumulator, M, N, K> { static constexpr int rows = M, cols = N; };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert((M == 16 && N == 16 && (K == 16 || K == 8)) || (M == 32 && N == 8 && K == 16) ||
                (M == 8 && N == 32 && K == 16) || (M == 8 && N == 8 && K == 4),
                "emu: WMMA shapes 16x16x16, 32x8x16, 8x32x16, 16x16x8 (tf32) and 8x8x4 (double)");

 public:
  using storage_element_type = typename storage<T>::type;
  using element_type = T;
  static constexpr int rows = rows_cols<Use, M, N, K>::rows, cols = rows_cols<Use, M, N, K>::cols;
  enum { num_elements = rows * cols / 32 };
  storage_element_type x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = typename fragment<Use, M, N, K, T, L>::storage_element_type(v);
}

namespace detail {
inline int lane() { return ::emu::g_cur->lane; }
// The memory index of element (r, c) of a matrix with leading dimension ldm.
inline size_t at(int r, int c, unsigned ldm, bool row) { return row ? size_t(r) * ldm + c : size_t(c) * ldm + r; }
template <class F, class P>
inline void load(F& f, const P* p, unsigned ldm, bool row) {
  for (int i = 0; i < F::num_elements; ++i) {
    int e = lane() + 32 * i;
    f.x[i] = p[at(e / F::cols, e % F::cols, ldm, row)];
  }
}
// An operand's exact value (every WMMA operand type is exact in double; tf32 without its low 13 bits).
template <class T> inline double value(const T& v) { return double(float(v)); }
inline double value(const signed char& v) { return v; }
inline double value(const unsigned char& v) { return v; }
inline double value(const int& v) { return v; }
inline double value(const float& v) { return v; }
inline double value(const double& v) { return v; }
inline double tf32_value(float v) { return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, v) & 0xffffe000u); }
}  // namespace detail

template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm) {
  static_assert(!std::is_same<L, void>::value, "emu: an accumulator's load_matrix_sync takes a layout_t");
  detail::load(f, p, ldm, std::is_same<L, row_major>::value);
}
template <int M, int N, int K, class T, class P>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const P* p, unsigned ldm, layout_t layout) {
  detail::load(f, p, ldm, layout == mem_row_major);
}
template <int M, int N, int K, class T, class P>
inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout) {
  using F = fragment<accumulator, M, N, K, T>;
  for (int i = 0; i < F::num_elements; ++i) {
    int e = detail::lane() + 32 * i;
    p[detail::at(e / F::cols, e % F::cols, ldm, layout == mem_row_major)] = P(f.x[i]);
  }
}

// D = A B + C over the warp: the lanes' elements meet in the warp's scratch (doubles, row-major A, B, C).
template <int M, int N, int K, class TA, class LA, class TB, class LB, class TC, class TD>
inline void mma_sync(fragment<accumulator, M, N, K, TD>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC>& c,
                     bool satf = false, int line = __builtin_LINE()) {
  constexpr bool tf32 = std::is_same<TA, precision::tf32>::value;
  double* s = static_cast<double*>(::emu::warp_scratch());
  double *A = s, *B = s + M * K, *C = s + M * K + K * N;
  int l = detail::lane();
  for (int i = 0; i < a.num_elements; ++i) A[l + 32 * i] = tf32 ? detail::tf32_value(float(a.x[i])) : detail::value(a.x[i]);
  for (int i = 0; i < b.num_elements; ++i) B[l + 32 * i] = tf32 ? detail::tf32_value(float(b.x[i])) : detail::value(b.x[i]);
  for (int i = 0; i < c.num_elements; ++i) C[l + 32 * i] = detail::value(c.x[i]);
  ::emu::syncwarp(0xffffffffu, line);
  typename fragment<accumulator, M, N, K, TD>::storage_element_type out[fragment<accumulator, M, N, K, TD>::num_elements];
  for (int i = 0; i < d.num_elements; ++i) {
    int e = l + 32 * i, r = e / N, col = e % N;
    if constexpr (std::is_same<TD, int>::value) {
      int64_t acc = int64_t(C[e]);
      for (int k = 0; k < K; ++k) acc += int64_t(A[r * K + k]) * int64_t(B[k * N + col]);
      out[i] = satf ? int(acc < INT32_MIN ? INT32_MIN : acc > INT32_MAX ? INT32_MAX : acc) : int(uint32_t(uint64_t(acc)));
    } else {
      __float128 sum = ::emu::dot_to_odd(&A[r * K], 1, &B[col], N, K, C[e]);
      if constexpr (std::is_same<TD, double>::value) out[i] = double(sum);
      else if constexpr (std::is_same<TD, float>::value) out[i] = float(sum);
      else out[i] = TD(__half_raw{__builtin_bit_cast(unsigned short, (_Float16)sum)});
    }
  }
  ::emu::syncwarp(0xffffffffu, line);     // no lane refills the scratch before every lane has read it
  for (int i = 0; i < d.num_elements; ++i) d.x[i] = out[i];
}

inline float __float_to_tf32(float x) {
  uint32_t u = __builtin_bit_cast(uint32_t, x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;                 // infinity and NaN stay
  u = (u + 0x1000u) & 0xffffe000u;                                 // to nearest, ties away from zero
  return __builtin_bit_cast(float, u);
}
}  // namespace wmma
}  // namespace nvcuda
