"""The emu worker's address space (RLIMIT_AS, option memory_limit_mb) is the tool's budget: loading modules must
not use it up, and when the tool's own memory (fiber stacks, race-detector shadow) does not fit, the case is
`unchecked` with the reason, never a crash judged as the kernel's `fail`."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends.base import DataRace, ResourceExhausted
from harness.backends.emu import sandbox
from harness.backends.emu.backend import EmuBackend
from harness.judging.core import verdict_for_fault
from harness.judging.registry import UNCHECKED

needs_sandbox = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                   reason=f"no seccomp sandbox here: {sandbox.unavailable_reason()}")

MODULES = 60
PER_MODULE_MIB = 16     # a module's own code and runtime state: ~2 MiB measured; the fiber stacks were 260 MiB


def _vm_size_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmSize:\s+(\d+) kB", f.read(), re.M).group(1)) // 1024


@needs_sandbox
def test_one_worker_loads_and_runs_many_modules():
    """60 modules in one worker under a 4 GiB limit: with stacks (260 MiB) and shared-memory shadow (12 MiB)
    kept per module the worker would pass its limit after ~15 and be replaced (or fail to map a segment)."""
    be = EmuBackend(schedules=1, timeout_s=120, memory_limit_mb=4096)
    x = np.arange(32, dtype=np.float32)
    try:
        sizes = []
        for k in range(MODULES):
            mod = be.load(f"__global__ void scale{k}(const float* x, float* y) "
                          f"{{ y[threadIdx.x] = x[threadIdx.x] * {k + 1}.0f; }}")
            y = np.zeros(32, np.float32)
            mod.launch(f"scale{k}", (1,), (32,), 0, [x, y], outputs=(1,))
            np.testing.assert_array_equal(y, x * (k + 1), err_msg=f"module {k}")
            assert be._worker.generation == 1 and be._worker.proc is not None, \
                f"the worker was replaced after module {k}: loading modules used up its address space ({sizes} MiB)"
            sizes.append(_vm_size_mib(be._worker.proc.pid))
        growth = (sizes[-1] - sizes[0]) / (MODULES - 1)
        assert growth < PER_MODULE_MIB, f"VmSize grows {growth:.1f} MiB per module loaded ({sizes[0]} -> {sizes[-1]})"
    finally:
        be.close()


@needs_sandbox
def test_a_race_shadow_beyond_the_memory_limit_is_unchecked_not_fail():
    """The detector's shadow takes 48 bytes per tracked byte the kernel touches: a kernel that writes all of a
    24 MiB output needs over 1 GiB of shadow, more than a 1 GiB worker holds. The launch ends as the tool's limit
    (ResourceExhausted, tool_limit, unchecked) with the reason; the worker goes on with the next case, and the same
    kernel with the detector off runs (the control)."""
    src = ("__global__ void fill(float* y, int n) "
           "{ for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = 1.0f; }")
    n = 6 << 20
    be = EmuBackend(schedules=1, timeout_s=300, memory_limit_mb=1024)
    try:
        y = np.zeros(n, np.float32)
        with pytest.raises(ResourceExhausted, match=r"race detector's shadow of y \(bytes \d+\.\. of 25165824 tracked; "
                                                    r"\d+ MiB of shadow mapped\) could not be mapped") as info:
            be.load(src).launch("fill", (1,), (256,), 0, [y, np.int32(n)])
        assert info.value.tool_limit is True
        assert verdict_for_fault(info.value) == UNCHECKED
        assert "memory_limit_mb" in str(info.value)
        small = np.zeros(64, np.float32)     # the next case runs, still under the detector
        be.load(src).launch("fill", (1,), (32,), 0, [small, np.int32(64)], outputs=(0,))
        np.testing.assert_array_equal(small, 1.0)
    finally:
        be.close()
    control = EmuBackend(schedules=1, timeout_s=300, memory_limit_mb=1024, race_check=False)
    try:
        y = np.zeros(n, np.float32)
        control.load(src).launch("fill", (1,), (256,), 0, [y, np.int32(n)], outputs=(0,))
        assert (y == 1.0).all()
    finally:
        control.close()


@needs_sandbox
def test_a_large_buffer_touched_in_part_is_checked_in_a_small_worker():
    """The shadow of a tracked buffer is mapped where accesses reach it (64 KiB of the buffer at a time): a 64 MiB
    output, whose whole shadow (3 GiB) would not fit a 1 GiB worker, is checked when the kernel touches a few
    places of it. Two blocks writing its last element race (the inter-block race is found, at its index); the
    same kernel writing one element per block is clean (the control). Before, tracking the buffer alone ended
    the launch as the tool's limit."""
    src = """
__global__ void tail(float* y, int n, int shared_slot) {
  if (threadIdx.x == 0) y[shared_slot ? n - 1 : n - 1 - blockIdx.x] = float(blockIdx.x);
  y[blockIdx.x * 65536 + threadIdx.x] = 2.0f;      // a chunk of the buffer per block
}"""
    n = 16 << 20
    be = EmuBackend(schedules=1, timeout_s=300, memory_limit_mb=1024)
    try:
        mod = be.load(src)
        y = np.zeros(n, np.float32)
        with pytest.raises(DataRace, match=rf"'y' index {n - 1} .*different blocks"):
            mod.launch("tail", (4,), (32,), 0, [y, np.int32(n), np.int32(1)])
        y = np.zeros(n, np.float32)
        mod.launch("tail", (4,), (32,), 0, [y, np.int32(n), np.int32(0)], outputs=(0,))
        assert (y[n - 4:] == [3, 2, 1, 0]).all() and (y[65536:65536 + 32] == 2.0).all()
    finally:
        be.close()


@needs_sandbox
def test_an_access_across_two_shadow_chunks_is_checked_in_both():
    """An unaligned 8-byte store at byte 65532 covers bytes of two shadow chunks (65536 bytes of the buffer each):
    a byte written by another block in the second chunk races it; a byte just past the store does not (the
    control)."""
    src = """
__global__ void straddle(unsigned char* b, int other) {
  if (threadIdx.x != 0) return;
  if (blockIdx.x == 0) { unsigned long long v = 0x0102030405060708ull; __builtin_memcpy(b + 65532, &v, 8); }
  else b[other] = 7;
}"""
    be = EmuBackend(schedules=1, timeout_s=120)
    try:
        mod = be.load(src)
        with pytest.raises(DataRace, match=r"'b' index 65538 .*different blocks"):
            mod.launch("straddle", (2,), (32,), 0, [np.zeros(1 << 17, np.uint8), np.int32(65538)])
        b = np.zeros(1 << 17, np.uint8)
        mod.launch("straddle", (2,), (32,), 0, [b, np.int32(65540)], outputs=(0,))
        assert b[65540] == 7 and b[65532:65540].tolist() == [8, 7, 6, 5, 4, 3, 2, 1]
    finally:
        be.close()
