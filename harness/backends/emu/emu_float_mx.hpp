// cuda_fp6.h and cuda_fp4.h for the emu backend: the OCP MX element formats E2M3 (bias 1, 3 mantissa bits, largest
// 7.5) and E3M2 (bias 3, 2 mantissa bits, largest 28), six bits held in a byte with the sign at bit 5, and E2M1
// (bias 1, 1 mantissa bit, largest 6), four bits with the sign at bit 3, two to a byte. None has an infinity or a NaN.
//
// A conversion rounds the exact value once, to nearest even (cudaRoundNearest) or toward zero (cudaRoundZero), the
// two modes CUDA defines for these formats; past the largest finite value it saturates to it (sign kept), and a NaN
// gives the positive largest value, as the CUDA Math API states. Widening to half is exact.
#pragma once

typedef __nv_fp8_storage_t __nv_fp6_storage_t;
typedef __nv_fp8x2_storage_t __nv_fp6x2_storage_t;
typedef __nv_fp8x4_storage_t __nv_fp6x4_storage_t;
typedef __nv_fp8_storage_t __nv_fp4_storage_t;
typedef __nv_fp8_storage_t __nv_fp4x2_storage_t;
typedef __nv_fp8x2_storage_t __nv_fp4x4_storage_t;
typedef enum __nv_fp6_interpretation_t { __NV_E2M3, __NV_E3M2 } __nv_fp6_interpretation_t;
typedef enum __nv_fp4_interpretation_t { __NV_E2M1 } __nv_fp4_interpretation_t;

namespace emu {
struct MxFormat { SmallFormat f; unsigned sign; };
inline MxFormat fp6_format(__nv_fp6_interpretation_t t) {
  return t == __NV_E2M3 ? MxFormat{{3, 1, 7.5}, 0x20} : MxFormat{{2, 3, 28.0}, 0x20};
}
inline MxFormat fp4_format(__nv_fp4_interpretation_t = __NV_E2M1) { return MxFormat{{1, 1, 6.0}, 0x8}; }

inline unsigned to_mx(double x, MxFormat m, cudaRoundMode mode, int line) {
  if (mode != cudaRoundNearest && mode != cudaRoundZero)
    device_assert("a conversion to fp6 or fp4 with a rounding mode other than cudaRoundNearest or cudaRoundZero",
                  line);
  if (x != x) return small_code(m.f.largest, m.f);
  double a = std::fabs(x);
  double r = a - a != 0 ? m.f.largest : round_small(a, m.f, mode == cudaRoundZero);
  return (std::signbit(x) ? m.sign : 0u) | small_code(r > m.f.largest ? m.f.largest : r, m.f);
}
inline double mx_value(unsigned code, MxFormat m) {
  double v = small_value(code & (m.sign - 1u), m.f);
  return code & m.sign ? -v : v;
}
inline unsigned encode_e2m3(double x) { return to_mx(x, fp6_format(__NV_E2M3), cudaRoundNearest, 0); }
inline unsigned encode_e3m2(double x) { return to_mx(x, fp6_format(__NV_E3M2), cudaRoundNearest, 0); }
inline unsigned encode_e2m1(double x) { return to_mx(x, fp4_format(), cudaRoundNearest, 0); }
inline double decode_e2m3(unsigned c) { return mx_value(c, fp6_format(__NV_E2M3)); }
inline double decode_e3m2(unsigned c) { return mx_value(c, fp6_format(__NV_E3M2)); }
inline double decode_e2m1(unsigned c) { return mx_value(c, fp4_format()); }
}  // namespace emu

// The conversions of one format family: NAME fp6 or fp4, FORMAT(t) its emu::MxFormat, W the bits between the two
// values of a pair (the first lowest).
#define EMU_MX_CONVERSIONS(NAME, FORMAT, W)                                                                    \
  inline __nv_##NAME##_storage_t __nv_cvt_double_to_##NAME(double x, __nv_##NAME##_interpretation_t t,        \
                                                           cudaRoundMode r, int line = __builtin_LINE()) {    \
    return (__nv_##NAME##_storage_t)emu::to_mx(x, FORMAT(t), r, line);                                        \
  }                                                                                                           \
  inline __nv_##NAME##_storage_t __nv_cvt_float_to_##NAME(float x, __nv_##NAME##_interpretation_t t,          \
                                                          cudaRoundMode r, int line = __builtin_LINE()) {     \
    return (__nv_##NAME##_storage_t)emu::to_mx(x, FORMAT(t), r, line);                                        \
  }                                                                                                           \
  inline __nv_##NAME##_storage_t __nv_cvt_halfraw_to_##NAME(__half_raw x, __nv_##NAME##_interpretation_t t,   \
                                                            cudaRoundMode r, int line = __builtin_LINE()) {   \
    return (__nv_##NAME##_storage_t)emu::to_mx(emu::HalfBits::value(x.x), FORMAT(t), r, line);                \
  }                                                                                                           \
  inline __nv_##NAME##_storage_t __nv_cvt_bfloat16raw_to_##NAME(                                             \
      __nv_bfloat16_raw x, __nv_##NAME##_interpretation_t t, cudaRoundMode r, int line = __builtin_LINE()) {  \
    return (__nv_##NAME##_storage_t)emu::to_mx(emu::Bf16Bits::value(x.x), FORMAT(t), r, line);                \
  }                                                                                                           \
  inline __nv_##NAME##x2_storage_t __nv_cvt_double2_to_##NAME##x2(                                           \
      double2 x, __nv_##NAME##_interpretation_t t, cudaRoundMode r, int line = __builtin_LINE()) {            \
    return (__nv_##NAME##x2_storage_t)(emu::to_mx(x.x, FORMAT(t), r, line) |                                  \
                                       emu::to_mx(x.y, FORMAT(t), r, line) << (W));                           \
  }                                                                                                           \
  inline __nv_##NAME##x2_storage_t __nv_cvt_float2_to_##NAME##x2(                                            \
      float2 x, __nv_##NAME##_interpretation_t t, cudaRoundMode r, int line = __builtin_LINE()) {             \
    return (__nv_##NAME##x2_storage_t)(emu::to_mx(x.x, FORMAT(t), r, line) |                                  \
                                       emu::to_mx(x.y, FORMAT(t), r, line) << (W));                           \
  }                                                                                                           \
  inline __nv_##NAME##x2_storage_t __nv_cvt_halfraw2_to_##NAME##x2(                                          \
      __half2_raw x, __nv_##NAME##_interpretation_t t, cudaRoundMode r, int line = __builtin_LINE()) {        \
    return (__nv_##NAME##x2_storage_t)(emu::to_mx(emu::HalfBits::value(x.x), FORMAT(t), r, line) |            \
                                       emu::to_mx(emu::HalfBits::value(x.y), FORMAT(t), r, line) << (W));     \
  }                                                                                                           \
  inline __nv_##NAME##x2_storage_t __nv_cvt_bfloat16raw2_to_##NAME##x2(                                      \
      __nv_bfloat162_raw x, __nv_##NAME##_interpretation_t t, cudaRoundMode r, int line = __builtin_LINE()) { \
    return (__nv_##NAME##x2_storage_t)(emu::to_mx(emu::Bf16Bits::value(x.x), FORMAT(t), r, line) |            \
                                       emu::to_mx(emu::Bf16Bits::value(x.y), FORMAT(t), r, line) << (W));     \
  }                                                                                                           \
  inline __half_raw __nv_cvt_##NAME##_to_halfraw(__nv_##NAME##_storage_t x, __nv_##NAME##_interpretation_t t) { \
    return __half_raw{emu::HalfBits::nearest(emu::mx_value(x, FORMAT(t)))};                                  \
  }                                                                                                           \
  inline __half2_raw __nv_cvt_##NAME##x2_to_halfraw2(__nv_##NAME##x2_storage_t x,                            \
                                                     __nv_##NAME##_interpretation_t t) {                      \
    return __half2_raw{__nv_cvt_##NAME##_to_halfraw((__nv_##NAME##_storage_t)(x & ((1u << (W)) - 1u)), t).x,  \
                       __nv_cvt_##NAME##_to_halfraw((__nv_##NAME##_storage_t)(x >> (W)), t).x};               \
  }
EMU_MX_CONVERSIONS(fp6, emu::fp6_format, 8)
EMU_MX_CONVERSIONS(fp4, emu::fp4_format, 4)
#undef EMU_MX_CONVERSIONS

EMU_SMALL_FLOAT_CLASSES(fp6, e2m3, __nv_fp6_storage_t, __nv_fp6x2_storage_t, __nv_fp6x4_storage_t, 8)
EMU_SMALL_FLOAT_CLASSES(fp6, e3m2, __nv_fp6_storage_t, __nv_fp6x2_storage_t, __nv_fp6x4_storage_t, 8)
EMU_SMALL_FLOAT_CLASSES(fp4, e2m1, __nv_fp4_storage_t, __nv_fp4x2_storage_t, __nv_fp4x4_storage_t, 4)
#undef EMU_SMALL_FLOAT_CLASSES
