"""Speed of the emu backend: a warp-per-row __dp4a GEMV over a 1024 x 2048 int8 matrix, 256-thread blocks.

Run with `pytest tests/bench/test_bench_emu.py --benchmark-enable`. Recorded per benchmark (extra_info):
the in-worker kernel time of one schedule (wall and CPU), fiber switches per launch, and the ratio of the
whole launch to the plain-C loop measured alongside. The plain-C benchmark runs the same loop nest (per-lane
partial sums, then the shuffle tree) compiled with the same flags, so the emu/plain ratio is the cost of
CUDA semantics on fibers. Results are also checked bit for bit against it. The switch benchmark times a
kernel that does nothing but warp rendezvous, for the cost of one fiber switch under each implementation.
"""
from __future__ import annotations

import ctypes
import subprocess
import time

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


FIBERS = ["asm", "boost", "ucontext"]


def _need(fiber):
    if not tc.fiber_usable(fiber, tc.find_cxx()):
        pytest.skip(f"{fiber} fibers are not usable here")


def _plain_ms(lib, inputs, repeats=20):
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _plain_run(lib, *inputs)
        t.append(time.perf_counter() - t0)
    return min(t) * 1e3


@pytest.mark.parametrize("fiber", FIBERS)
def test_bench_emu_gemv_one_schedule(benchmark, plain, inputs, fiber):
    from harness.backends.emu.backend import EmuBackend
    _need(fiber)
    be = EmuBackend(fiber=fiber, schedules=1)
    try:
        mod = be.load(KERNEL)
        y = benchmark(_emu_launch, mod, *inputs)
        stats = mod.last_stats
        plain_ms = _plain_ms(plain, inputs)
        benchmark.extra_info.update({
            "fiber": fiber, "kernel_ms": round(stats["kernel_ms"][0], 2),
            "kernel_cpu_ms": round(stats["kernel_cpu_ms"][0], 2), "switches": stats["switches"][0],
            "plain_c_ms": round(plain_ms, 3), "kernel_cpu_over_plain_c": round(stats["kernel_cpu_ms"][0] / plain_ms, 2)})
        if benchmark.stats:        # None when benchmarks are disabled (the default suite runs them once)
            benchmark.extra_info["launch_over_plain_c"] = round(benchmark.stats.stats.min * 1e3 / plain_ms, 2)
        assert stats["switches"][0] >= N * 5       # every thread ran as a fiber and met each shuffle
        assert np.array_equal(y, _plain_run(plain, *inputs)), f"input seed {INPUT_SEED}"
    finally:
        be.close()


SWITCH_KERNEL = r"""
__global__ void rendezvous(int* out, int rounds){
  int v = threadIdx.x;
  for(int r = 0; r < rounds; ++r) v = __shfl_xor_sync(0xffffffffu, v, 1) + 1;
  out[blockIdx.x*blockDim.x + threadIdx.x] = v; }
"""
SWITCH_BLOCKS, SWITCH_ROUNDS = 16, 64


@pytest.mark.parametrize("fiber", FIBERS)
def test_bench_emu_fiber_switch(benchmark, fiber):
    """A kernel of warp rendezvous only: CPU time per fiber switch (one switch per lane and shuffle)."""
    from harness.backends.emu.backend import EmuBackend
    _need(fiber)
    be = EmuBackend(fiber=fiber, schedules=1)
    try:
        mod = be.load(SWITCH_KERNEL)
        out = np.zeros(SWITCH_BLOCKS * 256, np.int32)
        cpu = []

        def once():
            mod.launch("rendezvous", (SWITCH_BLOCKS,), (256,), 0, [out, np.int32(SWITCH_ROUNDS)], outputs=(0,))
            cpu.append(mod.last_stats["kernel_cpu_ms"][0] / mod.last_stats["switches"][0] * 1e6)
        benchmark(once)
        switches = mod.last_stats["switches"][0]
        benchmark.extra_info.update({"fiber": fiber, "switches": switches, "ns_per_switch_cpu": round(min(cpu), 1)})
        assert switches >= SWITCH_BLOCKS * 256 * SWITCH_ROUNDS
        # each round swaps the values of lanes 2i and 2i+1 and adds one: an even number of rounds ends at t + rounds
        want = np.arange(256, dtype=np.int32) + SWITCH_ROUNDS
        assert np.array_equal(out.reshape(SWITCH_BLOCKS, 256), np.broadcast_to(want, (SWITCH_BLOCKS, 256)))
    finally:
        be.close()


def test_bench_emu_gemv_all_checks(benchmark, inputs):
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend()          # default: 5 schedules (block sampling), every check on
    try:
        mod = be.load(KERNEL)
        y = benchmark(_emu_launch, mod, *inputs)
        benchmark.extra_info.update({"schedules": be.schedules,
                                     "kernel_ms": [round(t, 2) for t in mod.last_stats["kernel_ms"]]})
        assert np.isfinite(y).all()
    finally:
        be.close()
