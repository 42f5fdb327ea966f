"""Large arguments through shared memory: placed once, laid out as device buffers, checked like any other."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

from harness.backends.base import GUARD_BYTES, SENTINEL_BYTE, OutOfBounds
from harness.backends.emu import staging

SRC = r"""
__global__ void scale_rows(const float* w, float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i < n) y[i] = 3.0f*w[i]; }
__global__ void poke_const(const float* w, float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i < n) y[i] = w[i];
  if(i == 0) ((float*)w)[n] = 1.0f; }
"""
pytestmark = pytest.mark.skipif(not staging.available(), reason="no memfd: arguments are pickled")


def test_place_lays_out_large_arrays_with_guard_bands():
    area = staging.StagingArea()
    try:
        big, small = np.arange(40000, dtype=np.float32), np.arange(10, dtype=np.float32)
        out, size = area.place([big, small, np.int32(3)])
        assert isinstance(out[0], staging.Staged) and out[1] is small and size >= big.nbytes + 2 * GUARD_BYTES
        assert out[0].offset % staging.ALIGN == 0
        view = staging.StagingView(area.fd).views({0: out[0]}, size)[0]
        assert np.all(view[:GUARD_BYTES] == SENTINEL_BYTE) and np.all(view[GUARD_BYTES + big.nbytes:] == SENTINEL_BYTE)
        assert view.size % mmap.PAGESIZE == 0 and view.size >= big.nbytes + 2 * GUARD_BYTES
        assert np.array_equal(view[GUARD_BYTES:GUARD_BYTES + big.nbytes].view(np.float32), big)
    finally:
        area.close()


def test_staged_arguments_give_the_same_results_and_guard_checks(emu):
    n = 50000
    w = np.linspace(-2, 2, n, dtype=np.float32)
    mod = emu.load(SRC)
    for _ in range(2):                 # the shared file is reused by the next launch
        y = np.zeros(n, np.float32)
        mod.launch("scale_rows", ((n + 255) // 256,), (256,), 0, [w, y, np.int32(n)], outputs=(1,))
        assert np.array_equal(y, 3 * w)
    with pytest.raises(OutOfBounds, match=r"write to 'w' \(arg 0, 50000 x float32\) 1 byte\(s\) past its end"):
        mod.launch("poke_const", ((n + 255) // 256,), (256,), 0, [w, np.zeros(n, np.float32), np.int32(n)],
                   outputs=(1,))
    assert np.array_equal(w, np.linspace(-2, 2, n, dtype=np.float32))    # the caller's array is untouched


def test_a_wild_write_near_a_staged_argument_hits_its_guard_pages(emu):
    """Large const inputs live in the shared file, each in its own pages with inaccessible gaps around them."""
    n = 50000
    src = SRC + r"""
__global__ void poke_before(const float* w, float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i < n) y[i] = w[i];
  if(i == 0) ((float*)w)[-2000] = 1.0f; }
"""
    w = np.linspace(-2, 2, n, dtype=np.float32)
    with pytest.raises(OutOfBounds, match=r"write to 'w' \(arg 0, 50000 x float32\) 8000 byte\(s\) before its start "
                                          r"\(element -2000\).*inaccessible guard pages"):
        emu.load(src).launch("poke_before", ((n + 255) // 256,), (256,), 0, [w, np.zeros(n, np.float32), np.int32(n)],
                             outputs=(1,))
    y = np.zeros(n, np.float32)        # the next launch runs in a new worker
    emu.load(SRC).launch("scale_rows", ((n + 255) // 256,), (256,), 0, [w, y, np.int32(n)], outputs=(1,))
    assert np.array_equal(y, 3 * w)
