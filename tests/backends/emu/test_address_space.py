"""The emu worker's address space (RLIMIT_AS, option memory_limit_mb) is the tool's budget: loading modules must
not use it up, and when the tool's own memory (fiber stacks, race-detector shadow) does not fit, the case is
`unchecked` with the reason, never a crash judged as the kernel's `fail`."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends.base import ResourceExhausted
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
    """The detector's shadow takes 48 bytes per tracked byte: a 24 MiB output needs over 1 GiB of shadow, more
    than a 1 GiB worker holds. The case is the tool's limit (ResourceExhausted, tool_limit, unchecked) with the
    reason; the worker is replaced and the same kernel, with the detector off, runs (the control)."""
    src = "__global__ void fill(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 1.0f; }"
    n = 6 << 20
    be = EmuBackend(schedules=1, timeout_s=300, memory_limit_mb=1024)
    try:
        y = np.zeros(n, np.float32)
        with pytest.raises(ResourceExhausted, match=r"race detector's shadow of y \(.*could not be mapped") as info:
            be.load(src).launch("fill", (1,), (32,), 0, [y, np.int32(32)])
        assert info.value.tool_limit is True
        assert verdict_for_fault(info.value) == UNCHECKED
        assert "memory_limit_mb" in str(info.value)
        generation = be._worker.generation
        small = np.zeros(64, np.float32)     # the next case runs in a new worker, still under the detector
        be.load(src).launch("fill", (2,), (32,), 0, [small, np.int32(64)], outputs=(0,))
        np.testing.assert_array_equal(small, 1.0)
        assert be._worker.generation == generation + 1
    finally:
        be.close()
    control = EmuBackend(schedules=1, timeout_s=300, memory_limit_mb=1024, race_check=False)
    try:
        y = np.zeros(n, np.float32)
        control.load(src).launch("fill", (1,), (32,), 0, [y, np.int32(32)])
        assert (y[:32] == 1.0).all()
    finally:
        control.close()
