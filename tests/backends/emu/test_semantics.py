"""CUDA semantics on the emu backend against independent numpy formulations of the CUDA documentation:
thread indexing, warp shuffles with widths, votes, __dp4a, the int8 mma fragment layout, __half and
float-to-int rounding, argument passing rules."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

SRC = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>
__global__ void index3d(int* out){
  int b = blockIdx.x + gridDim.x*(blockIdx.y + gridDim.y*blockIdx.z);
  int t = threadIdx.x + blockDim.x*(threadIdx.y + blockDim.y*threadIdx.z);
  int nt = blockDim.x*blockDim.y*blockDim.z;
  out[b*nt + t] = b*1000 + t; }
__global__ void shuffles(const float* v, float* out, int w, int d){
  int l = threadIdx.x; float x = v[l];
  out[0*32+l] = __shfl_sync(0xffffffffu, x, d, w);
  out[1*32+l] = __shfl_up_sync(0xffffffffu, x, d, w);
  out[2*32+l] = __shfl_down_sync(0xffffffffu, x, d, w);
  out[3*32+l] = __shfl_xor_sync(0xffffffffu, x, d, w); }
__global__ void votes(const int* p, unsigned* out){
  int l = threadIdx.x;
  out[l] = __ballot_sync(0xffffffffu, p[l]);
  out[32+l] = __any_sync(0xffffffffu, p[l]);
  out[64+l] = __all_sync(0xffffffffu, p[l]); }
__global__ void dp4a(const int* a, const int* b, const int* c, int* out, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i<n) out[i] = __dp4a(a[i], b[i], c[i]); }
__global__ void dp4a_vec(const signed char* a, const signed char* b, int* out){
  const int4* a16=(const int4*)a; const int4* b16=(const int4*)b; int4 x=a16[threadIdx.x], y=b16[threadIdx.x];
  char4 p = ((const char4*)a)[threadIdx.x*4], q = ((const char4*)b)[threadIdx.x*4];
  out[2*threadIdx.x] = __dp4a(x.x,y.x,0)+__dp4a(x.y,y.y,0)+__dp4a(x.z,y.z,0)+__dp4a(x.w,y.w,0);
  out[2*threadIdx.x+1] = __dp4a(p, q, 0); }
__global__ void mma(const signed char* A, const signed char* Bt, const int* C, int* D){
  int lane=threadIdx.x, gid=lane>>2, tid=lane&3;
  int a0=*(const int*)(A+gid*32+tid*4), a1=*(const int*)(A+(gid+8)*32+tid*4);
  int a2=*(const int*)(A+gid*32+16+tid*4), a3=*(const int*)(A+(gid+8)*32+16+tid*4);
  int b0=*(const int*)(Bt+gid*32+tid*4), b1=*(const int*)(Bt+gid*32+16+tid*4);
  int c0=C[gid*8+tid*2], c1=C[gid*8+tid*2+1], c2=C[(gid+8)*8+tid*2], c3=C[(gid+8)*8+tid*2+1];
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
    : "+r"(c0),"+r"(c1),"+r"(c2),"+r"(c3) : "r"(a0),"r"(a1),"r"(a2),"r"(a3), "r"(b0),"r"(b1));
  D[gid*8+tid*2]=c0; D[gid*8+tid*2+1]=c1; D[(gid+8)*8+tid*2]=c2; D[(gid+8)*8+tid*2+1]=c3; }
__global__ void halfs(const float* x, __half* h, float* back, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i<n){ h[i]=__float2half(x[i]); back[i]=__half2float(h[i]); } }
__global__ void rounding(const float* x, int* a, int* b, float* c, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i<n){ a[i]=__float2int_rn(x[i]); b[i]=(int)rintf(x[i]);
  c[i]=__fmul_rn(x[i], 3.0f) + 1.0f; } }
__global__ void mul_add(const float* x, const float* c, float* out){
  out[0] = x[0]*x[0] + c[0]; out[1] = fmaf(x[0], x[0], c[0]); }
__global__ void scalars(float* out, int i, float f, double d, unsigned u, long long ll){
  out[0]=(float)i; out[1]=f; out[2]=(float)d; out[3]=(float)u; out[4]=(float)ll; }
__global__ void hello(int* y){ printf("thread %d of %d\n", (int)threadIdx.x, (int)blockDim.x); y[threadIdx.x]=1; }
"""


@pytest.fixture(scope="module")
def mod(load):
    return load(SRC)


def test_thread_and_block_indices_3d(mod):
    grid, block = (3, 2, 2), (4, 2, 3)
    nb, nt = 12, 24
    out = np.zeros(nb * nt, np.int32)
    mod.launch("index3d", grid, block, 0, [out], outputs=(0,))
    b, t = np.divmod(np.arange(nb * nt), nt)
    assert np.array_equal(out, b * 1000 + t)


@settings(max_examples=40)
@given(width=st.sampled_from([1, 2, 4, 8, 16, 32]), delta=st.integers(0, 63))
def test_shuffles_match_cuda_definition(mod, width, delta):
    v = np.arange(32, dtype=np.float32) * 1.5 + 0.25
    out = np.zeros(4 * 32, np.float32)
    mod.launch("shuffles", (1,), (32,), 0, [v, out, np.int32(width), np.int32(delta)], outputs=(1,))
    lane = np.arange(32)
    base, pos = lane // width * width, lane % width
    idx = base + delta % width
    delta = delta % 32             # PTX shfl reads the low 5 bits of the lane offset
    up = np.where(pos >= delta, lane - delta, lane)
    down = np.where(pos + delta < width, lane + delta, lane)
    x = lane ^ delta
    xor = np.where((x < 32) & (x <= base + width - 1), x, lane)   # later groups read their own value
    expect = np.concatenate([v[idx], v[up], v[down], v[xor]])
    assert np.array_equal(out, expect), f"width={width} delta={delta}"


def test_votes(mod):
    rng = np.random.default_rng(3)
    p = rng.integers(0, 2, 32).astype(np.int32)
    out = np.zeros(96, np.uint32)
    mod.launch("votes", (1,), (32,), 0, [p, out], outputs=(1,))
    ballot = int(np.sum(p.astype(np.uint64) << np.arange(32, dtype=np.uint64)))
    assert np.all(out[:32] == ballot) and np.all(out[32:64] == 1) and np.all(out[64:] == int(p.all()))


def test_dp4a_is_exact_with_wraparound(mod):
    seed = 11
    rng = np.random.default_rng(seed)
    n = 1000
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    c = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    c[:4] = [2**31 - 1, -2**31, 2**31 - 100, 0]      # accumulate overflow wraps modulo 2^32
    a[:4] = b[:4] = np.int32(0x7F7F7F7F)
    out = np.zeros(n, np.int32)
    mod.launch("dp4a", ((n + 255) // 256,), (256,), 0, [a, b, c, out, np.int32(n)], outputs=(3,))
    prod = (a.view(np.int8).reshape(n, 4).astype(np.int64) * b.view(np.int8).reshape(n, 4)).sum(1) + c
    expect = ((prod + 2**31) % 2**32 - 2**31).astype(np.int32)
    assert np.array_equal(out, expect), f"replay: seed={seed}"


def test_vector_types_and_char4_dp4a(mod):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, 32 * 16, dtype=np.int8)
    b = rng.integers(-128, 128, 32 * 16, dtype=np.int8)
    out = np.zeros(64, np.int32)
    mod.launch("dp4a_vec", (1,), (32,), 0, [a, b, out], outputs=(2,))
    prods = (a.astype(np.int32) * b).reshape(32, 16)
    assert np.array_equal(out[0::2], prods.sum(1))
    assert np.array_equal(out[1::2], prods[:, :4].sum(1))


def test_mma_m16n8k32_fragment_layout(mod):
    seed = 7
    rng = np.random.default_rng(seed)
    A = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    Bt = rng.integers(-128, 128, (8, 32), dtype=np.int8)      # B column-major: row n of Bt is column n of B
    C = rng.integers(-1000, 1000, (16, 8)).astype(np.int32)
    D = np.zeros((16, 8), np.int32)
    mod.launch("mma", (1,), (32,), 0, [A, Bt, C, D], outputs=(3,))
    assert np.array_equal(D, A.astype(np.int32) @ Bt.T.astype(np.int32) + C), f"replay: seed={seed}"


def test_half_conversion_rounds_to_nearest_even(mod):
    rng = np.random.default_rng(2)
    ties = (np.arange(1, 200, dtype=np.float32) * 2 + 1) * np.float32(2.0 ** -11)   # halfway between halves in [1,2)
    x = np.concatenate([rng.standard_normal(500).astype(np.float32) * 100, ties,
                        np.array([65504, 65520, 1e-8, -0.0, 6e-5], np.float32)])
    h = np.zeros(x.size, np.float16)
    back = np.zeros(x.size, np.float32)
    mod.launch("halfs", ((x.size + 127) // 128,), (128,), 0, [x, h, back, np.int32(x.size)], outputs=(1, 2))
    with np.errstate(over="ignore"):     # 65520 rounds up to inf, as on the GPU
        expect = x.astype(np.float16)
    assert np.array_equal(h.view(np.uint16), expect.view(np.uint16))
    assert np.array_equal(back, h.astype(np.float32))


def test_float_to_int_round_half_even_and_no_contraction(mod):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49999, 1e10, -1e10, np.nan], np.float32)
    a = np.zeros(x.size, np.int32)
    b = np.zeros(x.size, np.int32)
    c = np.zeros(x.size, np.float32)
    mod.launch("rounding", (1,), (32,), 0, [x, a, b, c, np.int32(x.size)], outputs=(1, 2, 3))
    finite = np.isfinite(x) & (np.abs(x) < 2**31)
    assert np.array_equal(a[finite], np.rint(x[finite]).astype(np.int32))
    assert list(a[~finite]) == [2**31 - 1, -2**31, 0]          # cvt.rni.s32.f32 saturates, NaN -> 0
    assert np.array_equal(b[finite], a[finite])
    assert np.array_equal(c, (x * np.float32(3.0)).astype(np.float32) + np.float32(1.0), equal_nan=True)


def test_multiply_add_is_not_contracted_but_fmaf_is_fused(mod):
    # x*x = 1 + 2^-11 + 2^-24 exactly; rounded to float it loses the 2^-24, fused it keeps it.
    x = np.array([1 + 2.0 ** -12], np.float32)
    c = np.array([-(1 + 2.0 ** -11)], np.float32)
    out = np.zeros(2, np.float32)
    mod.launch("mul_add", (1,), (1,), 0, [x, c, out], outputs=(2,))
    assert out[0] == 0.0 and out[1] == np.float32(2.0 ** -24)


def test_scalar_arguments_pass_by_value(mod):
    out = np.zeros(5, np.float32)
    mod.launch("scalars", (1,), (1,), 0, [out, np.int32(-3), np.float32(2.5), np.float64(0.125),
                                          np.uint32(7), np.int64(-9)], outputs=(0,))
    assert list(out) == [-3.0, 2.5, 0.125, 7.0, -9.0]


@pytest.mark.parametrize("bad,match", [
    ([np.zeros(5, np.float32), 3, np.float32(1), np.float64(1), np.uint32(1), np.int64(1)], r"args\[1\] \(i: int\).*np.int32"),
    ([np.zeros(5, np.float32), np.int64(3), np.float32(1), np.float64(1), np.uint32(1), np.int64(1)], r"args\[1\] \(i: int\): pass a numpy scalar of dtype int32.*got int64"),
    ([np.zeros(5, np.float32), np.int32(3), np.float64(1), np.float64(1), np.uint32(1), np.int64(1)], r"args\[2\] \(f: float\)"),
    ([np.zeros(5, np.float64), np.int32(3), np.float32(1), np.float64(1), np.uint32(1), np.int64(1)], r"args\[0\] \(out: float\*\): .*must have dtype float32, got float64"),
    ([np.zeros(10, np.float32)[::2], np.int32(3), np.float32(1), np.float64(1), np.uint32(1), np.int64(1)], r"C-contiguous"),
    ([np.zeros(5, np.float32)], r"takes 6 parameters"),
])
def test_argument_mismatch_is_value_error(mod, bad, match):
    with pytest.raises(ValueError, match=match):
        mod.launch("scalars", (1,), (1,), 0, bad)


def test_runtime_rejected_launch_config_is_value_error_not_crash(mod, monkeypatch):
    # The runtime's own limit check (emu::BAD_LAUNCH, 256 KiB of dynamic shared memory) behind the backend's:
    # with the backend's check relaxed, the runtime's refusal must still surface as the caller's ValueError.
    import harness.backends.emu.backend as emu_mod
    from harness.backends.base import KernelFault
    from harness.backends.emu.native import FAULT_NAMES
    assert FAULT_NAMES[6] == "BadLaunch"
    monkeypatch.setattr(emu_mod, "MAX_DYNAMIC_SHARED", 512 * 1024)
    with pytest.raises(ValueError, match=r"launch: hello<<<1x1x1, 4x1x1, 307200>>>: .*outside the CUDA limits") as err:
        mod.launch("hello", (1,), (4,), 300 * 1024, [np.zeros(4, np.int32)])
    assert not isinstance(err.value, KernelFault)


def test_launch_argument_errors(mod):
    out = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match=r"name: no kernel 'nope'"):
        mod.launch("nope", (1,), (1,), 0, [out])
    with pytest.raises(ValueError, match=r"block: 2048 threads"):
        mod.launch("hello", (1,), (2048,), 0, [out])
    with pytest.raises(ValueError, match=r"grid: expected 1 to 3 positive sizes"):
        mod.launch("hello", (0,), (4,), 0, [out])
    with pytest.raises(ValueError, match=r"outputs: 3 is not an argument index"):
        mod.launch("hello", (1,), (4,), 0, [out], outputs=(3,))
    frozen = np.zeros(4, np.int32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match=r"args\[0\] \(y: int\*\).*read-only"):
        mod.launch("hello", (1,), (4,), 0, [frozen])
    a = np.zeros(64, np.int8)
    with pytest.raises(ValueError, match=r"overlap in memory"):
        mod.launch("dp4a_vec", (1,), (1,), 0, [a, a, np.zeros(2, np.int32)])


def test_device_printf_is_captured(mod):
    y = np.zeros(3, np.int32)
    res = mod.launch("hello", (1,), (3,), 0, [y], outputs=(0,))
    text = "\n".join(res.notes)
    assert "thread 0 of 3\nthread 1 of 3\nthread 2 of 3\n" in text


def test_a_kernels_own_macros_do_not_reach_into_the_device_api(load):
    """A kernel may `#define tid ...` (NVIDIA's marchingCubes sample does) or `#define syncthreads __syncthreads`
    (concurrentKernels): threadIdx, the barrier, shuffles and votes must still be CUDA's, not expansions through
    the kernel's macros."""
    mod = load("#define tid (blockIdx.x * blockDim.x + threadIdx.x)\n#define syncthreads __syncthreads\n"
               "#define vote 0\n#define shfl 0\n#define trap 0\n#define g_cur 0\n#define device_printf 0\n"
               "__global__ void k(int* y){ __shared__ int s[4]; s[threadIdx.x] = threadIdx.x; syncthreads();\n"
               "  int v = __shfl_sync(0xfu, s[3 - threadIdx.x], threadIdx.x);\n"
               "  y[tid] = v + 100 * blockIdx.x + 10 * __any_sync(0xfu, 1); }")
    y = np.zeros(8, np.int32)
    mod.launch("k", (2,), (4,), 0, [y], outputs=(0,))
    assert y.tolist() == [13, 12, 11, 10, 113, 112, 111, 110]


def test_two_modules_keep_separate_state(load):
    a = load("__global__ void k(int* y){ __shared__ int s[4]; s[threadIdx.x]=threadIdx.x+1; __syncthreads(); "
             "y[threadIdx.x]=s[3-threadIdx.x]; }")
    b = load("__global__ void k(int* y){ __shared__ int s[8]; s[threadIdx.x]=100+threadIdx.x; __syncthreads(); "
             "y[threadIdx.x]=s[threadIdx.x]; }")
    ya, yb = np.zeros(4, np.int32), np.zeros(8, np.int32)
    for _ in range(2):
        a.launch("k", (1,), (4,), 0, [ya], outputs=(0,))
        b.launch("k", (1,), (8,), 0, [yb], outputs=(0,))
    assert list(ya) == [4, 3, 2, 1] and list(yb) == list(range(100, 108))


MISC = r"""
#include <cuda_runtime.h>
#include <cstdio>
#include <cmath>
__device__ __forceinline__ float twice(float v){ return 2.0f * v; }
extern "C" __global__ void __launch_bounds__(64) misc(const float4* __restrict__ in, float* __restrict__ out,
                                                      int* counter){
  float4 v = __ldg(&in[threadIdx.x]);
  float s = 0.0f;
  #pragma unroll
  for(int i = 0; i < 1; ++i) s += twice(v.x) + v.y + v.z + v.w;
  __syncwarp();
  unsigned active = __activemask();
  out[blockIdx.x*blockDim.x + threadIdx.x] = s + (float)(warpSize + gridDim.x) + (active == 0xffffffffu ? 0.5f : 0.0f);
  atomicAdd(counter, 1);
  __shared__ __align__(16) float tile[2][32];
  tile[threadIdx.x/32][threadIdx.x%32] = __expf(0.0f) + rsqrtf(4.0f) + powf(2.0f, 3.0f) + sinf(0.0f) + cosf(0.0f);
  __syncthreads();
  if(threadIdx.x == 0) out[blockIdx.x*blockDim.x] += tile[1][31] - 10.5f;
}
"""


def test_sine_and_cosine_together(load):
    """CUDA's `sincosf` and its fast `__sincosf` (NVIDIA's convolutionFFT2D twiddles use it) give both values at
    once; emu's are the host's, so they agree with numpy to float rounding."""
    mod = load("""
__global__ void sc(const float* x, float* s, float* c, float* s2, float* c2) {
  int i = threadIdx.x;
  __sincosf(x[i], &s[i], &c[i]);
  sincosf(x[i], &s2[i], &c2[i]);
}""")
    x = np.linspace(-3.0, 3.0, 32, dtype=np.float32)
    outs = [np.zeros(32, np.float32) for _ in range(4)]
    mod.launch("sc", (1,), (32,), 0, [x, *outs], outputs=(1, 2, 3, 4))
    for got, want in zip(outs, (np.sin, np.cos, np.sin, np.cos)):
        np.testing.assert_allclose(got, want(x.astype(np.float64)), atol=1e-6)


def test_an_integer_division_by_zero_goes_on_as_on_a_gpu(load):
    """x86 traps on an integer division by zero (and INT_MIN / -1); a GPU gives an unspecified value and the
    thread goes on (PTX div/rem). Before, the worker died (KernelCrash: GKLEE's seive2 divides by a 0 the kernel
    itself wrote). Now the division ends with quotient all ones and remainder the dividend (INT_MIN and 0 for the
    overflow), for 32- and 64-bit, signed and unsigned, divisors in registers and in memory, and the launch's
    notes say how many there were. Divisions that do not trap are untouched (the last lane)."""
    mod = load("""
__global__ void divs(const int* a, const int* b, int* q, int* r, const long long* a64, const long long* b64,
                     long long* q64, long long* r64, const unsigned* ua, const unsigned* ub, unsigned* uq, unsigned* ur) {
  int i = threadIdx.x;
  q[i] = a[i] / b[i]; r[i] = a[i] % b[i];
  q64[i] = a64[i] / b64[i]; r64[i] = a64[i] % b64[i];
  uq[i] = ua[i] / ub[i]; ur[i] = ua[i] % ub[i];
}""")
    a, b = np.array([7, -7, -2**31, 9], np.int32), np.array([0, 0, -1, 2], np.int32)
    a64, b64 = np.array([7, -7, -2**63, 9], np.int64), np.array([0, 0, -1, 2], np.int64)
    ua, ub = np.array([7, 5, 3, 9], np.uint32), np.array([0, 0, 0, 2], np.uint32)
    q, r = np.zeros(4, np.int32), np.zeros(4, np.int32)
    q64, r64 = np.zeros(4, np.int64), np.zeros(4, np.int64)
    uq, ur = np.zeros(4, np.uint32), np.zeros(4, np.uint32)
    result = mod.launch("divs", (1,), (4,), 0, [a, b, q, r, a64, b64, q64, r64, ua, ub, uq, ur],
                        outputs=(2, 3, 6, 7, 10, 11))
    assert q.tolist() == [-1, -1, -2**31, 4] and r.tolist() == [7, -7, 0, 1]
    assert q64.tolist() == [-1, -1, -2**63, 4] and r64.tolist() == [7, -7, 0, 1]
    assert uq.tolist() == [2**32 - 1] * 3 + [4] and ur.tolist() == [7, 5, 3, 1]
    note = next(n for n in result.notes if "division(s) by zero" in n)
    # 9 quotients and remainders trap (3 lanes x 3 types); g++ may divide once for both or once for each
    assert 9 <= int(re.match(r"emu: (\d+) integer division\(s\) by zero in run 1", note).group(1)) <= 18, note


@pytest.mark.parametrize("name", ["div", "round", "max"])
def test_a_kernel_named_like_a_library_function_runs(load, name):
    """GKLEE's divergence.cu names its kernel `div`: in emu's build the name also has cstdlib's overloads (and
    `round` math's, `max` CUDA's), which return values; the launch table takes the one that returns void. Before,
    the build failed ("no matches converting function 'thunk'")."""
    mod = load(f"__global__ void {name}(int* a, int n) {{ a[threadIdx.x] = threadIdx.x / n; }}")
    a = np.zeros(32, np.int32)
    mod.launch(name, (1,), (32,), 0, [a, np.int32(3)], outputs=(0,))
    assert a.tolist() == [i // 3 for i in range(32)]


def test_common_cuda_constructs_compile_and_run(load):
    mod = load(MISC)
    x = np.arange(2 * 64 * 4, dtype=np.float32).reshape(2 * 64, 4) % 5      # float4 per thread (only 64 read)
    out = np.zeros(2 * 64, np.float32)
    counter = np.zeros(1, np.int32)
    mod.launch("misc", (2,), (64,), 0, [x, out, counter], outputs=(1,))
    v = x[:64]
    per_thread = 2 * v[:, 0] + v[:, 1] + v[:, 2] + v[:, 3] + 34.5
    expect = np.concatenate([per_thread, per_thread])
    expect[[0, 64]] += 1.0 + 0.5 + 8.0 + 0.0 + 1.0 - 10.5
    assert np.array_equal(out, expect.astype(np.float32))
    assert counter[0] == 128
