"""cuRAND's device API on emu: the toolkit's curand_kernel.h (the toolchain extra's nvidia-curand wheel) compiled
as device code with the kernel (harness/backends/emu/toolkit_headers.py, emu's curand_kernel.h). A generator
state per thread runs race-free; one state shared by the threads is a data race on the state, reported at the
kernel's line with the place inside cuRAND; without the toolkit's headers the build says what to install."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace, UnsupportedConstruct
from harness.backends.emu import toolkit_headers
from harness.backends.emu.backend import EmuBackend

STATE_BYTES = 48        # sizeof(curandState): the XORWOW generator's state

SOURCE = r"""
#include <curand_kernel.h>
__global__ void own_state(curandState* state, unsigned int* r, float* u, unsigned long long seed) {
  int t = threadIdx.x;
  curand_init(seed, t, 0, &state[t]);
  r[t] = curand(&state[t]);
  u[t] = curand_uniform(&state[t]);
}
__global__ void one_state(curandState* state, float* u) {
  u[threadIdx.x] = curand_uniform(state);
}
"""

needs_curand = pytest.mark.skipif(toolkit_headers.toolkit_include() is None,
                                  reason="no CUDA toolkit with cuRAND's headers here (the toolchain extra installs "
                                         "the nvidia-curand wheel)")


@pytest.fixture(scope="module")
def backend():
    be = EmuBackend(timeout_s=60)
    yield be
    be.close()


def _own(module, seed, n=32):
    state = np.zeros(STATE_BYTES * n, np.uint8)
    r, u = np.zeros(n, np.uint32), np.zeros(n, np.float32)
    module.launch("own_state", (1,), (n,), 0, [state, r, u, np.uint64(seed)], [1, 2])
    return r, u


@needs_curand
def test_a_state_per_thread_runs_and_is_race_free(backend):
    module = backend.load(SOURCE)
    r1, u1 = _own(module, 1234)
    r2, u2 = _own(module, 1234)
    assert (r1 == r2).all() and (u1 == u2).all()                  # the same seed, the same numbers
    assert len(set(r1.tolist())) == len(r1)                       # each thread its own subsequence
    assert ((u1 > 0) & (u1 <= 1)).all()                           # curand_uniform's (0, 1]
    assert not (_own(module, 99)[0] == r1).all()                  # another seed, other numbers


@needs_curand
def test_one_state_shared_by_the_threads_is_a_race_on_the_state(backend):
    module = backend.load(SOURCE)
    with pytest.raises(DataRace) as err:
        module.launch("one_state", (1,), (8,), 0, [np.zeros(STATE_BYTES, np.uint8), np.zeros(8, np.float32)], [1])
    first = err.value.races[0]
    assert first.startswith("data race on 'state' index"), first
    line = SOURCE.split("\n").index("  u[threadIdx.x] = curand_uniform(state);") + 1
    assert f" at line {line} (in curand_kernel.h:" in first, first   # the kernel's line, then the place in cuRAND


def test_without_the_toolkits_curand_headers_the_build_says_what_to_install(backend, monkeypatch):
    monkeypatch.setattr(toolkit_headers, "include_flags", lambda: ())
    with pytest.raises(UnsupportedConstruct, match="curand_kernel.h .* install the toolchain extra"):
        backend.load(SOURCE)


@needs_curand
def test_the_toolkits_math_constants_are_offered(backend):
    """<math_constants.h> (CUDART_PI_F and kin: macros only) is the toolkit's own, as on a GPU build."""
    module = backend.load("#include <math_constants.h>\n"
                          "__global__ void k(float* y){ y[threadIdx.x] = CUDART_PI_F * threadIdx.x; }\n")
    y = np.zeros(4, np.float32)
    module.launch("k", (1,), (4,), 0, [y], [0])
    assert np.allclose(y, np.float32(np.pi) * np.arange(4))
