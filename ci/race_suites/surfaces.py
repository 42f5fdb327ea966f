"""Surfaces, for the GPUVerify adapter: each surface a store in global memory that the race detector watches.

A surface store (`surf2Dwrite(v, surf, x_bytes, y)`) writes device memory, so two threads storing to one texel
race as two stores to one element do; GPUVerify's benchmarks write surfaces that a host program bound to CUDA
arrays, through references (`surface<void, 2> s;`, which CUDA 12 removed: nvcc refuses them) or objects
(`cudaSurfaceObject_t` parameters). Neither the arrays nor their extents are in the suite, so each distinct surface
a file names in its loads and stores (the reference, or the parameter or expression holding the object) becomes a
resident byte buffer of the adapter's (`surface:<name>`, seeded like the other buffers), and each load or store a
typed access of its bytes at the call's own line: reports name the file's line and the surface, and the index they
give is the byte in that store. The store's layout needs no extents: the texel's 16-byte cell is the Morton
(bit-interleaved) number of its coordinates (x_bytes / 16, y, z or layer or face), which is one-to-one and keeps
small coordinates near the start, so a store of `surface_bytes` covers whatever a launch reaches; an access past its
end (checked against the store's size, so that it never lands in other memory) is an OutOfBounds naming the store
and how far it reached, after which the adapter grows the store and runs the file again, as for its other buffers. A byte offset that is not a multiple of the texel's size, a negative coordinate, or one past what the
interleaving keeps apart (2^21 texels in three dimensions: CUDA's largest 3D surface has 2^14) is a fault of the
kernel on a GPU (the default boundary mode traps) and traps here. The boundary-mode argument is read and set
aside: with no extents nothing is out of range. Line numbers stay: the definitions go before a `#line 1` marker."""
from __future__ import annotations

import re

from cudasrc.signatures import closing_bracket, split_top_level

from .run import SYMBOL_PREFIX as PREFIX, with_definitions

_REFERENCE = re.compile(r"\b(?:(?:static|extern)\s+)?surface\s*<[^<>;]*>\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*;")
# kind -> coordinates after the byte offset in x (y, z, layer, face)
_COORDINATES = {"1D": 0, "2D": 1, "3D": 2, "1DLayered": 1, "2DLayered": 2, "Cubemap": 2, "CubemapLayered": 2}
_CALL = re.compile(r"\bsurf(" + "|".join(sorted(_COORDINATES, key=len, reverse=True)) + r")(read|write)\s*(<)?")
STORES = f"{PREFIX}surface_stores"      # the stores' addresses and sizes in bytes, which the adapter sets
SIZES = f"{PREFIX}surface_bytes"
SURFACE_BYTES = 1 << 20       # a store's first size; grown (by the adapter's OutOfBounds rule) to what a launch reaches


def _definitions(count: int) -> str:
    """The stores' pointers and sizes and the one function that places a texel in its store, as C++ nvcc and emu
    compile."""
    return "\n".join([
        "#include <type_traits>",
        f"__device__ unsigned char* {STORES}[{count}];",
        f"__device__ unsigned long long {SIZES}[{count}];",
        f"__device__ inline unsigned long long {PREFIX}spread(unsigned long long v, int ways) {{",
        "  unsigned long long out = 0;",
        "  for (int bit = 0; bit * ways < 64 && bit < 32; ++bit) out |= ((v >> bit) & 1ULL) << (bit * ways);",
        "  return out;",
        "}",
        f"template <class T> __device__ inline T& {PREFIX}texel(int surface, int ways, long long x_bytes, "
        "long long c1, long long c2) {",
        "  static_assert(sizeof(T) <= 16 && 16 % sizeof(T) == 0, \"a surface texel is 1, 2, 4, 8 or 16 bytes\");",
        "  if (x_bytes < 0 || c1 < 0 || c2 < 0 || x_bytes % (long long)sizeof(T) != 0) __trap();",
        "  // the bits each coordinate keeps in the interleaving (far past CUDA's largest surfaces): more would collide",
        "  if ((((unsigned long long)x_bytes >> 4) | (unsigned long long)c1 | (unsigned long long)c2)"
        " >> (ways == 1 ? 32 : ways == 2 ? 31 : 21)) __trap();",
        f"  unsigned long long cell = {PREFIX}spread((unsigned long long)x_bytes >> 4, ways)"
        f" | {PREFIX}spread((unsigned long long)c1, ways) << 1 | {PREFIX}spread((unsigned long long)c2, ways) << 2;",
        "  unsigned long long at = cell * 16 + (x_bytes & 15), size = " + SIZES + "[surface];",
        "  if (at + sizeof(T) > size) {",
        "    // past the store's end: a store into its guard pages (a page past the end, then as far as it reached, at",
        "    // most 512 KiB) ends the launch as an OutOfBounds that names the store and how far it was reached",
        "    unsigned long long past = at + sizeof(T) - size;",
        f"    *(volatile unsigned char*)({STORES}[surface] + size + 4096 + (past < (1ULL << 19) ? past : (1ULL << 19))) = 0;",
        "  }",
        f"  return *reinterpret_cast<T*>({STORES}[surface] + at);",
        "}",
    ])


def _key(expression: str) -> str:
    return re.sub(r"\s+", "", expression)


def surface_stores(code: str, filename: str) -> tuple[str, dict[str, int]]:
    """`code` (comments removed) with its surface references declared as plain objects and its surface loads and
    stores made accesses of the adapter's stores, and the surfaces in store order (the symbols STORES and SIZES
    hold their pointers and sizes, which the adapter sets), each with the number of coordinates its calls
    interleave (0 where calls of different dimensions name it); `code` itself and {} where it has none. A call it
    cannot read is a ValueError naming its line."""
    names: dict[str, int] = {}       # surface -> coordinates interleaved in its store (0: calls that differ)

    def rewrite(text: str, offset: int) -> str:
        """`text` (at `offset` in code) with its calls rewritten, those in a call's arguments too."""
        out, pos = [], 0
        for m in _CALL.finditer(text):
            if m.start() < pos:
                continue
            kind, op, templated = m.groups()
            line = code.count("\n", 0, offset + m.start()) + 1
            i = m.end()
            texel = None
            if templated:
                i -= 1
                close = closing_bracket(text, i)
                texel, i = text[i + 1:close].strip(), close + 1
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text) or text[i] != "(":
                continue                  # a name that is not a call (a declaration of the reader's own)
            close = closing_bracket(text, i)
            args = [rewrite(a, offset + i + 1).strip() for a in split_top_level(text[i + 1:close], ",")]
            wanted = 2 + _COORDINATES[kind]      # value or pointer (or none, templated read), surface, x, coordinates
            first = 0 if op == "read" and texel else 1
            if len(args) not in (wanted - 1 + first, wanted + first):
                raise ValueError(f"source: line {line}: surf{kind}{op} with {len(args)} argument(s): cannot read it")
            surface = _key(args[first])
            coords = args[first + 1:first + 2 + _COORDINATES[kind]] + ["0"] * (2 - _COORDINATES[kind])
            ways = 1 + _COORDINATES[kind]
            names[surface] = ways if names.get(surface, ways) == ways else 0
            where = f"{list(names).index(surface)}, {ways}, {', '.join(f'(long long)({c})' for c in coords)}"
            if op == "write":         # `surf2Dwrite<T>(v, ...)` stores v as T; else as its own type
                value, texel = args[0], texel or f"std::decay_t<decltype({args[0]})>"
                replacement = f"({PREFIX}texel<{texel}>({where}) = ({texel})({value}))"
            elif texel:
                replacement = f"({PREFIX}texel<{texel}>({where}))"
            else:
                target = args[0]
                replacement = (f"(*({target}) = {PREFIX}texel<std::remove_reference_t<decltype(*({target}))>>"
                               f"({where}))")
            out += [text[pos:m.start()], replacement]
            pos = close + 1
        out.append(text[pos:])
        return "".join(out)

    rewritten = rewrite(code, 0)
    if not names and not _REFERENCE.search(rewritten):
        return code, {}
    # a reference is a name only now: an int keeps any other mention of it compiling
    rewritten = _REFERENCE.sub(lambda r: f"__device__ int {r.group(1)};", rewritten)
    return with_definitions(_definitions(max(1, len(names))), rewritten, filename), names


def texel_of(byte: int, ways: int) -> tuple[int, ...]:
    """The coordinates of a byte of a store whose calls interleave `ways` coordinates: the x offset in bytes, then
    y and z (or the layer or face) as the call passes them. The inverse of the placement above, for reports."""
    cell, within = divmod(byte, 16)
    coords = [0] * ways
    for bit in range(cell.bit_length()):
        if cell >> bit & 1:
            coords[bit % ways] |= 1 << (bit // ways)
    return (coords[0] * 16 + within, *coords[1:])


_RACE_ON_STORE = re.compile(r"data race on 'surface:(?P<name>[^' ]+) \(through __device__ variable " + re.escape(STORES)
                            + r"\)' index \d+ \(byte (?P<byte>\d+)\)")


def texels_raced(detail: str, surfaces: dict[str, int]) -> list[str]:
    """For each race a report names on a surface store, where it lies as the kernel's calls name texels:
    "image byte 2732: x 172 bytes, y 10, z 3" (none for a surface whose calls differ in dimensions)."""
    out = []
    for m in _RACE_ON_STORE.finditer(detail):
        ways = surfaces.get(m.group("name"), 0)
        if ways:
            x, *rest = texel_of(int(m.group("byte")), ways)
            out.append(f"{m.group('name')} byte {m.group('byte')}: x {x} bytes"
                       + "".join(f", {axis} {v}" for axis, v in zip(("y", "z"), rest)))
    return out
