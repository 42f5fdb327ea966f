"""<mma.h>'s WMMA API on emu (emu_wmma.hpp): fragments loaded in either layout, mma_sync in every shape and type
emu provides, stores in either layout, against exact references (rationals rounded once; integers in numpy). The
fragments' element mapping is emu's own (CUDA leaves it unspecified), so only whole-matrix results and element-wise
use of x[] are checked. A load of shared memory another warp writes without a barrier is a DataRace."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from harness.backends import DataRace
from tests.backends.emu.float_reference import HALF, round_binary32, round_exact

SEED = 616

SOURCE = r"""
#include <mma.h>
#include <cuda_bf16.h>
using namespace nvcuda;

// f16 operands: A row-major, B column-major, C and D float row-major; then D doubled element-wise through x[].
__global__ void f16_f32(const __half* A, const __half* B, const float* C, float* D) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c, d;
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(d, a, b, c);
  wmma::store_matrix_sync(D, d, 16, wmma::mem_row_major);
  for (int i = 0; i < d.num_elements; ++i) d.x[i] *= 2.0f;
  wmma::store_matrix_sync(D + 256, d, 16, wmma::mem_col_major);
}

// f16 accumulators; A column-major, B row-major; C zero-filled.
__global__ void f16_f16(const __half* A, const __half* B, __half* D) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, __half> c;
  wmma::fill_fragment(c, 0.0f);
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

// bf16, 32 x 8 x 16.
__global__ void bf16_32x8(const __nv_bfloat16* A, const __nv_bfloat16* B, float* D) {
  wmma::fragment<wmma::matrix_a, 32, 8, 16, __nv_bfloat16, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 32, 8, 16, __nv_bfloat16, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 32, 8, 16, float> c;
  wmma::fill_fragment(c, 1.0f);
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 8);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 8, wmma::mem_row_major);
}

// int8: unsigned A and B (CUDA takes one signedness for both), int accumulators, saturating.
__global__ void int8_sat(const unsigned char* A, const unsigned char* B, const int* C, int* D, int satf) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, unsigned char, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, unsigned char, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::load_matrix_sync(c, C, 16, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c, satf != 0);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

__global__ void int8_signed(const signed char* A, const signed char* B, int* D) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::col_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 16, int> c;
  wmma::fill_fragment(c, -7);
  wmma::load_matrix_sync(a, A, 16);
  wmma::load_matrix_sync(b, B, 16);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_col_major);
}

// tf32, 16 x 16 x 8: A converted with __float_to_tf32, B as loaded (the tensor cores ignore its low 13 bits).
__global__ void tf32(const float* A, const float* B, float* D) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::load_matrix_sync(a, A, 8);
  wmma::load_matrix_sync(b, B, 16);
  for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
  wmma::fill_fragment(c, 0.0f);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
}

// double, 8 x 8 x 4.
__global__ void f64(const double* A, const double* B, const double* C, double* D) {
  wmma::fragment<wmma::matrix_a, 8, 8, 4, double, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 8, 8, 4, double, wmma::col_major> b;
  wmma::fragment<wmma::accumulator, 8, 8, 4, double> c;
  wmma::load_matrix_sync(a, A, 4);
  wmma::load_matrix_sync(b, B, 4);
  wmma::load_matrix_sync(c, C, 8, wmma::mem_row_major);
  wmma::mma_sync(c, a, b, c);
  wmma::store_matrix_sync(D, c, 8, wmma::mem_row_major);
}

// Warp 1 stages A in shared memory for warp 0's load, with or without a barrier between.
__global__ void staged(const __half* A, const __half* B, float* D, int barrier) {
  __shared__ __half s[256];
  int t = threadIdx.x;
  if (t >= 32) for (int i = t - 32; i < 256; i += 32) s[i] = A[i];
  if (barrier) __syncthreads();
  if (t < 32) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
    wmma::fill_fragment(c, 0.0f);
    wmma::load_matrix_sync(a, s, 16);
    wmma::load_matrix_sync(b, B, 16);
    wmma::mma_sync(c, a, b, c);
    wmma::store_matrix_sync(D, c, 16, wmma::mem_row_major);
  }
  if (!barrier) __syncthreads();
}
"""


@pytest.fixture(scope="module")
def module(detector):
    return detector.load(SOURCE)


def _exact(A, B, C) -> list:
    """A B + C in rationals, row-major (A: M x K, B: K x N, C: M x N)."""
    M, K = A.shape
    N = B.shape[1]
    return [[sum((Fraction(float(A[i, k])) * Fraction(float(B[k, j])) for k in range(K)), Fraction(float(C[i, j])))
             for j in range(N)] for i in range(M)]


def test_f16_operands_float_accumulators_both_layouts(module):
    rng = np.random.default_rng(SEED)
    A = (rng.standard_normal((16, 16)) * np.exp2(rng.integers(-6, 7, (16, 16)))).astype(np.float16)
    B = rng.standard_normal((16, 16)).astype(np.float16)
    C = rng.standard_normal((16, 16)).astype(np.float32)
    A[0, :], A[0, :2], B[:2, 0], C[0, 0] = 0, [2.0**-7, 2.0**-24], [2.0**-7, 2.0**-24], 1024   # just past a midpoint
    D = np.zeros(512, np.float32)
    module.launch("f16_f32", (1,), (32,), 0, [A, np.ascontiguousarray(B.T), C, D], outputs=(3,))
    want = np.array([[round_binary32(q) for q in row] for row in _exact(A, B, C)], np.float32)
    assert np.array_equal(D[:256].reshape(16, 16), want), f"replay: seed={SEED}"
    assert np.array_equal(D[256:].reshape(16, 16).T, 2 * want)                   # x[] scaled, stored column-major


def test_f16_accumulators(module):
    rng = np.random.default_rng(SEED + 1)
    A, B = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 16)).astype(np.float16)
    D = np.zeros((16, 16), np.float16)
    module.launch("f16_f16", (1,), (32,), 0, [np.ascontiguousarray(A.T), B, D], outputs=(2,))
    want = np.array([[round_exact(q, HALF) for q in row] for row in _exact(A, B, np.zeros((16, 16)))], np.uint16)
    assert np.array_equal(D.view(np.uint16), want), f"replay: seed={SEED + 1}"


def test_bf16_32x8x16(module):
    rng = np.random.default_rng(SEED + 2)
    bits = lambda x: (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)        # noqa: E731
    val = lambda b: (b.astype(np.uint32) << 16).view(np.float32)                             # noqa: E731
    A, B = bits(rng.standard_normal((32, 16))), bits(rng.standard_normal((16, 8)))
    D = np.zeros((32, 8), np.float32)
    module.launch("bf16_32x8", (1,), (32,), 0, [A, B, D], outputs=(2,))
    want = np.array([[round_binary32(q) for q in row] for row in _exact(val(A), val(B), np.ones((32, 8)))], np.float32)
    assert np.array_equal(D, want), f"replay: seed={SEED + 2}"


@pytest.mark.parametrize("satf", [0, 1])
def test_int8_with_and_without_saturation(module, satf):
    rng = np.random.default_rng(SEED + 3)
    A = rng.integers(0, 256, (16, 16)).astype(np.uint8)
    B = rng.integers(0, 256, (16, 16)).astype(np.uint8)
    C = rng.integers(-1000, 1000, (16, 16)).astype(np.int64)
    C[0, :4] = 2**31 - 10
    D = np.zeros((16, 16), np.int32)
    module.launch("int8_sat", (1,), (32,), 0, [A, np.ascontiguousarray(B.T), C.astype(np.int32), D, np.int32(satf)],
                  outputs=(3,))
    exact = A.astype(np.int64) @ B.astype(np.int64) + C
    assert (exact > 2**31 - 1).any()
    want = np.clip(exact, -2**31, 2**31 - 1) if satf else exact.astype(np.int32)
    assert np.array_equal(D, want.astype(np.int32)), f"replay: seed={SEED + 3}"


def test_signed_int8(module):
    rng = np.random.default_rng(SEED + 6)
    A, B = (rng.integers(-128, 128, (16, 16)).astype(np.int8) for _ in range(2))
    D = np.zeros((16, 16), np.int32)
    module.launch("int8_signed", (1,), (32,), 0, [np.ascontiguousarray(A.T), B, D], outputs=(2,))
    assert np.array_equal(D.T, A.astype(np.int64) @ B.astype(np.int64) - 7), f"replay: seed={SEED + 6}"


def test_tf32(module):
    rng = np.random.default_rng(SEED + 4)
    A, B = rng.standard_normal((16, 8)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    A[0, 0] = np.float32(1 + 2.0**-11)                     # a tie at tf32's last bit: away from zero
    D = np.zeros((16, 16), np.float32)
    module.launch("tf32", (1,), (32,), 0, [A, B, D], outputs=(2,))

    def tf32(x):                                           # cvt.rna.tf32.f32: nearest, ties away from zero
        u = x.view(np.uint32).astype(np.uint64)
        return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    assert tf32(A)[0, 0] == np.float32(1 + 2.0**-10)
    truncated = (B.view(np.uint32) & 0xFFFFE000).view(np.float32)
    want = np.array([[round_binary32(q) for q in row] for row in _exact(tf32(A), truncated, np.zeros((16, 16)))],
                    np.float32)
    assert np.array_equal(D, want), f"replay: seed={SEED + 4}"


def test_double_8x8x4(module):
    rng = np.random.default_rng(SEED + 7)
    A, B, C = rng.standard_normal((8, 4)), rng.standard_normal((4, 8)), rng.standard_normal((8, 8))
    D = np.zeros((8, 8))
    module.launch("f64", (1,), (32,), 0, [A, np.ascontiguousarray(B.T), C, D], outputs=(3,))
    want = np.array([[float(q) for q in row] for row in _exact(A, B, C)])      # float(): the nearest double
    assert np.array_equal(D, want), f"replay: seed={SEED + 7}"


def test_a_load_of_shared_memory_another_warp_writes_needs_a_barrier(module):
    rng = np.random.default_rng(SEED + 5)
    A, B = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 16)).astype(np.float16)
    D = np.zeros((16, 16), np.float32)
    with pytest.raises(DataRace, match=r"__shared__ 's'"):
        module.launch("staged", (1,), (64,), 0, [A, np.ascontiguousarray(B.T), D, np.int32(0)], outputs=(2,))
    module.launch("staged", (1,), (64,), 0, [A, np.ascontiguousarray(B.T), D, np.int32(1)], outputs=(2,))
    want = np.array([[round_binary32(q) for q in row] for row in _exact(A, B, np.zeros((16, 16)))], np.float32)
    assert np.array_equal(D, want)
