"""Every fiber implementation: the built-in x86-64 switch, Boost.Context and the glibc ucontext fallback,
chosen by option or env var; each runs a kernel with barriers and shuffles under every schedule."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.emu import toolchain as tc

SRC = r"""
__global__ void reduce(const float* x, float* y){
  __shared__ float part[8];
  float v = x[blockIdx.x*blockDim.x + threadIdx.x];
  for(int s=16;s>0;s>>=1) v += __shfl_xor_sync(0xffffffffu, v, s);
  if((threadIdx.x&31)==0) part[threadIdx.x>>5] = v;
  __syncthreads();
  if(threadIdx.x==0){ float t=0.0f; for(int w=0; w<(int)(blockDim.x>>5); ++w) t+=part[w]; y[blockIdx.x]=t; } }
"""
# Floating-point state belongs to the fiber: a kernel that changes the rounding mode must not leak it into
# the next fiber (the built-in switch saves and restores MXCSR and the x87 control word, as fcontext does).
FP_SRC = r"""
#include <cfenv>
__global__ void fp_state(float* out){
  if(threadIdx.x == 0) fesetround(FE_DOWNWARD);
  __syncthreads();
  volatile float one = 1.0f, three = 3.0f;
  out[threadIdx.x] = one / three;
  if(threadIdx.x == 0) fesetround(FE_TONEAREST); }
"""


def _run(backend):
    x = np.arange(4 * 256, dtype=np.float32) % 7
    y = np.zeros(4, np.float32)
    backend.load(SRC).launch("reduce", (4,), (256,), 0, [x, y], outputs=(1,))
    return x, y


def _usable(fiber):
    return tc.fiber_usable(fiber, tc.find_cxx())


@pytest.mark.parametrize("fiber", ["asm", "boost", "ucontext"])
def test_each_fiber_implementation_runs_and_agrees(fiber):
    from harness.backends.emu.backend import EmuBackend
    if not _usable(fiber):
        with pytest.raises(ValueError, match=rf"fiber: '{fiber}' requested but"):
            tc.resolve_fiber(fiber)
        pytest.skip(f"{fiber} fibers are not usable here")
    be = EmuBackend(fiber=fiber, schedules=6)
    try:
        assert be.toolchain.fiber == fiber and be.describe()["fiber"] == fiber
        x, y = _run(be)
        # integer-valued floats: every summation order is exact
        assert np.array_equal(y, x.reshape(4, 256).sum(1))
    finally:
        be.close()


@pytest.mark.parametrize("fiber", ["asm", "boost", "ucontext"])
def test_rounding_mode_is_per_fiber(fiber, ungated):     # fesetround is a host function: past the gate
    from harness.backends.emu.backend import EmuBackend
    if not _usable(fiber):
        pytest.skip(f"{fiber} fibers are not usable here")
    be = EmuBackend(fiber=fiber, schedules=1)
    try:
        out = np.zeros(64, np.float32)
        be.load(FP_SRC).launch("fp_state", (1,), (64,), 0, [out], outputs=(0,))
    finally:
        be.close()
    nearest = np.float32(1) / np.float32(3)   # 1/3 rounded to nearest lies above 1/3
    downward = np.nextafter(nearest, np.float32(0))
    # thread 0 rounds downward; the others never changed their own mode
    assert out[0] == downward and np.all(out[1:] == nearest), out[:4]


def test_env_var_forces_a_fiber_implementation(monkeypatch):
    monkeypatch.setenv(tc.FIBER_ENV, "ucontext")
    assert tc.resolve_fiber(None) == "ucontext"
    monkeypatch.setenv(tc.FIBER_ENV, "fibres")
    with pytest.raises(ValueError, match=r"fiber: expected one of auto, asm, boost, ucontext"):
        tc.resolve_fiber(None)


def test_auto_prefers_the_built_in_switch(monkeypatch):
    monkeypatch.delenv(tc.FIBER_ENV, raising=False)
    cxx = tc.find_cxx()
    want = next(f for f in tc.AUTO_ORDER if tc.fiber_usable(f, cxx))
    assert tc.resolve_fiber("auto") == want
    if tc.asm_switch_usable(cxx):
        assert want == "asm"
