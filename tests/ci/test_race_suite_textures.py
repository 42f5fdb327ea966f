"""Texture references in GPUVerify's files (GPUVerifyBenchmarks: NVIDIA's imaging samples, AES, DG): CUDA 12
removed them, so the adapter puts a seeded read-only texture in their place (ci/race_suites/textures.py). A
texel reads the same every time, a fetch cannot race, and a race on what a kernel does with fetched values is
still found."""
from __future__ import annotations

import numpy as np
import pytest

from ci.race_suites.textures import PREFIX, seeded_textures


HEAD = "//pass\n//--blockDim=64 --gridDim=2\n\n"
DECLS = ("static texture<float, 2, cudaReadModeElementType> image;\n"
         "texture<uchar4, cudaTextureType2D, cudaReadModeNormalizedFloat> rgba;\n"
         "texture<unsigned, 1, cudaReadModeElementType> keyA, keyB;\n")
COPY = HEAD + DECLS + r"""
__device__ float brightness(texture<uchar4, 2, cudaReadModeNormalizedFloat> t, float x, float y) {
  float4 c = tex2D(t, x, y);
  return c.x + c.y + c.z + c.w;
}
__global__ void copy(float* out, unsigned* keys) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = tex2D(image, (float)threadIdx.x + 0.5f, (float)blockIdx.x) + brightness(rgba, 1.0f, 2.0f);
  keys[i] = tex1Dfetch(keyA, (int)i) ^ tex1Dfetch(keyB, (int)i);
}
"""
# the negative control: every thread stores its own texel's value to one slot
RACY = HEAD + DECLS + r"""
__global__ void copy(float* out) {
  out[0] = tex2D(image, (float)threadIdx.x, (float)blockIdx.x);
}
"""
CASES = {"copy": COPY, "racy": RACY}


def test_a_kernel_reading_texture_references_runs_clean(verdicts):
    rec = verdicts["copy"]
    assert rec["verdict"] == "clean", rec
    assert rec["seeded_textures"] == ["image", "rgba", "keyA", "keyB"]


def test_a_race_on_fetched_values_is_still_found(verdicts):
    rec = verdicts["racy"]
    assert rec["verdict"] == "race" and rec["data_race"] and "'out'" in rec["kernels"]["copy"]["detail"], rec
    assert rec["same_value"] is False          # the texels differ: not a benign same-value store


def test_a_texel_reads_the_same_each_time_and_values_are_as_the_buffers_hold(emu):
    code, names = seeded_textures(r"""
texture<int, 1, cudaReadModeElementType> ints;
texture<float, 2> floats;
texture<unsigned char, 2, cudaReadModeNormalizedFloat> bytes;
__global__ void read(int* a, int* b, float* f, float* g, float* n) {
  int i = threadIdx.x;
  a[i] = tex1Dfetch(ints, i % 8);
  b[i] = tex1Dfetch(ints, i % 8);
  f[i] = tex2D(floats, (float)(i % 8), 0.0f);
  g[i] = tex2D(floats, (float)(i % 8) + 0.5f, 0.0f);
  n[i] = tex2D(bytes, (float)i, 1.0f);
}
""", seed=7, filename="kernel.cu")
    assert names == ["ints", "floats", "bytes"]
    module = emu.load(code)
    a, b = np.zeros(64, np.int32), np.zeros(64, np.int32)
    f, g, n = (np.zeros(64, np.float32) for _ in range(3))
    module.launch("read", (1,), (64,), 0, [a, b, f, g, n], [0, 1, 2, 3, 4])
    assert (a == b).all() and (a == np.tile(a[:8], 8)).all()          # the same texel, the same value
    assert len(set(a[:8])) > 1 and ((0 <= a) & (a < 64)).all()
    assert (f == np.tile(f[:8], 8)).all() and ((0 <= f) & (f < 1)).all()
    assert (f != g).any()           # a float coordinate counts in 1/256 of a texel: filtering may change the value
    assert ((0 <= n) & (n < 1)).all() and len(set(n)) > 32             # normalized floats, one per coordinate


def test_texture_objects_read_seeded_texels_per_object(emu):
    """A fetch from a texture object (bindlessTexture, whose host code made the objects) reads the seeded texel of
    its coordinates and its handle: the same twice, another for another object."""
    code, names = seeded_textures(r"""
__global__ void read(cudaTextureObject_t a, cudaTextureObject_t b, float4* x, float4* y, float4* z) {
  int i = threadIdx.x;
  x[i] = tex2D<float4>(a, (float)i, 0.5f);
  y[i] = tex2D<float4>(a, (float)i, 0.5f);
  z[i] = tex2D<float4>(b, (float)i, 0.5f);
}
""", 3, "objects.cu")
    assert names == []
    x, y, z = (np.zeros(4 * 8, np.float32) for _ in range(3))
    emu.load(code).launch("read", (1,), (8,), 0, [np.uint64(1), np.uint64(2), x, y, z], [2, 3, 4])
    assert np.array_equal(x, y) and not np.array_equal(x, z)
    assert ((x >= 0) & (x < 1)).all() and len(set(x.tolist())) > 16


def test_the_seed_chooses_the_texels(emu):
    src = "texture<float, 1> t;\n__global__ void read(float* out) { out[threadIdx.x] = tex1D(t, (float)threadIdx.x); }\n"
    got = []
    for seed in (1, 2, 1):
        out = np.zeros(32, np.float32)
        emu.load(seeded_textures(src, seed, "kernel.cu")[0]).launch("read", (1,), (32,), 0, [out], [0])
        got.append(out)
    assert (got[0] == got[2]).all() and (got[0] != got[1]).any()


def test_only_references_and_cudas_own_fetches_are_rewritten():
    src = ("#include \"common.h\"\ntexture<float, 2> tex;\n"
           "__device__ float tex2DBilinear(const texture<float, 2> t, float x, float y) { return tex2D(t, x, y); }\n"
           "__global__ void k(float* o, cudaTextureObject_t obj) { o[0] = tex2DBilinear(tex, 0, 0) + tex2D<float>(obj, 0, 0); }\n")
    code, names = seeded_textures(src, 0, "kernel.cu")
    body = code.split('#line 1 "kernel.cu"\n', 1)[1]
    assert names == ["tex"] and body.count("\n") == src.count("\n")         # line numbers kept
    assert f"__device__ {PREFIX}texture_0 tex;" in body
    assert f"tex2DBilinear(const {PREFIX}texture<float, 2> t" in body and f"return {PREFIX}fetch(t, x, y)" in body
    assert f"{PREFIX}fetch_object<float>(obj, 0, 0)" in body      # a texture object's fetch: a seeded texel too
    gather = "__global__ void k(float4* o, cudaTextureObject_t obj) { o[0] = tex2Dgather<float4>(obj, 0, 0); }\n"
    assert seeded_textures(gather, 0, "kernel.cu") == (gather, [])      # four texels' components: left to emu
    assert seeded_textures("__global__ void k(float* o) { o[0] = 1; }\n", 0, "kernel.cu") == \
        ("__global__ void k(float* o) { o[0] = 1; }\n", [])


def test_a_reference_without_its_closing_bracket_is_an_error():
    with pytest.raises(ValueError, match="line 2: `texture<` has no closing `>`"):
        seeded_textures("\ntexture<float, 2 tex;\n", 0, "kernel.cu")
