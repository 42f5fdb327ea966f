"""Cost of holding blocks that wait for later blocks (emu_runtime.cpp, "spinning").

Run with `pytest tests/bench/test_bench_held_blocks.py --benchmark-enable`. A chain of 64 blocks of 64 threads in
which each block's thread 0 waits for the block before it (a decoupled look-back at its simplest), one schedule,
detector on. In forward order no block waits (the baseline); in reverse order 63 blocks are held, each after
32768 reads of the word it spins on, and each resumed once that word changed. extra_info records run 1's CPU
time and, for reverse, the ratio to forward measured just before it. A software grid barrier (every block counts
itself in, then waits for all) of 64 and 512 blocks prices the resumes: each arrival resumes every held block.
"""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.emu.backend import EmuBackend
from tests.backends.emu.test_held_blocks import SOURCE    # chain, counted_barrier

BLOCKS = 64
_forward_ms: list[float] = []


@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_bench_blocks_held_while_later_blocks_run(benchmark, order):
    be = EmuBackend(schedules=1, schedule=order, timeout_s=300)
    try:
        mod = be.load(SOURCE)

        def run():
            flags, prefix = np.zeros(BLOCKS, np.int32), np.zeros(BLOCKS, np.int32)
            result = mod.launch("chain", (BLOCKS,), (64,), 0, [flags, prefix, np.int32(0)], outputs=())
            return prefix, result
        prefix, result = benchmark(run)
        b = np.arange(BLOCKS)
        assert np.array_equal(prefix, (b + 1) * (b + 2) // 2)
        held = [c for c in result.caveats if "spun until" in c]
        assert bool(held) == (order == "reverse"), result.caveats
        benchmark.extra_info.update({"order": order, "blocks": BLOCKS,
                                     "run1_cpu_ms": round(mod.last_stats["kernel_cpu_ms"][0], 2)})
        if benchmark.stats:       # None when benchmarks are disabled (the default suite runs each once)
            ms = benchmark.stats.stats.min * 1e3
            if order == "forward":
                _forward_ms.append(ms)
            elif _forward_ms:
                benchmark.extra_info["reverse_over_forward"] = round(ms / _forward_ms[-1], 2)
    finally:
        be.close()


@pytest.mark.parametrize("blocks", [64, 512])
def test_bench_a_software_grid_barrier(benchmark, blocks):
    """Every block but the last is held, and each arrival resumes every held block: blocks^2 / 2 resumes, each
    going back after 16 yields of its spin."""
    be = EmuBackend(schedules=1, timeout_s=300)
    try:
        mod = be.load(SOURCE)

        def run():
            count, seen = np.zeros(1, np.uint32), np.zeros(blocks, np.uint32)
            mod.launch("counted_barrier", (blocks,), (32,), 0, [count, seen, np.int32(0)], outputs=())
            return seen
        assert list(benchmark(run)) == [blocks] * blocks
        benchmark.extra_info.update({"blocks": blocks, "run1_cpu_ms": round(mod.last_stats["kernel_cpu_ms"][0], 2)})
    finally:
        be.close()
