"""Texture references, for the GPUVerify adapter: seeded read-only textures in their place.

GPUVerify takes a texture fetch as a value of the texel type, any value: texture memory is read-only during a
launch, so a fetch cannot race. CUDA 12 removed texture references (nvcc refuses `texture<...>`), and the host
program that bound them is not in the suite, so the files cannot be built as they lie. Each reference becomes
an empty `__device__` object of the adapter's own type, and each fetch from one (`tex2D(tex, x, y)`, ...) a call
of one function that returns the texel's value: a hash of the seed and the coordinates, so a texel read twice
reads the same, as from a bound array. A float coordinate counts in 1/256 of a texel (the 8 fractional bits
of the hardware's linear filtering weights), so the value may change within a texel as filtering changes it;
an integer one counts whole texels; the gradients of `tex2DGrad` choose a mip level, not a texel, and are not
counted. Values are as the adapter's buffers hold: floats in [0, 1), integers in [0, 64); a texture read as
normalized floats (`cudaReadModeNormalizedFloat`) returns floats in [0, 1) of the vector width.
A fetch from a texture object (`tex2D<float4>(obj, x, y)`: the host created the object, the suite has no host
code) is the same seeded value of the texel type it names, the handle hashed in with the coordinates, so two
objects read different texels. `tex2Dgather` is left as it is: emu refuses it with its reason. Surfaces are
written, so they are stores (surfaces.py). Line numbers stay: the definitions go before a `#line 1` marker."""
from __future__ import annotations

import re

from cudasrc.signatures import TEXTURE_FETCH, closing_bracket

from .run import SPLITMIX_FINISH, SYMBOL_PREFIX as PREFIX, with_definitions

_TEXTURE = re.compile(r"\btexture\s*<")
_DECLARED = re.compile(r"\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*;")
_STORAGE = re.compile(r"\b((?:static|extern)\s+)$")
# the fetches of one texel; tex2Dgather, which returns four texels' components, is left to emu's refusal
_FETCH = re.compile(r"(?!tex2Dgather\b)" + TEXTURE_FETCH + r"(?=\s*\()")
# a fetch from a texture object, its texel type given (`tex2D<float4>(obj, x, y)`)
_OBJECT_FETCH = re.compile(r"(?!tex2Dgather\b)" + TEXTURE_FETCH + r"\s*<(?=[^<>;(){}]*>\s*\()")
_NORMALIZED_SCALARS = ("char", "signed char", "unsigned char", "short", "unsigned short")
_NORMALIZED_VECTORS = ("char", "uchar", "short", "ushort")


def _closing_angle(code: str, i: int) -> int:
    """Index of the `>` closing the template argument list opened at code[i]; it ends before the statement does."""
    end = code.find(";", i)
    try:
        return closing_bracket(code[:len(code) if end < 0 else end], i)
    except ValueError:
        raise ValueError(f"source: line {code.count(chr(10), 0, i) + 1}: `texture<` has no closing `>` before the "
                         "statement ends") from None


def _definitions(seed: int) -> str:
    """The adapter's texture type and its one fetch function, as C++ that nvcc and emu both compile."""
    read_types = [f"template <> struct {PREFIX}read<{t}, 1> {{ typedef float type; }};" for t in _NORMALIZED_SCALARS]
    read_types += [f"template <> struct {PREFIX}read<{v}{n}, 1> {{ typedef float{n} type; }};"
                   for v in _NORMALIZED_VECTORS for n in (1, 2, 4)]
    return "\n".join([
        "#include <type_traits>",
        f"template <class T, int Dim = 1, int Mode = 0> struct {PREFIX}texture {{}};",
        f"template <class T, int Mode> struct {PREFIX}read {{ typedef T type; }};",
        *read_types,
        f"__device__ inline unsigned long long {PREFIX}mix(unsigned long long z) {{",
        f"  z += 0x9E3779B97F4A7C15ULL; {SPLITMIX_FINISH} return z;",
        "}",
        f"template <class C> __device__ inline unsigned long long {PREFIX}texel_key(C c) {{",
        "  if constexpr (std::is_floating_point<C>::value) {",
        "    double s = (double)c * 256.0;",
        "    return s == s ? (unsigned long long)(long long)floor(fmin(fmax(s, -4.0e18), 4.0e18)) : 0x7FF8ULL;",
        "  } else if constexpr (std::is_integral<C>::value) {",
        "    return (unsigned long long)(long long)c;",
        "  } else {",
        "    return 0ULL;",
        "  }",
        "}",
        f"template <class E> __device__ inline E {PREFIX}texel_value(unsigned long long h) {{",
        "  if constexpr (std::is_floating_point<E>::value) return (E)((double)(h >> 11) * (1.0 / 9007199254740992.0));",
        "  else return (E)(h % 64);",
        "}",
        f"template <class R> __device__ inline R {PREFIX}texel(unsigned long long h) {{",
        f"  if constexpr (std::is_arithmetic<R>::value) {{ return {PREFIX}texel_value<R>(h); }}",
        "  else {",
        "    R r; typedef decltype(r.x) E; E* c = reinterpret_cast<E*>(&r);",
        f"    for (unsigned i = 0; i < sizeof(R) / sizeof(E); ++i) c[i] = {PREFIX}texel_value<E>({PREFIX}mix(h + i));",
        "    return r;",
        "  }",
        "}",
        f"template <class T, int D, int M, class... C> __device__ inline typename {PREFIX}read<T, M>::type",
        f"{PREFIX}fetch(const {PREFIX}texture<T, D, M>&, C... coords) {{",
        f"  unsigned long long h = {seed & 0xFFFFFFFF}ULL ^ (unsigned long long)(D * 256 + M);",
        f"  ((h = {PREFIX}mix(h ^ {PREFIX}texel_key(coords))), ...);",
        f"  return {PREFIX}texel<typename {PREFIX}read<T, M>::type>(h);",
        "}",
        f"template <class R, class... C> __device__ inline R {PREFIX}fetch_object(unsigned long long object, "
        "C... coords) {",
        f"  unsigned long long h = {seed & 0xFFFFFFFF}ULL ^ {PREFIX}mix(object);",
        f"  ((h = {PREFIX}mix(h ^ {PREFIX}texel_key(coords))), ...);",
        f"  return {PREFIX}texel<R>(h);",
        "}",
    ])


def seeded_textures(code: str, seed: int, filename: str) -> tuple[str, list[str]]:
    """`code` (comments removed) with its texture references made seeded textures, and the names of those it
    declares; `code` itself where it has none. `filename` names the file in the `#line` marker."""
    if not _TEXTURE.search(code) and not _OBJECT_FETCH.search(code):
        return code, []
    out, names, pos = [], [], 0
    for k, m in enumerate(_TEXTURE.finditer(code)):
        close = _closing_angle(code, m.end() - 1)
        args = code[m.end():close]
        declared = _DECLARED.match(code, close + 1)
        start = m.start()
        if declared:         # a file-scope reference: an object of the adapter's type that device code may name
            storage = _STORAGE.search(code, pos, m.start())
            start = storage.start() if storage else m.start()
            alias = f"{PREFIX}texture_{k}"
            text = (f"typedef {PREFIX}texture<{args}> {alias}; {storage.group(1) if storage else ''}"
                    f"__device__ {alias}")
            names += re.split(r"\s*,\s*", declared.group(1).strip())
        else:                # a parameter or template argument
            text = f"{PREFIX}texture<{args}>"
        out += [code[pos:start], text]
        pos = close + 1
    out.append(code[pos:])
    renamed = re.sub(_OBJECT_FETCH, f"{PREFIX}fetch_object<", "".join(out))
    renamed = re.sub(_FETCH, f"{PREFIX}fetch", renamed)
    return with_definitions(_definitions(seed), renamed, filename), names
