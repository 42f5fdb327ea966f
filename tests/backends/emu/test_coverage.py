"""CUDA constructs that hand-written kernels use beyond qconform's own: atomics overloads and wrap-around
atomics, integer intrinsics, __CUDA_ARCH__, cooperative groups. Each runs a small kernel on emu and checks the
result against values computed here from the CUDA definitions."""
from __future__ import annotations

import numpy as np
import pytest

ATOMICS = r"""
__global__ void atomics(unsigned int* u, int* s, unsigned long long* ull, float* f, unsigned* inc, unsigned* dec,
                        unsigned* cas) {
  int t = threadIdx.x;
  atomicAdd(&u[0], 1);              // unsigned int*, int: nvcc converts the value
  atomicAdd(u + 1, t);
  atomicSub(&s[0], 2u);             // int*, unsigned
  atomicMax(&s[1], t);
  atomicMin(&s[2], -t);
  atomicAdd(&ull[0], 1);            // unsigned long long*, int
  atomicOr(&u[2], 1u << (t % 32));
  atomicXor(&u[3], 1);
  atomicAnd(&u[4], ~(1u << (t % 32)));
  atomicAdd(&f[0], 0.5f);
  atomicExch(&f[1], 3.0f);
  atomicInc(&inc[0], 4u);           // wraps to 0 after reaching 4: 0 1 2 3 4 0 1 ...
  atomicDec(&dec[0], 5u);           // wraps to 5 when 0: ... 1 0 5 4 ...
  atomicDec(&dec[1], 5u);           // starts above 5: set to 5 first
  if (atomicCAS(&cas[0], 0u, 7u) == 0u) atomicAdd(&cas[1], 1u);   // exactly one CAS succeeds
  atomicAdd_block(&s[3], 1);
  atomicAdd_system(&s[4], 1);
}
"""


def test_atomic_overloads_and_wraparound(load):
    mod = load(ATOMICS)
    n = 70
    u = np.array([0, 0, 0, 0, 0xFFFFFFFF], np.uint32)
    s = np.array([100, -5, 0, 0, 0], np.int32)
    ull = np.array([2**40], np.uint64)
    f = np.zeros(2, np.float32)
    inc = np.zeros(1, np.uint32)
    dec = np.array([2, 9], np.uint32)
    cas = np.zeros(2, np.uint32)
    mod.launch("atomics", (1,), (n,), 0, [u, s, ull, f, inc, dec, cas])
    assert u[0] == n and u[1] == sum(range(n))
    assert u[2] == 0xFFFFFFFF and u[3] == n % 2 and u[4] == 0
    assert s[0] == 100 - 2 * n and s[1] == n - 1 and s[2] == -(n - 1) and s[3] == n and s[4] == n
    assert ull[0] == 2**40 + n
    assert f[0] == 0.5 * n and f[1] == 3.0
    v = 0
    for _ in range(n):                       # atom.inc: ((old >= 4) ? 0 : old + 1)
        v = 0 if v >= 4 else v + 1
    assert inc[0] == v
    for k, start in enumerate((2, 9)):       # atom.dec: ((old == 0 || old > 5) ? 5 : old - 1)
        v = start
        for _ in range(n):
            v = 5 if v == 0 or v > 5 else v - 1
        assert dec[k] == v
    assert cas[0] == 7 and cas[1] == 1


INTRINSICS = r"""
__global__ void intr(const int* a, const int* b, int* out, unsigned* uout, long long* lout) {
  int i = threadIdx.x;
  int x = a[i], y = b[i];
  unsigned ux = (unsigned)x, uy = (unsigned)y;
  out[8 * i + 0] = __mul24(x, y);
  uout[8 * i + 0] = __umul24(ux, uy);
  uout[8 * i + 1] = __umulhi(ux, uy);
  out[8 * i + 1] = __mulhi(x, y);
  uout[8 * i + 2] = __sad(x, y, 7u);
  uout[8 * i + 3] = __usad(ux, uy, 0u);
  out[8 * i + 2] = __hadd(x, y);
  out[8 * i + 3] = __rhadd(x, y);
  uout[8 * i + 4] = __funnelshift_l(ux, uy, (unsigned)i);
  uout[8 * i + 5] = __funnelshift_r(ux, uy, (unsigned)i);
  uout[8 * i + 6] = __byte_perm(ux, uy, 0x5140u + (unsigned)i);
  uout[8 * i + 7] = min(x, uy);                // nvcc's mixed overload: compared as unsigned
  out[8 * i + 4] = __clzll((long long)x);
  out[8 * i + 5] = max(-1, 2);
  lout[i] = __mul64hi((long long)x << 20, (long long)y << 20);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  out[8 * i + 6] = __CUDA_ARCH__;
#else
  out[8 * i + 6] = -1;
#endif
  out[8 * i + 7] = 0;
}
"""


def _s24(v):
    v = int(v) & 0xFFFFFF
    return v - (1 << 24) if v & 0x800000 else v


def _wrap32(v, signed):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if signed and v & 0x80000000 else v


def test_integer_intrinsics_match_their_ptx_definitions(load):
    mod = load(INTRINSICS)
    rng = np.random.default_rng(17)            # seed recorded here
    n = 32
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    a[:4] = [0x00FFFFFF, -1, 0x7FFFFF, 5]
    b[:4] = [0x00FFFFFF, 3, 0x800000, -7]
    out = np.zeros(8 * n, np.int32)
    uout = np.zeros(8 * n, np.uint32)
    lout = np.zeros(n, np.int64)
    mod.launch("intr", (1,), (n,), 0, [a, b, out, uout, lout], outputs=(2, 3, 4))
    for i in range(n):
        x, y = int(a[i]), int(b[i])
        ux, uy = x & 0xFFFFFFFF, y & 0xFFFFFFFF
        o, u = out[8 * i:8 * i + 8], uout[8 * i:8 * i + 8]
        assert o[0] == _wrap32(_s24(x) * _s24(y), True), i
        assert u[0] == ((ux & 0xFFFFFF) * (uy & 0xFFFFFF)) & 0xFFFFFFFF, i
        assert u[1] == (ux * uy) >> 32 and o[1] == (x * y) >> 32, i
        assert u[2] == (abs(x - y) + 7) & 0xFFFFFFFF and u[3] == abs(ux - uy), i
        assert o[2] == (x + y) >> 1 and o[3] == (x + y + 1) >> 1, i
        hl = (uy << 32) | ux
        assert u[4] == ((hl << (i % 32)) >> 32) & 0xFFFFFFFF and u[5] == (hl >> (i % 32)) & 0xFFFFFFFF, i
        sel = 0x5140 + i
        expect = sum(((hl >> (8 * ((sel >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
        assert u[6] == expect, i
        assert u[7] == min(ux, uy), i
        assert o[4] == (64 if x == 0 else 64 - (x & 0xFFFFFFFFFFFFFFFF).bit_length()), i
        assert o[5] == 2 and o[6] == 900, i
        assert lout[i] == ((x << 20) * (y << 20)) >> 64, i


COOP = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void coop(const int* in, int* out, int* tile_sums) {
  cg::thread_block block = cg::this_thread_block();
  __shared__ int buf[128];
  unsigned r = block.thread_rank();
  buf[r] = in[r];
  block.sync();
  out[r] = buf[(r + 1) % block.size()];       // a neighbour's value: correct only after the block sync
  cg::sync(block);
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  int v = in[r];
  for (int d = 8; d > 0; d /= 2) v += tile.shfl_down(v, d);
  tile.sync();
  if (tile.thread_rank() == 0) tile_sums[r / 16] = v;
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  if (warp.ballot(in[r] > 0) == 0xffffffffu && warp.thread_rank() == 0) out[r] += 1000;
}
"""


def test_cooperative_groups_block_and_tiles(load):
    mod = load(COOP)
    rng = np.random.default_rng(5)
    inp = rng.integers(1, 100, 128).astype(np.int32)
    out = np.zeros(128, np.int32)
    sums = np.zeros(8, np.int32)
    mod.launch("coop", (1,), (128,), 0, [inp, out, sums], outputs=(1, 2))
    expect = np.roll(inp, -1)
    expect[::32] += 1000
    assert np.array_equal(out, expect)
    assert np.array_equal(sums, inp.reshape(8, 16).sum(axis=1))


COOP_REDUCE = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>
namespace cg = cooperative_groups;
__global__ void coop_reduce(const int* in, int* out) {
  cg::thread_block_tile<8> tile = cg::tiled_partition<8>(cg::this_thread_block());
  int v = in[threadIdx.x];
  int* o = out + 6 * threadIdx.x;
  o[0] = cg::reduce(tile, v, cg::plus<int>());
  o[1] = cg::reduce(tile, v, cg::less<int>());
  o[2] = cg::reduce(tile, v, cg::greater<int>());
  o[3] = cg::reduce(tile, v, cg::bit_xor<int>());
  o[4] = cg::inclusive_scan(tile, v);
  o[5] = cg::exclusive_scan(tile, v, cg::plus<int>());
}
"""


def test_cooperative_groups_reduce_and_scan_over_tiles(load):
    mod = load(COOP_REDUCE)
    inp = np.random.default_rng(11).integers(-1000, 1000, 64).astype(np.int32)
    out = np.zeros(6 * 64, np.int32)
    mod.launch("coop_reduce", (1,), (64,), 0, [inp, out], outputs=(1,))
    got = out.reshape(64, 6)
    tiles = inp.reshape(8, 8)
    for t in range(8):
        rows = got[8 * t:8 * t + 8]
        assert np.all(rows[:, 0] == tiles[t].sum()) and np.all(rows[:, 1] == tiles[t].min())
        assert np.all(rows[:, 2] == tiles[t].max()) and np.all(rows[:, 3] == np.bitwise_xor.reduce(tiles[t]))
        assert np.array_equal(rows[:, 4], np.cumsum(tiles[t]))
        assert np.array_equal(rows[1:, 5], np.cumsum(tiles[t])[:-1]) and rows[0, 5] == 0


def test_the_multi_grid_group_is_reported_unsupported(load):
    from harness.backends.base import UnsupportedConstruct
    src = ("#include <cooperative_groups.h>\n"
           "__global__ void k(int* o) { auto g = cooperative_groups::this_multi_grid(); o[0] = g.size(); }\n")
    with pytest.raises(UnsupportedConstruct, match="multi-grid group"):
        load(src)


BYVALUE = r"""
struct Params { int n; float scale; float taps[3]; };            // a fixed array inside a struct
struct Graph { int nodes; int edges; const int* nindex; const int* nlist; };
typedef int (*op_t)(int, int);
__device__ int add(int a, int b) { return a + b; }
__device__ int mul(int a, int b) { return a * b; }
__device__ op_t d_add = add;
__device__ op_t d_mul = mul;
__constant__ float c_bias[4] = {1.0f, 2.0f, 3.0f, 4.0f};         // initialised at file scope
__constant__ int c_offset;                                         // set from the host
__device__ int d_launches;                                         // written by the kernel: reset before every run

__global__ void structs(const Params p, const float* x, float* y) {
  int i = threadIdx.x;
  if (i < p.n) y[i] = p.scale * (p.taps[0] * x[i] + p.taps[1] + p.taps[2]) + c_bias[i % 4] + (float)c_offset;
}
__global__ void degrees(const Graph g, int* deg) {
  int v = threadIdx.x;
  if (v < g.nodes) { int s = 0; for (int e = g.nindex[v]; e < g.nindex[v + 1]; e++) s += g.nlist[e]; deg[v] = s; }
}
__global__ void apply(op_t op, int (*op2)(int, int), const int* a, int* out) {
  int i = threadIdx.x;
  if (i == 0) d_launches += 1;
  __syncthreads();
  out[i] = op2(op(a[i], i), d_launches);
}
"""


@pytest.fixture(scope="module")
def byvalue(load):
    return load(BYVALUE)


def test_struct_with_fixed_array_by_value_and_constants(byvalue):
    params = np.dtype([("n", "<i4"), ("scale", "<f4"), ("taps", "<f4", (3,))])
    p = np.zeros((), params)[()]
    p["n"], p["scale"], p["taps"] = 5, 2.0, (3.0, 0.5, 0.25)
    x = np.arange(8, dtype=np.float32)
    y = np.zeros(8, np.float32)
    byvalue.set_symbol("c_offset", np.int32(10))
    byvalue.launch("structs", (1,), (8,), 0, [p, x, y])
    bias = np.array([1, 2, 3, 4, 1, 2, 3, 4], np.float32)
    expect = np.where(np.arange(8) < 5, 2.0 * (3.0 * x + 0.75) + bias + 10.0, 0.0).astype(np.float32)
    assert np.array_equal(y, expect)
    with pytest.raises(ValueError, match="compiled struct is 20 bytes"):
        byvalue.launch("structs", (1,), (8,), 0, [np.zeros((), [("n", "<i4")])[()], x, y])
    with pytest.raises(ValueError, match="symbol 'c_offset' is 4 bytes"):
        byvalue.set_symbol("c_offset", np.int64(1))
    with pytest.raises(ValueError, match="no file-scope __device__ or __constant__ variable 'nope'"):
        byvalue.set_symbol("nope", np.int32(1))


def test_struct_with_device_pointers_to_resident_buffers(byvalue):
    from harness.backends.base import Struct
    nindex = byvalue.alloc("nindex", (4,), np.int32, np.array([0, 2, 3, 5], np.int32))
    nlist = byvalue.alloc("nlist", (5,), np.int32, np.array([7, 1, 4, 2, 9], np.int32))
    graph = np.dtype([("nodes", "<i4"), ("edges", "<i4"), ("nindex", "<u8"), ("nlist", "<u8")])
    g = np.zeros((), graph)[()]
    g["nodes"], g["edges"] = 3, 5
    deg = np.zeros(3, np.int32)
    byvalue.launch("degrees", (1,), (32,), 0, [Struct(g, ((8, nindex), (16, nlist))), deg], outputs=(1,))
    assert list(deg) == [8, 4, 11]
    with pytest.raises(ValueError, match="pointer offset 4 must be a multiple of 8"):
        byvalue.launch("degrees", (1,), (32,), 0, [Struct(g, ((4, nindex),)), deg], outputs=(1,))


def test_function_pointers_from_device_symbols(byvalue):
    from harness.backends.base import Symbol
    a = np.arange(32, dtype=np.int32)
    out = np.zeros(32, np.int32)
    # d_launches is reset before every schedule's run: each run sees 1, so the schedules agree.
    byvalue.launch("apply", (1,), (32,), 0, [Symbol("d_add"), Symbol("d_mul"), a, out], outputs=(3,))
    assert np.array_equal(out, (a + np.arange(32)) * 1)
    byvalue.launch("apply", (1,), (32,), 0, [Symbol("d_mul"), Symbol("d_add"), a, out], outputs=(3,))
    assert np.array_equal(out, a * np.arange(32) + 1)
    with pytest.raises(ValueError, match="function-pointer parameter takes Symbol"):
        byvalue.launch("apply", (1,), (32,), 0, [Symbol("d_add"), np.uint64(0), a, out], outputs=(3,))
    with pytest.raises(ValueError, match="'op_t' .a struct, or a typedef'd function pointer. takes"):
        byvalue.launch("apply", (1,), (32,), 0, [np.uint64(0), Symbol("d_add"), a, out], outputs=(3,))
    with pytest.raises(ValueError, match="symbol 'c_bias' is 16 bytes, the parameter 8"):
        byvalue.launch("apply", (1,), (32,), 0, [Symbol("c_bias"), Symbol("d_add"), a, out], outputs=(3,))


def test_signatures_and_symbols_are_read_from_source():
    from cudasrc.signatures import kernel_signatures
    from harness.backends.emu.rewrite import device_symbols
    sig, = kernel_signatures("static __global__ void k(const Graph g, int (*op)(int, int), float taps[4], "
                             "const int* __restrict__ x) {}")
    assert sig.params == (("const Graph", "g"), ("int (*)(int, int)", "op"), ("float*", "taps"), ("const int*", "x"))
    sig, = kernel_signatures("__global__ void k(float x[][N], const int y[4][8][2], int n) {}")
    assert sig.params == (("float*", "x"), ("const int*", "y"), ("int", "n"))
    with pytest.raises(ValueError, match=r"kernel parameter 'float x\[4\]\[\]'.*only the first bound"):
        kernel_signatures("__global__ void k(float x[4][]) {}")
    src = ("__constant__ float c[4] = {1, 2, 3, 4};\nstatic __device__ int n, m[2];\n"
           "__device__ int (*fp)(int) = f;\n__device__ int f(int a) { return a; }\n"
           "__device__ float g(float);\n__global__ void k(int* o) { __shared__ int s; }\n")
    assert device_symbols(src) == ["c", "n", "m", "fp"]


ROWS = r"""
#define M 4
__device__ float at(float a[][M], int r, int c) { return a[r][c]; }
__global__ void rows(float a[][M], float out[2][M], int n) {
  int r = blockIdx.x, c = threadIdx.x;
  if (r < n) out[r][c] = at(a, r, c) * 2.0f + r;
}
"""


def test_multi_dimensional_array_parameters_index_a_flat_buffer_by_rows(load):
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    load(ROWS).launch("rows", (2,), (4,), 0, [a, out, np.int32(2)], outputs=(1,))
    np.testing.assert_array_equal(out, a * 2 + np.repeat([0.0, 1.0], 4))


LIBCUXX = r"""
#include <cuda.h>
#include <cuda/atomic>
typedef cuda::atomic<int> data_type;
typedef int flag_t;
__global__ void lib(data_type* const dist, flag_t* const flags, const int n) {
  int i = threadIdx.x;
  dist[0].fetch_add(1);
  dist[1].fetch_min(100 - i);
  dist[2].fetch_max(i);
  int expected = 0;
  if (dist[3].compare_exchange_strong(expected, 9)) flags[0] += 1;   // once: the winner's plain write is unique
  const data_type v = dist[4].load(cuda::memory_order_relaxed);
  if (i == n - 1) dist[5].store(v + 1);
  cuda::atomic_ref<int, cuda::thread_scope_device> ref(flags[1]);
  ref.fetch_add(2);
}
"""


def test_libcuxx_atomics_and_typedefd_pointer_params(load):
    from cudasrc.signatures import kernel_signatures
    sig, = kernel_signatures(LIBCUXX)
    assert sig.params == (("cuda::atomic<int>*", "dist"), ("int*", "flags"), ("const int", "n"))
    mod = load(LIBCUXX)
    dist = np.array([0, 1000, -1, 0, 41, 0], np.int32)
    flags = np.zeros(2, np.int32)
    mod.launch("lib", (1,), (64,), 0, [dist, flags, np.int32(64)])
    assert list(dist) == [64, 100 - 63, 63, 9, 41, 42] and list(flags) == [1, 128]


SYNC_PRED = r"""
__global__ void votes(const int* x, int* out) {
  int t = threadIdx.x;
  int c = __syncthreads_count(x[t] > 50);
  int a = __syncthreads_and(x[t] >= 0);
  int o = __syncthreads_or(x[t] > 1000);
  int c2 = __syncthreads_count(t % 3 == 0);         // a second round: the first round's sum is not carried over
  int g = 4 * (blockIdx.x * blockDim.x + t);
  out[g] = c; out[g + 1] = a; out[g + 2] = o; out[g + 3] = c2;
}
"""


def test_syncthreads_count_and_or(load):
    mod = load(SYNC_PRED)
    x = np.random.default_rng(3).integers(0, 100, 96).astype(np.int32)
    out = np.zeros(2 * 4 * 96, np.int32)
    mod.launch("votes", (2,), (96,), 0, [x, out], outputs=(1,))
    expect = [int((x > 50).sum()), 1, 0, 32]
    assert out.reshape(2 * 96, 4).tolist() == [expect] * (2 * 96)


SPELLINGS = r"""
__global__ void spell(unsigned long long int* total, long int base, unsigned long int step, float* __restrict y) {
  atomicAdd(total, (unsigned long long int)(base + step * threadIdx.x));
  y[threadIdx.x] = (float)WIDTH * threadIdx.x;       // WIDTH: a macro given as a build flag
}
"""


def test_long_type_spellings_restrict_and_macro_flags(emu):
    """`unsigned long long int*`, `long int`, `unsigned long int` and the `__restrict` spelling (without the
    trailing underscores, which nvcc also takes) are kernel parameter types, and a -DNAME=VALUE build flag
    reaches every compile of the module, nvcc's device-side check included."""
    from cudasrc.signatures import kernel_signatures
    sig, = kernel_signatures(SPELLINGS)
    assert sig.ctypes == ("unsigned long long int*", "long int", "unsigned long int", "float*")
    mod = emu.load(SPELLINGS, flags=("-DWIDTH=3",))
    total = np.array([2**40], np.uint64)
    y = np.zeros(8, np.float32)
    mod.launch("spell", (1,), (8,), 0, [total, np.int64(-5), np.uint64(2), y])
    assert total[0] == 2**40 + sum(-5 + 2 * t for t in range(8))
    assert np.array_equal(y, 3.0 * np.arange(8, dtype=np.float32))


STRUCT_POINTER = r"""
typedef struct { unsigned short id; short v; char tag; } rec_t;   // 6 bytes
__global__ void stamp(rec_t* r) {
  int t = threadIdx.x;
  r[t].id = (unsigned short)t; r[t].v = (short)(r[t].v * 2); r[t].tag = 'a' + t;
}
"""


def test_pointer_to_struct_takes_its_bytes(load):
    """A pointer to a struct takes the structs' bytes (a uint8 array) or a structured array laid out like it;
    any other dtype is refused, naming the rule."""
    mod = load(STRUCT_POINTER)
    layout = np.dtype([("id", "<u2"), ("v", "<i2"), ("tag", "i1"), ("pad", "i1")])
    recs = np.zeros(8, layout)
    recs["v"] = np.arange(8) - 3
    raw = recs.view(np.uint8).copy()
    mod.launch("stamp", (1,), (8,), 0, [raw])
    out = raw.view(layout)
    assert list(out["id"]) == list(range(8)) and list(out["v"]) == [2 * (i - 3) for i in range(8)]
    assert bytes(out["tag"].astype(np.uint8)) == b"abcdefgh"
    mod.launch("stamp", (1,), (8,), 0, [recs])
    assert list(recs["id"]) == list(range(8))
    with pytest.raises(ValueError, match="pointee type 'rec_t'; pass its bytes"):
        mod.launch("stamp", (1,), (8,), 0, [np.zeros(12, np.int32)])


ENUMS = r"""
enum Mode { COPY = 0, DOUBLE, TRIPLE };
typedef enum { SMALL = 4, LARGE = 16 } Size;
enum class Step : unsigned char { ONE = 1, TWO };
__global__ void scaled(Mode mode, enum Mode again, Size size, const Step step, const int* x, int* y) {
  int i = threadIdx.x;
  y[i] = x[i] * (int(mode) + 1) + int(again) * 100 + int(size) * 1000 + int(step) * 10000;
}
"""


def test_enumerations_by_value_are_their_integer_types(load):
    from cudasrc.signatures import enumerations, kernel_signatures
    sig, = kernel_signatures(ENUMS)
    assert sig.params[:4] == (("int", "mode"), ("int", "again"), ("int", "size"), ("const unsigned char", "step"))
    declared, = kernel_signatures(ENUMS, resolve=False)
    assert declared.params[:4] == (("Mode", "mode"), ("enum Mode", "again"), ("Size", "size"), ("const Step", "step"))
    assert enumerations(ENUMS) == {"Mode": (0, 1, 2), "Size": (4, 16), "Step": (1, 2)}
    assert enumerations("enum Flags { A = 1 << 2, B };") == {}        # not a literal: no values claimed
    x, y = np.arange(8, dtype=np.int32), np.zeros(8, np.int32)
    load(ENUMS).launch("scaled", (1,), (8,), 0, [np.int32(2), np.int32(1), np.int32(16), np.uint8(2), x, y],
                       outputs=(5,))
    np.testing.assert_array_equal(y, x * 3 + 100 + 16000 + 20000)


FILE_SCOPE_SHARED = r"""
__shared__ float tile[64];
__shared__ int hits, unused;
extern __shared__ float spill[];
__device__ float neighbour(int t) { return tile[(t + 1) % 64]; }
__global__ void rotate(const float* x, float* y, int* count) {
  int t = threadIdx.x, g = blockIdx.x * 64 + t;
  tile[t] = x[g];
  spill[t] = 2.0f * x[g];
  if (t == 0) hits = 0;
  __syncthreads();
  atomicAdd(&hits, 1);
  __syncthreads();
  y[g] = neighbour(t) + spill[(t + 2) % 64];
  if (t == 0) count[blockIdx.x] = hits;
}
__global__ void shadowed(float* tile) { tile[threadIdx.x] = 1.0f; }   // the parameter hides the variable
__global__ void racy(float* y) { tile[0] = threadIdx.x; y[threadIdx.x] = 0.0f; }
"""


def test_shared_variables_at_file_scope_are_one_slot_per_block(load, emu):
    mod = load(FILE_SCOPE_SHARED)
    x, y, count = np.arange(128, dtype=np.float32), np.zeros(128, np.float32), np.zeros(2, np.int32)
    mod.launch("rotate", (2,), (64,), 64 * 4, [x, y, count], outputs=(1, 2))
    want = [np.roll(part, -1) + 2 * np.roll(part, -2) for part in (x[:64], x[64:])]
    np.testing.assert_array_equal(y, np.concatenate(want))
    np.testing.assert_array_equal(count, [64, 64])              # each block its own `hits`
    buf = np.zeros(32, np.float32)
    mod.launch("shadowed", (1,), (32,), 0, [buf], outputs=(0,))
    assert (buf == 1.0).all()
    from harness.backends.base import DataRace
    assert emu.race_check                              # the detector is on by default
    with pytest.raises(DataRace, match=r"__shared__ 'tile' \(line 2\) index 0"):
        mod.launch("racy", (1,), (32,), 0, [np.zeros(32, np.float32)], outputs=(0,))


DEVICE_POINTERS = r"""
struct Out { int n; float* data; };
__device__ float* d_y;                 // set by the host, as cudaMemcpyToSymbol would
__device__ Out d_out;
__global__ void through_symbols(const float* x) {
  int i = threadIdx.x;
  d_y[i] = 2.0f * x[i];
  if (i < d_out.n) d_out.data[i] = x[i] + 1.0f;
}
__global__ void racy_through_symbol(const float* x) { d_y[0] = x[threadIdx.x]; }
__global__ void racy_through_struct(Out o, const float* x) { o.data[0] = x[threadIdx.x]; }
"""


def test_pointer_variables_set_by_the_host_and_races_through_them(load):
    from harness.backends.base import DataRace, Struct
    mod = load(DEVICE_POINTERS)
    x = np.arange(32, dtype=np.float32)
    y, out = mod.alloc("y", (32,), np.float32), mod.alloc("out", (32,), np.float32, np.zeros(32, np.float32))
    mod.set_symbol("d_y", y)
    value = np.zeros((), np.dtype([("n", "<i4"), ("pad", "<i4"), ("data", "<u8")]))[()]
    value["n"] = 8
    mod.set_symbol("d_out", Struct(value, ((8, out),)))
    mod.launch("through_symbols", (1,), (32,), 0, [x])
    np.testing.assert_array_equal(mod.read(y), 2 * x)
    np.testing.assert_array_equal(mod.read(out), np.where(np.arange(32) < 8, x + 1, 0))
    with pytest.raises(DataRace, match=r"data race on 'y \(through __device__ variable d_y\)' index 0"):
        mod.launch("racy_through_symbol", (1,), (32,), 0, [x])
    with pytest.raises(DataRace, match=r"data race on 'out \(through o\)' index 0"):
        mod.launch("racy_through_struct", (1,), (32,), 0, [Struct(value, ((8, out),)), x])
    with pytest.raises(ValueError, match=r"symbol 'd_out': the compiled struct is 16 bytes, the value has 8"):
        mod.set_symbol("d_out", Struct(np.void(bytes(8))))
    with pytest.raises(ValueError, match=r"pointer offset 4 must be a multiple of 8"):
        mod.set_symbol("d_out", Struct(value, ((4, out),)))
    mod.free(y)
    with pytest.raises(ValueError, match=r"symbol 'd_y' \(set_symbol\) pointer at offset 0: .* not a live resident buffer"):
        mod.launch("through_symbols", (1,), (32,), 0, [x])


@pytest.mark.parametrize("second", [0, 4097])
def test_more_static_shared_memory_than_ptxas_accepts_is_a_refused_launch(load, second):
    from harness.backends.base import LaunchRefused
    from harness.racescan import classify
    # 48 KiB exactly (12288 floats) builds with nvcc; one float more in a second array does not
    extra = f"  __shared__ float more[{second}];\n  more[threadIdx.x] = 2.0f;\n" if second else ""
    mod = load("__global__ void big(float* y) {\n  __shared__ float tile[12288];\n"
               "  tile[threadIdx.x] = 1.0f;\n" + extra + "  y[threadIdx.x] = tile[threadIdx.x];\n}\n")
    if not second:
        mod.launch("big", (1,), (32,), 0, [np.zeros(32, np.float32)], outputs=(0,))
        return
    with pytest.raises(LaunchRefused, match=r"static __shared__ 'more' \(line 4, 16388 bytes\) brings the kernel's "
                                            r"static __shared__ memory to 65540 bytes, over the 49152 bytes ptxas "
                                            r"accepts") as err:
        mod.launch("big", (1,), (32,), 0, [np.zeros(32, np.float32)], outputs=(0,))
    assert classify(err.value, True).kind == "unsupported"      # no device runs it: no race verdict either way


TEMPLATES = r"""
template <typename T, int N>
__global__ void scale(const T* x, T* y, T a) {
  __shared__ T tile[N];
  tile[threadIdx.x] = a * x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = tile[(threadIdx.x + 1) % N];
}
template __global__ void scale<float, 32>(const float*, float*, float);
template __global__ void scale< int, 64 >(const int*, int*, int);
template <int N> __global__ void racy(int* y) { y[0] = N + threadIdx.x; }
template __global__ void racy<7>(int*);
template <typename T> __global__ void never_made(T* y) { y[0] = T(); }
"""


def test_template_kernels_launch_by_their_explicit_instantiations(load):
    from cudasrc.signatures import kernel_signatures, template_kernels
    from harness.backends.base import DataRace
    sigs = {s.name: s.params for s in kernel_signatures(TEMPLATES)}
    assert sigs == {"scale<float,32>": (("const float*", "x"), ("float*", "y"), ("float", "a")),   # the template's names
                    "scale<int,64>": (("const int*", "x"), ("int*", "y"), ("int", "a")), "racy<7>": (("int*", "y"),)}
    assert template_kernels(TEMPLATES) == ["scale", "racy", "never_made"]
    mod = load(TEMPLATES)
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    mod.launch("scale<float,32>", (1,), (32,), 0, [x, y, np.float32(2)], outputs=(1,))
    np.testing.assert_array_equal(y, 2 * np.roll(x, -1))
    xi, yi = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    mod.launch("scale<int,64>", (1,), (64,), 0, [xi, yi, np.int32(3)], outputs=(1,))
    np.testing.assert_array_equal(yi, 3 * np.roll(xi, -1))
    with pytest.raises(DataRace, match=r"racy<7><<<1x1x1, 32x1x1, 0>>>: data race on 'y' index 0"):
        mod.launch("racy<7>", (1,), (32,), 0, [np.zeros(1, np.int32)])
    with pytest.raises(ValueError, match="never_made"):
        mod.launch("never_made", (1,), (32,), 0, [np.zeros(1, np.int32)])
    with pytest.raises(ValueError, match="scale is a template: launch one of its instantiations"):
        mod.launch("scale", (1,), (32,), 0, [x, y, np.float32(2)], outputs=(1,))


SHARED_FORMS = r"""
#define B 8
__global__ void forms(const float* x, float* y) {
  __shared__ float rows[B][(B + 2) * 4];
  volatile __shared__ float v[(B >> 1) + 1];
  extern float __shared__ dyn[];
  int t = threadIdx.x;
  rows[t][t] = x[t];
  dyn[t] = 2.0f * x[t];
  if (t < (B >> 1) + 1) v[t] = 3.0f;
  __syncthreads();
  y[t] = rows[(t + 1) % B][(t + 1) % B] + dyn[t] + v[t % ((B >> 1) + 1)];
}
"""


def test_shared_declarations_in_real_codes_forms_run(load):
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    load(SHARED_FORMS).launch("forms", (1,), (8,), 8 * 4, [x, y], outputs=(1,))
    np.testing.assert_array_equal(y, np.roll(x, -1) + 2 * x + 3)


SPECIAL_REGISTERS = r"""
__global__ void lanes(unsigned* out) {
  unsigned lane, lt, ge, tid, ctaid;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  asm("mov.u32 %0, %%lanemask_ge;" : "=r"(ge));
  asm("mov.u32 %0, %%tid.x;" : "=r"(tid));
  asm("mov.u32 %0, %%ctaid.x;" : "=r"(ctaid));
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[5 * i] = lane; out[5 * i + 1] = lt; out[5 * i + 2] = ge; out[5 * i + 3] = tid; out[5 * i + 4] = ctaid;
}
"""


def test_reads_of_ptx_special_registers(load):
    out = np.zeros(5 * 128, np.uint32)
    load(SPECIAL_REGISTERS).launch("lanes", (2,), (64,), 0, [out], outputs=(0,))
    got = out.reshape(128, 5)
    t = np.arange(64, dtype=np.uint64)
    lane = t % 32
    want = np.stack([lane, (1 << lane) - 1, (~((1 << lane) - 1)) & 0xFFFFFFFF, t, np.zeros(64)], 1).astype(np.uint32)
    np.testing.assert_array_equal(got[:64], want)
    np.testing.assert_array_equal(got[64:, 4], 1)


RUNTIME_TYPES = r"""
__global__ void extent_sum(cudaExtent e, cudaTextureObject_t tex, cudaSurfaceObject_t surf, unsigned long long* out) {
  cudaPos p = {e.width, e.height, e.depth};
  cudaExtent twice = {2 * p.x, 2 * p.y, 2 * p.z};
  out[threadIdx.x] = twice.width + twice.height + twice.depth + tex * 1000 + surf * 100000;
}
"""


def test_runtime_structs_and_object_handles_by_value(load):
    """cudaExtent and cudaPos (driver_types.h) by value, and the texture and surface object handles a kernel may
    take and keep: emu declares them as CUDA's headers do, and cudasrc lays cudaExtent out without a definition in
    the source."""
    from cudasrc.structs import struct_layout
    from harness.backends.base import Struct
    mod = load(RUNTIME_TYPES)
    extent = np.zeros((), struct_layout(RUNTIME_TYPES, "cudaExtent").dtype)[()]
    extent["width"], extent["height"], extent["depth"] = 1, 2, 3
    out = np.zeros(4, np.uint64)
    mod.launch("extent_sum", (1,), (4,), 0, [Struct(extent, ()), np.uint64(7), np.uint64(9), out], outputs=(3,))
    assert list(out) == [12 + 7000 + 900000] * 4


NAMESPACES = r"""
namespace attn { namespace detail {
__constant__ float bias[2];
__device__ float twice(float v) { return 2.0f * v; }
} // namespace detail
__shared__ float stage[64];                     // at namespace scope: one slot per block, as at file scope
__global__ void scaled(const float* x, float* y) {
  int t = threadIdx.x;
  stage[t] = detail::twice(x[t]);
  __syncthreads();
  y[t] = stage[63 - t] + detail::bias[t & 1];
}
}  // namespace attn
namespace { __global__ void hidden(float* y) { y[threadIdx.x] = 1.0f; } }
namespace v2::inner { __global__ void nested(float* y) { y[threadIdx.x] = 3.0f; } }
namespace topk {
enum class Mode { Plain, Paged };
template <Mode M> __global__ void by_mode(float* y) { y[threadIdx.x] = M == Mode::Plain ? 5.0f : 6.0f; }
}  // namespace topk
"""


def test_kernels_and_symbols_in_namespaces(load):
    """Kernels keep their names (nvcc gives them C linkage on a GPU, where the namespace is not part of the symbol);
    emu's launch table qualifies them, and symbols by their qualified names."""
    from cudasrc.signatures import kernel_signatures
    assert [(k.name, k.scope) for k in kernel_signatures(NAMESPACES)] == [
        ("scaled", "attn::"), ("hidden", ""), ("nested", "v2::inner::")]
    mod = load(NAMESPACES)
    assert "attn::detail::bias" in mod.symbols()
    mod.set_symbol("attn::detail::bias", np.array([10.0, 20.0], np.float32))
    x, y = np.arange(64, dtype=np.float32), np.zeros(64, np.float32)
    mod.launch("scaled", (1,), (64,), 0, [x, y], outputs=(1,))
    np.testing.assert_array_equal(y, 2.0 * x[::-1] + np.tile([10.0, 20.0], 32))
    for kernel, value in (("hidden", 1.0), ("nested", 3.0)):
        mod.launch(kernel, (1,), (8,), 0, [y[:8]], outputs=(0,))
        assert (y[:8] == value).all()
    # a template argument as the kernel's own namespace writes it (flashinfer's `FilteredTopKMode::Plain`) is read
    # there, and the qualified spelling too
    from cudasrc.instantiations import instantiated
    source = instantiated(NAMESPACES, ["by_mode<Mode::Plain>", "by_mode<topk::Mode::Paged>"])
    mod = load(source)
    for kernel, value in (("by_mode<Mode::Plain>", 5.0), ("by_mode<topk::Mode::Paged>", 6.0)):
        mod.launch(kernel, (1,), (8,), 0, [y[:8]], outputs=(0,))
        assert (y[:8] == value).all()
    from harness.backends import UnsupportedConstruct
    from harness.backends.emu.rewrite import rewrite
    with pytest.raises(UnsupportedConstruct, match=r"__shared__ 'stage' of a namespace, named with its namespace "
                                                   r"\(line 3\)"):
        rewrite("namespace d { __shared__ float stage[4]; }\n__global__ void k(float* y) {\n"
                "  d::stage[threadIdx.x] = 1.0f;\n  y[0] = d::stage[0];\n}\n")


ALIGNMENT = r"""
__device__ int block_sum(int v) {
  static __shared__ int partial[32];        // `static` inside a device function: still one slot per block
  partial[threadIdx.x] = v;
  __syncthreads();
  int s = 0;
  for (int i = 0; i < blockDim.x; ++i) s += partial[i];
  __syncthreads();
  return s;
}
template <class T, int N> struct Pair { T v[N]; };
__global__ void aligned(unsigned* out, int* sums) {
  extern __shared__ __align__(1024) unsigned char dyn[];
  __shared__ char small[3];
  __shared__ __align__(1024) char wide[8];
  __shared__ __attribute__((aligned(512))) char other[8];
  __shared__ alignas(alignof(float4) * 16) char cxx[8], cxx2[4];   // C++'s alignas, a constant expression
  __shared__ Pair<int, 4> pair, pair2;                            // a template type with two arguments
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    small[0] = 1; wide[0] = 2; other[0] = 3; dyn[0] = 4;
    out[0] = (unsigned)__cvta_generic_to_shared(dyn) % 4096u;
    out[1] = (unsigned)(reinterpret_cast<unsigned long long>(dyn) % 4096u);
    out[2] = (unsigned)__cvta_generic_to_shared(wide) % 1024u;
    out[3] = (unsigned)(reinterpret_cast<unsigned long long>(wide) % 1024u);
    out[4] = (unsigned)__cvta_generic_to_shared(other) % 512u + small[0] + wide[0] + other[0] + dyn[0] - 10;
    pair.v[3] = 5; pair2.v[0] = 6;
    out[5] = (unsigned)__cvta_generic_to_shared(cxx) % 256u + (unsigned)__cvta_generic_to_shared(cxx2) % 256u +
             unsigned(pair.v[3] + pair2.v[0]) - 11;
  }
  sums[blockIdx.x * blockDim.x + threadIdx.x] = block_sum(blockIdx.x + 1);
}
"""


def test_shared_memory_is_aligned_as_a_gpu_aligns_it_and_static_shared_is_per_block(load):
    """The dynamic area starts page-aligned in the shared window and in memory (a kernel XOR-swizzling absolute shared
    addresses computed wrong results when it was only 64-byte aligned), `__align__` and C++'s `alignas(expression)`
    on static shared arrays are kept (cuda-samples declares `alignas(alignof(float4))` arrays; a template type with
    two arguments is one declarator),
    and a `static __shared__` array of a device function is one slot per block (it was a function-local static
    reference bound to the first block's slot, and broke the race detector's build)."""
    mod = load(ALIGNMENT)
    out, sums = np.zeros(6, np.uint32), np.zeros(64, np.int32)
    mod.launch("aligned", (2,), (32,), 64, [out, sums], outputs=(1,))
    assert out.tolist() == [0, 0, 0, 0, 0, 0]
    assert sums.tolist() == [32] * 32 + [64] * 32


REAL_CODE_FORMS = r"""
#include <iostream>
#include <mma.h>
#include <cooperative_groups.h>
using namespace nvcuda;
namespace cg = cooperative_groups;
constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }   // a constexpr host function, as Marlin's
template <int N>
__launch_bounds__(N)
__global__ void scale(float const* __restrict__ x, float* y, size_t const n) {
  auto tile = cg::tiled_partition<32>(cg::this_thread_block());
  size_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i] + ceil_div(int(n), N) + tile.meta_group_size();
}
template __global__ void scale<64>(float const* __restrict__, float*, size_t const);
template <int N>
__block_size__((N, 1, 1))
__global__ void rows(unsigned* out) {
  __shared__ __align__(16) unsigned short s[64];
  s[2 * threadIdx.x] = 2 * threadIdx.x; s[2 * threadIdx.x + 1] = 2 * threadIdx.x + 1;
  __syncwarp();
  unsigned r, a = static_cast<unsigned>(__cvta_generic_to_shared(&s[(threadIdx.x % 8) * 8]));
  asm volatile("ldmatrix.sync.aligned.x1.m8n8.shared.b16 {%0}, [%1];" : "=r"(r) : "r"(a));   // `.x1.m8n8`
  out[threadIdx.x] = r;
}
template __global__ void rows<32>(unsigned*);
"""


def test_forms_real_kernels_use(emu):
    """What a survey of public LLM kernels found emu refusing: <iostream> (a load-time initializer), <mma.h> with
    only inline PTX, a constexpr host function in device code (nvcc's --expt-relaxed-constexpr reaches its check),
    __launch_bounds__ before __global__ and __block_size__ in templates, east const, meta_group_size, ldmatrix's
    `.x1.m8n8` qualifier order."""
    from harness.backends import BuildError
    with pytest.raises(BuildError, match=r"calling a constexpr __host__ function"):
        emu.load(REAL_CODE_FORMS)
    mod = emu.load(REAL_CODE_FORMS, flags=("--expt-relaxed-constexpr",))
    x, y = np.arange(100, dtype=np.float32), np.zeros(100, np.float32)
    mod.launch("scale<64>", (2,), (64,), 0, [x, y, np.uint64(100)], outputs=(1,))
    np.testing.assert_array_equal(y, 2 * x + 2 + 2)
    out = np.zeros(32, np.uint32)
    mod.launch("rows<32>", (1,), (32,), 0, [out], outputs=(0,))
    lane = np.arange(32)
    np.testing.assert_array_equal(out, (2 * lane) | (2 * lane + 1) << 16)


CUDA_STD = r"""
#include <cuda/std/type_traits>
#include <cuda/std/limits>
#include <cuda/std/cstdint>
#include <cuda/std/atomic>
template <class T>
__global__ void widths(T* out, unsigned* count) {
  static_assert(cuda::std::is_same<T, float>::value, "float only");
  cuda::std::atomic_ref<unsigned> c(*count);
  c.fetch_add(1u);
  out[threadIdx.x] = cuda::std::numeric_limits<T>::max() > T(1) ? T(sizeof(cuda::std::int64_t)) : T(0);
}
template __global__ void widths<float>(float*, unsigned*);
"""


def test_cuda_std_headers_name_the_standard_library(load):
    """libcu++'s <cuda/std/...> headers (NVIDIA's dmmaTensorCoreGemm sample includes <cuda/std/type_traits>): the
    standard library's names under cuda::std, and cuda::std::atomic_ref as emu's cuda::atomic_ref."""
    out, count = np.zeros(32, np.float32), np.zeros(1, np.uint32)
    load(CUDA_STD).launch("widths<float>", (1,), (32,), 0, [out, count], outputs=(0,))
    assert np.all(out == 8.0) and count[0] == 32


CLASS_SYMBOLS = r"""
// cuFHE's modular integer: empty constructor and destructor, so CUDA lets __shared__ and __constant__ arrays hold it
struct FFP {
  unsigned long long v;
  __host__ __device__ FFP() {}
  __host__ __device__ ~FFP() {}
};
namespace fhe {
__constant__ FFP con_twd[4];
}
static __device__ FFP counter;
__global__ void twiddled(unsigned long long* y) {
  y[threadIdx.x] = fhe::con_twd[threadIdx.x].v;
  if (threadIdx.x == 0) { counter.v += 1; y[0] += counter.v; }
}
"""


def test_device_variables_of_a_class_with_an_empty_constructor_load(load):
    """g++ constructs such a variable and registers its destructor when the library loads, host code emu's gate
    refuses ("file-scope host code that would run when its library is loaded"); a GPU runs neither. emu gives each
    storage of the class's size, never constructed, which the host sets and every run starts from again."""
    module = load(CLASS_SYMBOLS)
    module.set_symbol("fhe::con_twd", np.array([5, 6, 7, 8], np.uint64))
    y = np.zeros(4, np.uint64)
    module.launch("twiddled", (1,), (4,), 0, [y], outputs=(0,))
    assert list(y) == [6, 6, 7, 8]                 # `counter` zero at every run's start: the schedules agree
    with pytest.raises(ValueError, match="symbol 'fhe::con_twd' is 32 bytes"):
        module.set_symbol("fhe::con_twd", np.zeros(3, np.uint64))
