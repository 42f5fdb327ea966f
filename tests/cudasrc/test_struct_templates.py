"""Structs passed by value that are instances of templates (`Param<float>`: arrayfire's tensors) or classes with
constructors: cudasrc.structs lays out their data members as the host compiler does, and refuses what it cannot
lay out (a vtable, a field attribute it does not read) rather than skip it."""
from __future__ import annotations

import re
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


# Expression templates (mshadow's plans): the layout lives in partial specializations, not the primary template.
SPECIALIZED = """typedef unsigned index_t;
namespace mshadow {
struct gpu {};
template <typename Device, int dim, typename DType> struct Tensor { DType *dptr_; index_t shape_[dim]; };
namespace expr {
template <typename ExpType, typename DType> class Plan { public: __device__ DType Eval(index_t y) const; };
template <typename Device, int dim, typename DType>
class Plan<Tensor<Device, dim, DType>, DType> {
 public:
  explicit Plan(const Tensor<Device, dim, DType> &t) : dptr_(t.dptr_), stride_(0) {}
 private:
  DType *dptr_;
  index_t stride_;
};
template <typename Device, typename DType>
class Plan<Tensor<Device, 1, DType>, DType> {
 private:
  DType *dptr_;
};
template <typename DType> class Plan<DType *, DType> { DType *p; int n; };
template <> class Plan<char, char> { short a; char b; };
template <typename T> struct Declared;
template <typename T> struct Declared<T *> { T *p; double w; };
template <typename A, typename B> struct Pair { char c; };
template <typename A> struct Pair<A, int> { A a; int i; };
template <typename B> struct Pair<int, B> { B b; char k; };
}}
"""


@pytest.mark.parametrize("name, fields, size", [
    # the two-dimensional plan: a pointer and a stride (the primary has no data members at all)
    ("mshadow::expr::Plan<mshadow::Tensor<mshadow::gpu, 2, float>, float>",
     [("dptr_", 0, True, "float"), ("stride_", 8, False, "uint32")], 16),
    # the one-dimensional plan is more specialized than the two-dimensional pattern, which fits it too
    ("Plan<Tensor<gpu, 1, double>, double>", [("dptr_", 0, True, "double")], 8),
    ("Plan<unsigned int *, unsigned int>", [("p", 0, True, "unsigned int"), ("n", 8, False, "int32")], 16),
    ("Plan<char, char>", [("a", 0, False, "int16"), ("b", 2, False, "int8")], 4),     # an explicit specialization
    ("Declared<float *>", [("p", 0, True, "float"), ("w", 8, False, "float64")], 16),
    ("Pair<double, int>", [("a", 0, False, "float64"), ("i", 8, False, "int32")], 16),
    ("Pair<float, float>", [("c", 0, False, "int8")], 1),                       # no specialization fits
])
def test_partial_specializations_are_chosen_as_the_compiler_chooses(name, fields, size):
    layout = struct_layout(SPECIALIZED, name)
    got = [(f.path, f.offset, f.pointer, f.ctype if f.pointer else str(f.dtype)) for f in layout.fields]
    assert got == fields and layout.size == size


@pytest.mark.parametrize("name, message", [
    ("Pair<int, int>", "more than one specialization of Pair fits"),           # the compiler rejects it too
    ("Declared<float>", "no definition of Declared for these arguments"),
    ("Plan<float>", "1 template argument(s) for Plan's 2 (ExpType, DType)"),
])
def test_an_instance_no_single_definition_fits_is_named(name, message):
    with pytest.raises(LookupError, match=re.escape(message)):
        struct_layout(SPECIALIZED, name)


def test_specialized_layouts_agree_with_the_host_compiler(tmp_path):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("no g++ to compare the layouts with")
    names = ("Plan<Tensor<gpu, 2, float>, float>", "Plan<Tensor<gpu, 1, double>, double>",
             "Plan<unsigned int *, unsigned int>", "Plan<char, char>", "Declared<float *>", "Pair<double, int>",
             "Pair<float, float>")
    checks = ["namespace mshadow { namespace expr { struct Probe {"]
    for k, name in enumerate(names):
        layout = struct_layout(SPECIALIZED, name)
        checks.append(f"typedef {name} T{k};")
        checks += [f"static_assert(__builtin_offsetof(T{k}, {f.path}) == {f.offset}, \"{name} {f.path}\");"
                   for f in layout.fields]
        checks.append(f"static_assert(sizeof(T{k}) == {layout.size}, \"{name}\");")
    checks.append("};}}")
    src = tmp_path / "layout.cpp"
    src.write_text("#define __device__\n#define __host__\n"
                   + SPECIALIZED.replace("private:", "public:").replace("{ DType *p;", "{ public: DType *p;")
                   .replace("{ short a;", "{ public: short a;")
                   + "\n".join(checks) + "\n")
    r = subprocess.run([cxx, "-std=gnu++17", "-Wno-invalid-offsetof", "-fsyntax-only", str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_member_class_defined_outside_is_no_specialization():
    """`template <typename T> struct Outer<T>::Inner { T a; }` defines Outer's member class, not a specialization
    of Outer whose base clause is `:Inner`: Outer<int> keeps its own (empty) body."""
    code = ("template <typename T> struct Outer { struct Inner; T *p; };\n"
            "template <typename T> struct Outer<T>::Inner { T a; double b; };\n")
    layout = struct_layout(code, "Outer<int>")
    assert [(f.path, f.offset, f.pointer) for f in layout.fields] == [("p", 0, True)] and layout.size == 8
