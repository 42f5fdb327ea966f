"""C types of kernel parameters and the numpy dtypes their data has.

In: a C type as a signature spells it ("const float * __restrict__", "int"). Out: its canonical spelling,
its element type, and the numpy dtype (or vector size) an argument for it must have. The emitters use the
project's table (`CTYPE_DTYPES`) for their contracts; the backends check launch arguments of any source
against the wider tables (`SCALAR_DTYPES`, `VECTOR_TYPES`)."""
from __future__ import annotations

import re

import numpy as np

# C element type -> numpy dtype name. Pointer params carry arrays of this type; scalars pass by value.
# The types qconform's contracts use; the backends accept the wider SCALAR_DTYPES below.
CTYPE_DTYPES = {
    "float": "float32",
    "double": "float64",
    "int": "int32",
    "signed char": "int8",
    "char": "int8",
    "unsigned char": "uint8",
    "__half": "float16",
    "long": "int64",
    "long long": "int64",
}

# Every C scalar spelling a kernel parameter (or the pointee of one) may have -> numpy dtype: the project's
# table plus the unsigned, fixed-width and alias spellings that hand-written kernels use (LP64 sizes).
SCALAR_DTYPES: dict[str, np.dtype] = {
    **{c: np.dtype(d) for c, d in CTYPE_DTYPES.items()},
    "int8_t": np.dtype("int8"), "uint8_t": np.dtype("uint8"),
    "short": np.dtype("int16"), "int16_t": np.dtype("int16"),
    "unsigned short": np.dtype("uint16"), "uint16_t": np.dtype("uint16"),
    "int32_t": np.dtype("int32"), "unsigned": np.dtype("uint32"), "unsigned int": np.dtype("uint32"),
    "uint32_t": np.dtype("uint32"),
    "int64_t": np.dtype("int64"), "long long int": np.dtype("int64"), "long int": np.dtype("int64"),
    "unsigned long int": np.dtype("uint64"), "unsigned long long int": np.dtype("uint64"),
    "uint64_t": np.dtype("uint64"), "unsigned long": np.dtype("uint64"),
    "unsigned long long": np.dtype("uint64"), "size_t": np.dtype("uint64"),
    "half": np.dtype("float16"), "bool": np.dtype("bool"),
    # bfloat16 has no numpy dtype: its data travels as its bit patterns
    "__nv_bfloat16": np.dtype("uint16"), "nv_bfloat16": np.dtype("uint16"),
    # FP8 (cuda_fp8.h) likewise: one byte per value
    "__nv_fp8_e4m3": np.dtype("uint8"), "__nv_fp8_e5m2": np.dtype("uint8"), "__nv_fp8_storage_t": np.dtype("uint8"),
    "__nv_fp8x2_storage_t": np.dtype("uint16"), "__nv_fp8x4_storage_t": np.dtype("uint32"),
    # glibc's <sys/types.h> shorthands, which CUDA's headers bring into every Linux build
    "ushort": np.dtype("uint16"), "uint": np.dtype("uint32"), "ulong": np.dtype("uint64"),
    # the runtime's texture and surface object handles (64-bit integers the host creates)
    "cudaTextureObject_t": np.dtype("uint64"), "cudaSurfaceObject_t": np.dtype("uint64"),
}

# CUDA vector types behind pointers -> their size in bytes. A kernel reads whole vectors, so an array for
# such a pointer may have any dtype as long as its byte size is a whole number of vectors.
# CUDA's vector types: <base><n> for n in 1..4 (n elements, no padding), the 8-byte bases' 4-vectors also as
# <base>4_16a / <base>4_32a; and the half pairs.
# The element type of each vector base, as SCALAR_DTYPES spells it (`uchar4` holds `unsigned char`s).
VECTOR_SCALARS = {"char": "signed char", "uchar": "unsigned char", "short": "short", "ushort": "unsigned short",
                  "int": "int", "uint": "unsigned int", "long": "long", "ulong": "unsigned long",
                  "longlong": "long long", "ulonglong": "unsigned long long", "float": "float", "double": "double"}
# The element types of the vector types (`uchar4` holds 4 uint8), the half pairs' included.
VECTOR_ELEMENTS: dict[str, np.dtype] = {**{base: SCALAR_DTYPES[c] for base, c in VECTOR_SCALARS.items()},
                                        "half": np.dtype("float16"), "__half": np.dtype("float16")}
_VECTOR_BASES = {base: d.itemsize for base, d in VECTOR_ELEMENTS.items() if "half" not in base}
VECTOR_BYTES = {f"{base}{n}": n * size for base, size in _VECTOR_BASES.items() for n in (1, 2, 3, 4)}
VECTOR_BYTES.update({f"{base}4_{a}a": 4 * size for base, size in _VECTOR_BASES.items() if size == 8 for a in (16, 32)})
VECTOR_BYTES.update({"half2": 4, "__half2": 4, "nv_bfloat162": 4, "__nv_bfloat162": 4, "__nv_fp8x2_e4m3": 2,
                     "__nv_fp8x2_e5m2": 2, "__nv_fp8x4_e4m3": 4, "__nv_fp8x4_e5m2": 4})


def normalize_ctype(text: str) -> str:
    """Canonical spelling of a C parameter type: single spaces, '*' attached to the type."""
    text = re.sub(r"\s+", " ", text.strip())
    text = re.sub(r"\s*\*\s*", "*", text)
    text = re.sub(r"\b__restrict(?:__)?\b", "", text).replace("  ", " ").strip()     # nvcc takes both spellings
    text = re.sub(r"\s*\*", "*", text)
    # `T* const p`: the parameter's own const qualifier says nothing to the caller (the pointer is a copy).
    text = re.sub(r"\*\s*const$", "*", text)
    # east const, `half2 const*` / `size_t const`: the same type as `const half2*` / `const size_t`
    return re.sub(r"^(?!const\b)([A-Za-z_][\w:]*(?: [A-Za-z_][\w:]*)*?) const\b", r"const \1", text)


def element_ctype(ctype: str) -> str:
    """'const signed char*' -> 'signed char'."""
    base = normalize_ctype(ctype).rstrip("*").strip()
    return base[len("const "):] if base.startswith("const ") else base
