"""Tensor-core inline PTX on emu: mma.sync in its f16, bf16, int8 and fp8 forms, ldmatrix, stmatrix and movmatrix.

The references are the matrix products themselves (numpy for integers; exact rationals rounded once for floats) and
the fragment layouts written out from the PTX ISA in each test kernel. The f16 and bf16 products go through
ldmatrix, so that a wrong layout in either instruction gives a wrong product. The race detector sees ldmatrix's
reads and stmatrix's writes as the accesses of the lane naming each row."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from harness.backends import DataRace, KernelFault
from tests.backends.emu.float_reference import E4M3, E5M2, HALF, decode, round_binary32, round_exact

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

__device__ unsigned smem(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ void store_d(float* D, const float* c) {
  int g = threadIdx.x >> 2, t = threadIdx.x & 3;
  D[g * 8 + 2 * t] = c[0]; D[g * 8 + 2 * t + 1] = c[1]; D[(g + 8) * 8 + 2 * t] = c[2]; D[(g + 8) * 8 + 2 * t + 1] = c[3];
}
__device__ void load_c(const float* C, float* c) {
  int g = threadIdx.x >> 2, t = threadIdx.x & 3;
  c[0] = C[g * 8 + 2 * t]; c[1] = C[g * 8 + 2 * t + 1]; c[2] = C[(g + 8) * 8 + 2 * t]; c[3] = C[(g + 8) * 8 + 2 * t + 1];
}

// D (16x8) = A (16xK, row major) * B (Kx8, row major) + C, K = 16 or 8, f16 or bf16 bits; A through ldmatrix (.x4 or
// .x2), B through ldmatrix.trans (.x2 or .x1), with shared-space or generic addresses. Lanes whose address ldmatrix
// ignores give one that is not shared memory.
__global__ void mma16(const unsigned short* A, const unsigned short* B, const float* C, float* D, int K, int bf) {
  __shared__ __align__(16) unsigned short sa[16 * 16];
  __shared__ __align__(16) unsigned short sb[16 * 8];
  int lane = threadIdx.x;
  for (int i = lane; i < 16 * K; i += 32) sa[i] = A[i];
  for (int i = lane; i < K * 8; i += 32) sb[i] = B[i];
  __syncwarp();
  unsigned a[4], b[2];
  float c[4];
  load_c(C, c);
  const void* nowhere = C;
  if (K == 16) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(smem(&sa[(lane % 16) * 16 + (lane / 16) * 8])));
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.b16 {%0, %1}, [%2];\n"
                 : "=r"(b[0]), "=r"(b[1]) : "l"(lane < 16 ? (const void*)&sb[lane * 8] : nowhere));
    if (bf)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                   "{%0,%1,%2,%3};\n" : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    else
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                   "{%0,%1,%2,%3};\n" : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.b16 {%0, %1}, [%2];\n"
                 : "=r"(a[0]), "=r"(a[1]) : "l"(lane < 16 ? (const void*)&sa[lane * 8] : nowhere));
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared::cta.b16 {%0}, [%1 + 0];\n"
                 : "=r"(b[0]) : "r"(lane < 8 ? smem(&sb[lane * 8]) : 0xfffffff0u));
    if (bf)
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    else
      asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  }
  store_d(D, c);
}

// The same product with f16 accumulators: C and D as f16 pairs, A and B read directly in the PTX layout.
__global__ void mma_f16_acc(const __half* A, const __half* B, const __half* C, __half* D) {
  int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  __half2 a[4], b[2], c[2], d[2];
  for (int r = 0; r < 4; ++r) {
    int row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
    a[r] = __halves2half2(A[row * 16 + col], A[row * 16 + col + 1]);
  }
  for (int r = 0; r < 2; ++r) b[r] = __halves2half2(B[(2 * t + 8 * r) * 8 + g], B[(2 * t + 8 * r + 1) * 8 + g]);
  for (int r = 0; r < 2; ++r) c[r] = __halves2half2(C[(g + 8 * r) * 8 + 2 * t], C[(g + 8 * r) * 8 + 2 * t + 1]);
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};\n"
               : "=r"(*(unsigned*)&d[0]), "=r"(*(unsigned*)&d[1])
               : "r"(*(unsigned*)&a[0]), "r"(*(unsigned*)&a[1]), "r"(*(unsigned*)&a[2]), "r"(*(unsigned*)&a[3]),
                 "r"(*(unsigned*)&b[0]), "r"(*(unsigned*)&b[1]), "r"(*(unsigned*)&c[0]), "r"(*(unsigned*)&c[1]));
  for (int r = 0; r < 2; ++r) {
    D[(g + 8 * r) * 8 + 2 * t] = __low2half(d[r]);
    D[(g + 8 * r) * 8 + 2 * t + 1] = __high2half(d[r]);
  }
}

// 8-bit operands packed four to a register: A (16xK row major) and Bt (8xK: B column major), K = 16 or 32.
__device__ unsigned pack4(const unsigned char* p) { return p[0] | p[1] << 8 | p[2] << 16 | (unsigned)p[3] << 24; }
__device__ void load8(const unsigned char* A, const unsigned char* Bt, int K, unsigned* a, unsigned* b) {
  int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  for (int r = 0; r < K / 8; ++r) a[r] = pack4(A + (g + 8 * (r & 1)) * K + 4 * t + 16 * (r >> 1));
  for (int r = 0; r < K / 16; ++r) b[r] = pack4(Bt + g * K + 4 * t + 16 * r);
}
__global__ void mma_int8(const unsigned char* A, const unsigned char* Bt, const int* C, int* D, int form) {
  unsigned a[4], b[2];
  int c[4];
  load8(A, Bt, form == 0 ? 16 : 32, a, b);
  load_c((const float*)C, (float*)c);
  if (form == 0)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  else if (form == 1)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n" : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n" : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  store_d((float*)D, (const float*)c);
}
__global__ void mma_fp8(const unsigned char* A, const unsigned char* Bt, const float* C, float* D) {
  unsigned a[4], b[2];
  float c[4];
  load8(A, Bt, 32, a, b);
  load_c(C, c);
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n" : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  store_d(D, c);
}

// Four 8x8 matrices of 16-bit values through ldmatrix.x4, back through stmatrix.x4 (.trans: each one transposed).
__global__ void roundtrip(const unsigned short* X, unsigned short* Y, int trans) {
  __shared__ __align__(16) unsigned short s[4 * 64], o[4 * 64];
  int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) s[i] = X[i];
  __syncwarp();
  unsigned r[4];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem(&s[lane * 8])));
  if (trans)
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(smem(&o[lane * 8])), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
  else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
                 :: "r"(smem(&o[lane * 8])), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]));
  __syncwarp();
  for (int i = lane; i < 256; i += 32) Y[i] = o[i];
}

// Two warps: warp 1 fills the tile that warp 0 loads with ldmatrix, with or without a barrier between.
// movmatrix: each lane's word of an 8x8 matrix of halves (lane 4r + c: row r, columns 2c, 2c + 1), transposed
__global__ void transpose8(const unsigned* X, unsigned* Y) {
  unsigned d, a = X[threadIdx.x];
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  Y[threadIdx.x] = d;
}

__global__ void staged(const unsigned short* X, unsigned* Y, int barrier) {
  __shared__ __align__(16) unsigned short s[64];
  int t = threadIdx.x;
  if (t >= 32) s[(t - 32) * 2] = X[(t - 32) * 2], s[(t - 32) * 2 + 1] = X[(t - 32) * 2 + 1];
  if (barrier) __syncthreads();
  if (t < 32) {
    unsigned r;
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(smem(&s[(t % 8) * 8])));
    Y[t] = r;
  }
  if (!barrier) __syncthreads();
}

__global__ void bad_row(const unsigned short* X, unsigned* Y, int where) {
  __shared__ __align__(16) unsigned short s[64 + 8];
  int t = threadIdx.x;
  s[t] = X[t];
  __syncwarp();
  unsigned r;
  if (where == 0)   // a row 2 bytes past a 16-byte boundary
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r) : "r"(smem(&s[(t % 8) * 8 + 1])));
  else              // a generic address of global memory
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.b16 {%0}, [%1];\n" : "=r"(r) : "l"(X + (t % 8) * 8));
  Y[t] = r;
}
"""

SEED = 20261205


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def _bits(x: np.ndarray, fmt: str) -> np.ndarray:
    if fmt == "f16":
        return x.astype(np.float16).view(np.uint16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)      # bf16: truncated, exact below


def _values(bits: np.ndarray, fmt: str) -> list:
    if fmt == "f16":
        return [Fraction(float(v)) for v in bits.view(np.float16).ravel()]
    return [Fraction(float(v)) for v in (bits.astype(np.uint32) << 16).view(np.float32).ravel()]


def _exact_product(A: list, B: list, C: np.ndarray, K: int) -> list:
    """A (16xK) * B (Kx8) + C as exact rationals, row major."""
    return [sum((A[i * K + k] * B[k * 8 + j] for k in range(K)), Fraction(float(C[i, j])))
            for i in range(16) for j in range(8)]


@pytest.mark.parametrize("K", [16, 8])
@pytest.mark.parametrize("fmt", ["f16", "bf16"])
def test_mma_through_ldmatrix_is_the_product_rounded_once(module, fmt, K):
    rng = np.random.default_rng(SEED + K)
    scale = np.exp2(rng.integers(-6, 7, (16, K)))          # magnitudes over 12 binades, so sums cancel and carry
    A = _bits(rng.standard_normal((16, K)) * scale, fmt)
    B = _bits(rng.standard_normal((K, 8)), fmt)
    C = (rng.standard_normal((16, 8)) * 4).astype(np.float32)
    # D[0,0] = 1024 + 2^-14 + 2^-48: just above a midpoint of binary32, which a sum rounded to double would land on
    A[0, :] = 0
    A[0, :2] = _bits(np.array([2.0**-7, 2.0**-24]), fmt)
    B[:2, 0] = _bits(np.array([2.0**-7, 2.0**-24]), fmt)
    C[0, 0] = 1024
    D = np.zeros((16, 8), np.float32)
    module.launch("mma16", (1,), (32,), 0, [A, B, C, D, np.int32(K), np.int32(fmt == "bf16")], outputs=(3,))
    exact = _exact_product(_values(A, fmt), _values(B, fmt), C, K)
    expect = np.array([round_binary32(q) for q in exact], np.float32).reshape(16, 8)
    assert np.array_equal(D.view(np.uint32), expect.view(np.uint32)), f"replay: seed={SEED + K} fmt={fmt} K={K}"


def test_mma_with_f16_accumulators(module):
    rng = np.random.default_rng(SEED)
    A = rng.standard_normal((16, 16)).astype(np.float16)
    B = rng.standard_normal((16, 8)).astype(np.float16)
    C = rng.standard_normal((16, 8)).astype(np.float16)
    A[0, :], B[:2, 0], C[0, 0] = 0, [1.0, 2.0**-24], 1024      # 1024 + 0.5 + 2^-48: above a midpoint of binary16
    A[0, :2] = [0.5, 2.0**-24]
    D = np.zeros((16, 8), np.float16)
    module.launch("mma_f16_acc", (1,), (32,), 0, [A, B, C, D], outputs=(3,))
    exact = [sum((Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(16)), Fraction(float(C[i, j])))
             for i in range(16) for j in range(8)]
    expect = np.array([round_exact(q, HALF) for q in exact], np.uint16).reshape(16, 8)
    assert np.array_equal(D.view(np.uint16), expect), f"replay: seed={SEED}"


@pytest.mark.parametrize("form, K, a_signed, b_signed", [(0, 16, True, True), (1, 32, False, True),
                                                         (2, 32, True, False)])
def test_mma_int8_forms(module, form, K, a_signed, b_signed):
    rng = np.random.default_rng(SEED + form)
    A = rng.integers(-128 if a_signed else 0, 128 if a_signed else 256, (16, K)).astype(np.int8 if a_signed else np.uint8)
    Bt = rng.integers(-128 if b_signed else 0, 128 if b_signed else 256, (8, K)).astype(np.int8 if b_signed else np.uint8)
    C = rng.integers(-1000, 1000, (16, 8)).astype(np.int64)
    if form == 2:          # .satfinite: sums past the int32 range clamp instead of wrapping
        C[0, :4] = 2**31 - 100
        C[1, :4] = -2**31 + 100
    D = np.zeros((16, 8), np.int32)
    module.launch("mma_int8", (1,), (32,), 0, [A.view(np.uint8), Bt.view(np.uint8), C.astype(np.int32), D,
                                               np.int32(form)], outputs=(3,))
    exact = A.astype(np.int64) @ Bt.T.astype(np.int64) + C
    expect = np.clip(exact, -2**31, 2**31 - 1) if form == 2 else exact.astype(np.int32)
    if form == 2:
        assert (exact > 2**31 - 1).any() and (exact < -2**31).any()      # the clamp is exercised
    assert np.array_equal(D, expect.astype(np.int32)), f"replay: seed={SEED + form} form={form}"


def test_mma_fp8_e4m3_by_e5m2(module):
    rng = np.random.default_rng(SEED + 8)
    finite = lambda fmt: [c for c in range(256) if decode(fmt, c) is not None and abs(decode(fmt, c)) != float("inf")]
    A = rng.choice(finite(E4M3), (16, 32)).astype(np.uint8)
    Bt = rng.choice(finite(E5M2), (8, 32)).astype(np.uint8)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    # 2^30 + 64 + 2^-25 (64 = 8 * 8; 2^-25 = 2^-9 * 2^-16, the subnormal minimums): above a midpoint of binary32
    A[0, :], A[0, :2] = 0x00, [0x50, 0x01]          # E4M3 8 and 2^-9
    Bt[0, :2] = [0x48, 0x01]                         # E5M2 8 and 2^-16
    C[0, 0] = 2.0**30
    D = np.zeros((16, 8), np.float32)
    module.launch("mma_fp8", (1,), (32,), 0, [A, Bt, C, D], outputs=(3,))
    exact = [sum((decode(E4M3, int(A[i, k])) * decode(E5M2, int(Bt[j, k])) for k in range(32)), Fraction(float(C[i, j])))
             for i in range(16) for j in range(8)]
    expect = np.array([round_binary32(q) for q in exact], np.float32).reshape(16, 8)
    assert np.array_equal(D.view(np.uint32), expect.view(np.uint32)), f"replay: seed={SEED + 8}"


@pytest.mark.parametrize("trans", [0, 1])
def test_stmatrix_inverts_ldmatrix(module, trans):
    X = np.arange(256, dtype=np.uint16) * 3 + 1
    Y = np.zeros(256, np.uint16)
    module.launch("roundtrip", (1,), (32,), 0, [X, Y, np.int32(trans)], outputs=(1,))
    mats = X.reshape(4, 8, 8)
    assert np.array_equal(Y.reshape(4, 8, 8), mats.transpose(0, 2, 1) if trans else mats)


def test_movmatrix_transposes_the_fragment(module):
    """ggml's flash attention (fattn-mma-f16.cuh's get_transposed) turns a fragment with movmatrix; the layout is
    ldmatrix's: lane 4r + c holds row r, columns 2c and 2c + 1, the lower column in the low half."""
    M = (np.arange(64, dtype=np.uint16) * 7 + 3).reshape(8, 8)
    words = lambda m: (m[:, 0::2].astype(np.uint32) | m[:, 1::2].astype(np.uint32) << 16).ravel()
    Y = np.zeros(32, np.uint32)
    module.launch("transpose8", (1,), (32,), 0, [words(M), Y], outputs=(1,))
    assert np.array_equal(Y, words(M.T))


def test_ldmatrix_after_another_warps_stores_needs_a_barrier(module):
    X = np.arange(64, dtype=np.uint16)
    Y = np.zeros(32, np.uint32)
    line = SOURCE.split("\n").index('    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\\n" : '
                                    '"=r"(r) : "r"(smem(&s[(t % 8) * 8])));') + 1
    with pytest.raises(DataRace, match=rf"__shared__ 's'.* at line {line}"):
        module.launch("staged", (1,), (64,), 0, [X, Y, np.int32(0)], outputs=(1,))
    module.launch("staged", (1,), (64,), 0, [X, Y, np.int32(1)], outputs=(1,))
    lane = np.arange(32)
    words = X.reshape(8, 4, 2)                 # row, word, half
    assert np.array_equal(Y, words[lane // 4, lane % 4, 0].astype(np.uint32) | words[lane // 4, lane % 4, 1].astype(np.uint32) << 16)


@pytest.mark.parametrize("where, rule", [(0, "not 16-byte aligned"), (1, "not shared memory")])
def test_a_bad_matrix_row_address_traps(module, where, rule):
    X = np.arange(64, dtype=np.uint16)
    Y = np.zeros(32, np.uint32)
    with pytest.raises(KernelFault, match=rf"matrix row address .*at line \d+ .*is {rule}"):
        module.launch("bad_row", (1,), (32,), 0, [X, Y, np.int32(where)], outputs=(1,))
