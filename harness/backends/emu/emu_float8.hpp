// cuda_fp8.h for the emu backend: the 8-bit float formats E4M3 (bias 7, 3 mantissa bits, no infinity, largest
// 448, NaN S.1111.111) and E5M2 (bias 15, 2 mantissa bits, IEEE-like with infinities, largest 57344), the
// __nv_cvt_* conversions and the __nv_fp8_e4m3 / __nv_fp8_e5m2 classes (with their x2 and x4 forms), held as bits.
//
// A conversion to FP8 rounds the exact value once, to nearest even (docs/KERNELS.md, "8-bit floats"): the value is
// scaled by a power of two so that its last kept bit has weight 1, and rounded there (exact in double). Then, as the
// CUDA Math API states: past the largest finite value, __NV_SATFINITE gives that value and __NV_NOSAT gives NaN
// (E4M3) or infinity (E5M2); a NaN gives E4M3's NaN, or E5M2's quiet NaN with the source's second mantissa bit;
// the sign is kept, zeros and NaN included. Widening to half is exact (a NaN becomes half's canonical NaN). The
// classes convert as CUDA's do: from floating types with saturation to finite, from integers through float, to
// integers toward zero with saturation (NaN to 0). Their constructors and conversions are all explicit.
#pragma once
#include <cmath>
#include <cstdint>

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;

namespace emu {
struct Fp8Format { int mantissa, bias; double largest; };
inline Fp8Format fp8_format(__nv_fp8_interpretation_t t) {
  return t == __NV_E4M3 ? Fp8Format{3, 7, 448.0} : Fp8Format{2, 15, 57344.0};
}

inline __nv_fp8_storage_t to_fp8(double x, __nv_saturation_t sat, __nv_fp8_interpretation_t t) {
  Fp8Format f = fp8_format(t);
  unsigned char sign = std::signbit(x) ? 0x80 : 0;
  if (x != x) {
    uint64_t bits = __builtin_bit_cast(uint64_t, x);
    return (unsigned char)(sign | (t == __NV_E4M3 ? 0x7f : 0x7e | ((bits >> 50) & 1u)));
  }
  double a = std::fabs(x);
  int min_exp = 1 - f.bias;                                  // exponent of the smallest normal number
  int e = a == 0 || a - a != 0 ? min_exp : std::ilogb(a) > min_exp ? std::ilogb(a) : min_exp;
  double ulp = std::ldexp(1.0, e - f.mantissa);              // weight of the last kept bit at this exponent
  double r = a - a != 0 ? a : std::nearbyint(a / ulp) * ulp;   // exact: a power-of-two scaling, then RNE
  if (r > f.largest) {
    if (sat == __NV_SATFINITE) r = f.largest;
    else return (unsigned char)(sign | (t == __NV_E4M3 ? 0x7f : 0x7c));
  }
  if (r == 0) return sign;
  int re = std::ilogb(r);
  if (re < min_exp)                                           // subnormal: exponent field 0
    return (unsigned char)(sign | unsigned(r / std::ldexp(1.0, min_exp - f.mantissa)));
  unsigned mant = unsigned(r / std::ldexp(1.0, re - f.mantissa)) - (1u << f.mantissa);
  return (unsigned char)(sign | unsigned(re + f.bias) << f.mantissa | mant);
}

inline double fp8_value(__nv_fp8_storage_t b, __nv_fp8_interpretation_t t) {
  Fp8Format f = fp8_format(t);
  double s = b & 0x80 ? -1.0 : 1.0;
  unsigned ex = (b & 0x7f) >> f.mantissa, mant = b & ((1u << f.mantissa) - 1u);
  if (t == __NV_E4M3 ? (b & 0x7f) == 0x7f : ex == 0x1f) {
    if (t == __NV_E5M2 && mant == 0) return s * INFINITY;
    return NAN;
  }
  if (ex == 0) return s * std::ldexp(double(mant), 1 - f.bias - f.mantissa);
  return s * std::ldexp(double(mant | (1u << f.mantissa)), int(ex) - f.bias - f.mantissa);
}
}  // namespace emu

inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t s, __nv_fp8_interpretation_t t) {
  return emu::to_fp8(x, s, t);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t s, __nv_fp8_interpretation_t t) {
  return emu::to_fp8(x, s, t);
}
inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw x, __nv_saturation_t s, __nv_fp8_interpretation_t t) {
  return emu::to_fp8(emu::HalfBits::value(x.x), s, t);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw x, __nv_saturation_t s,
                                                      __nv_fp8_interpretation_t t) {
  return emu::to_fp8(emu::Bf16Bits::value(x.x), s, t);
}
inline __nv_fp8x2_storage_t __nv_cvt_double2_to_fp8x2(double2 x, __nv_saturation_t s, __nv_fp8_interpretation_t t) {
  return (__nv_fp8x2_storage_t)(emu::to_fp8(x.x, s, t) | emu::to_fp8(x.y, s, t) << 8);
}
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t s, __nv_fp8_interpretation_t t) {
  return (__nv_fp8x2_storage_t)(emu::to_fp8(x.x, s, t) | emu::to_fp8(x.y, s, t) << 8);
}
inline __nv_fp8x2_storage_t __nv_cvt_halfraw2_to_fp8x2(__half2_raw x, __nv_saturation_t s,
                                                       __nv_fp8_interpretation_t t) {
  return (__nv_fp8x2_storage_t)(__nv_cvt_halfraw_to_fp8(__half_raw{x.x}, s, t) |
                                __nv_cvt_halfraw_to_fp8(__half_raw{x.y}, s, t) << 8);
}
inline __nv_fp8x2_storage_t __nv_cvt_bfloat16raw2_to_fp8x2(__nv_bfloat162_raw x, __nv_saturation_t s,
                                                           __nv_fp8_interpretation_t t) {
  return (__nv_fp8x2_storage_t)(__nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{x.x}, s, t) |
                                __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw{x.y}, s, t) << 8);
}
// Widening to half is exact; a NaN becomes half's canonical NaN.
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t t) {
  double v = emu::fp8_value(x, t);
  return __half_raw{v != v ? (unsigned short)0x7fff : emu::HalfBits::nearest(v)};
}
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t t) {
  return __half2_raw{__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)(x & 0xff), t).x,
                     __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)(x >> 8), t).x};
}

// The classes: KIND is E4M3 or E5M2, NAME e4m3 or e5m2.
#define EMU_FP8_CLASSES(NAME, KIND)                                                                            \
  struct __attribute__((aligned(1))) __nv_fp8_##NAME {                                                        \
    __nv_fp8_storage_t __x;                                                                                   \
    __nv_fp8_##NAME() = default;                                                                              \
    explicit __nv_fp8_##NAME(double f) : __x(emu::to_fp8(f, __NV_SATFINITE, __NV_##KIND)) {}                  \
    explicit __nv_fp8_##NAME(float f) : __nv_fp8_##NAME(double(f)) {}                                         \
    explicit __nv_fp8_##NAME(__half f) : __nv_fp8_##NAME(double(float(f))) {}                                 \
    explicit __nv_fp8_##NAME(__nv_bfloat16 f) : __nv_fp8_##NAME(double(float(f))) {}                          \
    explicit __nv_fp8_##NAME(unsigned short v) : __nv_fp8_##NAME(float(v)) {}                                 \
    explicit __nv_fp8_##NAME(unsigned int v) : __nv_fp8_##NAME(float(v)) {}                                   \
    explicit __nv_fp8_##NAME(unsigned long v) : __nv_fp8_##NAME(float(v)) {}                                  \
    explicit __nv_fp8_##NAME(unsigned long long v) : __nv_fp8_##NAME(float(v)) {}                             \
    explicit __nv_fp8_##NAME(short v) : __nv_fp8_##NAME(float(v)) {}                                          \
    explicit __nv_fp8_##NAME(int v) : __nv_fp8_##NAME(float(v)) {}                                            \
    explicit __nv_fp8_##NAME(long v) : __nv_fp8_##NAME(float(v)) {}                                           \
    explicit __nv_fp8_##NAME(long long v) : __nv_fp8_##NAME(float(v)) {}                                      \
    double emu_value() const { return emu::fp8_value(__x, __NV_##KIND); }                                     \
    template <class I> I emu_to_int() const { return emu::saturate_int<I>(std::trunc(emu_value())); }        \
    explicit operator double() const { return emu_value(); }                                                  \
    explicit operator float() const { return float(emu_value()); }                                            \
    explicit operator __half() const { return __half(__nv_cvt_fp8_to_halfraw(__x, __NV_##KIND)); }            \
    explicit operator __nv_bfloat16() const { return emu::make16<__nv_bfloat16>(emu_value()); }               \
    explicit operator unsigned char() const { return emu_to_int<unsigned char>(); }                           \
    explicit operator signed char() const { return emu_to_int<signed char>(); }                               \
    explicit operator char() const { return emu_to_int<char>(); }                                             \
    explicit operator unsigned short() const { return emu_to_int<unsigned short>(); }                         \
    explicit operator short() const { return emu_to_int<short>(); }                                           \
    explicit operator unsigned int() const { return emu_to_int<unsigned int>(); }                             \
    explicit operator int() const { return emu_to_int<int>(); }                                               \
    explicit operator unsigned long() const { return emu_to_int<unsigned long>(); }                           \
    explicit operator long() const { return emu_to_int<long>(); }                                             \
    explicit operator unsigned long long() const { return emu_to_int<unsigned long long>(); }                 \
    explicit operator long long() const { return emu_to_int<long long>(); }                                   \
    explicit operator bool() const { return (__x & 0x7fu) != 0; }                                             \
  };                                                                                                          \
  struct __attribute__((aligned(2))) __nv_fp8x2_##NAME {                                                      \
    __nv_fp8x2_storage_t __x;                                                                                 \
    __nv_fp8x2_##NAME() = default;                                                                            \
    explicit __nv_fp8x2_##NAME(double2 f) : __x(__nv_cvt_double2_to_fp8x2(f, __NV_SATFINITE, __NV_##KIND)) {} \
    explicit __nv_fp8x2_##NAME(float2 f) : __x(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_##KIND)) {}   \
    explicit __nv_fp8x2_##NAME(__half2 f)                                                                     \
        : __x(__nv_cvt_halfraw2_to_fp8x2(__half2_raw(f), __NV_SATFINITE, __NV_##KIND)) {}                     \
    explicit __nv_fp8x2_##NAME(__nv_bfloat162 f)                                                              \
        : __x(__nv_cvt_bfloat16raw2_to_fp8x2(__nv_bfloat162_raw(f), __NV_SATFINITE, __NV_##KIND)) {}          \
    explicit operator __half2() const { return __half2(__nv_cvt_fp8x2_to_halfraw2(__x, __NV_##KIND)); }       \
    explicit operator float2() const {                                                                        \
      return float2{float(emu::fp8_value((__nv_fp8_storage_t)(__x & 0xff), __NV_##KIND)),                     \
                    float(emu::fp8_value((__nv_fp8_storage_t)(__x >> 8), __NV_##KIND))};                      \
    }                                                                                                         \
  };                                                                                                          \
  struct __attribute__((aligned(4))) __nv_fp8x4_##NAME {                                                      \
    __nv_fp8x4_storage_t __x;                                                                                 \
    __nv_fp8x4_##NAME() = default;                                                                            \
    explicit __nv_fp8x4_##NAME(double4 f)                                                                     \
        : __x(__nv_cvt_double2_to_fp8x2(double2{f.x, f.y}, __NV_SATFINITE, __NV_##KIND) |                     \
              unsigned(__nv_cvt_double2_to_fp8x2(double2{f.z, f.w}, __NV_SATFINITE, __NV_##KIND)) << 16) {}   \
    explicit __nv_fp8x4_##NAME(float4 f)                                                                      \
        : __x(__nv_cvt_float2_to_fp8x2(float2{f.x, f.y}, __NV_SATFINITE, __NV_##KIND) |                       \
              unsigned(__nv_cvt_float2_to_fp8x2(float2{f.z, f.w}, __NV_SATFINITE, __NV_##KIND)) << 16) {}     \
    explicit __nv_fp8x4_##NAME(__half2 lo, __half2 hi)                                                        \
        : __x(__nv_cvt_halfraw2_to_fp8x2(__half2_raw(lo), __NV_SATFINITE, __NV_##KIND) |                      \
              unsigned(__nv_cvt_halfraw2_to_fp8x2(__half2_raw(hi), __NV_SATFINITE, __NV_##KIND)) << 16) {}    \
    explicit __nv_fp8x4_##NAME(__nv_bfloat162 lo, __nv_bfloat162 hi)                                          \
        : __x(__nv_cvt_bfloat16raw2_to_fp8x2(__nv_bfloat162_raw(lo), __NV_SATFINITE, __NV_##KIND) |           \
              unsigned(__nv_cvt_bfloat16raw2_to_fp8x2(__nv_bfloat162_raw(hi), __NV_SATFINITE, __NV_##KIND))   \
                  << 16) {}                                                                                   \
    explicit operator float4() const {                                                                        \
      float v[4];                                                                                             \
      for (int k = 0; k < 4; ++k) v[k] = float(emu::fp8_value((__nv_fp8_storage_t)(__x >> (8 * k)), __NV_##KIND)); \
      return float4{v[0], v[1], v[2], v[3]};                                                                  \
    }                                                                                                         \
  };
EMU_FP8_CLASSES(e4m3, E4M3)
EMU_FP8_CLASSES(e5m2, E5M2)
#undef EMU_FP8_CLASSES
