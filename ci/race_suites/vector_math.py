"""The vector arithmetic GPUVerify's front end gave CUDA's vector types, for files written against it.

GPUVerify compiled CUDA with clang, whose CUDA header declares `float3` and its kin as clang vector types
(`ext_vector_type`): `a - b`, `v * 2.0f`, `v += w` work element by element, and a scalar operand stands for a vector
of that value. NVIDIA's samples get the same from the SDK's `helper_math.h`, which also has `lerp`, `dot`,
`length`, `normalize`, `cross`, `clamp`, `make_float3(s)` and the like; GPUVerifyBenchmarks' copies of those samples
call them with no header at all. nvcc's vector types are plain structs without any of it, so such a file is not
device code a GPU build accepts. `with_vector_math` puts definitions of the same meaning before the file, written
here: the element-wise operators (only where the file defines no operator of its own), and each helper function the
file calls and does not declare itself (a file that declares one, to take its result as arbitrary, keeps that).
Each helper computes what the SDK's does (`lerp(a, b, t) = a + t * (b - a)`, `length(v) = sqrtf(dot(v, v))`,
`normalize(v) = v * rsqrtf(dot(v, v))`, ...). The definitions' own helpers and macros carry the adapters' prefix
(run.SYMBOL_PREFIX), so that they meet no name of the file."""
from __future__ import annotations

import re

from cudasrc.types import VECTOR_SCALARS

from .run import SYMBOL_PREFIX, with_definitions

# (the adapter's own names are written qc_/QC_ here and prefixed by _prefixed)
_TRAITS = "\n".join(f"QC_VECTORS({element}, {base})" for base, element in VECTOR_SCALARS.items())

# What every helper needs: which types are vectors, of what element and size; element access by index.
_BASE = r"""#include <type_traits>
template <class V> struct qc_vector { static constexpr int size = 0; };
#define QC_VECTOR(V, E, N) template <> struct qc_vector<V> { typedef E element; static constexpr int size = N; };
#define QC_VECTORS(E, P) QC_VECTOR(P##1, E, 1) QC_VECTOR(P##2, E, 2) QC_VECTOR(P##3, E, 3) QC_VECTOR(P##4, E, 4)
""" + _TRAITS + r"""
template <class V> using qc_if_vector = typename std::enable_if<(qc_vector<V>::size > 0), int>::type;
template <class V> using qc_element = typename qc_vector<V>::element;
// the components x, y, z, w lie in order (CUDA's vector types are standard-layout structs of them)
template <class V> __host__ __device__ inline qc_element<V>* qc_at(V& v) { return &v.x; }
template <class V> __host__ __device__ inline const qc_element<V>* qc_at(const V& v) { return &v.x; }
#define QC_EACH(V) for (int i = 0; i < qc_vector<V>::size; ++i)
"""

# Element-wise binary operators: vector op vector, vector op scalar, scalar op vector, and the compound forms.
_OPERATOR = r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V operator OP(V a, const V& b) {
  QC_EACH(V) qc_at(a)[i] = qc_at(a)[i] OP qc_at(b)[i];
  return a;
}
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V operator OP(V a, qc_element<V> s) {
  QC_EACH(V) qc_at(a)[i] = qc_at(a)[i] OP s;
  return a;
}
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V operator OP(qc_element<V> s, V a) {
  QC_EACH(V) qc_at(a)[i] = s OP qc_at(a)[i];
  return a;
}
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V& operator OP=(V& a, const V& b) { return a = a OP b; }
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V& operator OP=(V& a, qc_element<V> s) { return a = a OP s; }
"""
_OPERATORS = "".join(_OPERATOR.replace("OP", op) for op in "+-*/") + r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V operator-(V a) {
  QC_EACH(V) qc_at(a)[i] = -qc_at(a)[i];
  return a;
}
"""

# make_<prefix>N from one scalar (every component), and from another vector (components converted; missing ones
# 0, or the given last one): the SDK's overloads, for every element type.
_MAKE = r"""__host__ __device__ inline P##2 make_##P##2(E s) { return make_##P##2(s, s); }
__host__ __device__ inline P##3 make_##P##3(E s) { return make_##P##3(s, s, s); }
__host__ __device__ inline P##4 make_##P##4(E s) { return make_##P##4(s, s, s, s); }
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline P##2 make_##P##2(const V& v) {
  return make_##P##2(static_cast<E>(qc_at(v)[0]), qc_vector<V>::size > 1 ? static_cast<E>(qc_at(v)[1]) : static_cast<E>(0));
}
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline P##3 make_##P##3(const V& v, E z = 0) {
  return make_##P##3(static_cast<E>(qc_at(v)[0]), static_cast<E>(qc_at(v)[1]), qc_vector<V>::size > 2 ? static_cast<E>(qc_at(v)[2]) : z);
}
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline P##4 make_##P##4(const V& v, E w = 0) {
  return make_##P##4(static_cast<E>(qc_at(v)[0]), static_cast<E>(qc_at(v)[1]), static_cast<E>(qc_at(v)[2]), qc_vector<V>::size > 3 ? static_cast<E>(qc_at(v)[3]) : w);
}
"""
_MAKERS = "#define QC_MAKERS(E, P) " + _MAKE.strip().replace("\n", " \\\n") + "\n" + "\n".join(
    f"QC_MAKERS({element}, {base})" for base, element in VECTOR_SCALARS.items()) + "\n"

# The SDK's helper functions, each by the name a file calls it with (scalar forms where the SDK has them).
_HELPERS = {
    "lerp": r"""__host__ __device__ inline float lerp(float a, float b, float t) { return a + t * (b - a); }
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V lerp(V a, const V& b, qc_element<V> t) {
  QC_EACH(V) qc_at(a)[i] = qc_at(a)[i] + t * (qc_at(b)[i] - qc_at(a)[i]);
  return a;
}
""",
    "clamp": r"""__host__ __device__ inline float clamp(float f, float a, float b) { return fmaxf(a, fminf(f, b)); }
__host__ __device__ inline int clamp(int f, int a, int b) { return f < a ? a : f > b ? b : f; }
__host__ __device__ inline unsigned int clamp(unsigned int f, unsigned int a, unsigned int b) { return f < a ? a : f > b ? b : f; }
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V clamp(V v, qc_element<V> a, qc_element<V> b) {
  QC_EACH(V) qc_at(v)[i] = qc_at(v)[i] < a ? a : qc_at(v)[i] > b ? b : qc_at(v)[i];
  return v;
}
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V clamp(V v, const V& a, const V& b) {
  QC_EACH(V) qc_at(v)[i] = qc_at(v)[i] < qc_at(a)[i] ? qc_at(a)[i] : qc_at(v)[i] > qc_at(b)[i] ? qc_at(b)[i] : qc_at(v)[i];
  return v;
}
""",
    "dot": r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline qc_element<V> dot(const V& a, const V& b) {
  qc_element<V> sum = 0;
  QC_EACH(V) sum += qc_at(a)[i] * qc_at(b)[i];
  return sum;
}
""",
    "length": r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline float length(const V& v) {
  float sum = 0;
  QC_EACH(V) sum += qc_at(v)[i] * qc_at(v)[i];
  return sqrtf(sum);
}
""",
    "normalize": r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V normalize(V v) {
  float sum = 0;
  QC_EACH(V) sum += qc_at(v)[i] * qc_at(v)[i];
  float inverse = rsqrtf(sum);
  QC_EACH(V) qc_at(v)[i] *= inverse;
  return v;
}
""",
    "cross": r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V cross(const V& a, const V& b) {
  static_assert(qc_vector<V>::size == 3, "cross: three components");
  V c = a;
  qc_at(c)[0] = a.y * b.z - a.z * b.y;
  qc_at(c)[1] = a.z * b.x - a.x * b.z;
  qc_at(c)[2] = a.x * b.y - a.y * b.x;
  return c;
}
""",
    "reflect": r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V reflect(V incident, const V& n) {
  qc_element<V> d = 0;
  QC_EACH(V) d += qc_at(n)[i] * qc_at(incident)[i];
  QC_EACH(V) qc_at(incident)[i] -= 2 * qc_at(n)[i] * d;
  return incident;
}
""",
    "fracf": r"""__host__ __device__ inline float fracf(float v) { return v - floorf(v); }
template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V fracf(V v) {
  QC_EACH(V) qc_at(v)[i] -= floorf(qc_at(v)[i]);
  return v;
}
""",
    # CUDA 5's math_functions.h had it (later releases keep only __saturatef): x clamped to [0, 1], NaN to 0
    "saturate": r"""__host__ __device__ inline float saturate(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
""",
    "smoothstep": r"""__host__ __device__ inline float smoothstep(float a, float b, float x) {
  float y = clamp((x - a) / (b - a), 0.0f, 1.0f);
  return y * y * (3.0f - 2.0f * y);
}
""",
}
_ELEMENTWISE = {"floorf": "floorf", "fabs": "fabsf", "fminf": "fminf", "fmaxf": "fmaxf"}   # name: scalar function
_UNARY = r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V NAME(V v) {
  QC_EACH(V) qc_at(v)[i] = SCALAR(qc_at(v)[i]);
  return v;
}
"""
_BINARY = r"""template <class V, qc_if_vector<V> = 0> __host__ __device__ inline V NAME(V a, const V& b) {
  QC_EACH(V) qc_at(a)[i] = SCALAR(qc_at(a)[i], qc_at(b)[i]);
  return a;
}
"""
_HELPERS.update({name: (_BINARY if name in ("fminf", "fmaxf") else _UNARY).replace("NAME", name).replace("SCALAR", scalar)
                 for name, scalar in _ELEMENTWISE.items()})
_NEEDS = {"smoothstep": ("clamp",)}     # a helper's helpers

_VECTOR_TYPE = re.compile(r"\b(?:u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4]\b")
_NOT_A_TYPE = ("return", "else", "case", "do", "sizeof", "new", "delete", "throw", "typeof")


def _declares(code: str, name: str) -> bool:
    """Whether the file declares or defines `name` itself (a type or a qualifier before it, not a keyword)."""
    return any(m.group(1) not in _NOT_A_TYPE
               for m in re.finditer(rf"\b(\w+)\s+{re.escape(name)}\s*\(", code))


def _prefixed(definitions: str) -> str:
    """The definitions with the adapter's own names (written `qc_...`, `QC_...` above) under SYMBOL_PREFIX."""
    return definitions.replace("qc_", SYMBOL_PREFIX).replace("QC_", SYMBOL_PREFIX.upper())


def vector_math_for(code: str) -> str:
    """The definitions `code` needs (empty when it uses no vector type)."""
    if not _VECTOR_TYPE.search(code):
        return ""
    parts = [_BASE, _MAKERS]
    if not re.search(r"\boperator\b", code):
        parts.append(_OPERATORS)
    wanted = [name for name in _HELPERS if re.search(rf"\b{name}\s*\(", code) and not _declares(code, name)]
    wanted = [n for name in wanted for n in (*_NEEDS.get(name, ()), name) if not _declares(code, n)]
    parts += [_HELPERS[name] for name in dict.fromkeys(wanted)]
    return _prefixed("".join(parts))


def with_vector_math(code: str, filename: str) -> str:
    """`code` with the vector arithmetic it needs before it (its lines keep their numbers)."""
    definitions = vector_math_for(code)
    return with_definitions(definitions, code, filename) if definitions else code
