// Exact-rounding primitives of the emu runtime, shared by its 16-bit and 8-bit float types and its explicitly rounded
// intrinsics (emu_float16.hpp, emu_float8.hpp, emu_rounding.hpp): the IEEE rounding modes; rounding to odd, which
// keeps the sticky bit so that one later rounding at least two bits narrower, in any mode, is the correct one
// (Boldo and Melquiond); TwoSum; directed rounding by stepping the nearest value; saturating integer conversion.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

namespace emu {
enum RoundMode : int { kRoundNearest = 0, kRoundZero, kRoundDown, kRoundUp };

template <class W>
inline bool sign_bit(W a) {
  if constexpr (sizeof(W) == 16) return (__builtin_bit_cast(unsigned __int128, a) >> 127) != 0;
  else return std::signbit(a);
}

// The exact value v + e (|e| below half an ulp of v, or e == 0), rounded to odd in v's format (double or quad).
template <class W>
inline W to_odd(W v, W e) {
  if (e == 0 || !(v == v) || v - v != 0) return v;
  if constexpr (sizeof(W) == 8) {
    return (__builtin_bit_cast(uint64_t, v) & 1u) ? v : std::nextafter(v, e > 0 ? INFINITY : -INFINITY);
  } else {
    unsigned __int128 bits = __builtin_bit_cast(unsigned __int128, v);
    if (v == 0) return __builtin_bit_cast(W, (unsigned __int128)1 | (e < 0 ? (unsigned __int128)1 << 127 : 0));
    if (bits & 1u) return v;
    bits += ((v > 0) == (e > 0)) ? 1 : -1;     // one step away from or toward zero, as e says
    return __builtin_bit_cast(W, bits);
  }
}

// a + b rounded to odd: TwoSum gives the rounded sum s and its exact error (s + e == a + b, barring overflow).
template <class W>
inline W sum_to_odd(W a, W b) {
  W s = a + b, bp = s - a, e = (a - (s - bp)) + (b - bp);
  return to_odd(s, e);
}

// x narrowed to float, rounded to odd.
inline float float_to_odd(double x) {
  float f = (float)x;
  if ((double)f != x && std::isfinite(f) && !(__builtin_bit_cast(uint32_t, f) & 1u))
    f = std::nextafterf(f, x > (double)f ? INFINITY : -INFINITY);
  return f;
}

// An integer in double, rounded to odd where it has more significant bits than double keeps (64-bit integers):
// the bits shifted out become a sticky low bit.
template <class I>
inline double int_to_odd(I v) {
  bool negative = v < I(0);
  uint64_t u = negative ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  int shift = u >> 53 ? 11 - __builtin_clzll(u) : 0;
  uint64_t keep = u >> shift;
  if (shift && (u & ((uint64_t(1) << shift) - 1))) keep |= 1u;
  double d = std::ldexp(double(keep), shift);
  return negative ? -d : d;
}

// The narrow format's value nearest x, stepped one ulp where it is on the wrong side of x for the mode; an
// overflow to infinity comes back to the largest finite value in the modes that do not round toward it.
template <class N, class W>
inline N round_to(W x, int mode) {
  N r = N(x);
  if (mode == kRoundNearest || !(x == x) || W(r) == x) return r;
  bool infinite = r - r != 0;
  if (infinite && x - x == 0) {          // overflow of a finite x
    bool keep = mode == kRoundUp ? r > 0 : mode == kRoundDown ? r < 0 : false;
    return keep ? r : (r > 0 ? std::numeric_limits<N>::max() : std::numeric_limits<N>::lowest());
  }
  bool above = W(r) > x;
  bool step = mode == kRoundZero ? (above ? r > 0 : r < 0) : mode == kRoundDown ? above : !above;
  if (!step) return r;
  return std::nextafter(r, above ? -std::numeric_limits<N>::infinity() : std::numeric_limits<N>::infinity());
}

// A rounded value (or NaN) converted to an integer type: NaN to 0, saturating at the type's limits.
template <class I>
inline I saturate_int(double v) {
  if (v != v) return I(0);
  if (v <= (double)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
  if (v >= (double)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
  return (I)v;
}
inline double round_int(double v, int mode) {
  return mode == kRoundNearest ? std::nearbyint(v) : mode == kRoundZero ? std::trunc(v)
       : mode == kRoundDown ? std::floor(v) : std::ceil(v);
}

// The tensor-core dot product (mma.sync, WMMA): sum over k < n of a[k * sa] * b[k * sb], plus c. Each product is exact
// in binary128 (operands of at most 53 bits); the products are summed in binary128, exactly for f16 and fp8 operands
// (docs/KERNELS.md, "Tensor-core instructions"), and c joins the sum rounded to odd, so that one rounding to the
// result's format (at most 53 bits) is the correct rounding of that sum.
inline __float128 dot_to_odd(const double* a, int sa, const double* b, int sb, int n, double c) {
  __float128 s = 0;
  for (int k = 0; k < n; ++k) s += (__float128)a[k * sa] * (__float128)b[k * sb];
  return sum_to_odd<__float128>(s, (__float128)c);
}
}  // namespace emu
