"""Scalar inline PTX on emu (harness/backends/emu/ptx.py, emu_ptx.hpp): `{ }` blocks with `.reg` locals and `@p`
guards; mov, cvt, cvta, integer and float arithmetic, bit-field and logic instructions, setp/selp, ld/st with their
memory orders, atom/red, shfl/vote, fence, bar.sync. Each is checked against a reference written here from the PTX
ISA's definitions; the memory orders by the race detector, with a plain-access negative control."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace, UnsupportedConstruct

SEED = 1205

SOURCE = r"""
#include <cuda_fp16.h>
#include <cstdint>

// The shared-address idiom of hand-written kernels: a 64-bit cvta in a scope block, narrowed to 32 bits.
__device__ unsigned smem_u32(const void* p) {
  unsigned a;
  asm("{ .reg .u64 s64;\n  cvta.to.shared.u64 s64, %1;\n  cvt.u32.u64 %0, s64; }\n" : "=r"(a) : "l"(p));
  return a;
}

__global__ void conversions(const float* x, int* ints, unsigned short* halves, float* back, unsigned* sat) {
  int t = threadIdx.x;
  float v = x[t];
  int a, b; unsigned short h, bf; float f, g;
  asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(a) : "f"(v));
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(b) : "f"(v));
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  asm("cvt.rz.bf16.f32 %0, %1;" : "=h"(bf) : "f"(v));
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  asm("cvt.rn.f32.s32 %0, %1;" : "=f"(g) : "r"(t * 7 - 100));
  unsigned s;
  asm("cvt.sat.u8.s32 %0, %1;" : "=r"(s) : "r"(a));
  ints[2 * t] = a; ints[2 * t + 1] = b;
  halves[2 * t] = h; halves[2 * t + 1] = bf;
  back[2 * t] = f; back[2 * t + 1] = g;
  sat[t] = s;
}

__global__ void integers(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* out) {
  int t = threadIdx.x;
  unsigned x = a[t], y = b[t], z = c[t], r[14];
  unsigned long long w;
  asm("mul.hi.u32 %0, %1, %2;" : "=r"(r[0]) : "r"(x), "r"(y));
  asm("mul.wide.s32 %0, %1, %2;" : "=l"(w) : "r"(x), "r"(y));
  asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(r[1]) : "r"(x), "r"(y), "r"(z));
  asm("shl.b32 %0, %1, %2;" : "=r"(r[2]) : "r"(x), "r"(z & 63));
  asm("shr.s32 %0, %1, %2;" : "=r"(r[3]) : "r"(x), "r"(z & 63));
  asm("bfe.u32 %0, %1, %2, %3;" : "=r"(r[4]) : "r"(x), "r"(y & 63), "r"(z & 63));
  asm("bfe.s32 %0, %1, %2, %3;" : "=r"(r[5]) : "r"(x), "r"(y & 63), "r"(z & 63));
  asm("bfi.b32 %0, %1, %2, %3, %4;" : "=r"(r[6]) : "r"(x), "r"(y), "r"(z & 63), "r"((z >> 8) & 63));
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r[7]) : "r"(x), "r"(y), "r"(z));
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r[8]) : "r"(x), "r"(y), "r"(z));     // a ^ b ^ c
  asm("lop3.b32 %0, %1, %2, %3, 0xCA;" : "=r"(r[9]) : "r"(x), "r"(y), "r"(z));     // a ? b : c, bitwise
  asm("popc.b32 %0, %1;" : "=r"(r[10]) : "r"(x));
  asm("clz.b32 %0, %1;" : "=r"(r[11]) : "r"(x >> (z & 31)));
  asm("brev.b32 %0, %1;" : "=r"(r[12]) : "r"(x));
  asm("{ .reg .pred p, q;\n setp.lt.s32 p|q, %1, %2;\n selp.u32 %0, 1, 2, p;\n @q add.u32 %0, %0, 10; }"
      : "+r"(r[13]) : "r"(x), "r"(y));
  for (int k = 0; k < 14; ++k) out[16 * t + k] = r[k];
  out[16 * t + 14] = unsigned(w);
  out[16 * t + 15] = unsigned(w >> 32);
}

__global__ void floats(const float* x, const float* y, float* out) {
  int t = threadIdx.x;
  float a = x[t], b = y[t], r[5];
  asm("add.rz.f32 %0, %1, %2;" : "=f"(r[0]) : "f"(a), "f"(b));
  asm("fma.rn.f32 %0, %1, %2, %1;" : "=f"(r[1]) : "f"(a), "f"(b));
  asm("mul.rn.sat.f32 %0, %1, %2;" : "=f"(r[2]) : "f"(a), "f"(b));
  asm("max.f32 %0, %1, %2;" : "=f"(r[3]) : "f"(a), "f"(b));
  asm("{ .reg .f32 h;\n mov.f32 h, 0f3F000000;\n mul.f32 %0, %1, h; }" : "=f"(r[4]) : "f"(a));   // * 0.5
  for (int k = 0; k < 5; ++k) out[5 * t + k] = r[k];
}

// Global and shared memory through ld/st: a vector load, a shared tile through cvta'd addresses, the
// read-only path, and a predicated copy as Marlin writes it (cp.async with a guard).
__global__ void memory(const float4* x, float* y, int take) {
  __shared__ __align__(16) float tile[64 * 4];
  int t = threadIdx.x;
  float a, b, c, d;
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(a), "=f"(b), "=f"(c), "=f"(d) : "l"(x + t));
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" :: "r"(smem_u32(&tile[4 * t])), "f"(a + b), "f"(c + d));
  asm volatile("{ .reg .pred p;\n setp.ne.b32 p, %0, 0;\n"
               "  @p cp.async.ca.shared.global [%1+8], [%2], 8;\n}\n" :: "r"(take), "r"(smem_u32(&tile[4 * t])), "l"(x + t));
  asm volatile("cp.async.wait_all;\n" ::);
  __syncthreads();
  float u, v, w;
  int o = (t + 1) % 64;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(u) : "r"(smem_u32(&tile[4 * o])));
  asm volatile("ld.shared.f32 %0, [%1+4];" : "=f"(v) : "r"(smem_u32(&tile[4 * o])));
  asm volatile("ld.shared.f32 %0, [%1+8];" : "=f"(w) : "r"(smem_u32(&tile[4 * o])));
  asm volatile("st.global.cs.f32 [%0], %1;" :: "l"(y + t), "f"(u + v + 10.0f * w));
}

// A flag handed from warp 1 to warp 0: release/acquire stores and loads order the data; plain ones do not.
__global__ void handoff(unsigned* flag, float* data, float* out, int ordered) {
  int t = threadIdx.x;
  if (t == 32) {
    data[0] = 42.0f;
    if (ordered) asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(flag), "r"(1u) : "memory");
    else asm volatile("st.global.u32 [%0], %1;" :: "l"(flag), "r"(1u) : "memory");
  }
  if (t == 0) {
    unsigned seen = 0;
    while (!seen) {
      if (ordered) asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
      else asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
    }
    out[0] = data[0];
  }
}

__global__ void atomics(unsigned* counter, unsigned* old, unsigned* slot) {
  unsigned mine;
  asm volatile("atom.global.add.u32 %0, [%1], 2;" : "=r"(mine) : "l"(counter));
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" :: "l"(counter + 1));
  unsigned prev;
  asm volatile("atom.acq_rel.gpu.global.cas.b32 %0, [%1], %2, %3;" : "=r"(prev) : "l"(slot), "r"(0u), "r"(threadIdx.x + 1));
  old[threadIdx.x] = mine;
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
  (void)prev;
}

__global__ void warp(const unsigned* x, unsigned* out) {
  unsigned v = x[threadIdx.x], s, b, u, in_range;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=r"(s) : "r"(v));
  asm volatile("{ .reg .pred p;\n setp.gt.u32 p, %1, 100;\n vote.sync.ballot.b32 %0, p, 0xffffffff; }" : "=r"(b) : "r"(v));
  // with its predicate output: false (and the lane's own value) where the source lane is below the segment
  asm volatile("{ .reg .pred q;\n shfl.sync.up.b32 %0|q, %2, 3, 0, 0xffffffff;\n selp.u32 %1, 1, 0, q; }"
               : "=r"(u), "=r"(in_range) : "r"(v));
  out[4 * threadIdx.x] = s;
  out[4 * threadIdx.x + 1] = b;
  out[4 * threadIdx.x + 2] = u;
  out[4 * threadIdx.x + 3] = in_range;
}

// Logic on registers and on predicates: and/or/xor/not of b32, and the same four of the predicates a > 10, b > 10.
__global__ void logic(const unsigned* a, const unsigned* b, unsigned* out) {
  unsigned x = a[threadIdx.x], y = b[threadIdx.x], r[4], p;
  asm("and.b32 %0, %1, %2;" : "=r"(r[0]) : "r"(x), "r"(y));
  asm("or.b32 %0, %1, %2;" : "=r"(r[1]) : "r"(x), "r"(y));
  asm("xor.b32 %0, %1, %2;" : "=r"(r[2]) : "r"(x), "r"(y));
  asm("not.b32 %0, %1;" : "=r"(r[3]) : "r"(x));
  asm("{ .reg .pred p, q, s, t, u, v;\n setp.gt.u32 p, %1, 10;\n setp.gt.u32 q, %2, 10;\n and.pred s, p, q;\n"
      " or.pred t, p, q;\n xor.pred u, p, q;\n not.pred v, p;\n"
      " selp.u32 %0, 1, 0, s;\n selp.u32 %1, 2, 0, t;\n or.b32 %0, %0, %1;\n selp.u32 %1, 4, 0, u;\n"
      " or.b32 %0, %0, %1;\n selp.u32 %1, 8, 0, v;\n or.b32 %0, %0, %1; }" : "=r"(p), "+r"(x) : "r"(y));
  for (int k = 0; k < 4; ++k) out[5 * threadIdx.x + k] = r[k];
  out[5 * threadIdx.x + 4] = p;
}

// Extended precision through the carry flag, as multiprecision code (cuFHE's modular arithmetic) writes it:
// a 96-bit add and subtract in 32-bit limbs, a 64 x 32 -> 96-bit product by mad.lo/mad.hi with carry, a
// 128-bit add in 64-bit limbs; then set (all ones or 1.0f) and the BoolOp forms of set and setp.
__global__ void carries(const unsigned* a, const unsigned* b, unsigned* out) {
  int t = threadIdx.x;
  const unsigned* x = a + 4 * t; const unsigned* y = b + 4 * t;
  unsigned* o = out + 16 * t;
  asm("add.cc.u32 %0, %3, %6;\n addc.cc.u32 %1, %4, %7;\n addc.u32 %2, %5, %8;"
      : "=r"(o[0]), "=r"(o[1]), "=r"(o[2]) : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(y[0]), "r"(y[1]), "r"(y[2]));
  asm("sub.cc.u32 %0, %3, %6;\n subc.cc.u32 %1, %4, %7;\n subc.u32 %2, %5, %8;"
      : "=r"(o[3]), "=r"(o[4]), "=r"(o[5]) : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(y[0]), "r"(y[1]), "r"(y[2]));
  asm("{ .reg .u32 z;\n mov.u32 z, 0;\n"
      " mul.lo.u32 %0, %3, %5;\n mul.hi.u32 %1, %3, %5;\n"
      " mad.lo.cc.u32 %1, %4, %5, %1;\n madc.hi.u32 %2, %4, %5, z; }"
      : "=r"(o[6]), "=r"(o[7]), "=r"(o[8]) : "r"(x[0]), "r"(x[1]), "r"(y[0]));
  unsigned long long lo, hi;
  asm("add.cc.u64 %0, %2, %4;\n addc.u64 %1, %3, %5;" : "=l"(lo), "=l"(hi)
      : "l"((unsigned long long)x[1] << 32 | x[0]), "l"((unsigned long long)x[3] << 32 | x[2]),
        "l"((unsigned long long)y[1] << 32 | y[0]), "l"((unsigned long long)y[3] << 32 | y[2]));
  o[9] = unsigned(lo); o[10] = unsigned(lo >> 32); o[11] = unsigned(hi); o[12] = unsigned(hi >> 32);
  float f;
  asm("set.ge.u32.u64 %0, %1, %2;" : "=r"(o[13]) : "l"((unsigned long long)x[0] << 8), "l"((unsigned long long)y[0] << 8));
  asm("set.lt.f32.s32 %0, %1, %2;" : "=f"(f) : "r"(x[1]), "r"(y[1]));
  o[14] = __float_as_uint(f);
  asm("{ .reg .pred p, q, r;\n setp.ne.u32 r, %1, 0;\n set.gt.and.u32.u32 %0, %2, %3, !r;\n"
      " setp.lt.or.u32 p|q, %2, %3, r;\n selp.u32 %1, 1, 0, p;\n @q or.b32 %1, %1, 2; }"
      : "=r"(o[15]), "+r"(o[13]) : "r"(x[2]), "r"(y[2]));
}

// An asm emu does not run, in a macro: the source builds, and only a launch that runs it is refused.
#define PROXY_FENCE() asm volatile("fence.proxy.async;\n" ::: "memory")
__global__ void maybe(int* y, int use) {
  if (use) PROXY_FENCE();
  y[threadIdx.x] = 1;
}
"""


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def _u32(v: int) -> int:
    return v & 0xFFFFFFFF


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def test_conversions(module):
    rng = np.random.default_rng(SEED)
    x = np.concatenate([[0.5, 1.5, 2.5, -0.5, -1.5, 3.7, -3.7, 1e10, -1e10, np.nan, 255.9, 300.0, -2.0, 65519.0,
                         70000.0, 1e-8], rng.uniform(-400, 400, 48)]).astype(np.float32)
    n = x.size
    ints, halves = np.zeros(2 * n, np.int32), np.zeros(2 * n, np.uint16)
    back, sat = np.zeros(2 * n, np.float32), np.zeros(n, np.uint32)
    module.launch("conversions", (1,), (n,), 0, [x, ints, halves, back, sat], outputs=(1, 2, 3, 4))
    with np.errstate(invalid="ignore", over="ignore"):
        clip = lambda v: np.where(np.isnan(v), 0, np.clip(v, -2**31, 2**31 - 1))        # noqa: E731
        assert np.array_equal(ints[0::2], clip(np.trunc(x.astype(np.float64))).astype(np.int64))
        assert np.array_equal(ints[1::2], clip(np.rint(x.astype(np.float64))).astype(np.int64))   # ties to even
        half = x.astype(np.float16)
    assert np.array_equal(halves[0::2], np.where(np.isnan(x), 0x7FFF, half.view(np.uint16)))   # the canonical NaN
    bits = x.view(np.uint32)
    bf_rz = np.where(np.isnan(x), 0x7FFF, bits >> 16)                                   # toward zero: truncation
    assert np.array_equal(halves[1::2], bf_rz.astype(np.uint16))
    assert np.array_equal(back[0::2], half.astype(np.float32), equal_nan=True)
    assert np.array_equal(back[1::2], (np.arange(n) * 7 - 100).astype(np.float32))
    assert np.array_equal(sat, np.clip(ints[0::2], 0, 255))


def _bfe(a: int, pos: int, length: int, signed: bool) -> int:
    pos, length = pos & 0xFF, length & 0xFF
    sbit = signed and length and (a >> min(pos + length - 1, 31)) & 1
    r = 0
    for i in range(32):
        bit = (a >> (pos + i)) & 1 if i < length and pos + i <= 31 else sbit
        r |= bit << i
    return r


def test_integer_instructions(module):
    rng = np.random.default_rng(SEED + 1)
    n = 64
    a, b, c = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    a[:4] = [0, 1, 0x80000000, 0xFFFFFFFF]
    c[:4] = [31, 32, 33, 0x2345]               # shift amounts at and past the width
    out = np.zeros(16 * n, np.uint32)
    module.launch("integers", (1,), (n,), 0, [a, b, c, out], outputs=(3,))
    out = out.reshape(n, 16)
    for t in range(n):
        x, y, z = int(a[t]), int(b[t]), int(c[t])
        sh = z & 63
        prmt = 0
        data = x | y << 32
        for k in range(4):                      # the default mode: each selector nibble picks a byte, bit 3 = sign
            sel = (z >> (4 * k)) & 0xF
            byte = (data >> (8 * (sel & 7))) & 0xFF
            prmt |= (0xFF if sel & 8 and byte & 0x80 else 0 if sel & 8 else byte) << (8 * k)
        pos, length = (z & 63), ((z >> 8) & 63)
        bfi = y
        for i in range(length):
            if pos + i <= 31:
                bfi = (bfi & ~(1 << (pos + i))) | (((x >> i) & 1) << (pos + i))
        shifted = x >> (z & 31)
        want = [(x * y) >> 32, _u32(x * y + z), _u32(x << sh) if sh < 32 else 0,
                _u32(_s32(x) >> min(sh, 31)), _bfe(x, y & 63, z & 63, False), _bfe(x, y & 63, z & 63, True),
                _u32(bfi), prmt, x ^ y ^ z, (x & y) | (~x & z), bin(x).count("1"),
                32 - shifted.bit_length(), int(f"{x:032b}"[::-1], 2), 1 + 0 if _s32(x) < _s32(y) else 2 + 10]
        wide = _s32(x) * _s32(y)
        want += [_u32(wide), _u32(wide >> 32)]
        got = [int(v) for v in out[t]]
        assert got == want, f"t={t} a={x:#x} b={y:#x} c={z:#x}: {[hex(g) for g in got]} want {[hex(w) for w in want]}"


def test_extended_precision_through_the_carry_flag_and_set(module):
    rng = np.random.default_rng(SEED + 7)
    n = 64
    a, b = (rng.integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    a[:8] = [0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0, 0]     # a carry through every limb
    b[:8] = [1, 0, 0, 0, 1, 0, 0, 0]                                         # a borrow through every limb
    a[8:12] = b[8:12]                                                        # equal: no borrow, set.ge true
    out = np.zeros(16 * n, np.uint32)
    module.launch("carries", (1,), (n,), 0, [a, b, out], outputs=(2,))
    out = out.reshape(n, 16)
    for t in range(n):
        x, y = [int(v) for v in a[4 * t:4 * t + 4]], [int(v) for v in b[4 * t:4 * t + 4]]
        limbs = lambda v, k, w=32: [(v >> (w * i)) & ((1 << w) - 1) for i in range(k)]      # noqa: E731
        x96, y96 = x[0] | x[1] << 32 | x[2] << 64, y[0] | y[1] << 32 | y[2] << 64
        x128, y128 = x96 | x[3] << 96, y96 | y[3] << 96
        want = (limbs((x96 + y96) % 2**96, 3) + limbs((x96 - y96) % 2**96, 3)
                + limbs((x[0] | x[1] << 32) * y[0], 3) + limbs((x128 + y128) % 2**128, 4))
        want.append(0xFFFFFFFF if x[0] >= y[0] else 0)
        want.append(0x3F800000 if _s32(x[1]) < _s32(y[1]) else 0)
        nonzero = 1 if want[13] else 0
        want[13] = (1 if x[2] < y[2] or nonzero else 0) | (2 if x[2] >= y[2] or nonzero else 0)   # p|q, OR r
        want.append(0xFFFFFFFF if x[2] > y[2] and not nonzero else 0)
        got = [int(v) for v in out[t]]
        assert got == want, f"t={t} a={[hex(v) for v in x]} b={[hex(v) for v in y]}: {[hex(g) for g in got]} " \
                            f"want {[hex(w) for w in want]}"


def test_float_instructions(module):
    rng = np.random.default_rng(SEED + 2)
    x = rng.standard_normal(64).astype(np.float32)
    y = rng.standard_normal(64).astype(np.float32)
    x[0], y[0] = 1.0, 2.0**-30                 # a sum that rounds differently toward zero
    out = np.zeros(5 * 64, np.float32)
    module.launch("floats", (1,), (64,), 0, [x, y, out], outputs=(2,))
    out = out.reshape(64, 5)
    exact = x.astype(np.float64) + y.astype(np.float64)
    near = exact.astype(np.float32)
    toward_zero = np.where(np.abs(near.astype(np.float64)) > np.abs(exact), np.nextafter(near, np.float32(0)), near)
    assert np.array_equal(out[:, 0], toward_zero) and out[0, 0] == 1.0
    fma = (x.astype(np.float64) * y.astype(np.float64) + x.astype(np.float64)).astype(np.float32)   # one rounding
    assert np.array_equal(out[:, 1], fma)
    assert np.array_equal(out[:, 2], np.clip((x * y).astype(np.float32), 0, 1))
    assert np.array_equal(out[:, 3], np.maximum(x, y)) and np.array_equal(out[:, 4], x * np.float32(0.5))


@pytest.mark.parametrize("take", [1, 0])
def test_loads_stores_and_a_predicated_copy(module, take):
    x = (np.arange(256, dtype=np.float32) + 1).reshape(64, 4)
    y = np.zeros(64, np.float32)
    module.launch("memory", (1,), (64,), 0, [x, y, np.int32(take)], outputs=(1,))
    nxt = np.roll(x, -1, axis=0)
    copied = (nxt[:, 0] + nxt[:, 1] + (nxt[:, 2] + nxt[:, 3])) + np.float32(10.0) * nxt[:, 0]   # x[t].x landed
    if take:
        assert np.array_equal(y, copied.astype(np.float32))
    else:
        assert not np.isin(y, copied).any()           # nothing landed: the slot kept the poison


def test_release_acquire_orders_a_handoff_and_plain_accesses_do_not(module):
    flag, data, out = np.zeros(1, np.uint32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    module.launch("handoff", (1,), (64,), 0, [flag, data, out, np.int32(1)])
    assert out[0] == 42.0
    flag[0] = 0
    with pytest.raises(DataRace, match=r"'data' index 0"):
        module.launch("handoff", (1,), (64,), 0, [flag, data, out, np.int32(0)])


def test_atomics(module):
    counter, old, slot = np.zeros(2, np.uint32), np.zeros(96, np.uint32), np.zeros(1, np.uint32)
    module.launch("atomics", (1,), (96,), 0, [counter, old, slot])       # read and written: not poisoned
    assert counter.tolist() == [192, 96] and sorted(old.tolist()) == list(range(0, 192, 2))
    assert 1 <= slot[0] <= 96


def test_logic_on_registers_and_predicates(module):
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 21, 64, dtype=np.uint32), rng.integers(0, 2**32, 64, dtype=np.uint32)
    b[::2] = rng.integers(0, 21, 32, dtype=np.uint32)           # half of them small, so q varies
    out = np.zeros(5 * 64, np.uint32)
    module.launch("logic", (1,), (64,), 0, [a, b, out], outputs=(2,))
    out = out.reshape(64, 5)
    assert np.array_equal(out[:, 0], a & b) and np.array_equal(out[:, 1], a | b)
    assert np.array_equal(out[:, 2], a ^ b) and np.array_equal(out[:, 3], ~a)
    p, q = a > 10, b > 10
    assert np.array_equal(out[:, 4], (p & q) * 1 + (p | q) * 2 + (p ^ q) * 4 + (~p) * 8)


def test_shuffle_and_vote(module):
    x = np.arange(32, dtype=np.uint32) * 7
    out = np.zeros(128, np.uint32)
    module.launch("warp", (1,), (32,), 0, [x, out], outputs=(1,))
    lane = np.arange(32)
    assert np.array_equal(out[0::4], x[lane ^ 1])
    assert np.all(out[1::4] == sum(1 << int(i) for i in lane if x[i] > 100))
    assert np.array_equal(out[2::4], np.where(lane >= 3, x[np.maximum(lane - 3, 0)], x))
    assert np.array_equal(out[3::4], (lane >= 3).astype(np.uint32))


def test_an_asm_emu_does_not_run_in_a_macro_refuses_only_the_launch_that_runs_it(module):
    y = np.zeros(32, np.int32)
    module.launch("maybe", (1,), (32,), 0, [y, np.int32(0)], outputs=(0,))
    assert (y == 1).all()
    with pytest.raises(UnsupportedConstruct, match=r"inline PTX 'fence.proxy.async' \(line \d+\) is a proxy fence"):
        module.launch("maybe", (1,), (32,), 0, [y, np.int32(1)], outputs=(0,))
