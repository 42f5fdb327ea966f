"""Surfaces in GPUVerify's files (GPUVerifyBenchmarks' volumeFiltering and bindlessTexture samples): each surface
a store in global memory that the race detector watches (ci/race_suites/surfaces.py). Distinct texels do not race,
two threads storing one texel do (the negative control), a load reads what a store left, a store grows as a launch
reaches further, and texture objects read seeded texels as texture references do."""
from __future__ import annotations

import numpy as np
import pytest

from ci.race_suites.surfaces import SIZES, STORES, surface_stores
from harness.backends.base import KernelFault, OutOfBounds, Struct

HEAD = "//pass\n//--blockDim=[8,8] --gridDim=[2,2]\n\n"
REFERENCE = "surface<void, 2> image;\nsurface<void, cudaSurfaceType2DLayered> stack;\n"
OWN = HEAD + REFERENCE + r"""
__global__ void own(float* out) {
  unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  surf2Dwrite(make_float4(x, y, 0, 1), image, x * sizeof(float4), y);
  surf2DLayeredwrite((float)x, stack, x * sizeof(float), y, 3);
  out[y * 16 + x] = (float)x;
}
"""
# the negative control: every thread of a row stores its own value to the row's first texel
SHARED_TEXEL = HEAD + REFERENCE + r"""
__global__ void own(float* out) {
  unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  surf2Dwrite(make_float4(x, y, 0, 1), image, 0, y);
  out[y * 16 + x] = (float)x;
}
"""
# surface objects (the host creates them): one parameter written, a texture object read
OBJECTS = "//pass\n//--blockDim=[16,16] --gridDim=[2,2]\n\n" + r"""
__global__ void mip(cudaSurfaceObject_t output, cudaTextureObject_t input, unsigned width) {
  unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  float4 c = tex2D<float4>(input, x * 0.5f, y * 0.5f) + tex2DLod<float4>(input, x, y, 1.0f);
  surf2Dwrite(make_uchar4(c.x, c.y, c.z, c.w), output, x * sizeof(uchar4), y);
}
"""
# a 3D surface reached at z up to 96 by a 2-block grid: the store's first megabyte does not hold it, so it grows
DEEP = "//pass\n//--blockDim=[4,4,4] --gridDim=[1,1,2]\n\n" + r"""
surface<void, 3> volume;
__global__ void deep(int* out) {
  int x = threadIdx.x, y = threadIdx.y, z = (blockIdx.z * 4 + threadIdx.z) * 12;
  surf3Dwrite(x + y + z, volume, x * 4, y * 8, z);
  out[(blockIdx.z * 4 + threadIdx.z) * 16 + y * 4 + x] = z;
}
"""
CASES = {"own": OWN, "shared_texel": SHARED_TEXEL, "objects": OBJECTS, "deep": DEEP}


def test_distinct_texels_run_clean(verdicts):
    rec = verdicts["own"]
    assert rec["verdict"] == "clean", rec
    assert set(rec["surface_bytes"]) == {"image", "stack"}


def test_two_threads_storing_one_texel_race(verdicts):
    rec = verdicts["shared_texel"]
    detail = rec["kernels"]["own"]["detail"]
    assert rec["verdict"] == "race" and rec["data_race"], rec
    # the report names the surface's store and the file's own line of the store
    assert "surface:image" in detail and "at line 9" in detail, detail
    # the store's byte, read back as the texel the calls name: row y's first texel
    texel = rec["kernels"]["own"]["surface_texels"][0]
    assert texel.startswith("image byte ") and ": x 0 bytes, y " in texel, texel
    assert 0 <= int(texel.split(", y ")[1]) < 16


def test_a_stores_byte_reads_back_as_the_texel_placed_there():
    from ci.race_suites.surfaces import texel_of
    def place(x_bytes, c1, c2, ways):       # the definitions' placement, in Python
        def spread(v):
            return sum(((v >> b) & 1) << (b * ways) for b in range(64 // ways + 1) if b * ways < 64)
        return (spread(x_bytes >> 4) | spread(c1) << 1 | spread(c2) << 2) * 16 + (x_bytes & 15)
    for ways, coords in ((1, (4000, 0, 0)), (2, (172, 10, 0)), (3, (4000, 62, 7)), (3, (0, 0, 1 << 20))):
        assert texel_of(place(*coords, ways), ways) == coords[:ways]


def test_surface_and_texture_objects_run(verdicts):
    rec = verdicts["objects"]
    assert rec["verdict"] == "clean", rec
    assert list(rec["surface_bytes"]) == ["output"]


def test_a_store_grows_to_what_the_launch_reaches(verdicts):
    rec = verdicts["deep"]
    assert rec["verdict"] == "clean", rec
    assert rec["surface_bytes"]["volume"] > 1 << 20


def test_a_load_reads_what_a_store_left(emu):
    code, names = surface_stores(r"""
surface<void, 3> cube;
__global__ void roundtrip(float* out, int* back) {
  int i = threadIdx.x;
  surf3Dwrite<float>(i, cube, i * 4, 2 * i, 7 - i % 8);
  surf3Dwrite((float)i + 0.5f, cube, i * 4, 2 * i, 7 - i % 8);
  float v;
  surf3Dread(&v, cube, i * 4, 2 * i, 7 - i % 8);
  out[i] = v + surf3Dread<float>(cube, i * 4, 2 * i, 7 - i % 8);
  back[i] = surf3Dread<int>(cube, 64, 0, 0);
}
""", "roundtrip.cu")
    assert names == {"cube": 3}
    module = emu.load(code, name="roundtrip.cu")
    store = module.alloc("surface:cube", (1 << 22,), np.uint8, np.zeros(1 << 22, np.uint8))
    module.set_symbol(STORES, Struct(np.void(bytes(8)), ((0, store),)))
    module.set_symbol(SIZES, np.array([1 << 22], np.uint64))
    out, back = np.zeros(32, np.float32), np.ones(32, np.int32)
    module.launch("roundtrip", (1, 1, 1), (32, 1, 1), 0, [out, back], outputs=(0, 1))
    np.testing.assert_array_equal(out, 2 * (np.arange(32) + 0.5))
    np.testing.assert_array_equal(back, 0)        # a texel no store reached: as the store was filled
    # a store smaller than the texels reached (y = 62 interleaves to bit 17 of the cell: 2 MiB in): the access past
    # its end is an OutOfBounds naming it, never an access of whatever memory lies there
    module.set_symbol(SIZES, np.array([1 << 20], np.uint64))
    small = module.alloc("surface:cube", (1 << 20,), np.uint8, np.zeros(1 << 20, np.uint8))
    module.set_symbol(STORES, Struct(np.void(bytes(8)), ((0, small),)))
    with pytest.raises(OutOfBounds, match=r"'surface:cube \(through __device__ variable \w+\)' \(resident buffer "
                                          r"'surface:cube' \(1048576 uint8\), 1048576 x uint8\) \d+ byte\(s\) past its end"):
        module.launch("roundtrip", (1, 1, 1), (32, 1, 1), 0, [out, back], outputs=(0, 1))


def test_misaligned_offsets_and_unreadable_calls():
    with pytest.raises(ValueError, match=r"line 2: surf2Dwrite with 2 argument"):
        surface_stores("surface<void, 2> s;\n__global__ void k() { surf2Dwrite(1.0f, s); }", "k.cu")
    code, names = surface_stores("__global__ void k() { int surf2Dwrite = 0; }", "k.cu")
    assert names == {} and "surf2Dwrite = 0" in code        # a name that is not a call stays


def test_a_misaligned_byte_offset_is_the_kernels_fault(emu):
    code, _ = surface_stores("surface<void, 1> line;\n__global__ void k(int* out, int shift, int z) {\n"
                             "  surf1Dwrite(1, line, threadIdx.x * 4 + shift);\n"
                             "  if (threadIdx.x == 0) surf3Dwrite(1, line, 0, 0, z);\n  out[threadIdx.x] = 1;\n}\n", "k.cu")
    module = emu.load(code, name="misaligned.cu")
    store = module.alloc("surface:line", (4096,), np.uint8, np.zeros(4096, np.uint8))
    module.set_symbol(STORES, Struct(np.void(bytes(8)), ((0, store),)))
    module.set_symbol(SIZES, np.array([4096], np.uint64))
    out = np.zeros(4, np.int32)
    module.launch("k", (1, 1, 1), (4, 1, 1), 0, [out, np.int32(0), np.int32(0)], outputs=(0,))    # the control
    assert list(out) == [1, 1, 1, 1]
    with pytest.raises(KernelFault, match="trap"):           # a 4-byte texel at byte 2
        module.launch("k", (1, 1, 1), (4, 1, 1), 0, [out, np.int32(2), np.int32(0)], outputs=(0,))
    with pytest.raises(KernelFault, match="trap"):           # z past the 2^21 texels the interleaving keeps apart
        module.launch("k", (1, 1, 1), (4, 1, 1), 0, [out, np.int32(0), np.int32(1 << 21)], outputs=(0,))


def test_an_access_far_past_the_store_is_its_out_of_bounds(emu):
    """x = 4000 bytes is cell 250, whose Morton number puts it 38 MB into the store, far beyond the guard pages of
    a 1 MiB store: checked against the store's size, the access becomes a store into those guard pages, so the
    launch is an OutOfBounds that names the surface and how far it reached (about 516 KiB, the check's cap), never
    a read of whatever memory lies there."""
    code, _ = surface_stores("surface<void, 3> cube;\n__global__ void far(int* back) {\n"
                             "  back[threadIdx.x] = surf3Dread<int>(cube, 4000, 0, 0);\n}\n", "far.cu")
    module = emu.load(code, name="far.cu")
    store = module.alloc("surface:cube", (1 << 20,), np.uint8, np.zeros(1 << 20, np.uint8))
    module.set_symbol(STORES, Struct(np.void(bytes(8)), ((0, store),)))
    module.set_symbol(SIZES, np.array([1 << 20], np.uint64))
    with pytest.raises(OutOfBounds, match=r"write to 'surface:cube \(through __device__ variable \w+\)' .*1048576 x "
                                          r"uint8\) 528385 byte\(s\) past its end"):
        module.launch("far", (1, 1, 1), (1, 1, 1), 0, [np.zeros(1, np.int32)], outputs=(0,))


def test_a_load_inside_a_stores_arguments_is_rewritten_too(emu):
    code, names = surface_stores("surface<void, 2> s;\n__global__ void bump(float* out) {\n"
                                 "  int x = threadIdx.x;\n"
                                 "  surf2Dwrite(surf2Dread<float>(s, x * 4, 1) + 1.0f, s, x * 4, 1);\n"
                                 "  out[x] = surf2Dread<float>(s, x * 4, 1);\n}\n", "bump.cu")
    assert names == {"s": 2} and "surf2Dread" not in code.split('#line 1 "bump.cu"\n', 1)[1]
    module = emu.load(code, name="bump.cu")
    store = module.alloc("surface:s", (1 << 16,), np.uint8, np.zeros(1 << 16, np.uint8))
    module.set_symbol(STORES, Struct(np.void(bytes(8)), ((0, store),)))
    module.set_symbol(SIZES, np.array([1 << 16], np.uint64))
    out = np.zeros(8, np.float32)
    module.launch("bump", (1, 1, 1), (8, 1, 1), 0, [out], outputs=(0,))
    assert list(out) == [1.0] * 8
