"""Resident buffers on the emu backend (Module.alloc / write / read / free and Buffers as launch arguments):
data stays in the worker between launches, and every check of a plain array argument applies to them."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import (POISON_BYTES, Buffer, BufferLost, DataRace, KernelTimeout, OutOfBounds,
                                   UnwrittenOutput)

SRC = r"""
__global__ void twice(const float* x, float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i < n) y[i] = 2.0f*x[i]; }
__global__ void add_into(const float* a, float* acc, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i < n) acc[i] += a[i]; }
__global__ void write_row(const float* row, float* cache, int pos, int width){
  int i = threadIdx.x; if(i < width) cache[pos*width + i] = row[i]; }
__global__ void half_written(float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i < n/2) y[i] = 1.0f; }
__global__ void one_past(float* y, int n){
  int i = blockIdx.x*blockDim.x + threadIdx.x; if(i <= n) y[i] = 1.0f; }
__global__ void racy(float* y){
  __shared__ float s; s = (float)threadIdx.x; __syncthreads(); if(threadIdx.x == 0) y[0] = s; }
__global__ void spin(float* y){ while(y[0] == 0.0f) {} }
"""


@pytest.fixture()
def mod(load):
    return load(SRC)


def test_alloc_write_read_free(mod):
    assert mod.supports_resident_buffers
    x = np.arange(10, dtype=np.float32)
    b = mod.alloc("x", (10,), np.float32, init=x)
    assert isinstance(b, Buffer) and b.shape == (10,) and b.dtype == np.float32 and b.name == "x"
    got = mod.read(b)
    assert np.array_equal(got, x)
    got[0] = 99.0                              # read returns a copy
    assert mod.read(b)[0] == 0.0
    mod.write(b, x[::-1].copy())
    assert np.array_equal(mod.read(b), x[::-1])
    poisoned = mod.alloc("p", 4, np.int32)
    assert np.all(mod.read(poisoned).view(np.uint8) == POISON_BYTES[0])
    mod.free(b)
    with pytest.raises(ValueError, match=r"buf: buffer 'x' \(10 float32\) is not a live resident buffer of this module"):
        mod.read(b)
    with pytest.raises(ValueError, match="was freed"):
        mod.free(b)


def test_bad_requests_name_the_argument(mod):
    with pytest.raises(ValueError, match=r"init: buffer 'x' \(4 float32\) takes a \(4,\) float32 array, got \(5,\) float32"):
        mod.alloc("x", (4,), np.float32, init=np.zeros(5, np.float32))
    with pytest.raises(ValueError, match=r"init: .* got \(4,\) float64"):
        mod.alloc("x", (4,), np.float32, init=np.zeros(4))
    with pytest.raises(ValueError, match=r"shape: buffer 'x' needs .* positive sizes"):
        mod.alloc("x", (0,), np.float32)
    with pytest.raises(ValueError, match=r"name: a buffer needs a non-empty string name"):
        mod.alloc("", (4,), np.float32)
    b = mod.alloc("y", (4,), np.float32)
    with pytest.raises(ValueError, match=r"array: buffer 'y' \(4 float32\) takes a \(4,\) float32 array, got \(2, 2\)"):
        mod.write(b, np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"args\[1\] \(y: float\*\): the kernel takes float\*, so buffer 'i' "
                                         r"\(4 int32\) must have dtype float32, got int32"):
        mod.launch("twice", (1,), (32,), 0, [np.zeros(4, np.float32), mod.alloc("i", 4, np.int32), np.int32(4)])
    with pytest.raises(ValueError, match=r"args\[0\] and args\[1\] are the same resident buffer 'y'"):
        mod.launch("twice", (1,), (32,), 0, [b, b, np.int32(4)])


def test_a_chain_of_launches_passes_data_in_place(mod):
    n = 300
    x = np.linspace(-1, 1, n, dtype=np.float32)
    bx = mod.alloc("x", n, np.float32, init=x)
    by = mod.alloc("y", n, np.float32)
    mod.launch("twice", (3,), (128,), 0, [bx, by, np.int32(n)], outputs=(1,))
    mod.launch("add_into", (3,), (128,), 0, [bx, by, np.int32(n)])      # in/out: keeps and updates contents
    assert np.array_equal(mod.read(by), 3 * x)
    assert np.array_equal(mod.read(bx), x)                             # a const input is untouched


def test_partial_write_keeps_the_other_rows(mod):
    width, rows = 8, 5
    cache = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
    bc = mod.alloc("kc", cache.shape, np.float32, init=cache)
    row = np.full(width, -1.0, np.float32)
    mod.launch("write_row", (1,), (32,), 0, [row, bc, np.int32(3), np.int32(width)])
    want = cache.copy()
    want[3] = -1.0
    assert np.array_equal(mod.read(bc), want)


def test_an_output_buffer_must_be_written_in_full(mod):
    by = mod.alloc("y", 64, np.float32, init=np.zeros(64, np.float32))
    with pytest.raises(UnwrittenOutput, match=r"32 of 64 elements of output 'y' were not written"):
        mod.launch("half_written", (1,), (64,), 0, [by, np.int32(64)], outputs=(0,))
    # without the output flag the same launch is a legal partial write of an in/out buffer
    mod.write(by, np.zeros(64, np.float32))
    mod.launch("half_written", (1,), (64,), 0, [by, np.int32(64)])
    assert np.array_equal(mod.read(by), np.r_[np.ones(32), np.zeros(32)].astype(np.float32))


def test_guard_bands_and_races_apply_to_buffers(mod):
    by = mod.alloc("y", 64, np.float32, init=np.zeros(64, np.float32))
    with pytest.raises(OutOfBounds, match=r"write to 'y' \(arg 0, 64 x float32, resident buffer 'y' \(64 float32\)\) "
                                          r"1 byte\(s\) past its end"):
        mod.launch("one_past", (1,), (128,), 0, [by, np.int32(64)])
    with pytest.raises(DataRace, match=r"__shared__ 's' .*write by .*thread \(0,0,0\).* and write by .*thread \(1,0,0\)"):
        mod.launch("racy", (1,), (64,), 0, [by])


def test_buffers_are_lost_with_the_worker(emu):
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(timeout_s=2, schedules=1)
    try:
        mod = be.load(SRC)
        b = mod.alloc("y", 4, np.float32, init=np.zeros(4, np.float32))
        with pytest.raises(KernelTimeout):
            mod.launch("spin", (1,), (1,), 0, [b])
        with pytest.raises(BufferLost, match=r"buf: resident buffer 'y' \(4 float32\) was lost: the emu worker"):
            mod.read(b)
        mod.free(b)                        # a lost buffer can still be freed (nothing to release)
        with pytest.raises(ValueError, match="was freed"):
            mod.read(b)
        fresh = mod.alloc("y", 4, np.float32, init=np.ones(4, np.float32))
        assert np.array_equal(mod.read(fresh), np.ones(4, np.float32))
    finally:
        be.close()


REACHED = r"""
struct Rows { int n; float* row; };
__device__ float* table;
__global__ void past_table(int at){ if(threadIdx.x == 0) table[at] = 1.0f; }
__global__ void past_row(Rows r, int at){ if(threadIdx.x == 0) r.row[at] = 1.0f; }
__global__ void bump_table(float* out){ int i = threadIdx.x; table[i] += 1.0f; out[i] = table[i]; }
"""


def test_a_resident_buffer_reached_through_a_pointer_is_guarded(load):
    """A buffer reached through a __device__ pointer or a by-value struct's field, not passed itself, has its guard
    bands checked and its guard pages named as an argument's: an overrun is an OutOfBounds naming it (it went
    unseen, or was a crash near another buffer, when only arguments were checked)."""
    from harness.backends.base import Struct
    mod = load(REACHED)
    table = mod.alloc("t", 64, np.float32, init=np.zeros(64, np.float32))
    mod.set_symbol("table", table)
    mod.launch("past_table", (1,), (32,), 0, [np.int32(63)])               # the last element: no fault
    with pytest.raises(OutOfBounds, match=r"write to 't \(through __device__ variable table\)' \(resident buffer 't' "
                                          r"\(64 float32\), 64 x float32\) 5 byte\(s\) past its end \(element 65 of 64\)"):
        mod.launch("past_table", (1,), (32,), 0, [np.int32(65)])         # the sentinel band after it
    mod.launch("past_table", (1,), (32,), 0, [np.int32(0)])                # the band was set again: no stale fault
    row = mod.alloc("row", 16, np.float32, init=np.zeros(16, np.float32))
    value = np.zeros((), np.dtype({"names": ["n", "row"], "formats": [np.int32, np.uint64], "offsets": [0, 8],
                                   "itemsize": 16}))[()]
    with pytest.raises(OutOfBounds, match=r"write to 'row \(through r\)' \(resident buffer 'row' \(16 float32\), 16 x "
                                          r"float32\) \d+ byte\(s\) past its end .*guard pages"):
        mod.launch("past_row", (1,), (32,), 0, [Struct(value, ((8, row),)), np.int32(100_000)])


def test_a_reached_buffer_starts_every_schedule_from_its_contents(load):
    """A kernel that updates a buffer reached through a pointer (`table[i] += 1`) reads the same in every schedule's
    run, so the schedules agree; afterwards the buffer holds what one run left (each run added 1 to the same
    contents before the fix, and the runs' outputs differed: an UninitializedRead)."""
    mod = load(REACHED)
    table = mod.alloc("t", 64, np.float32, init=np.arange(64, dtype=np.float32))
    mod.set_symbol("table", table)
    out = np.zeros(64, np.float32)
    mod.launch("bump_table", (1,), (64,), 0, [out], outputs=(0,))
    assert np.array_equal(out, np.arange(64) + 1.0)
    assert np.array_equal(mod.read(table), np.arange(64) + 1.0)
    mod.launch("bump_table", (1,), (64,), 0, [out], outputs=(0,))      # the next launch starts from there
    assert np.array_equal(mod.read(table), np.arange(64) + 2.0)
