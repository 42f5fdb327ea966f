"""Both fiber libraries: Boost.Context (fast) and the glibc ucontext fallback, chosen by option or env var."""
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


def _run(backend):
    x = np.arange(4 * 256, dtype=np.float32) % 7
    y = np.zeros(4, np.float32)
    backend.load(SRC).launch("reduce", (4,), (256,), 0, [x, y], outputs=(1,))
    return x, y


def test_ucontext_fallback_runs_and_agrees():
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(fiber="ucontext", schedules=3)
    try:
        assert be.toolchain.fiber == "ucontext" and be.describe()["fiber"] == "ucontext"
        x, y = _run(be)
        # integer-valued floats: every summation order is exact
        assert np.array_equal(y, x.reshape(4, 256).sum(1))
    finally:
        be.close()


def test_env_var_forces_ucontext(monkeypatch):
    monkeypatch.setenv(tc.FIBER_ENV, "ucontext")
    assert tc.resolve_fiber(None) == "ucontext"
    monkeypatch.setenv(tc.FIBER_ENV, "fibres")
    with pytest.raises(ValueError, match=r"fiber: expected one of auto, boost, ucontext"):
        tc.resolve_fiber(None)


def test_boost_is_used_when_usable(emu):
    usable = tc.boost_context_usable(tc.find_cxx())
    if not usable:
        with pytest.raises(ValueError, match=r"'boost' requested but Boost.Context"):
            tc.resolve_fiber("boost")
        pytest.skip("Boost.Context not installed here: the ucontext fallback is in use")
    assert tc.resolve_fiber("auto") == "boost"
    if emu.toolchain.fiber == "boost":
        x, y = _run(emu)
    else:   # the shared backend was forced to ucontext (QCONFORM_EMU_FIBER): start a Boost.Context one
        from harness.backends.emu.backend import EmuBackend
        be = EmuBackend(fiber="boost")
        try:
            assert be.toolchain.fiber == "boost"
            x, y = _run(be)
        finally:
            be.close()
    assert np.array_equal(y, x.reshape(4, 256).sum(1))
