"""Cost of the emu's happens-before race detector over the checks without it.

Run with `pytest tests/bench/test_bench_race.py --benchmark-enable`. Each kernel is launched with every check
of the default plan (5 schedules; the detector, when on, watches run 1), once with the detector and once
without; extra_info records run 1's in-worker time (CPU ms), the accesses the detector checked and, for the
'on' benchmark, the ratio of the whole launch to the 'off' one measured just before it. Two kernels bracket
the cost: a shared-memory tiled SGEMM (every inner-loop load is a tracked shared access) and a warp-per-row
int8 GEMV (its weights are const, so untracked: the usual shape of qconform's kernels); a histogram of 65536
atomicAdds on 256 bins prices the atomics' path (release/acquire bookkeeping and the spin check after each).
A counter that 4096 and 16384 threads update with seq_cst cuda::atomic operations prices synchronization: each
operation acquires what every earlier one released (one entry per thread), by reference to the address's release
log, so the cost grows with the threads, not with their square as when each acquire copied the entries. 4000
phases of a cuda::barrier price the arrive-wait barriers: one release log per barrier, a wait taking it up to its
phase's end, and a cumulative release copying only what no earlier one copied, so the cost grows with the phases
(per-phase logs, each copied whole into the next, cost their square: 470 s for 400 phases of a 64-thread block). A
float sum by atomicAdd, whose schedules disagree, prices the detector's
reruns of the other schedules. The results are
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
_on_ms: dict[str, float] = {}


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


HISTOGRAM = r"""
__global__ void histogram(const int* x, unsigned* bins, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    atomicAdd(&bins[x[i] & 255], 1u);
}
"""
N_HIST = 1 << 16             # 65536 atomics over 256 bins: 64 blocks of 256 threads


def _histogram(mod):
    x = np.random.default_rng(INPUT_SEED).integers(0, 1 << 20, N_HIST, dtype=np.int32)
    bins = np.zeros(256, np.uint32)

    def run():
        bins[:] = 0
        mod.launch("histogram", (64,), (256,), 0, [x, bins, np.int32(N_HIST)])
        return bins.copy()
    return run


SEQ_CST_COUNTER = r"""
#include <cuda/atomic>
__global__ void seq_cst_counter(int* count, int* out) {
  cuda::atomic_ref<int> c(*count);
  for (int k = 0; k < 4; ++k) c.fetch_add(1);          // seq_cst: each one acquires and releases
  out[blockIdx.x * blockDim.x + threadIdx.x] = threadIdx.x;
}
"""


def _seq_cst_counter(blocks):
    def make(mod):
        count, out = np.zeros(1, np.int32), np.zeros(blocks * 256, np.int32)

        def run():
            count[:] = 0
            mod.launch("seq_cst_counter", (blocks,), (256,), 0, [count, out], outputs=(1,))
            return np.concatenate([count, out])
        return run
    return make


BARRIER_PHASES = r"""
#include <cuda/barrier>
// 2000 phases of one cuda::barrier: each arrival releases to the barrier's log, each wait acquires up to its phase's end.
__global__ void phases(const float* x, float* y, int steps) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  __shared__ float s[64];
  int t = threadIdx.x;
  if (t == 0) init(&bar, blockDim.x);
  __syncthreads();
  float acc = 0.0f;
  for (int k = 0; k < steps; ++k) {
    s[t] = x[64 * k + t];
    bar.arrive_and_wait();
    acc += s[63 - t];
    bar.arrive_and_wait();
  }
  y[blockIdx.x * 64 + t] = acc;
}
"""
N_PHASES = 2000


def _barrier_phases(mod):
    x = np.random.default_rng(INPUT_SEED).standard_normal(64 * N_PHASES).astype(np.float32)
    y = np.zeros(2 * 64, np.float32)

    def run():
        mod.launch("phases", (2,), (64,), 0, [x, y, np.int32(N_PHASES)], outputs=(1,))
        return y.copy()
    return run


# name -> (source, the launch, backend options): the histogram's blocks add into shared bins, so a run on a block
# sample legitimately gives other counts than the full run; every run covers every block.
KERNELS = {"sgemm_shared": (SGEMM, _sgemm, {}), "gemv_int8": (GEMV, _gemv, {}),
           "histogram_atomics": (HISTOGRAM, _histogram, {"block_sampling": "all"}),
           "seq_cst_counter": (SEQ_CST_COUNTER, _seq_cst_counter(16), {"block_sampling": "all"}),
           "seq_cst_counter_16k": (SEQ_CST_COUNTER, _seq_cst_counter(64), {"block_sampling": "all"}),
           "barrier_phases": (BARRIER_PHASES, _barrier_phases, {})}
_results: dict[str, np.ndarray] = {}


@pytest.mark.parametrize("race_check", [False, True], ids=["off", "on"])
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_bench_race_detector_overhead(benchmark, kernel, race_check):
    source, make, options = KERNELS[kernel]
    be = EmuBackend(timeout_s=300, race_check=race_check, **options)
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
        if race_check and benchmark.stats:
            _on_ms[kernel] = benchmark.stats.stats.min * 1e3
    finally:
        be.close()


@pytest.mark.parametrize("kernel", ["sgemm_shared", "gemv_int8", "barrier_phases"])
def test_bench_every_access_of_the_source(benchmark, kernel):
    """The detector on the build that makes every access of the source (EmuBackend accesses="source": the passes
    that drop or move accesses turned off) against the optimised build's ('on' above): same results bit for bit,
    more accesses checked where the optimised build merged or dropped some."""
    source, make, options = KERNELS[kernel]
    be = EmuBackend(timeout_s=300, race_check=True, accesses="source", **options)
    try:
        mod = be.load(source)
        out = benchmark(make(mod))
        stats = mod.last_stats
        benchmark.extra_info.update({"kernel": kernel, "accesses": "source",
                                     "run1_cpu_ms": round(stats["kernel_cpu_ms"][0], 2),
                                     "checked_accesses": stats["race_accesses"]})
        if benchmark.stats and kernel in _on_ms:
            benchmark.extra_info["launch_over_compiled"] = round(benchmark.stats.stats.min * 1e3 / _on_ms[kernel], 2)
        if kernel in _results:
            assert np.array_equal(out, _results[kernel]), "the build of every access computed something else"
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


FLOAT_SUM = r"""
__global__ void float_sum(const float* x, float* total, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(total, x[i]);
}
"""


@pytest.mark.parametrize("race_check", [False, True], ids=["off", "on"])
def test_bench_rerun_when_schedules_disagree(benchmark, race_check):
    """A float sum in atomic order: the schedules give different sums and run 1 has no race, so with the detector
    each other schedule runs again under it (harness.backends.emu.runs) before the verdict, RaceDetected."""
    from harness.backends.base import RaceDetected
    be = EmuBackend(timeout_s=300, race_check=race_check)
    try:
        mod = be.load(FLOAT_SUM)
        x = np.random.default_rng(INPUT_SEED).standard_normal(4096).astype(np.float32)

        def run():
            with pytest.raises(RaceDetected):
                mod.launch("float_sum", (16,), (256,), 0, [x, np.zeros(1, np.float32), np.int32(4096)], outputs=(1,))
        benchmark(run)
        if benchmark.stats:
            ms = benchmark.stats.stats.min * 1e3
            if not race_check:
                _off_ms["float_sum"] = ms
            elif "float_sum" in _off_ms:
                benchmark.extra_info["launch_over_off"] = round(ms / _off_ms["float_sum"], 2)
    finally:
        be.close()
