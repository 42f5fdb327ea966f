// Resolves `#include <cuComplex.h>` in kernel source to emu's copy: CUDA's single and double complex numbers
// (float2 and double2 by another name) and their arithmetic, as device and host functions of the emu runtime.
// Division scales by |re| + |im| of the divisor before dividing, and the magnitude is hypot's, so neither
// overflows where the plain formulas would; their last bits may differ from the toolkit's.
#pragma once
#include <math.h>
#include "emu_device.hpp"

typedef float2 cuFloatComplex;
typedef double2 cuDoubleComplex;
typedef cuFloatComplex cuComplex;

// One definition for both precisions: Z the complex type, R its real type, S the names' suffix (f or none).
#define EMU_CUCOMPLEX(Z, R, S, MAKE, ABS, HYPOT)                                                                   \
  static inline R cuCreal##S(Z x) { return x.x; }                                                                 \
  static inline R cuCimag##S(Z x) { return x.y; }                                                                 \
  static inline Z MAKE(R re, R im) { Z z; z.x = re; z.y = im; return z; }                                         \
  static inline Z cuConj##S(Z x) { return MAKE(x.x, -x.y); }                                                      \
  static inline Z cuCadd##S(Z a, Z b) { return MAKE(a.x + b.x, a.y + b.y); }                                      \
  static inline Z cuCsub##S(Z a, Z b) { return MAKE(a.x - b.x, a.y - b.y); }                                      \
  static inline Z cuCmul##S(Z a, Z b) { return MAKE(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }              \
  static inline Z cuCdiv##S(Z a, Z b) {                                                                           \
    R s = ABS(b.x) + ABS(b.y), inv = (R)1 / s;                                                                    \
    R ar = a.x * inv, ai = a.y * inv, br = b.x * inv, bi = b.y * inv;                                             \
    R d = (R)1 / (br * br + bi * bi);                                                                             \
    return MAKE((ar * br + ai * bi) * d, (ai * br - ar * bi) * d);                                               \
  }                                                                                                               \
  static inline R cuCabs##S(Z x) { return HYPOT(x.x, x.y); }                                                      \
  static inline Z cuCfma##S(Z x, Z y, Z d) { return MAKE(x.x * y.x - x.y * y.y + d.x, x.x * y.y + x.y * y.x + d.y); }
EMU_CUCOMPLEX(cuFloatComplex, float, f, make_cuFloatComplex, fabsf, hypotf)
EMU_CUCOMPLEX(cuDoubleComplex, double, , make_cuDoubleComplex, fabs, hypot)
#undef EMU_CUCOMPLEX
static inline cuComplex make_cuComplex(float re, float im) { return make_cuFloatComplex(re, im); }

static inline cuDoubleComplex cuComplexFloatToDouble(cuFloatComplex c) { return make_cuDoubleComplex(c.x, c.y); }
static inline cuFloatComplex cuComplexDoubleToFloat(cuDoubleComplex c) {
  return make_cuFloatComplex((float)c.x, (float)c.y);
}
