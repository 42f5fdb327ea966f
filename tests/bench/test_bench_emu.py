"""Speed of the emu backend: a warp-per-row __dp4a GEMV over a 1024 x 2048 int8 matrix, 256-thread blocks.

Run with `pytest tests/bench/test_bench_emu.py --benchmark-enable`. Recorded per benchmark (extra_info):
the in-worker kernel time of one schedule, fiber switches per launch and per second. The plain-C benchmark
runs the same loop nest (per-lane partial sums, then the shuffle tree) compiled with the same flags, so the
emu/plain ratio is the cost of CUDA semantics on fibers. Results are also checked bit for bit against it.
"""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from harness.backends.emu import toolchain as tc

N, K = 1024, 2048
KERNEL = r"""
__global__ void gemv_dp4a(const signed char* w, const signed char* x, const float* ws, const float* xs, float* y,
                          int n, int k){
  int row = (blockIdx.x*blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31; if(row >= n) return;
  const int* w4 = (const int*)(w + (long)row*k); const int* x4 = (const int*)x; const float* wsr = ws + (long)row*(k/32);
  float acc = 0.0f;
  for(int b = lane; b < k/4; b += 32){ int blk = b/8; acc += (float)__dp4a(w4[b], x4[b], 0) * (wsr[blk]*xs[blk]); }
  for(int s = 16; s > 0; s >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, s);
  if(lane == 0) y[row] = acc;
}
"""
PLAIN_C = r"""
#include <stdint.h>
static inline int dp4a(int a, int b){ int s = 0; for(int i = 0; i < 4; ++i) s += (int8_t)(a >> 8*i) * (int8_t)(b >> 8*i); return s; }
extern "C" void gemv_plain(const int8_t* w, const int8_t* x, const float* ws, const float* xs, float* y, int n, int k){
  for(int row = 0; row < n; ++row){
    const int* w4 = (const int*)(w + (long)row*k); const int* x4 = (const int*)x; const float* wsr = ws + (long)row*(k/32);
    float acc[32], nxt[32];
    for(int lane = 0; lane < 32; ++lane){ acc[lane] = 0.0f;
      for(int b = lane; b < k/4; b += 32){ int blk = b/8; acc[lane] += (float)dp4a(w4[b], x4[b]) * (wsr[blk]*xs[blk]); } }
    for(int s = 16; s > 0; s >>= 1){
      for(int l = 0; l < 32; ++l) nxt[l] = acc[l] + (l + s < 32 ? acc[l + s] : acc[l]);
      for(int l = 0; l < 32; ++l) acc[l] = nxt[l]; }
    y[row] = acc[0];
  }
}
"""
INPUT_SEED = 2026


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(INPUT_SEED)
    return [rng.integers(-128, 128, (N, K), dtype=np.int8), rng.integers(-128, 128, K, dtype=np.int8),
            (rng.random((N, K // 32)) * 0.01).astype(np.float32), (rng.random(K // 32) * 0.01).astype(np.float32)]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    d = tmp_path_factory.mktemp("plainc")
    src, so = d / "gemv.cpp", d / "gemv.so"
    src.write_text(PLAIN_C)
    subprocess.run([tc.find_cxx(), "-O2", "-ffp-contract=off", "-fno-strict-aliasing", "-fPIC", "-shared", str(src),
                    "-o", str(so)], check=True, capture_output=True)
    lib = ctypes.CDLL(str(so))
    lib.gemv_plain.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int, ctypes.c_int]
    return lib


def _plain_run(lib, w, x, ws, xs):
    y = np.zeros(N, np.float32)
    lib.gemv_plain(w.ctypes.data, x.ctypes.data, ws.ctypes.data, xs.ctypes.data, y.ctypes.data, N, K)
    return y


def _emu_launch(mod, w, x, ws, xs):
    y = np.zeros(N, np.float32)
    mod.launch("gemv_dp4a", (N * 32 // 256,), (256,), 0, [w, x, ws, xs, y, np.int32(N), np.int32(K)], outputs=(4,))
    return y


def test_bench_plain_c_gemv(benchmark, plain, inputs):
    y = benchmark(_plain_run, plain, *inputs)
    assert np.isfinite(y).all() and np.any(y != 0)


@pytest.mark.parametrize("fiber", ["boost", "ucontext"])
def test_bench_emu_gemv_one_schedule(benchmark, plain, inputs, fiber):
    from harness.backends.emu.backend import EmuBackend
    if fiber == "boost" and not tc.boost_context_usable(tc.find_cxx()):
        pytest.skip("Boost.Context not installed here")
    be = EmuBackend(fiber=fiber, schedules=1)
    try:
        mod = be.load(KERNEL)
        y = benchmark(_emu_launch, mod, *inputs)
        stats = mod.last_stats
        benchmark.extra_info.update({
            "fiber": fiber, "kernel_ms": round(stats["kernel_ms"][0], 2), "switches": stats["switches"][0],
            "switches_per_s": round(stats["switches"][0] / (stats["kernel_ms"][0] / 1e3))})
        assert stats["switches"][0] >= N * 32      # every thread ran as a fiber
        assert np.array_equal(y, _plain_run(plain, *inputs)), f"input seed {INPUT_SEED}"
    finally:
        be.close()


def test_bench_emu_gemv_all_checks(benchmark, inputs):
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend()          # default: 4 schedules, every check on
    try:
        mod = be.load(KERNEL)
        y = benchmark(_emu_launch, mod, *inputs)
        benchmark.extra_info.update({"schedules": be.schedules,
                                     "kernel_ms": [round(t, 2) for t in mod.last_stats["kernel_ms"]]})
        assert np.isfinite(y).all()
    finally:
        be.close()
