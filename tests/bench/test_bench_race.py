"""Cost of the emu's happens-before race detector over the checks without it.

Run with `pytest tests/bench/test_bench_race.py --benchmark-enable`. Each kernel is launched with every check
of the default plan (5 schedules; the detector, when on, watches run 1), once with the detector and once
without; extra_info records run 1's in-worker time (CPU ms), the accesses the detector checked and, for the
'on' benchmark, the ratio of the whole launch to the 'off' one measured just before it. Two kernels bracket
the cost: a shared-memory tiled SGEMM (every inner-loop load is a tracked shared access) and a warp-per-row
int8 GEMV (its weights are const, so untracked: the usual shape of qconform's kernels). The results are
checked bit for bit between the two builds (the instrumentation must not change what a kernel computes).
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.emu.backend import EmuBackend

from .test_bench_emu import KERNEL as GEMV    # the warp-per-row __dp4a GEMV

SGEMM = r"""
__global__ void sgemm_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[16][16], tb[16][16];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
  float acc = 0.0f;
  for (int t = 0; t < n; t += 16) {
    ta[ty][tx] = a[row * n + t + tx];
    tb[ty][tx] = b[(t + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < 16; ++k) acc += ta[ty][k] * tb[k][tx];
    __syncthreads();
  }
  c[row * n + col] = acc;
}
"""
N_MM = 128                   # 128 x 128 SGEMM: 64 blocks of 16 x 16
N_MV, K_MV = 1024, 2048      # the GEMV of test_bench_emu.py
INPUT_SEED = 2026
_off_ms: dict[str, float] = {}


def _sgemm(mod):
    rng = np.random.default_rng(INPUT_SEED)
    a, b = rng.standard_normal((2, N_MM * N_MM)).astype(np.float32)
    c = np.zeros(N_MM * N_MM, np.float32)

    def run():
        mod.launch("sgemm_tiled", (N_MM // 16, N_MM // 16), (16, 16), 0, [a, b, c, np.int32(N_MM)], outputs=(2,))
        return c.copy()
    return run


def _gemv(mod):
    rng = np.random.default_rng(INPUT_SEED)
    args = [rng.integers(-128, 128, (N_MV, K_MV), dtype=np.int8), rng.integers(-128, 128, K_MV, dtype=np.int8),
            (rng.random((N_MV, K_MV // 32)) * 0.01).astype(np.float32),
            (rng.random(K_MV // 32) * 0.01).astype(np.float32), np.zeros(N_MV, np.float32), np.int32(N_MV),
            np.int32(K_MV)]

    def run():
        mod.launch("gemv_dp4a", (N_MV * 32 // 256,), (256,), 0, args, outputs=(4,))
        return args[4].copy()
    return run


KERNELS = {"sgemm_shared": (SGEMM, _sgemm), "gemv_int8": (GEMV, _gemv)}
_results: dict[str, np.ndarray] = {}


@pytest.mark.parametrize("race_check", [False, True], ids=["off", "on"])
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_bench_race_detector_overhead(benchmark, kernel, race_check):
    source, make = KERNELS[kernel]
    be = EmuBackend(timeout_s=300, race_check=race_check)
    try:
        mod = be.load(source)
        run = make(mod)
        out = benchmark(run)
        stats = mod.last_stats
        benchmark.extra_info.update({"kernel": kernel, "race_check": race_check, "schedules": be.schedules,
                                     "run1_cpu_ms": round(stats["kernel_cpu_ms"][0], 2),
                                     "checked_accesses": stats["race_accesses"]})
        if race_check:
            assert stats["race_accesses"] > 0
        else:
            assert stats["race_accesses"] is None
        if benchmark.stats:       # None when benchmarks are disabled (the default suite runs each once)
            ms = benchmark.stats.stats.min * 1e3
            if not race_check:
                _off_ms[kernel] = ms
            elif kernel in _off_ms:
                benchmark.extra_info["launch_over_off"] = round(ms / _off_ms[kernel], 2)
        if kernel in _results:
            assert np.array_equal(out, _results[kernel]), "the detector's build computed something else"
        _results[kernel] = out
    finally:
        be.close()


def test_bench_sweep_over_a_parameter_domain(benchmark):
    """A sweep (harness.racescan.sweep) over the 127 values of the race corpus's one-value race twin: the cost of
    one point (a 64-thread launch with the detector and 5 schedules) bounds a sweep of SWEEP_LIMIT points."""
    from pathlib import Path

    from harness.racescan import read_entry, sweep
    entry = read_entry(Path(__file__).resolve().parents[1] / "race_corpus" / "scalar_value_race_fixed.cu")
    be = EmuBackend(timeout_s=300, race_check=True)
    try:
        verdict = benchmark(lambda: sweep(be, entry.source, entry.kernel, entry.grid, entry.block, 0, entry.args, 17))
        assert verdict.kind == "clean" and verdict.points == 127
        if benchmark.stats:
            benchmark.extra_info["ms_per_point"] = round(benchmark.stats.stats.min * 1e3 / verdict.points, 2)
    finally:
        be.close()
