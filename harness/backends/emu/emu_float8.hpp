// cuda_fp8.h for the emu backend: the 8-bit float formats E4M3 (bias 7, 3 mantissa bits, no infinity, largest
// 448, NaN S.1111.111) and E5M2 (bias 15, 2 mantissa bits, IEEE-like with infinities, largest 57344), the MX scale
// E8M0 (a power of two 2^-127..2^127, NaN 0xFF), the __nv_cvt_* conversions and the __nv_fp8_e4m3 / e5m2 / e8m0
// classes (with their x2 and x4 forms), held as bits.
//
// A conversion to FP8 rounds the exact value once, to nearest even (docs/KERNELS.md, "8-bit floats"): the value is
// scaled by a power of two so that its last kept bit has weight 1, and rounded there (exact in double). Then, as the
// CUDA Math API states: past the largest finite value, __NV_SATFINITE gives that value and __NV_NOSAT gives NaN
// (E4M3) or infinity (E5M2); a NaN gives E4M3's NaN, or E5M2's quiet NaN with the source's second mantissa bit;
// the sign is kept, zeros and NaN included. Widening to half is exact (a NaN becomes half's canonical NaN). The
// classes convert as CUDA's do: from floating types with saturation to finite, from integers exactly (one
// rounding), to integers toward zero with saturation (NaN to 0). Their constructors and conversions are all explicit.
#pragma once
#include <cmath>
#include <cstdint>

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;
typedef enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE } __nv_saturation_t;
typedef enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 } __nv_fp8_interpretation_t;

enum cudaRoundMode { cudaRoundNearest, cudaRoundZero, cudaRoundPosInf, cudaRoundMinInf };

namespace emu {
[[noreturn]] void device_assert(const char* what, int line);   // emu_runtime.cpp: a TRAP naming the rule broken

// A small binary format without infinities in its arithmetic here: `mantissa` stored bits, `bias`, the largest
// finite value. E4M3 and E5M2 (this header), E2M3, E3M2 and E2M1 (emu_float_mx.hpp).
struct SmallFormat { int mantissa, bias; double largest; };

// The finite magnitude a >= 0 rounded at the weight of its format's last kept bit (subnormals: the smallest normal's):
// to nearest even, or toward zero. Exact: a power-of-two scaling, then an integer rounding. The result may be one
// binade up (a carry), or past `largest`: the caller decides what overflow gives.
inline double round_small(double a, SmallFormat f, bool toward_zero) {
  int min_exp = 1 - f.bias;
  int e = a == 0 ? min_exp : std::ilogb(a) > min_exp ? std::ilogb(a) : min_exp;
  double ulp = std::ldexp(1.0, e - f.mantissa);
  return (toward_zero ? std::trunc(a / ulp) : std::nearbyint(a / ulp)) * ulp;
}
// The code of a representable magnitude r (sign bit clear).
inline unsigned small_code(double r, SmallFormat f) {
  if (r == 0) return 0;
  int min_exp = 1 - f.bias, re = std::ilogb(r);
  if (re < min_exp) return unsigned(r / std::ldexp(1.0, min_exp - f.mantissa));      // subnormal: exponent field 0
  return unsigned(re + f.bias) << f.mantissa | (unsigned(r / std::ldexp(1.0, re - f.mantissa)) - (1u << f.mantissa));
}
// The magnitude of a code (sign bit clear) read as a normal/subnormal number (NaN and infinity codes: the caller's).
inline double small_value(unsigned code, SmallFormat f) {
  unsigned ex = code >> f.mantissa, mant = code & ((1u << f.mantissa) - 1u);
  if (ex == 0) return std::ldexp(double(mant), 1 - f.bias - f.mantissa);
  return std::ldexp(double(mant | (1u << f.mantissa)), int(ex) - f.bias - f.mantissa);
}

inline SmallFormat fp8_format(__nv_fp8_interpretation_t t) {
  return t == __NV_E4M3 ? SmallFormat{3, 7, 448.0} : SmallFormat{2, 15, 57344.0};
}

inline __nv_fp8_storage_t to_fp8(double x, __nv_saturation_t sat, __nv_fp8_interpretation_t t) {
  SmallFormat f = fp8_format(t);
  unsigned char sign = std::signbit(x) ? 0x80 : 0;
  if (x != x) {
    uint64_t bits = __builtin_bit_cast(uint64_t, x);
    return (unsigned char)(sign | (t == __NV_E4M3 ? 0x7f : 0x7e | ((bits >> 50) & 1u)));
  }
  double a = std::fabs(x);
  double r = a - a != 0 ? a : round_small(a, f, false);
  if (r > f.largest) {
    if (sat == __NV_SATFINITE) r = f.largest;
    else return (unsigned char)(sign | (t == __NV_E4M3 ? 0x7f : 0x7c));
  }
  return (unsigned char)(sign | small_code(r, f));
}

inline double fp8_value(__nv_fp8_storage_t b, __nv_fp8_interpretation_t t) {
  SmallFormat f = fp8_format(t);
  double s = b & 0x80 ? -1.0 : 1.0;
  unsigned ex = (b & 0x7f) >> f.mantissa, mant = b & ((1u << f.mantissa) - 1u);
  if (t == __NV_E4M3 ? (b & 0x7f) == 0x7f : ex == 0x1f) {
    if (t == __NV_E5M2 && mant == 0) return s * INFINITY;
    return NAN;
  }
  return s * small_value(b & 0x7fu, f);
}

// E8M0, the MX formats' scale: 2^(code - 127) for codes 0..254, NaN 0xFF. A conversion rounds |x| to a power of two
// toward zero (cudaRoundZero) or up (cudaRoundPosInf), the two modes CUDA defines for it; below 2^-127 (zero
// included) gives 2^-127; above 2^127 (infinity included) 2^127 with __NV_SATFINITE, else NaN; NaN gives NaN.
inline __nv_fp8_storage_t to_e8m0(double x, __nv_saturation_t sat, cudaRoundMode mode, int line) {
  if (mode != cudaRoundZero && mode != cudaRoundPosInf)
    device_assert("a conversion to e8m0 with a rounding mode other than cudaRoundZero or cudaRoundPosInf", line);
  if (x != x) return 0xff;
  double a = std::fabs(x);
  if (a - a != 0) return sat == __NV_SATFINITE ? 0xfe : 0xff;
  if (a == 0) return 0x00;
  int e = std::ilogb(a);
  if (mode == cudaRoundPosInf && std::ldexp(1.0, e) != a) ++e;
  if (e < -127) return 0x00;
  if (e > 127) return sat == __NV_SATFINITE ? 0xfe : 0xff;
  return (__nv_fp8_storage_t)(e + 127);
}
inline double e8m0_value(__nv_fp8_storage_t b) { return b == 0xff ? NAN : std::ldexp(1.0, int(b) - 127); }
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

// E8M0 conversions: |x| rounded to a power of two (to_e8m0), and back to bfloat16, exactly (2^-127 is a subnormal
// bfloat16; NaN becomes bfloat16's canonical NaN).
inline __nv_fp8_storage_t __nv_cvt_double_to_e8m0(double x, __nv_saturation_t s, cudaRoundMode r,
                                                  int line = __builtin_LINE()) {
  return emu::to_e8m0(x, s, r, line);
}
inline __nv_fp8_storage_t __nv_cvt_float_to_e8m0(float x, __nv_saturation_t s, cudaRoundMode r,
                                                 int line = __builtin_LINE()) {
  return emu::to_e8m0(x, s, r, line);
}
inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_e8m0(__nv_bfloat16_raw x, __nv_saturation_t s, cudaRoundMode r,
                                                       int line = __builtin_LINE()) {
  return emu::to_e8m0(emu::Bf16Bits::value(x.x), s, r, line);
}
inline __nv_fp8x2_storage_t __nv_cvt_double2_to_e8m0x2(double2 x, __nv_saturation_t s, cudaRoundMode r,
                                                       int line = __builtin_LINE()) {
  return (__nv_fp8x2_storage_t)(emu::to_e8m0(x.x, s, r, line) | emu::to_e8m0(x.y, s, r, line) << 8);
}
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_e8m0x2(float2 x, __nv_saturation_t s, cudaRoundMode r,
                                                      int line = __builtin_LINE()) {
  return (__nv_fp8x2_storage_t)(emu::to_e8m0(x.x, s, r, line) | emu::to_e8m0(x.y, s, r, line) << 8);
}
inline __nv_fp8x2_storage_t __nv_cvt_bfloat162raw_to_e8m0x2(__nv_bfloat162_raw x, __nv_saturation_t s,
                                                            cudaRoundMode r, int line = __builtin_LINE()) {
  return (__nv_fp8x2_storage_t)(emu::to_e8m0(emu::Bf16Bits::value(x.x), s, r, line) |
                                emu::to_e8m0(emu::Bf16Bits::value(x.y), s, r, line) << 8);
}
inline __nv_bfloat16_raw __nv_cvt_e8m0_to_bf16raw(__nv_fp8_storage_t x) {
  return __nv_bfloat16_raw{x == 0xff ? (unsigned short)0x7fff : emu::Bf16Bits::nearest(emu::e8m0_value(x))};
}
inline __nv_bfloat162_raw __nv_cvt_e8m0x2_to_bf162raw(__nv_fp8x2_storage_t x) {
  return __nv_bfloat162_raw{__nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)(x & 0xff)).x,
                            __nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)(x >> 8)).x};
}

// What the classes' constructors and conversions do per format (CUDA's: from floating types saturating to finite,
// E8M0 rounding up; integers exactly, through int_to_odd, so that the one rounding is the format's).
namespace emu {
inline unsigned encode_e4m3(double x) { return to_fp8(x, __NV_SATFINITE, __NV_E4M3); }
inline unsigned encode_e5m2(double x) { return to_fp8(x, __NV_SATFINITE, __NV_E5M2); }
inline unsigned encode_e8m0(double x) { return to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf, 0); }
inline double decode_e4m3(unsigned c) { return fp8_value((__nv_fp8_storage_t)c, __NV_E4M3); }
inline double decode_e5m2(unsigned c) { return fp8_value((__nv_fp8_storage_t)c, __NV_E5M2); }
inline double decode_e8m0(unsigned c) { return e8m0_value((__nv_fp8_storage_t)c); }
}  // namespace emu

// The classes of one 8-, 6- or 4-bit format and their pairs and quadruples: PREFIX fp8, fp6 or fp4; NAME the format
// (emu::encode_NAME and emu::decode_NAME convert); S1, S2, S4 the storage of one, two and four values; W the bits
// from one packed value to the next (the first value lowest). Every constructor and conversion is explicit, as in
// CUDA 13; conversions to integers truncate and saturate (NaN to 0).
#define EMU_SMALL_FLOAT_CLASSES(PREFIX, NAME, S1, S2, S4, W)                                                     \
  struct __attribute__((aligned(sizeof(S1)))) __nv_##PREFIX##_##NAME {                                        \
    S1 __x;                                                                                                   \
    __nv_##PREFIX##_##NAME() = default;                                                                       \
    explicit __nv_##PREFIX##_##NAME(double f) : __x(S1(emu::encode_##NAME(f))) {}                             \
    explicit __nv_##PREFIX##_##NAME(float f) : __nv_##PREFIX##_##NAME(double(f)) {}                           \
    explicit __nv_##PREFIX##_##NAME(__half f) : __nv_##PREFIX##_##NAME(double(float(f))) {}                   \
    explicit __nv_##PREFIX##_##NAME(__nv_bfloat16 f) : __nv_##PREFIX##_##NAME(double(float(f))) {}            \
    explicit __nv_##PREFIX##_##NAME(unsigned short v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}        \
    explicit __nv_##PREFIX##_##NAME(unsigned int v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}           \
    explicit __nv_##PREFIX##_##NAME(unsigned long v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}          \
    explicit __nv_##PREFIX##_##NAME(unsigned long long v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}     \
    explicit __nv_##PREFIX##_##NAME(short v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}                  \
    explicit __nv_##PREFIX##_##NAME(int v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}                    \
    explicit __nv_##PREFIX##_##NAME(long v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}                   \
    explicit __nv_##PREFIX##_##NAME(long long v) : __nv_##PREFIX##_##NAME(emu::int_to_odd(v)) {}              \
    double emu_value() const { return emu::decode_##NAME(__x); }                                              \
    template <class I> I emu_to_int() const { return emu::saturate_int<I>(std::trunc(emu_value())); }        \
    explicit operator double() const { return emu_value(); }                                                  \
    explicit operator float() const { return float(emu_value()); }                                            \
    explicit operator __half() const { return emu::make16<__half>(emu_value()); }                             \
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
    explicit operator bool() const { return emu_value() != 0; }                                               \
  };                                                                                                          \
  struct __attribute__((aligned(sizeof(S2)))) __nv_##PREFIX##x2_##NAME {                                      \
    S2 __x;                                                                                                   \
    __nv_##PREFIX##x2_##NAME() = default;                                                                     \
    static S2 emu_pack(double a, double b) { return S2(emu::encode_##NAME(a) | emu::encode_##NAME(b) << (W)); } \
    double emu_at(int k) const { return emu::decode_##NAME(unsigned(__x) >> ((W) * k) & ((1u << (W)) - 1u)); } \
    explicit __nv_##PREFIX##x2_##NAME(double2 f) : __x(emu_pack(f.x, f.y)) {}                                 \
    explicit __nv_##PREFIX##x2_##NAME(float2 f) : __x(emu_pack(f.x, f.y)) {}                                  \
    explicit __nv_##PREFIX##x2_##NAME(__half2 f) : __x(emu_pack(float(f.x), float(f.y))) {}                   \
    explicit __nv_##PREFIX##x2_##NAME(__nv_bfloat162 f) : __x(emu_pack(float(f.x), float(f.y))) {}            \
    explicit operator __half2() const {                                                                       \
      return __half2(emu::make16<__half>(emu_at(0)), emu::make16<__half>(emu_at(1)));                         \
    }                                                                                                         \
    explicit operator float2() const { return float2{float(emu_at(0)), float(emu_at(1))}; }                   \
  };                                                                                                          \
  struct __attribute__((aligned(sizeof(S4)))) __nv_##PREFIX##x4_##NAME {                                      \
    S4 __x;                                                                                                   \
    __nv_##PREFIX##x4_##NAME() = default;                                                                     \
    static S4 emu_pack(double a, double b, double c, double d) {                                              \
      return S4(emu::encode_##NAME(a) | emu::encode_##NAME(b) << (W) | emu::encode_##NAME(c) << (2 * (W)) |   \
                emu::encode_##NAME(d) << (3 * (W)));                                                          \
    }                                                                                                         \
    double emu_at(int k) const { return emu::decode_##NAME(unsigned(__x) >> ((W) * k) & ((1u << (W)) - 1u)); } \
    explicit __nv_##PREFIX##x4_##NAME(double4 f) : __x(emu_pack(f.x, f.y, f.z, f.w)) {}                       \
    explicit __nv_##PREFIX##x4_##NAME(float4 f) : __x(emu_pack(f.x, f.y, f.z, f.w)) {}                        \
    explicit __nv_##PREFIX##x4_##NAME(__half2 lo, __half2 hi)                                                 \
        : __x(emu_pack(float(lo.x), float(lo.y), float(hi.x), float(hi.y))) {}                                \
    explicit __nv_##PREFIX##x4_##NAME(__nv_bfloat162 lo, __nv_bfloat162 hi)                                   \
        : __x(emu_pack(float(lo.x), float(lo.y), float(hi.x), float(hi.y))) {}                                \
    explicit operator float4() const {                                                                        \
      return float4{float(emu_at(0)), float(emu_at(1)), float(emu_at(2)), float(emu_at(3))};                  \
    }                                                                                                         \
  };
EMU_SMALL_FLOAT_CLASSES(fp8, e4m3, __nv_fp8_storage_t, __nv_fp8x2_storage_t, __nv_fp8x4_storage_t, 8)
EMU_SMALL_FLOAT_CLASSES(fp8, e5m2, __nv_fp8_storage_t, __nv_fp8x2_storage_t, __nv_fp8x4_storage_t, 8)
EMU_SMALL_FLOAT_CLASSES(fp8, e8m0, __nv_fp8_storage_t, __nv_fp8x2_storage_t, __nv_fp8x4_storage_t, 8)
// (EMU_SMALL_FLOAT_CLASSES stays defined for emu_float_mx.hpp, which undefines it.)
