"""Structs passed by value that are instances of templates (`Param<float>`: arrayfire's tensors) or classes with
constructors: cudasrc.structs lays out their data members as the host compiler does, and refuses what it cannot
lay out (a vtable, a field attribute it does not read) rather than skip it."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from cudasrc.structs import struct_layout

CODE = """typedef long long dim_t;
namespace cuda {
template<typename T> struct Param { T *ptr; dim_t dims[4]; dim_t strides[4]; };
template<typename T>
class CParam {
public:
    const T *ptr;
    dim_t dims[4];
    dim_t strides[4];
    __device__ __host__ CParam(const T *iptr, const dim_t *idims) : ptr(iptr) {
        for (int i = 0; i < 4; i++) { dims[i] = idims[i]; }
    }
    __device__ __host__ ~CParam() {}
    __device__ T at(int i) const;
    static const int rank = 4;
    typedef T value_type;
};
template <typename T, int N> struct Small { T v[N]; char tag; };
// cuFHE's NTT handler: its twiddle pointers in a base class, defaults for every template argument
enum ConvKind { NEGATIVE_CYCLIC_CONVOLUTION };
template <ConvKind conv_kind = NEGATIVE_CYCLIC_CONVOLUTION>
class Twiddle {
public:
    __host__ __device__ Twiddle() { twd_ = nullptr; }
    void Create(unsigned size = 1024);
    double* twd_;
    double* twd_inv_;
};
struct Empty { __device__ void f() const {} };
template <unsigned length = 1024, ConvKind conv_kind = NEGATIVE_CYCLIC_CONVOLUTION>
class Handler: public Twiddle<conv_kind>, private Empty {
public:
    __host__ __device__ Handler() {}
private:
    static const unsigned kLength_ = length;
};
struct Counted : Twiddle<> { int n; };
}
"""


@pytest.mark.parametrize("name, fields, size", [
    ("Param<float>", [("ptr", 0, True), ("dims", 8, False), ("strides", 40, False)], 72),
    ("CParam<int>", [("ptr", 0, True), ("dims", 8, False), ("strides", 40, False)], 72),
    ("Small<double, 3>", [("v", 0, False), ("tag", 24, False)], 32),
    ("Small<char, 5>", [("v", 0, False), ("tag", 5, False)], 6),
    ("Handler<>", [("twd_", 0, True), ("twd_inv_", 8, True)], 16),           # the base's members, the empty one none
    ("Counted", [("twd_", 0, True), ("twd_inv_", 8, True), ("n", 16, False)], 24),
])
def test_a_template_instance_and_a_class_with_members_are_laid_out(name, fields, size):
    layout = struct_layout(CODE, name)
    assert [(f.path, f.offset, f.pointer) for f in layout.fields] == fields and layout.size == size
    assert layout.fields[0].ctype == {"Param<float>": "float", "CParam<int>": "int"}.get(name, layout.fields[0].ctype)


def test_the_layouts_agree_with_the_host_compiler(tmp_path):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to compare the layouts with")
    checks = []
    for k, name in enumerate(("Param<float>", "CParam<int>", "Small<double, 3>", "Small<char, 5>", "Handler<>",
                              "Counted")):
        layout = struct_layout(CODE, name)
        checks.append(f"typedef cuda::{name} T{k};")         # offsetof's arguments take no comma
        checks += [f"static_assert(offsetof(T{k}, {f.path}) == {f.offset}, \"{name} {f.path}\");"
                   for f in layout.fields]
        checks.append(f"static_assert(sizeof(T{k}) == {layout.size}, \"{name}\");")
    src = tmp_path / "layout.cpp"
    src.write_text("#include <cstddef>\n#define __device__\n#define __host__\n" + CODE + "\n".join(checks) + "\n")
    r = subprocess.run([cxx, "-std=gnu++17", "-Wno-invalid-offsetof", "-fsyntax-only", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("code, name, message", [
    ("struct V { virtual void f(); int x; };", "V", "a virtual function ('virtual void f()') puts a vtable pointer"),
    ("struct A { float4 __align__(16) q; };", "A", "cannot read field declarator"),       # not skipped silently
    (CODE, "Small<int>", "1 template argument(s) for Small's 2 (T, N)"),
    ("struct B { int x; }; struct V : virtual B { int y; };", "V", "virtual base class 'virtual B'"),
    # a base whose tail padding the derived class's members may take (the ABI lets them where B is not a POD)
    ("struct B { double d; char c; B() {} }; struct D : B { char e; };", "D", "base class B has tail padding"),
])
def test_what_cannot_be_laid_out_is_named(code, name, message):
    with pytest.raises(LookupError, match=message.replace("(", r"\(").replace(")", r"\)")):
        struct_layout(code, name)
