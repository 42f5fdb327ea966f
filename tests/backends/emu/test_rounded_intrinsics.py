"""CUDA's explicitly rounded intrinsics on emu (emu_rounding.hpp): float and double arithmetic and the conversions
in the four IEEE modes, each result compared bit for bit with the exact value (fractions.Fraction) rounded here by
exact comparisons with its neighbouring candidates; nothing of the emulator's rounding-to-odd is reused."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

SEED = 1205      # every random input comes from it; failures print the operands

MODES = ("rn", "rz", "rd", "ru")
F_OPS = ("fadd", "fsub", "fmul", "fdiv", "frcp", "fsqrt", "fmaf")
D_OPS = ("dadd", "dsub", "dmul", "ddiv", "drcp", "dsqrt", "fma")

SOURCE = r"""
#define FOUR(OUT, K, CALL_RN, CALL_RZ, CALL_RD, CALL_RU) \
  OUT[4 * (K) + 0] = CALL_RN; OUT[4 * (K) + 1] = CALL_RZ; OUT[4 * (K) + 2] = CALL_RD; OUT[4 * (K) + 3] = CALL_RU;

__global__ void float_ops(const float* a, const float* b, const float* c, float* out, float* rsq, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i], z = c[i];
  float* o = out + 28 * i;
  FOUR(o, 0, __fadd_rn(x, y), __fadd_rz(x, y), __fadd_rd(x, y), __fadd_ru(x, y))
  FOUR(o, 1, __fsub_rn(x, y), __fsub_rz(x, y), __fsub_rd(x, y), __fsub_ru(x, y))
  FOUR(o, 2, __fmul_rn(x, y), __fmul_rz(x, y), __fmul_rd(x, y), __fmul_ru(x, y))
  FOUR(o, 3, __fdiv_rn(x, y), __fdiv_rz(x, y), __fdiv_rd(x, y), __fdiv_ru(x, y))
  FOUR(o, 4, __frcp_rn(y), __frcp_rz(y), __frcp_rd(y), __frcp_ru(y))
  FOUR(o, 5, __fsqrt_rn(fabsf(x)), __fsqrt_rz(fabsf(x)), __fsqrt_rd(fabsf(x)), __fsqrt_ru(fabsf(x)))
  FOUR(o, 6, __fmaf_rn(x, y, z), __fmaf_rz(x, y, z), __fmaf_rd(x, y, z), __fmaf_ru(x, y, z))
  rsq[i] = __frsqrt_rn(fabsf(x));
}

__global__ void double_ops(const double* a, const double* b, const double* c, double* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = a[i], y = b[i], z = c[i];
  double* o = out + 28 * i;
  FOUR(o, 0, __dadd_rn(x, y), __dadd_rz(x, y), __dadd_rd(x, y), __dadd_ru(x, y))
  FOUR(o, 1, __dsub_rn(x, y), __dsub_rz(x, y), __dsub_rd(x, y), __dsub_ru(x, y))
  FOUR(o, 2, __dmul_rn(x, y), __dmul_rz(x, y), __dmul_rd(x, y), __dmul_ru(x, y))
  FOUR(o, 3, __ddiv_rn(x, y), __ddiv_rz(x, y), __ddiv_rd(x, y), __ddiv_ru(x, y))
  FOUR(o, 4, __drcp_rn(y), __drcp_rz(y), __drcp_rd(y), __drcp_ru(y))
  FOUR(o, 5, __dsqrt_rn(fabs(x)), __dsqrt_rz(fabs(x)), __dsqrt_rd(fabs(x)), __dsqrt_ru(fabs(x)))
  FOUR(o, 6, __fma_rn(x, y, z), __fma_rz(x, y, z), __fma_rd(x, y, z), __fma_ru(x, y, z))
}

__global__ void conversions(const double* d, const long long* v, float* f, long long* l, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float* fo = f + 20 * i;
  long long* lo = l + 16 * i;
  float x = (float)d[i];
  FOUR(fo, 0, __double2float_rn(d[i]), __double2float_rz(d[i]), __double2float_rd(d[i]), __double2float_ru(d[i]))
  FOUR(fo, 1, __ll2float_rn(v[i]), __ll2float_rz(v[i]), __ll2float_rd(v[i]), __ll2float_ru(v[i]))
  unsigned long long u = (unsigned long long)v[i];
  FOUR(fo, 2, __ull2float_rn(u), __ull2float_rz(u), __ull2float_rd(u), __ull2float_ru(u))
  unsigned w = (unsigned)v[i];
  FOUR(fo, 3, __uint2float_rn(w), __uint2float_rz(w), __uint2float_rd(w), __uint2float_ru(w))
  int k = (int)v[i];
  FOUR(fo, 4, __int2float_rn(k), __int2float_rz(k), __int2float_rd(k), __int2float_ru(k))
  FOUR(lo, 0, __float2ll_rn(x), __float2ll_rz(x), __float2ll_rd(x), __float2ll_ru(x))
  FOUR(lo, 1, (long long)__float2ull_rn(x), (long long)__float2ull_rz(x), (long long)__float2ull_rd(x),
       (long long)__float2ull_ru(x))
  FOUR(lo, 2, __double2int_rn(d[i]), __double2int_rz(d[i]), __double2int_rd(d[i]), __double2int_ru(d[i]))
  FOUR(lo, 3, __double2ll_rn(d[i]), __double2ll_rz(d[i]), __double2ll_rd(d[i]), __double2ll_ru(d[i]))
}
"""


@pytest.fixture(scope="module")
def module(load):
    return load(SOURCE)


# ---- the exact reference ------------------------------------------------------------------------------------
def _neighbours(c, kind):
    if kind is np.float32:
        return [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]
    return [math.nextafter(c, -math.inf), c, math.nextafter(c, math.inf)]


def round_exact(q: Fraction, mode: str, kind):
    """q rounded to float32 (kind np.float32) or double (float): the nearest candidate around a first guess is
    chosen by exact comparisons (ties to the even pattern); an infinity is a result only where IEEE rounds to it."""
    big = Fraction(2) ** (128 if kind is np.float32 else 1024)          # what infinity stands for when rounding
    try:
        with np.errstate(over="ignore"):
            guess = kind(float(q))
    except OverflowError:                                              # beyond double's range
        guess = kind(math.inf if q > 0 else -math.inf)
    cands = {float(x) for x in _neighbours(guess, kind)} | {float(guess)}

    def val(x):
        return Fraction(x) if math.isfinite(x) else (big if x > 0 else -big)

    if mode == "rn":
        def key(x):
            bits = np.array([x], kind).view(np.uint32 if kind is np.float32 else np.uint64)[0]
            return (abs(val(x) - q), int(bits) & 1)
        return min(cands, key=key)
    if mode == "rz":
        ok = [x for x in cands if math.isfinite(x) and abs(val(x)) <= abs(q) and (x == 0 or (x > 0) == (q > 0))]
        return max(ok, key=lambda x: abs(val(x)))
    if mode == "rd":
        return max((x for x in cands if (val(x) <= q and x != math.inf) or x == -math.inf and q < -big / 2),
                   key=val)
    return min((x for x in cands if (val(x) >= q and x != -math.inf) or x == math.inf and q > big / 2), key=val)


def expect(q, mode, kind, zero_sign=None):
    """The expected result of an exact value: a zero takes `zero_sign` (IEEE's rule for the operation)."""
    if q == 0:
        return -0.0 if zero_sign else 0.0
    return round_exact(q, mode, kind)


def _same(got, want) -> bool:
    return (np.isnan(got) and np.isnan(want)) or (got == want and np.signbit(got) == np.signbit(want))


def _random_floats(rng, n, kind):
    if kind is np.float32:
        bits = rng.integers(0, 0x7F800000, n, dtype=np.int64).astype(np.uint32)
        bits |= rng.integers(0, 2, n).astype(np.uint32) << 31
        out = bits.view(np.float32)
        out[: n // 2] = (rng.uniform(-4, 4, n // 2) * 2.0 ** rng.integers(-20, 20, n // 2)).astype(np.float32)
        return out
    bits = rng.integers(0, 0x7FF0000000000000, n, dtype=np.int64).astype(np.uint64)
    bits |= rng.integers(0, 2, n).astype(np.uint64) << np.uint64(63)
    out = bits.view(np.float64)
    out[: n // 2] = rng.uniform(-4, 4, n // 2) * 2.0 ** rng.integers(-40, 40, n // 2)
    return out


def _exact_results(x, y, z, op):
    """The exact value of an op and the sign an exact zero takes in round-down and in the other modes."""
    X, Y, Z = Fraction(float(x)), Fraction(float(y)), Fraction(float(z))
    if op in ("fadd", "dadd", "fsub", "dsub"):
        yy = -y if op.endswith("sub") else y
        both = (x == 0 and yy == 0)
        plus_zero_both = both and not np.signbit(x) and not np.signbit(yy)
        minus_zero_both = both and np.signbit(x) and np.signbit(yy)
        return X + (-Y if op.endswith("sub") else Y), (not plus_zero_both, minus_zero_both)
    if op in ("fmul", "dmul"):
        s = bool(np.signbit(x) != np.signbit(y))
        return X * Y, (s, s)
    if op in ("fdiv", "ddiv"):
        return (None if Y == 0 else X / Y), (bool(np.signbit(x) != np.signbit(y)),) * 2
    if op in ("frcp", "drcp"):
        return (None if Y == 0 else 1 / Y), (bool(np.signbit(y)),) * 2
    if op in ("fsqrt", "dsqrt"):
        return ("sqrt", abs(X)), (False, False)
    P = X * Y
    both_zero = P == 0 and Z == 0
    psign = bool(np.signbit(x) != np.signbit(y))
    plus = both_zero and not psign and not np.signbit(z)
    minus = both_zero and psign and np.signbit(z)
    return P + Z, (not plus, minus)


def _sqrt_rounded(a: Fraction, mode: str, kind):
    """The square root of a rounded in the mode, by squaring candidates around a first guess."""
    if a == 0:
        return 0.0                              # the root of fabs(x): +0
    guess = kind(math.sqrt(float(a)))
    cands = sorted({float(v) for v in _neighbours(guess, kind) for v in _neighbours(v, kind)})
    below = max(c for c in cands if c >= 0 and Fraction(c) ** 2 <= a)
    above = min(c for c in cands if Fraction(c) ** 2 >= a)
    if below == above or mode in ("rz", "rd"):
        return below
    if mode == "ru":
        return above
    mid = (Fraction(below) + Fraction(above)) / 2
    if a != mid * mid:
        return below if a < mid * mid else above
    return below if int(np.array([below], kind).view(np.uint32 if kind is np.float32 else np.uint64)[0]) % 2 == 0 else above


@pytest.mark.parametrize("kind", [np.float32, float], ids=["float", "double"])
def test_arithmetic_in_every_rounding_mode(module, kind):
    rng = np.random.default_rng(SEED)
    n = 240
    dtype = np.float32 if kind is np.float32 else np.float64
    a, b, c = (_random_floats(rng, n, kind) for _ in range(3))
    a[:6] = [1.0, -1.0, 3.0, 0.0, -0.0, 1e-30]          # exact cancellations, zero signs
    b[:6] = [-1.0, 1.0, 3.0, -0.0, -0.0, 1e30]
    c[:6] = [0.0, -0.0, -9.0, 0.0, -0.0, -1.0]
    out = np.zeros(28 * n, dtype)
    extra = [np.zeros(n, np.float32)] if kind is np.float32 else []
    module.launch("float_ops" if kind is np.float32 else "double_ops", (2,), (128,), 0,
                  [a, b, c, out, *extra, np.int32(n)], outputs=tuple(range(3, 4 + len(extra))))
    ops = F_OPS if kind is np.float32 else D_OPS
    for i in range(n):
        for k, op in enumerate(ops):
            q, (zero_rd, zero_other) = _exact_results(a[i], b[i], c[i], op)
            for m, mode in enumerate(MODES):
                got = out[28 * i + 4 * k + m]
                if q is None:
                    continue                     # division by zero: IEEE's infinity or NaN, as on a GPU
                if isinstance(q, tuple):
                    want = _sqrt_rounded(q[1], mode, kind)
                else:
                    want = expect(q, mode, kind, zero_rd if mode == "rd" else zero_other)
                assert _same(float(got), float(want)), (f"{op}_{mode}({a[i]!r}, {b[i]!r}, {c[i]!r}) = {got!r}, "
                                                        f"want {want!r} (seed {SEED}, case {i})")
    if kind is np.float32:
        rsq = extra[0]
        for i in range(n):
            want = _rsqrt_rounded(abs(Fraction(float(a[i]))))
            assert float(rsq[i]) == want, f"__frsqrt_rn({a[i]!r}) = {rsq[i]!r}, want {want!r} (seed {SEED})"


def _rsqrt_rounded(a: Fraction) -> float:
    """1/sqrt(a) rounded to the nearest float: of two candidates y1 < y2, y2 is nearer exactly when the root lies
    above their midpoint m, that is when m^2 * a < 1 (ties: the even pattern)."""
    if a == 0:
        return math.inf
    y = np.float32(1 / math.sqrt(float(a)))
    cands = sorted({float(w) for v in _neighbours(y, np.float32) for w in _neighbours(v, np.float32)})
    best = cands[0]
    for cand in cands[1:]:
        m = (Fraction(best) + Fraction(cand)) / 2
        if m * m * a < 1 or (m * m * a == 1 and int(np.array([cand], np.float32).view(np.uint32)[0]) % 2 == 0):
            best = cand
    return best


def test_conversions_in_every_rounding_mode(module):
    rng = np.random.default_rng(SEED + 1)
    n = 200
    d = _random_floats(rng, n, float)
    d[:n // 2] = rng.uniform(-3e9, 3e9, n // 2)
    d[:12] = [0.5, 1.5, 2.5, -2.5, 1e30, -1e30, 3.4028235677973366e38, 3.5e38, -0.0, 2.0 ** 62, -(2.0 ** 63), 1e-50]
    v = rng.integers(-2 ** 63, 2 ** 63 - 1, n, dtype=np.int64)
    v[:8] = [2 ** 60 - 1, -(2 ** 60) + 1, 2 ** 24 + 1, -(2 ** 24) - 1, 0, -1, 2 ** 63 - 1, -(2 ** 63)]
    f = np.zeros(20 * n, np.float32)
    l = np.zeros(16 * n, np.int64)
    module.launch("conversions", (2,), (128,), 0, [d, v, f, l, np.int32(n)], outputs=(2, 3))
    for i in range(n):
        u = int(v[i]) % 2 ** 64
        w = u % 2 ** 32
        k = w - 2 ** 32 if w >= 2 ** 31 else w
        sources = [Fraction(float(d[i])), Fraction(int(v[i])), Fraction(u), Fraction(w), Fraction(k)]
        for s, q in enumerate(sources):
            for m, mode in enumerate(MODES):
                want = expect(q, mode, np.float32, np.signbit(d[i]) if s == 0 else False)
                got = f[20 * i + 4 * s + m]
                assert _same(float(got), float(want)), f"conversion {s} {mode} of {q}: {got!r}, want {want!r} (case {i})"
        with np.errstate(over="ignore"):
            x32 = float(np.float32(d[i]))                  # the kernel's (float)d[i]: an infinity past float's range
        x = Fraction(x32) if math.isfinite(x32) else Fraction(2) ** 200 * (1 if x32 > 0 else -1)   # saturates alike
        for s, (q, lo, hi) in enumerate([(x, -2 ** 63, 2 ** 63 - 1), (x, 0, 2 ** 64 - 1),
                                         (Fraction(float(d[i])), -2 ** 31, 2 ** 31 - 1),
                                         (Fraction(float(d[i])), -2 ** 63, 2 ** 63 - 1)]):
            for m, mode in enumerate(MODES):
                r = {"rn": round(q), "rz": math.trunc(q), "rd": math.floor(q), "ru": math.ceil(q)}[mode]
                want = min(max(r, lo), hi)
                got = int(l[16 * i + 4 * s + m]) % 2 ** 64 if s == 1 else int(l[16 * i + 4 * s + m])
                assert got == want, f"to integer {s} {mode} of {float(q)!r}: {got}, want {want} (case {i})"
