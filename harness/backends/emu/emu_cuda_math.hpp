// CUDA's device math that C's library lacks, for the device code a CUDA compile takes (cuRAND's normal generators
// call erfcinvf and sincospi there):
// - erfinv, erfcinv, normcdf, normcdfinv and their float forms. Each inverse is solved in long double: a bracket that
//   always holds the root, narrowed by Newton steps on erfc (or erf), with a bisection wherever a step would leave
//   the bracket, until a step no longer moves. erfc, not 1 - erf, keeps the relative accuracy of small tail
//   probabilities, and erf's own root that of small arguments. The float forms round the long double root once;
//   CUDA documents 2 to 5 ulp for its own.
// - sinpi, cospi, sincospi (x times pi, reduced exactly to [-1, 1] first, so whole and half turns are exact zeros),
//   rcbrt, erfcx, the norms norm3d, norm4d, rnorm3d, rnorm4d, rhypot, and their float forms, in long double.
#pragma once
#include <cmath>
#include <limits>

namespace emu {
// x in (lo, hi) with f(x) == y for f = erfc (decreasing, `tail`) or erf (increasing), from x0
inline long double erf_root(long double y, bool tail, long double lo, long double hi, long double x) {
  const long double two_over_sqrt_pi = 1.1283791670955125738961589031215452L;
  for (int i = 0; i < 200; ++i) {
    long double f = (tail ? std::erfc(x) : std::erf(x)) - y;
    if (f == 0) return x;
    if ((f > 0) == tail) lo = x; else hi = x;
    long double slope = (tail ? -two_over_sqrt_pi : two_over_sqrt_pi) * std::exp(-x * x);
    long double next = slope != 0 ? x - f / slope : (lo + hi) / 2;
    if (!(next > lo && next < hi)) next = (lo + hi) / 2;
    if (next == x || hi - lo <= std::numeric_limits<long double>::epsilon() * std::fabs(x)) break;
    x = next;
  }
  return x;
}
inline long double erfcinv_l(long double y) {
  if (y != y || y < 0 || y > 2) return std::numeric_limits<long double>::quiet_NaN();
  if (y == 0) return std::numeric_limits<long double>::infinity();
  if (y == 2) return -std::numeric_limits<long double>::infinity();
  if (y > 0.5L && y < 1.5L) {                    // near the middle erf's own root keeps x's relative accuracy
    return erf_root(1.0L - y, false, -30.0L, 30.0L, 0.0L);
  }
  return erf_root(y, true, -30.0L, 30.0L, 0.0L);  // erfc(-30) == 2 and erfc(30) == 0 in long double
}
inline long double erfinv_l(long double y) {
  if (y != y || y < -1 || y > 1) return std::numeric_limits<long double>::quiet_NaN();
  if (y == 0) return y;                          // keeps the sign of zero
  long double a = std::fabs(y);
  // small |y|: erf's root (a tiny y has a tiny, exact inverse); else erfc's, through 1 - |y|, exact in long double
  long double x = a < 0.5L ? erf_root(a, false, 0.0L, 30.0L, a * 0.886226925452758013649083741671L)
                           : erfcinv_l(1.0L - a);
  return y < 0 ? -x : x;
}
}  // namespace emu

inline float erfinvf(float y) { return (float)emu::erfinv_l(y); }
inline double erfinv(double y) { return (double)emu::erfinv_l(y); }
inline float erfcinvf(float y) { return (float)emu::erfcinv_l(y); }
inline double erfcinv(double y) { return (double)emu::erfcinv_l(y); }
inline float normcdff(float x) { return (float)(0.5L * std::erfc(-(long double)x * 0.70710678118654752440084436210484903L)); }
inline double normcdf(double x) { return (double)(0.5L * std::erfc(-(long double)x * 0.70710678118654752440084436210484903L)); }
inline float normcdfinvf(float p) { return (float)(-1.41421356237309504880168872420969808L * emu::erfcinv_l(2.0L * p)); }
inline double normcdfinv(double p) { return (double)(-1.41421356237309504880168872420969808L * emu::erfcinv_l(2.0L * p)); }

namespace emu {
inline long double pi_l() { return 3.14159265358979323846264338327950288L; }
inline long double turns(long double x) { return std::remainder(x, 2.0L); }   // exact: x - 2n in [-1, 1]
inline long double sinpi_l(long double x) {
  if (std::isinf(x)) return std::numeric_limits<long double>::quiet_NaN();
  long double r = turns(x);
  if (r == std::trunc(r)) return std::copysign(0.0L, x);                // sin(pi n) is 0 for a whole n
  return std::sin(pi_l() * r);
}
inline long double cospi_l(long double x) {
  if (std::isinf(x)) return std::numeric_limits<long double>::quiet_NaN();
  long double r = std::fabs(turns(x));
  if (r == 0.5L) return 0.0L;
  return std::cos(pi_l() * r);
}
inline long double erfcx_l(long double x) {
  if (x > 1.0e4L) return 1.0L / (x * std::sqrt(pi_l()));                 // exp(x^2) erfc(x) ~ 1/(x sqrt(pi))
  return std::exp(x * x) * std::erfc(x);
}
}  // namespace emu

inline float sinpif(float x) { return (float)emu::sinpi_l(x); }
inline double sinpi(double x) { return (double)emu::sinpi_l(x); }
inline float cospif(float x) { return (float)emu::cospi_l(x); }
inline double cospi(double x) { return (double)emu::cospi_l(x); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
inline void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
inline float rcbrtf(float x) { return (float)(1.0L / std::cbrt((long double)x)); }
inline double rcbrt(double x) { return (double)(1.0L / std::cbrt((long double)x)); }
inline float erfcxf(float x) { return (float)emu::erfcx_l(x); }
inline double erfcx(double x) { return (double)emu::erfcx_l(x); }
inline float norm3df(float a, float b, float c) { return (float)std::sqrt((long double)a * a + (long double)b * b + (long double)c * c); }
inline double norm3d(double a, double b, double c) { return (double)std::sqrt((long double)a * a + (long double)b * b + (long double)c * c); }
inline float norm4df(float a, float b, float c, float d) {
  return (float)std::sqrt((long double)a * a + (long double)b * b + (long double)c * c + (long double)d * d);
}
inline double norm4d(double a, double b, double c, double d) {
  return (double)std::sqrt((long double)a * a + (long double)b * b + (long double)c * c + (long double)d * d);
}
inline float rnorm3df(float a, float b, float c) { return (float)(1.0L / std::sqrt((long double)a * a + (long double)b * b + (long double)c * c)); }
inline double rnorm3d(double a, double b, double c) { return (double)(1.0L / std::sqrt((long double)a * a + (long double)b * b + (long double)c * c)); }
inline float rnorm4df(float a, float b, float c, float d) {
  return (float)(1.0L / std::sqrt((long double)a * a + (long double)b * b + (long double)c * c + (long double)d * d));
}
inline double rnorm4d(double a, double b, double c, double d) {
  return (double)(1.0L / std::sqrt((long double)a * a + (long double)b * b + (long double)c * c + (long double)d * d));
}
// CUDA's C++ float overloads of these (crt/math_functions.hpp): `sinpi(x)` with a float x is sinpif, a float, as
// `rsqrt(x)` is rsqrtf; without them the double forms ran, and a source's own template of the name (Megatron's host
// `template<typename U> U rsqrt(U)`) won the call
inline float erfinv(float y) { return erfinvf(y); }
inline float erfcinv(float y) { return erfcinvf(y); }
inline float normcdf(float x) { return normcdff(x); }
inline float normcdfinv(float p) { return normcdfinvf(p); }
inline float sinpi(float x) { return sinpif(x); }
inline float cospi(float x) { return cospif(x); }
inline float rcbrt(float x) { return rcbrtf(x); }
inline float erfcx(float x) { return erfcxf(x); }
inline float exp10(float x) { return ::exp10f(x); }
inline float rhypotf(float a, float b) { return (float)(1.0L / std::hypot((long double)a, (long double)b)); }
inline double rhypot(double a, double b) { return (double)(1.0L / std::hypot((long double)a, (long double)b)); }
