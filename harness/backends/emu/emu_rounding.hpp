// CUDA's explicitly rounded float and double intrinsics for the emu backend: the arithmetic (__fadd_rz,
// __fmul_ru, __fmaf_rd, __ddiv_rz, __dsqrt_ru, ...) and the conversions (__uint2float_rd, __ll2float_rn,
// __double2float_rz, __float2ll_ru, ...) in the four IEEE modes: to nearest even (_rn), toward zero (_rz), down
// (_rd) and up (_ru). The host's rounding mode is never changed (fibers share it).
//
// How the exact result is rounded once (docs/KERNELS.md, "Rounded intrinsics"):
// - float results: the exact value is first rounded to odd in double (53 >= 24 + 2 bits: a later single rounding
//   to float in any mode is then the correct one). Sums come from TwoSum, products are exact in double, quotients
//   and square roots carry the sign of their exact remainder (fma), which says on which side the exact value is.
// - double results: the same in __float128 (113 >= 53 + 2), whose products of doubles are exact.
// - a value rounded to nearest is stepped one ulp where it lies on the wrong side of the exact one; an overflow
//   to infinity comes back to the largest finite value in the modes that do not round away from it.
#pragma once
#include "emu_exact.hpp"

namespace emu {
// The sign of an exact remainder as a direction: where the exact quotient or root lies from the rounded one.
template <class W>
inline W side(W r, bool flip) {
  return r == 0 ? W(0) : ((r > 0) != flip ? W(1) : W(-1));
}
// a + b rounded once into N, through the sum rounded to odd in the wide format W. An exact zero is -0 when rounding
// down unless both operands are +0 (IEEE 754's rule for x + (-x)).
template <class N, class W>
inline N sum_rounded(W a, W b, int mode) {
  W s = sum_to_odd(a, b);
  if (s == 0 && mode == kRoundDown && !(a == 0 && b == 0 && !sign_bit(a) && !sign_bit(b))) return -N(0);
  return round_to<N>(s, mode);
}

inline float fadd(float a, float b, int m) { return sum_rounded<float, double>(a, b, m); }
inline float fmul(float a, float b, int m) { return round_to<float>(double(a) * double(b), m); }   // exact product
inline float fdiv(float a, float b, int m) {
  double q = double(a) / double(b), r = std::fma(-q, double(b), double(a));   // exact remainder: a = q*b + r
  return round_to<float>(to_odd(q, side(r, b < 0)), m);
}
inline float fsqrt(float a, int m) {
  double s = std::sqrt(double(a)), r = std::fma(-s, s, double(a));
  return round_to<float>(to_odd(s, side(r, false)), m);
}
inline float ffma(float a, float b, float c, int m) { return sum_rounded<float, double>(double(a) * double(b), c, m); }
using quad = __float128;
inline double dadd(double a, double b, int m) { return sum_rounded<double, quad>(a, b, m); }
inline double dmul(double a, double b, int m) { return round_to<double>(quad(a) * quad(b), m); }
inline double ddiv(double a, double b, int m) {
  double q = a / b;
  if (q - q != 0 && a - a == 0 && b != 0 && b - b == 0) return round_to<double>(quad(a) / quad(b), m);   // overflow
  quad r = quad(a) - quad(q) * quad(b);   // exact: q*b is exact in quad and lies within an ulp of a
  return round_to<double>(to_odd(quad(q), side(r, b < 0)), m);
}
inline double dsqrt(double a, int m) {
  double s = std::sqrt(a);
  quad r = quad(a) - quad(s) * quad(s);
  return round_to<double>(to_odd(quad(s), side(r, false)), m);
}
inline double dfma(double a, double b, double c, int m) { return sum_rounded<double, quad>(quad(a) * quad(b), c, m); }
// 1/sqrt(a) rounded to nearest: the float whose neighbouring midpoints bracket the exact value, checked by squaring
// them in quad (a midpoint has 25 bits, its square times a float is exact there).
inline float frsqrt_rn(float a) {
  float y = float(1.0 / std::sqrt(double(a)));
  if (!(a > 0) || a - a != 0 || y - y != 0) return y;
  for (int k = 0; k < 4; ++k) {
    float up = std::nextafter(y, INFINITY), down = std::nextafter(y, 0.0f);
    quad hi = (quad(y) + quad(up)) / 2, lo = (quad(y) + quad(down)) / 2;
    quad over = hi * hi * quad(a) - 1, under = lo * lo * quad(a) - 1;   // the root is below hi and above lo
    if (over < 0 || (over == 0 && (__builtin_bit_cast(uint32_t, y) & 1u))) y = up;
    else if (under > 0 || (under == 0 && (__builtin_bit_cast(uint32_t, y) & 1u))) y = down;
    else break;
  }
  return y;
}
// Integers: 64-bit ones rounded to odd into double first (int_to_odd).
template <class I> inline float i2f(I v, int m) { return round_to<float>(int_to_odd(v), m); }
template <class I> inline double i2d(I v, int m) {
  return sizeof(I) <= 4 ? double(v) : round_to<double>(quad(v), m);
}
template <class I, class F> inline I f2i(F v, int m) {
  return saturate_int<I>(round_int(double(v), m));
}
}  // namespace emu

// One line per intrinsic and mode, so that every name is spelled out (toolchain.device_api_has reads them).
inline float __fadd_rz(float a, float b) { return emu::fadd(a, b, emu::kRoundZero); }
inline float __fadd_rd(float a, float b) { return emu::fadd(a, b, emu::kRoundDown); }
inline float __fadd_ru(float a, float b) { return emu::fadd(a, b, emu::kRoundUp); }
inline float __fsub_rz(float a, float b) { return emu::fadd(a, -b, emu::kRoundZero); }
inline float __fsub_rd(float a, float b) { return emu::fadd(a, -b, emu::kRoundDown); }
inline float __fsub_ru(float a, float b) { return emu::fadd(a, -b, emu::kRoundUp); }
inline float __fmul_rz(float a, float b) { return emu::fmul(a, b, emu::kRoundZero); }
inline float __fmul_rd(float a, float b) { return emu::fmul(a, b, emu::kRoundDown); }
inline float __fmul_ru(float a, float b) { return emu::fmul(a, b, emu::kRoundUp); }
inline float __fdiv_rz(float a, float b) { return emu::fdiv(a, b, emu::kRoundZero); }
inline float __fdiv_rd(float a, float b) { return emu::fdiv(a, b, emu::kRoundDown); }
inline float __fdiv_ru(float a, float b) { return emu::fdiv(a, b, emu::kRoundUp); }
inline float __frcp_rz(float a) { return emu::fdiv(1.0f, a, emu::kRoundZero); }
inline float __frcp_rd(float a) { return emu::fdiv(1.0f, a, emu::kRoundDown); }
inline float __frcp_ru(float a) { return emu::fdiv(1.0f, a, emu::kRoundUp); }
inline float __fsqrt_rz(float a) { return emu::fsqrt(a, emu::kRoundZero); }
inline float __fsqrt_rd(float a) { return emu::fsqrt(a, emu::kRoundDown); }
inline float __fsqrt_ru(float a) { return emu::fsqrt(a, emu::kRoundUp); }
inline float __frsqrt_rn(float a) { return emu::frsqrt_rn(a); }
inline float __fmaf_rz(float a, float b, float c) { return emu::ffma(a, b, c, emu::kRoundZero); }
inline float __fmaf_rd(float a, float b, float c) { return emu::ffma(a, b, c, emu::kRoundDown); }
inline float __fmaf_ru(float a, float b, float c) { return emu::ffma(a, b, c, emu::kRoundUp); }
inline float __fmaf_ieee_rn(float a, float b, float c) { return std::fmaf(a, b, c); }
inline float __fmaf_ieee_rz(float a, float b, float c) { return emu::ffma(a, b, c, emu::kRoundZero); }
inline float __fmaf_ieee_rd(float a, float b, float c) { return emu::ffma(a, b, c, emu::kRoundDown); }
inline float __fmaf_ieee_ru(float a, float b, float c) { return emu::ffma(a, b, c, emu::kRoundUp); }
inline double __dadd_rz(double a, double b) { return emu::dadd(a, b, emu::kRoundZero); }
inline double __dadd_rd(double a, double b) { return emu::dadd(a, b, emu::kRoundDown); }
inline double __dadd_ru(double a, double b) { return emu::dadd(a, b, emu::kRoundUp); }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dsub_rz(double a, double b) { return emu::dadd(a, -b, emu::kRoundZero); }
inline double __dsub_rd(double a, double b) { return emu::dadd(a, -b, emu::kRoundDown); }
inline double __dsub_ru(double a, double b) { return emu::dadd(a, -b, emu::kRoundUp); }
inline double __dmul_rz(double a, double b) { return emu::dmul(a, b, emu::kRoundZero); }
inline double __dmul_rd(double a, double b) { return emu::dmul(a, b, emu::kRoundDown); }
inline double __dmul_ru(double a, double b) { return emu::dmul(a, b, emu::kRoundUp); }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __ddiv_rz(double a, double b) { return emu::ddiv(a, b, emu::kRoundZero); }
inline double __ddiv_rd(double a, double b) { return emu::ddiv(a, b, emu::kRoundDown); }
inline double __ddiv_ru(double a, double b) { return emu::ddiv(a, b, emu::kRoundUp); }
inline double __drcp_rn(double a) { return 1.0 / a; }
inline double __drcp_rz(double a) { return emu::ddiv(1.0, a, emu::kRoundZero); }
inline double __drcp_rd(double a) { return emu::ddiv(1.0, a, emu::kRoundDown); }
inline double __drcp_ru(double a) { return emu::ddiv(1.0, a, emu::kRoundUp); }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline double __dsqrt_rz(double a) { return emu::dsqrt(a, emu::kRoundZero); }
inline double __dsqrt_rd(double a) { return emu::dsqrt(a, emu::kRoundDown); }
inline double __dsqrt_ru(double a) { return emu::dsqrt(a, emu::kRoundUp); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __fma_rz(double a, double b, double c) { return emu::dfma(a, b, c, emu::kRoundZero); }
inline double __fma_rd(double a, double b, double c) { return emu::dfma(a, b, c, emu::kRoundDown); }
inline double __fma_ru(double a, double b, double c) { return emu::dfma(a, b, c, emu::kRoundUp); }
inline float __double2float_rn(double d) { return float(d); }
inline float __double2float_rz(double d) { return emu::round_to<float>(d, emu::kRoundZero); }
inline float __double2float_rd(double d) { return emu::round_to<float>(d, emu::kRoundDown); }
inline float __double2float_ru(double d) { return emu::round_to<float>(d, emu::kRoundUp); }
inline float __int2float_rz(int i) { return emu::i2f(i, emu::kRoundZero); }
inline float __int2float_rd(int i) { return emu::i2f(i, emu::kRoundDown); }
inline float __int2float_ru(int i) { return emu::i2f(i, emu::kRoundUp); }
inline float __uint2float_rn(unsigned i) { return emu::i2f(i, emu::kRoundNearest); }
inline float __uint2float_rz(unsigned i) { return emu::i2f(i, emu::kRoundZero); }
inline float __uint2float_rd(unsigned i) { return emu::i2f(i, emu::kRoundDown); }
inline float __uint2float_ru(unsigned i) { return emu::i2f(i, emu::kRoundUp); }
inline float __ll2float_rn(long long i) { return emu::i2f(i, emu::kRoundNearest); }
inline float __ll2float_rz(long long i) { return emu::i2f(i, emu::kRoundZero); }
inline float __ll2float_rd(long long i) { return emu::i2f(i, emu::kRoundDown); }
inline float __ll2float_ru(long long i) { return emu::i2f(i, emu::kRoundUp); }
inline float __ull2float_rn(unsigned long long i) { return emu::i2f(i, emu::kRoundNearest); }
inline float __ull2float_rz(unsigned long long i) { return emu::i2f(i, emu::kRoundZero); }
inline float __ull2float_rd(unsigned long long i) { return emu::i2f(i, emu::kRoundDown); }
inline float __ull2float_ru(unsigned long long i) { return emu::i2f(i, emu::kRoundUp); }
inline double __int2double_rn(int i) { return double(i); }
inline double __uint2double_rn(unsigned i) { return double(i); }
inline double __ll2double_rn(long long i) { return emu::i2d(i, emu::kRoundNearest); }
inline double __ll2double_rz(long long i) { return emu::i2d(i, emu::kRoundZero); }
inline double __ll2double_rd(long long i) { return emu::i2d(i, emu::kRoundDown); }
inline double __ll2double_ru(long long i) { return emu::i2d(i, emu::kRoundUp); }
inline double __ull2double_rn(unsigned long long i) { return emu::i2d(i, emu::kRoundNearest); }
inline double __ull2double_rz(unsigned long long i) { return emu::i2d(i, emu::kRoundZero); }
inline double __ull2double_rd(unsigned long long i) { return emu::i2d(i, emu::kRoundDown); }
inline double __ull2double_ru(unsigned long long i) { return emu::i2d(i, emu::kRoundUp); }
inline unsigned __float2uint_rz(float f) { return emu::f2i<unsigned>(f, emu::kRoundZero); }
inline unsigned __float2uint_rd(float f) { return emu::f2i<unsigned>(f, emu::kRoundDown); }
inline unsigned __float2uint_ru(float f) { return emu::f2i<unsigned>(f, emu::kRoundUp); }
inline long long __float2ll_rn(float f) { return emu::f2i<long long>(f, emu::kRoundNearest); }
inline long long __float2ll_rz(float f) { return emu::f2i<long long>(f, emu::kRoundZero); }
inline long long __float2ll_rd(float f) { return emu::f2i<long long>(f, emu::kRoundDown); }
inline long long __float2ll_ru(float f) { return emu::f2i<long long>(f, emu::kRoundUp); }
inline unsigned long long __float2ull_rn(float f) { return emu::f2i<unsigned long long>(f, emu::kRoundNearest); }
inline unsigned long long __float2ull_rz(float f) { return emu::f2i<unsigned long long>(f, emu::kRoundZero); }
inline unsigned long long __float2ull_rd(float f) { return emu::f2i<unsigned long long>(f, emu::kRoundDown); }
inline unsigned long long __float2ull_ru(float f) { return emu::f2i<unsigned long long>(f, emu::kRoundUp); }
inline int __double2int_rn(double d) { return emu::f2i<int>(d, emu::kRoundNearest); }
inline int __double2int_rz(double d) { return emu::f2i<int>(d, emu::kRoundZero); }
inline int __double2int_rd(double d) { return emu::f2i<int>(d, emu::kRoundDown); }
inline int __double2int_ru(double d) { return emu::f2i<int>(d, emu::kRoundUp); }
inline unsigned __double2uint_rn(double d) { return emu::f2i<unsigned>(d, emu::kRoundNearest); }
inline unsigned __double2uint_rz(double d) { return emu::f2i<unsigned>(d, emu::kRoundZero); }
inline unsigned __double2uint_rd(double d) { return emu::f2i<unsigned>(d, emu::kRoundDown); }
inline unsigned __double2uint_ru(double d) { return emu::f2i<unsigned>(d, emu::kRoundUp); }
inline long long __double2ll_rn(double d) { return emu::f2i<long long>(d, emu::kRoundNearest); }
inline long long __double2ll_rz(double d) { return emu::f2i<long long>(d, emu::kRoundZero); }
inline long long __double2ll_rd(double d) { return emu::f2i<long long>(d, emu::kRoundDown); }
inline long long __double2ll_ru(double d) { return emu::f2i<long long>(d, emu::kRoundUp); }
inline unsigned long long __double2ull_rn(double d) { return emu::f2i<unsigned long long>(d, emu::kRoundNearest); }
inline unsigned long long __double2ull_rz(double d) { return emu::f2i<unsigned long long>(d, emu::kRoundZero); }
inline unsigned long long __double2ull_rd(double d) { return emu::f2i<unsigned long long>(d, emu::kRoundDown); }
inline unsigned long long __double2ull_ru(double d) { return emu::f2i<unsigned long long>(d, emu::kRoundUp); }
inline int __double2hiint(double d) { return int(__builtin_bit_cast(uint64_t, d) >> 32); }
inline int __double2loint(double d) { return int(uint32_t(__builtin_bit_cast(uint64_t, d))); }
inline double __hiloint2double(int hi, int lo) {
  return __builtin_bit_cast(double, uint64_t(uint32_t(hi)) << 32 | uint32_t(lo));
}
