// The 16-bit floating-point types of CUDA device code for the emu backend: cuda_fp16.h's __half / __half2 (IEEE
// binary16) and cuda_bf16.h's __nv_bfloat16 / __nv_bfloat162 (bfloat16), both held as their bit patterns.
//
// The types declare the constructors and conversion operators that CUDA 13 declares for nvcc, so that overload
// resolution picks here what it picked in nvcc's compile of the same source (emu's gate compiles every source with
// nvcc first): from any arithmetic type rounding to nearest, to integers rounding toward zero with saturation.
//
// Numerics (docs/KERNELS.md, "16-bit floats"):
// - + - * / and square root are computed in double and rounded once: exact, for double keeps more than 2p+2 bits
//   (p = 11 for binary16, 8 for bfloat16), so the double rounding is innocuous.
// - fma rounds once: the double sum a*b + c (a*b is exact) is rounded to odd through its TwoSum error, which keeps
//   the sticky bit the second rounding needs.
// - Directed conversions (_rz, _rd, _ru) step the nearest result one ulp where it lies on the wrong side.
// - NaN results are CUDA's canonical NaN (0x7FFF); conversions to integers map NaN to 0 and saturate.
// - The math functions (hexp, hsin, hrcp...) are the double functions rounded once. CUDA's device versions are
//   approximations and may differ from these in the last bit, within the errors the CUDA Math API documents.
#pragma once
#include "emu_exact.hpp"

namespace emu {
constexpr unsigned short kF16NaN = 0x7fff, kF16Sign = 0x8000;

struct HalfBits {   // IEEE binary16
  static double value(unsigned short b) { return (double)__builtin_bit_cast(_Float16, b); }
  static unsigned short nearest(double x) { return __builtin_bit_cast(unsigned short, (_Float16)x); }
  static constexpr unsigned short kOne = 0x3c00, kInf = 0x7c00;
};
struct Bf16Bits {   // bfloat16: the high half of a float
  static double value(unsigned short b) { return (double)__builtin_bit_cast(float, uint32_t(b) << 16); }
  static unsigned short nearest(double x) {
    uint32_t u = __builtin_bit_cast(uint32_t, float_to_odd(x));   // rounded to odd first: keeps the sticky bit
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  static constexpr unsigned short kOne = 0x3f80, kInf = 0x7f80;
};

// The 16-bit pattern of x in format B under a rounding mode.
template <class B>
inline unsigned short round16(double x, int mode) {
  if (x != x) return kF16NaN;
  unsigned short r = B::nearest(x);
  if (mode == kRoundNearest) return r;
  double v = B::value(r);
  if (v == x) return r;
  bool negative = r & kF16Sign, away;   // away: one step to the larger magnitude, else to the smaller
  if (mode == kRoundZero) {
    if (std::fabs(v) < std::fabs(x)) return r;
    away = false;
  } else if (mode == kRoundDown) {
    if (v < x) return r;
    away = negative;
  } else {
    if (v > x) return r;
    away = !negative;
  }
  return (unsigned short)(away ? r + 1 : r - 1);
}

}  // namespace emu

struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };
struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };
struct __half;
struct __nv_bfloat16;

// The scalar type: constructors from every arithmetic type (nearest), conversions to them (float exact, integers
// toward zero, saturating), and to bool (nonzero, NaN included).
#define EMU_F16_TYPE(T, BITS, OTHER)                                                                           \
  struct __attribute__((aligned(2))) T {                                                                      \
    using emu_bits = ::emu::BITS;                                                                             \
    unsigned short __x;                                                                                       \
    T() = default;                                                                                            \
    constexpr T(const T##_raw& r) : __x(r.x) {}                                                               \
    explicit T(const OTHER& o);                                                                               \
    T(float f) : __x(::emu::round16<emu_bits>(f, ::emu::kRoundNearest)) {}                                    \
    T(double d) : __x(::emu::round16<emu_bits>(d, ::emu::kRoundNearest)) {}                                   \
    T(short i) : T(int(i)) {}                                                                                 \
    T(unsigned short i) : T(int(i)) {}                                                                        \
    T(int i) : __x(::emu::round16<emu_bits>(double(i), ::emu::kRoundNearest)) {}                              \
    T(unsigned i) : __x(::emu::round16<emu_bits>(double(i), ::emu::kRoundNearest)) {}                         \
    T(long i) : T((long long)i) {}                                                                            \
    T(unsigned long i) : T((unsigned long long)i) {}                                                          \
    T(long long i) : __x(::emu::round16<emu_bits>(::emu::int_to_odd(i), ::emu::kRoundNearest)) {}             \
    T(unsigned long long i) : __x(::emu::round16<emu_bits>(::emu::int_to_odd(i), ::emu::kRoundNearest)) {}    \
    T& operator=(const T##_raw& r) { __x = r.x; return *this; }                                               \
    operator T##_raw() const { return T##_raw{__x}; }                                                         \
    operator float() const { return (float)emu_bits::value(__x); }                                            \
    template <class I> I emu_to_int() const {                                                                 \
      return ::emu::saturate_int<I>(std::trunc(emu_bits::value(__x)));                                        \
    }                                                                                                         \
    operator signed char() const { return emu_to_int<signed char>(); }                                        \
    operator unsigned char() const { return emu_to_int<unsigned char>(); }                                    \
    operator char() const { return emu_to_int<char>(); }                                                      \
    operator short() const { return emu_to_int<short>(); }                                                    \
    operator unsigned short() const { return emu_to_int<unsigned short>(); }                                  \
    operator int() const { return emu_to_int<int>(); }                                                        \
    operator unsigned() const { return emu_to_int<unsigned>(); }                                              \
    operator long() const { return emu_to_int<long>(); }                                                      \
    operator unsigned long() const { return emu_to_int<unsigned long>(); }                                    \
    operator long long() const { return emu_to_int<long long>(); }                                            \
    operator unsigned long long() const { return emu_to_int<unsigned long long>(); }                          \
    constexpr operator bool() const { return (__x & 0x7fffu) != 0; }                                          \
  };
EMU_F16_TYPE(__half, HalfBits, __nv_bfloat16)
EMU_F16_TYPE(__nv_bfloat16, Bf16Bits, __half)
#undef EMU_F16_TYPE
inline __half::__half(const __nv_bfloat16& o) : __half(float(o)) {}
inline __nv_bfloat16::__nv_bfloat16(const __half& o) : __nv_bfloat16(float(o)) {}

#define EMU_F16_PAIR(T2, T)                                                                                    \
  struct __attribute__((aligned(4))) T2 {                                                                     \
    T x, y;                                                                                                   \
    T2() = default;                                                                                           \
    constexpr T2(const T& a, const T& b) : x(a), y(b) {}                                                      \
    T2(const T2##_raw& r) { x.__x = r.x; y.__x = r.y; }                                                       \
    T2& operator=(const T2##_raw& r) { x.__x = r.x; y.__x = r.y; return *this; }                              \
    operator T2##_raw() const { return T2##_raw{x.__x, y.__x}; }                                              \
  };
EMU_F16_PAIR(__half2, __half)
EMU_F16_PAIR(__nv_bfloat162, __nv_bfloat16)
#undef EMU_F16_PAIR
typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

namespace emu {
template <class T> inline double val(T h) { return T::emu_bits::value(h.__x); }
template <class T> inline T make16(double x, int mode = kRoundNearest) {
  T r;
  r.__x = round16<typename T::emu_bits>(x, mode);
  return r;
}
template <class T> inline T bits16(unsigned short b) {
  T r;
  r.__x = b;
  return r;
}
template <class T> inline bool isnan16(T h) { return (h.__x & 0x7fffu) > T::emu_bits::kInf; }
// max/min of IEEE 754-2019 maximumNumber: a NaN operand yields the other, +0 is above -0; `nan` propagates NaN.
template <class T> inline T max16(T a, T b, bool nan) {
  if (isnan16(a) || isnan16(b)) return (nan || (isnan16(a) && isnan16(b))) ? bits16<T>(kF16NaN) : isnan16(a) ? b : a;
  double x = val(a), y = val(b);
  if (x == y) return (a.__x & kF16Sign) ? b : a;
  return x > y ? a : b;
}
template <class T> inline T min16(T a, T b, bool nan) {
  if (isnan16(a) || isnan16(b)) return (nan || (isnan16(a) && isnan16(b))) ? bits16<T>(kF16NaN) : isnan16(a) ? b : a;
  double x = val(a), y = val(b);
  if (x == y) return (a.__x & kF16Sign) ? a : b;
  return x < y ? a : b;
}
template <class T> inline T sat16(T h) {   // clamp to [0, 1]; NaN to +0
  double v = val(h);
  return v != v || v <= 0.0 ? bits16<T>(0) : v >= 1.0 ? bits16<T>(T::emu_bits::kOne) : h;
}
template <class T> inline T relu16(T h) {   // negative to +0; NaN to the canonical NaN
  return isnan16(h) ? bits16<T>(kF16NaN) : (h.__x & kF16Sign) ? bits16<T>(0) : h;
}
// a*b is exact in double for 16-bit operands, so the sum rounded to odd then once to 16 bits is the fma.
template <class T> inline T fma16(T a, T b, T c) { return make16<T>(sum_to_odd(val(a) * val(b), val(c))); }
}  // namespace emu

// Functions of one name for both formats (CUDA overloads them), scalar then pair.
#define EMU_F16_OVERLOADS(T, T2)                                                                               \
  inline T __hadd(T a, T b) { return ::emu::make16<T>(::emu::val(a) + ::emu::val(b)); }                       \
  inline T __hsub(T a, T b) { return ::emu::make16<T>(::emu::val(a) - ::emu::val(b)); }                       \
  inline T __hmul(T a, T b) { return ::emu::make16<T>(::emu::val(a) * ::emu::val(b)); }                       \
  inline T __hdiv(T a, T b) { return ::emu::make16<T>(::emu::val(a) / ::emu::val(b)); }                       \
  inline T __hadd_rn(T a, T b) { return __hadd(a, b); }                                                       \
  inline T __hsub_rn(T a, T b) { return __hsub(a, b); }                                                       \
  inline T __hmul_rn(T a, T b) { return __hmul(a, b); }                                                       \
  inline T __hadd_sat(T a, T b) { return ::emu::sat16(__hadd(a, b)); }                                       \
  inline T __hsub_sat(T a, T b) { return ::emu::sat16(__hsub(a, b)); }                                       \
  inline T __hmul_sat(T a, T b) { return ::emu::sat16(__hmul(a, b)); }                                       \
  inline T __hfma(T a, T b, T c) { return ::emu::fma16(a, b, c); }                                            \
  inline T __hfma_sat(T a, T b, T c) { return ::emu::sat16(::emu::fma16(a, b, c)); }                          \
  inline T __hfma_relu(T a, T b, T c) { return ::emu::relu16(::emu::fma16(a, b, c)); }                        \
  inline T __hneg(T a) { return ::emu::bits16<T>(a.__x ^ ::emu::kF16Sign); }                                  \
  inline T __habs(T a) { return ::emu::bits16<T>(a.__x & 0x7fffu); }                                          \
  inline T __hmax(T a, T b) { return ::emu::max16(a, b, false); }                                             \
  inline T __hmin(T a, T b) { return ::emu::min16(a, b, false); }                                             \
  inline T __hmax_nan(T a, T b) { return ::emu::max16(a, b, true); }                                          \
  inline T __hmin_nan(T a, T b) { return ::emu::min16(a, b, true); }                                          \
  inline bool __heq(T a, T b) { return ::emu::val(a) == ::emu::val(b); }                                      \
  inline bool __hne(T a, T b) { return ::emu::val(a) < ::emu::val(b) || ::emu::val(a) > ::emu::val(b); }      \
  inline bool __hlt(T a, T b) { return ::emu::val(a) < ::emu::val(b); }                                       \
  inline bool __hle(T a, T b) { return ::emu::val(a) <= ::emu::val(b); }                                      \
  inline bool __hgt(T a, T b) { return ::emu::val(a) > ::emu::val(b); }                                       \
  inline bool __hge(T a, T b) { return ::emu::val(a) >= ::emu::val(b); }                                      \
  inline bool __hequ(T a, T b) { return !__hne(a, b); }                                                       \
  inline bool __hneu(T a, T b) { return !__heq(a, b); }                                                       \
  inline bool __hltu(T a, T b) { return !__hge(a, b); }                                                       \
  inline bool __hleu(T a, T b) { return !__hgt(a, b); }                                                       \
  inline bool __hgtu(T a, T b) { return !__hle(a, b); }                                                       \
  inline bool __hgeu(T a, T b) { return !__hlt(a, b); }                                                       \
  inline bool __hisnan(T a) { return ::emu::isnan16(a); }                                                     \
  inline int __hisinf(T a) { double v = ::emu::val(a); return v == INFINITY ? 1 : v == -INFINITY ? -1 : 0; }  \
  inline T hsqrt(T a) { return ::emu::make16<T>(std::sqrt(::emu::val(a))); }                                 \
  inline T hrsqrt(T a) { return ::emu::make16<T>(1.0 / std::sqrt(::emu::val(a))); }                          \
  inline T hrcp(T a) { return ::emu::make16<T>(1.0 / ::emu::val(a)); }                                        \
  inline T hexp(T a) { return ::emu::make16<T>(std::exp(::emu::val(a))); }                                    \
  inline T hexp2(T a) { return ::emu::make16<T>(std::exp2(::emu::val(a))); }                                  \
  inline T hexp10(T a) { return ::emu::make16<T>(std::pow(10.0, ::emu::val(a))); }                           \
  inline T hlog(T a) { return ::emu::make16<T>(std::log(::emu::val(a))); }                                    \
  inline T hlog2(T a) { return ::emu::make16<T>(std::log2(::emu::val(a))); }                                  \
  inline T hlog10(T a) { return ::emu::make16<T>(std::log10(::emu::val(a))); }                                \
  inline T hsin(T a) { return ::emu::make16<T>(std::sin(::emu::val(a))); }                                    \
  inline T hcos(T a) { return ::emu::make16<T>(std::cos(::emu::val(a))); }                                    \
  inline T htanh(T a) { return ::emu::make16<T>(std::tanh(::emu::val(a))); }                                  \
  inline T htanh_approx(T a) { return htanh(a); }                                                             \
  inline T hceil(T a) { return ::emu::make16<T>(std::ceil(::emu::val(a))); }                                  \
  inline T hfloor(T a) { return ::emu::make16<T>(std::floor(::emu::val(a))); }                                \
  inline T htrunc(T a) { return ::emu::make16<T>(std::trunc(::emu::val(a))); }                                \
  inline T hrint(T a) { return ::emu::make16<T>(std::nearbyint(::emu::val(a))); }                             \
  inline float __low2float(T2 a) { return float(a.x); }                                                       \
  inline float __high2float(T2 a) { return float(a.y); }                                                      \
  inline T2 __lowhigh2highlow(T2 a) { return T2(a.y, a.x); }                                                  \
  inline T2 __hadd2(T2 a, T2 b) { return T2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }                            \
  inline T2 __hsub2(T2 a, T2 b) { return T2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }                            \
  inline T2 __hmul2(T2 a, T2 b) { return T2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }                            \
  inline T2 __h2div(T2 a, T2 b) { return T2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }                            \
  inline T2 __hadd2_rn(T2 a, T2 b) { return __hadd2(a, b); }                                                  \
  inline T2 __hsub2_rn(T2 a, T2 b) { return __hsub2(a, b); }                                                  \
  inline T2 __hmul2_rn(T2 a, T2 b) { return __hmul2(a, b); }                                                  \
  inline T2 __hadd2_sat(T2 a, T2 b) { return T2(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); }                \
  inline T2 __hsub2_sat(T2 a, T2 b) { return T2(__hsub_sat(a.x, b.x), __hsub_sat(a.y, b.y)); }                \
  inline T2 __hmul2_sat(T2 a, T2 b) { return T2(__hmul_sat(a.x, b.x), __hmul_sat(a.y, b.y)); }                \
  inline T2 __hfma2(T2 a, T2 b, T2 c) { return T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }            \
  inline T2 __hfma2_sat(T2 a, T2 b, T2 c) { return T2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y)); } \
  inline T2 __hfma2_relu(T2 a, T2 b, T2 c) { return T2(__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y)); } \
  inline T2 __hcmadd(T2 a, T2 b, T2 c) {   /* complex a*b + c, each part in double, then rounded */                     \
    double ax = ::emu::val(a.x), ay = ::emu::val(a.y), bx = ::emu::val(b.x), by = ::emu::val(b.y);            \
    return T2(::emu::make16<T>(ax * bx - ay * by + ::emu::val(c.x)),                                          \
              ::emu::make16<T>(ax * by + ay * bx + ::emu::val(c.y)));                                         \
  }                                                                                                           \
  inline T2 __hneg2(T2 a) { return T2(__hneg(a.x), __hneg(a.y)); }                                            \
  inline T2 __habs2(T2 a) { return T2(__habs(a.x), __habs(a.y)); }                                            \
  inline T2 __hmax2(T2 a, T2 b) { return T2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }                            \
  inline T2 __hmin2(T2 a, T2 b) { return T2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }                            \
  inline T2 __hmax2_nan(T2 a, T2 b) { return T2(__hmax_nan(a.x, b.x), __hmax_nan(a.y, b.y)); }                \
  inline T2 __hmin2_nan(T2 a, T2 b) { return T2(__hmin_nan(a.x, b.x), __hmin_nan(a.y, b.y)); }                \
  inline T2 __hisnan2(T2 a) {                                                                                 \
    return T2(::emu::bits16<T>(__hisnan(a.x) ? T::emu_bits::kOne : 0),                                        \
              ::emu::bits16<T>(__hisnan(a.y) ? T::emu_bits::kOne : 0));                                       \
  }                                                                                                           \
  inline T2 h2sqrt(T2 a) { return T2(hsqrt(a.x), hsqrt(a.y)); }                                               \
  inline T2 h2rsqrt(T2 a) { return T2(hrsqrt(a.x), hrsqrt(a.y)); }                                            \
  inline T2 h2rcp(T2 a) { return T2(hrcp(a.x), hrcp(a.y)); }                                                  \
  inline T2 h2exp(T2 a) { return T2(hexp(a.x), hexp(a.y)); }                                                  \
  inline T2 h2exp2(T2 a) { return T2(hexp2(a.x), hexp2(a.y)); }                                               \
  inline T2 h2exp10(T2 a) { return T2(hexp10(a.x), hexp10(a.y)); }                                            \
  inline T2 h2log(T2 a) { return T2(hlog(a.x), hlog(a.y)); }                                                  \
  inline T2 h2log2(T2 a) { return T2(hlog2(a.x), hlog2(a.y)); }                                               \
  inline T2 h2log10(T2 a) { return T2(hlog10(a.x), hlog10(a.y)); }                                            \
  inline T2 h2sin(T2 a) { return T2(hsin(a.x), hsin(a.y)); }                                                  \
  inline T2 h2cos(T2 a) { return T2(hcos(a.x), hcos(a.y)); }                                                  \
  inline T2 h2tanh(T2 a) { return T2(htanh(a.x), htanh(a.y)); }                                               \
  inline T2 h2tanh_approx(T2 a) { return h2tanh(a); }                                                         \
  inline T2 h2ceil(T2 a) { return T2(hceil(a.x), hceil(a.y)); }                                               \
  inline T2 h2floor(T2 a) { return T2(hfloor(a.x), hfloor(a.y)); }                                            \
  inline T2 h2trunc(T2 a) { return T2(htrunc(a.x), htrunc(a.y)); }                                            \
  inline T2 h2rint(T2 a) { return T2(hrint(a.x), hrint(a.y)); }                                               \
  inline T operator+(const T& a, const T& b) { return __hadd(a, b); }                                         \
  inline T operator-(const T& a, const T& b) { return __hsub(a, b); }                                         \
  inline T operator*(const T& a, const T& b) { return __hmul(a, b); }                                         \
  inline T operator/(const T& a, const T& b) { return __hdiv(a, b); }                                         \
  inline T& operator+=(T& a, const T& b) { return a = __hadd(a, b); }                                         \
  inline T& operator-=(T& a, const T& b) { return a = __hsub(a, b); }                                         \
  inline T& operator*=(T& a, const T& b) { return a = __hmul(a, b); }                                         \
  inline T& operator/=(T& a, const T& b) { return a = __hdiv(a, b); }                                         \
  inline T operator+(const T& a) { return a; }                                                                \
  inline T operator-(const T& a) { return __hneg(a); }                                                        \
  inline T& operator++(T& a) { return a = __hadd(a, ::emu::bits16<T>(T::emu_bits::kOne)); }                  \
  inline T& operator--(T& a) { return a = __hsub(a, ::emu::bits16<T>(T::emu_bits::kOne)); }                  \
  inline T operator++(T& a, int) { T old = a; ++a; return old; }                                              \
  inline T operator--(T& a, int) { T old = a; --a; return old; }                                              \
  inline bool operator==(const T& a, const T& b) { return __heq(a, b); }                                      \
  inline bool operator!=(const T& a, const T& b) { return __hneu(a, b); }                                     \
  inline bool operator<(const T& a, const T& b) { return __hlt(a, b); }                                       \
  inline bool operator<=(const T& a, const T& b) { return __hle(a, b); }                                      \
  inline bool operator>(const T& a, const T& b) { return __hgt(a, b); }                                       \
  inline bool operator>=(const T& a, const T& b) { return __hge(a, b); }                                      \
  inline T2 operator+(const T2& a, const T2& b) { return __hadd2(a, b); }                                     \
  inline T2 operator-(const T2& a, const T2& b) { return __hsub2(a, b); }                                     \
  inline T2 operator*(const T2& a, const T2& b) { return __hmul2(a, b); }                                     \
  inline T2 operator/(const T2& a, const T2& b) { return __h2div(a, b); }                                     \
  inline T2& operator+=(T2& a, const T2& b) { return a = __hadd2(a, b); }                                     \
  inline T2& operator-=(T2& a, const T2& b) { return a = __hsub2(a, b); }                                     \
  inline T2& operator*=(T2& a, const T2& b) { return a = __hmul2(a, b); }                                     \
  inline T2& operator/=(T2& a, const T2& b) { return a = __h2div(a, b); }                                     \
  inline T2 operator+(const T2& a) { return a; }                                                              \
  inline T2 operator-(const T2& a) { return __hneg2(a); }                                                     \
  inline bool operator==(const T2& a, const T2& b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }             \
  inline bool operator!=(const T2& a, const T2& b) { return __hneu(a.x, b.x) && __hneu(a.y, b.y); }           \
  inline bool operator<(const T2& a, const T2& b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }              \
  inline bool operator<=(const T2& a, const T2& b) { return __hle(a.x, b.x) && __hle(a.y, b.y); }             \
  inline bool operator>(const T2& a, const T2& b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); }              \
  inline bool operator>=(const T2& a, const T2& b) { return __hge(a.x, b.x) && __hge(a.y, b.y); }

// The pair comparisons: as a pair of 1.0 / 0.0 (__heq2), a bool of both lanes (__hbeq2), a 16-bit mask per lane.
#define EMU_F16_COMPARE(T, T2, OP)                                                                             \
  inline T2 OP##2(T2 a, T2 b) {                                                                               \
    return T2(::emu::bits16<T>(OP(a.x, b.x) ? T::emu_bits::kOne : 0),                                         \
              ::emu::bits16<T>(OP(a.y, b.y) ? T::emu_bits::kOne : 0));                                        \
  }                                                                                                           \
  inline unsigned OP##2_mask(T2 a, T2 b) { return (OP(a.x, b.x) ? 0xffffu : 0u) | (OP(a.y, b.y) ? 0xffff0000u : 0u); }
#define EMU_F16_COMPARES(T, T2)                                                                                \
  EMU_F16_COMPARE(T, T2, __heq) EMU_F16_COMPARE(T, T2, __hne) EMU_F16_COMPARE(T, T2, __hlt)                    \
  EMU_F16_COMPARE(T, T2, __hle) EMU_F16_COMPARE(T, T2, __hgt) EMU_F16_COMPARE(T, T2, __hge)                    \
  EMU_F16_COMPARE(T, T2, __hequ) EMU_F16_COMPARE(T, T2, __hneu) EMU_F16_COMPARE(T, T2, __hltu)                 \
  EMU_F16_COMPARE(T, T2, __hleu) EMU_F16_COMPARE(T, T2, __hgtu) EMU_F16_COMPARE(T, T2, __hgeu)                 \
  inline bool __hbeq2(T2 a, T2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }                              \
  inline bool __hbne2(T2 a, T2 b) { return __hne(a.x, b.x) && __hne(a.y, b.y); }                              \
  inline bool __hblt2(T2 a, T2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }                              \
  inline bool __hble2(T2 a, T2 b) { return __hle(a.x, b.x) && __hle(a.y, b.y); }                              \
  inline bool __hbgt2(T2 a, T2 b) { return __hgt(a.x, b.x) && __hgt(a.y, b.y); }                              \
  inline bool __hbge2(T2 a, T2 b) { return __hge(a.x, b.x) && __hge(a.y, b.y); }                              \
  inline bool __hbequ2(T2 a, T2 b) { return __hequ(a.x, b.x) && __hequ(a.y, b.y); }                           \
  inline bool __hbneu2(T2 a, T2 b) { return __hneu(a.x, b.x) && __hneu(a.y, b.y); }                           \
  inline bool __hbltu2(T2 a, T2 b) { return __hltu(a.x, b.x) && __hltu(a.y, b.y); }                           \
  inline bool __hbleu2(T2 a, T2 b) { return __hleu(a.x, b.x) && __hleu(a.y, b.y); }                           \
  inline bool __hbgtu2(T2 a, T2 b) { return __hgtu(a.x, b.x) && __hgtu(a.y, b.y); }                           \
  inline bool __hbgeu2(T2 a, T2 b) { return __hgeu(a.x, b.x) && __hgeu(a.y, b.y); }

// Functions whose names spell the format: NAME is half or bfloat16, NAME2 half2 or bfloat162.
#define EMU_F16_INT_CONVERSIONS(T, NAME, I, ABBR)                                                               \
  inline I __##NAME##2##ABBR##_rn(T h) { return ::emu::saturate_int<I>(::emu::round_int(::emu::val(h), ::emu::kRoundNearest)); } \
  inline I __##NAME##2##ABBR##_rz(T h) { return ::emu::saturate_int<I>(::emu::round_int(::emu::val(h), ::emu::kRoundZero)); } \
  inline I __##NAME##2##ABBR##_rd(T h) { return ::emu::saturate_int<I>(::emu::round_int(::emu::val(h), ::emu::kRoundDown)); } \
  inline I __##NAME##2##ABBR##_ru(T h) { return ::emu::saturate_int<I>(::emu::round_int(::emu::val(h), ::emu::kRoundUp)); } \
  inline T __##ABBR##2##NAME##_rn(I i) { return ::emu::make16<T>(::emu::int_to_odd(i), ::emu::kRoundNearest); } \
  inline T __##ABBR##2##NAME##_rz(I i) { return ::emu::make16<T>(::emu::int_to_odd(i), ::emu::kRoundZero); }  \
  inline T __##ABBR##2##NAME##_rd(I i) { return ::emu::make16<T>(::emu::int_to_odd(i), ::emu::kRoundDown); }  \
  inline T __##ABBR##2##NAME##_ru(I i) { return ::emu::make16<T>(::emu::int_to_odd(i), ::emu::kRoundUp); }
#define EMU_F16_NAMED(T, T2, NAME, NAME2)                                                                      \
  inline T __float2##NAME(float f) { return ::emu::make16<T>(f); }                                            \
  inline T __float2##NAME##_rn(float f) { return ::emu::make16<T>(f); }                                       \
  inline T __float2##NAME##_rz(float f) { return ::emu::make16<T>(f, ::emu::kRoundZero); }                    \
  inline T __float2##NAME##_rd(float f) { return ::emu::make16<T>(f, ::emu::kRoundDown); }                    \
  inline T __float2##NAME##_ru(float f) { return ::emu::make16<T>(f, ::emu::kRoundUp); }                      \
  inline T __double2##NAME(double d) { return ::emu::make16<T>(d); }                                          \
  inline float __##NAME##2float(T h) { return float(h); }                                                     \
  inline short __##NAME##_as_short(T h) { return (short)h.__x; }                                              \
  inline unsigned short __##NAME##_as_ushort(T h) { return h.__x; }                                           \
  inline T __short_as_##NAME(short i) { return ::emu::bits16<T>((unsigned short)i); }                         \
  inline T __ushort_as_##NAME(unsigned short i) { return ::emu::bits16<T>(i); }                               \
  inline signed char __##NAME##2char_rz(T h) { return h.template emu_to_int<signed char>(); }                 \
  inline unsigned char __##NAME##2uchar_rz(T h) { return h.template emu_to_int<unsigned char>(); }            \
  EMU_F16_INT_CONVERSIONS(T, NAME, int, int)                                                                  \
  EMU_F16_INT_CONVERSIONS(T, NAME, unsigned, uint)                                                            \
  EMU_F16_INT_CONVERSIONS(T, NAME, short, short)                                                              \
  EMU_F16_INT_CONVERSIONS(T, NAME, unsigned short, ushort)                                                    \
  EMU_F16_INT_CONVERSIONS(T, NAME, long long, ll)                                                             \
  EMU_F16_INT_CONVERSIONS(T, NAME, unsigned long long, ull)                                                   \
  inline T2 make_##NAME2(T a, T b) { return T2(a, b); }                                                       \
  inline T2 __halves2##NAME2(T a, T b) { return T2(a, b); }                                                   \
  inline T2 __##NAME##2##NAME2(T a) { return T2(a, a); }                                                      \
  inline T2 __float2##NAME2##_rn(float f) { T h = ::emu::make16<T>(f); return T2(h, h); }                     \
  inline T2 __floats2##NAME2##_rn(float a, float b) { return T2(::emu::make16<T>(a), ::emu::make16<T>(b)); }  \
  inline T2 __float22##NAME2##_rn(float2 f) { return T2(::emu::make16<T>(f.x), ::emu::make16<T>(f.y)); }      \
  inline float2 __##NAME2##2float2(T2 h) { return float2{float(h.x), float(h.y)}; }                           \
  inline T __low2##NAME(T2 a) { return a.x; }                                                                 \
  inline T __high2##NAME(T2 a) { return a.y; }                                                                \
  inline T2 __low2##NAME2(T2 a) { return T2(a.x, a.x); }                                                      \
  inline T2 __high2##NAME2(T2 a) { return T2(a.y, a.y); }                                                     \
  inline T2 __lows2##NAME2(T2 a, T2 b) { return T2(a.x, b.x); }                                              \
  inline T2 __highs2##NAME2(T2 a, T2 b) { return T2(a.y, b.y); }

EMU_F16_OVERLOADS(__half, __half2)
EMU_F16_OVERLOADS(__nv_bfloat16, __nv_bfloat162)
EMU_F16_COMPARES(__half, __half2)
EMU_F16_COMPARES(__nv_bfloat16, __nv_bfloat162)
EMU_F16_NAMED(__half, __half2, half, half2)
EMU_F16_NAMED(__nv_bfloat16, __nv_bfloat162, bfloat16, bfloat162)
#undef EMU_F16_OVERLOADS
#undef EMU_F16_COMPARE
#undef EMU_F16_COMPARES
#undef EMU_F16_INT_CONVERSIONS
#undef EMU_F16_NAMED

#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_NEG_ZERO_FP16 __ushort_as_half((unsigned short)0x8000U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)
#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_NEG_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x8000U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
