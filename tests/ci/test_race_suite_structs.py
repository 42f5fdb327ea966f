"""Structs passed by value to the labelled suites' kernels (GPUVerify's `pointers_in_structs`): the layout read
from the source (cudasrc.structs) agrees with the host compiler's, and the adapter's argument (seeded fields, a
resident buffer behind each pointer) lets the detector see a race through a struct's pointer, and no race in the
race-free twin."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from cudasrc.structs import struct_layout

LAYOUTS = r"""
typedef struct { float x, y; } Pair;
struct Inner { short s; char c; };
struct Mixed {
  char tag;
  double scale;
  int taps[3], *out;
  struct { unsigned short u; int* p; } nested[2];
  struct Inner in;
  Pair pair;
  bool on;
};
"""


def test_layouts_agree_with_the_host_compiler(tmp_path):
    layout = struct_layout(LAYOUTS, "Mixed")
    fields = {f.path: f for f in layout.fields}
    assert [f.path for f in layout.fields] == ["tag", "scale", "taps", "out", "nested[0].u", "nested[0].p",
                                               "nested[1].u", "nested[1].p", "in.s", "in.c", "pair.x", "pair.y",
                                               "on"]
    assert fields["out"].pointer and fields["out"].ctype == "int" and fields["taps"].count == 3
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to compare the layout with")
    asserts = "".join(f"static_assert(offsetof(struct Mixed, {f.path}) == {f.offset}, \"{f.path}\");\n"
                      for f in layout.fields)
    src = tmp_path / "layout.cpp"
    src.write_text("#include <cstddef>\n" + LAYOUTS + asserts +
                   f"static_assert(sizeof(struct Mixed) == {layout.size}, \"size\");\n")
    r = subprocess.run([cxx, "-std=gnu++17", "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert layout.dtype.itemsize == layout.size == 88


VECTOR_FIELDS = r"""
typedef unsigned int uint;
typedef struct Ray { float3 origin; float2 dir; int length; uint steps; uchar4 color[2]; double2 w; short3 s; } Ray;
"""


def test_vector_and_typedef_fields_agree_with_cuda_alignment(tmp_path):
    """CUDA's vector types inside a struct (lineOfSight's `Ray`) with CUDA's alignments, compared with the host
    compiler on emu's device header (which declares them as CUDA does), and a typedef of a scalar (`uint`)."""
    from harness.backends.emu.toolchain import RUNTIME_DIR
    layout = struct_layout(VECTOR_FIELDS, "Ray")
    got = {f.path: (f.offset, f.ctype, f.count) for f in layout.fields}
    assert got == {"origin": (0, "float", 3), "dir": (16, "float", 2), "length": (24, "int", 1),
                   "steps": (28, "unsigned int", 1), "color": (32, "unsigned char", 8), "w": (48, "double", 2),
                   "s": (64, "short", 3)}
    assert layout.size == 80 and layout.align == 16
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to compare the layout with")
    asserts = "".join(f"static_assert(offsetof(Ray, {f.path}) == {f.offset}, \"{f.path}\");\n" for f in layout.fields)
    src = tmp_path / "vectors.cpp"
    src.write_text("#include <cstddef>\n" + VECTOR_FIELDS + asserts +
                   f"static_assert(sizeof(Ray) == {layout.size} && alignof(Ray) == {layout.align}, \"size\");\n")
    r = subprocess.run([cxx, "-std=gnu++17", "-fsyntax-only", f"-I{RUNTIME_DIR}", "-include", "emu_device.hpp",
                        str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("decl, rule", [
    ("struct U { union { int a; float b; } v; };", r"field 'union"),
    ("struct B { int flag : 1; };", r"bit fields"),
    ("struct P { int** pp; };", r"field 'pp' is a pointer to a pointer"),
    ("struct V { float5 v; };", r"struct float5: no definition"),
    ("struct H { int a[100000000]; };", r"struct H: larger than 32764 bytes at field 'int a\[100000000\]'"),
    ("struct R { struct Q q; }; struct Q { struct R r; };", r"nested more than 16 deep"),
])
def test_what_is_not_laid_out_is_named(decl, rule):
    with pytest.raises(LookupError, match=rule):
        struct_layout(decl, decl.split()[1])


STRUCT_KERNEL = r"""//pass
//--blockDim=32 --gridDim=2

struct S {
  int n;
  struct {
    int* p;
    int* q;
  } s;
};

__global__ void k(struct S A) {
  int i = threadIdx.x + blockDim.x * blockIdx.x;
  %s
}
"""


def test_a_race_through_a_struct_pointer_is_found_and_its_twin_is_clean(tmp_path):
    from ci.race_suites import gpuverify
    from harness.backends.emu.backend import EmuBackend
    root = tmp_path / "testsuite" / "CUDA"
    bodies = {"twin": "A.s.p[i] = A.s.q[i] + A.n;",
              "racy": "A.s.p[i %% 16] = A.s.q[i] + A.n;     // 64 threads, 16 slots"}
    for name, body in bodies.items():
        (root / name).mkdir(parents=True)
        (root / name / "kernel.cu").write_text(STRUCT_KERNEL % body.replace("%%", "%"))
    backend = EmuBackend(timeout_s=60, block_sampling="all")
    try:
        twin = gpuverify.score_file(backend, root / "twin" / "kernel.cu", root, 0)
        racy = gpuverify.score_file(backend, root / "racy" / "kernel.cu", root, 0)
    finally:
        backend.close()
    assert twin["verdict"] == "clean", json.dumps(twin)[:2000]
    assert racy["verdict"] == "race" and racy["fault"] == "DataRace", json.dumps(racy)[:2000]
    assert "A.s.p" in racy["kernels"]["k"]["detail"]


def test_a_sweep_refills_the_struct_buffers_instead_of_allocating_more():
    from ci.race_suites import gpuverify
    from harness.backends.emu.backend import EmuBackend
    code = STRUCT_KERNEL % "A.s.p[i] = A.s.q[i] + A.n;"
    header = gpuverify.read_header(code)
    backend = EmuBackend(timeout_s=60)
    try:
        module = backend.load(gpuverify.device_source(code))
        sig = next(s for s in gpuverify.kernel_signatures(code) if s.name == "k")
        rng, resident = np.random.default_rng(0), {}
        first, = gpuverify.make_args(sig, header, {}, rng, 64, module=module, code=code, resident=resident)
        p_before = module.read(first.pointers[0][1]).copy()
        second, = gpuverify.make_args(sig, header, {}, rng, 64, module=module, code=code, resident=resident)
        assert [b for _, b in first.pointers] == [b for _, b in second.pointers] and len(resident) == 2
        assert not np.array_equal(module.read(second.pointers[0][1]), p_before)     # new seeded values
        third, = gpuverify.make_args(sig, header, {}, rng, 64, module=module, code=code)      # no cache: new ones
        assert third.pointers[0][1] != first.pointers[0][1]
    finally:
        backend.close()


def test_cuda_vector_types_by_value_take_seeded_elements():
    from ci.race_suites import gpuverify
    rng = np.random.default_rng(0)
    for ctype, size, kind in (("uchar4", 4, "u"), ("float3", 12, "f"), ("double4_16a", 32, "f"), ("half2", 4, "f")):
        value = gpuverify.vector_value(ctype, rng)
        assert value.dtype.itemsize == size and value["v"].dtype.kind == kind, (ctype, value.dtype)


HEADER_BESIDE = "__device__ int twice(int v) {\n  return 2 * v;\n}\n"
WITH_HEADER = r"""//pass
//--blockDim=64 --gridDim=1

#include "helpers.h"
#include "helpers.h"
#include "missing_everywhere.h"

__global__ void k(int* y, uchar4 c) {
  y[threadIdx.x %% 2] = twice(c.x);
}
"""


def test_headers_beside_a_file_are_inlined_and_its_line_numbers_stay_true(tmp_path):
    from ci.race_suites import gpuverify
    from ci.race_suites.run import inline_includes
    from harness.backends.emu.backend import EmuBackend
    root = tmp_path / "testsuite" / "CUDA"
    (root / "beside").mkdir(parents=True)
    (root / "beside" / "helpers.h").write_text(HEADER_BESIDE)
    (root / "beside" / "kernel.cu").write_text((WITH_HEADER % ()).replace('#include "missing_everywhere.h"\n', "\n"))
    full = inline_includes(root / "beside" / "kernel.cu", required=False, line_markers=True)
    assert full.count("return 2 * v;") == 1 and '#line 1 "helpers.h"' in full and '#line 5 "kernel.cu"' in full
    with pytest.raises(FileNotFoundError, match="include 'missing_everywhere.h' not found"):
        (root / "beside" / "other.cu").write_text(WITH_HEADER % ())
        inline_includes(root / "beside" / "other.cu")
    assert '#include "missing_everywhere.h"' in inline_includes(root / "beside" / "other.cu", required=False)
    backend = EmuBackend(timeout_s=60)
    try:
        rec = gpuverify.score_file(backend, root / "beside" / "kernel.cu", root, 0)
    finally:
        backend.close()
    assert rec["verdict"] == "race", rec          # 64 threads store into 2 slots
    assert "at line 9 and write" in rec["kernels"]["k"]["detail"], rec["kernels"]["k"]["detail"]


def test_a_vector_type_by_value_and_default_member_initializers_are_laid_out():
    """llama.cpp passes `const uint3` fast-division constants by value, and its fusion struct gives each pointer
    `= nullptr`: a vector type is a struct of its components; an initializer moves nothing."""
    layout = struct_layout("", "uint3")
    assert [(f.path, f.offset, f.ctype) for f in layout.fields] == [("x", 0, "unsigned int"), ("y", 4, "unsigned int"),
                                                                   ("z", 8, "unsigned int")]
    assert (layout.size, layout.align) == (12, 4)
    assert struct_layout("", "float4").align == 16
    fused = struct_layout("struct args { const void * bias = nullptr; float scale{1.0f}; int taps[2] = {1, 2}; };",
                          "args")
    assert [(f.path, f.offset, f.count) for f in fused.fields] == [("bias", 0, 1), ("scale", 8, 1), ("taps", 12, 2)]
    assert fused.size == 24
