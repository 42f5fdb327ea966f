"""C struct layouts read out of CUDA source without a compiler, for by-value struct arguments of anyone's kernels.

Fields may be scalars (the source's simple typedefs of them included), CUDA's vector types, pointers, fixed arrays
of them and nested structs (named, or anonymous and declared in place); they are laid out as C lays them out with
natural alignment (a vector type with CUDA's: `float2` on 8 bytes, `float3` on 4, `float4` on 16), which the host
(x86-64 LP64) and the GPU share for these types. A vector is a field of its element type, one element per
component. Anything else (unions, bit fields, unknown type names) is a LookupError that names the struct and the
field, never a guess."""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .signatures import (closing_bracket, resolved_type, split_declaration, split_top_level, strip_comments,
                         type_names)
from .type_patterns import deduce, most_specialized
from .types import SCALAR_DTYPES, VECTOR_ELEMENTS, VECTOR_SCALARS

POINTER_BYTES = 8
# Structs of CUDA's runtime headers (driver_types.h) that kernels take by value without defining them
RUNTIME_STRUCTS = {
    "cudaExtent": "size_t width; size_t height; size_t depth;",
    "cudaPos": "size_t x; size_t y; size_t z;",
    "cudaPitchedPtr": "void* ptr; size_t pitch; size_t xsize; size_t ysize;",
}
MAX_PARAM_BYTES = 32764     # CUDA's limit on a kernel's parameters (12.1 and later): no by-value struct is larger


@dataclass(frozen=True)
class Field:
    path: str           # 's.p' for a field of a nested struct
    offset: int         # bytes from the start of the outermost struct
    ctype: str          # the scalar type, or the pointee's for a pointer
    pointer: bool
    count: int = 1      # elements of a fixed array

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.uint64) if self.pointer else SCALAR_DTYPES[self.ctype]


@dataclass(frozen=True)
class StructLayout:
    name: str
    size: int
    align: int
    fields: tuple[Field, ...]

    @property
    def dtype(self) -> np.dtype:
        """A numpy structured dtype of exactly the C layout (padding included), one entry per field path."""
        return np.dtype({"names": [f.path for f in self.fields],
                         "formats": [f.dtype if f.count == 1 else (f.dtype, (f.count,)) for f in self.fields],
                         "offsets": [f.offset for f in self.fields], "itemsize": self.size})


def struct_layout(code: str, name: str) -> StructLayout:
    """The layout of `struct name { ... }` (or `typedef struct { ... } name;`) as defined in `code`; a CUDA vector
    type (`uint3`, `float4`: a struct of the runtime's headers) has its components as fields x, y, z, w."""
    vector = _vector(name)
    if vector:
        size, align, field = vector
        step = size // field.count
        return StructLayout(name, size, align, tuple(Field(c, i * step, field.ctype, False)
                                                     for i, c in enumerate("xyzw"[:field.count])))
    clean = strip_comments(code)
    return _layout_of(_Source(clean, type_names(clean)), name, 0)


@dataclass(frozen=True)
class _Source:
    clean: str                      # comments removed
    typedefs: dict                  # its simple typedefs and enumerations (signatures.type_names)


_VECTOR = re.compile(r"(" + "|".join(VECTOR_SCALARS) + r")([1-4])(?:_(16|32)a)?")


def _vector(tag: str) -> "tuple[int, int, Field] | None":
    """Size, alignment and the one field (its count the components) of a CUDA vector type, or None."""
    m = _VECTOR.fullmatch(tag)
    if not m or (m.group(3) and m.group(2) != "4"):
        return None
    scalar, n = VECTOR_SCALARS[m.group(1)], int(m.group(2))
    size = VECTOR_ELEMENTS[m.group(1)].itemsize
    align = int(m.group(3)) if m.group(3) else size if n in (1, 3) else min(n * size, 16)
    return n * size, align, Field("", 0, scalar, False, n)


_TEMPLATE_PARAM = re.compile(r"^(?:typename|class|[A-Za-z_][\w:]*(?:\s+[A-Za-z_]\w*)*?)\s+([A-Za-z_]\w*)"
                             r"\s*(?:=\s*(.*))?$", re.S)


@dataclass(frozen=True)
class _Definition:
    bases: tuple          # the base classes' type names, in order (`: public CuTwiddle<conv_kind>`)
    body: str             # between the braces


_INSTANCE = re.compile(r"(?:[A-Za-z_]\w*\s*::\s*)*([A-Za-z_]\w*)\s*<(.*)>", re.S)


@dataclass(frozen=True)
class _Template:
    params: tuple         # parameter names
    defaults: tuple       # their default arguments' texts, or None
    pattern: "tuple | None"   # a specialization's template arguments (`Plan<Tensor<D, n, T>, T>`), else None
    bases: str            # the base clause, without its ':'
    body: "str | None"    # between the braces; None for a declaration


def _templates_of(clean: str, base: str) -> list:
    """Every `template <...> struct|class base` of the source: the primary (declared or defined) and its partial
    and explicit specializations."""
    out = []
    for t in re.finditer(r"\btemplate\s*<", clean):
        close = closing_bracket(clean, t.end() - 1)
        head = re.match(r"\s*(?:struct|class)\s+" + re.escape(base) + r"\b\s*", clean[close + 1:])
        if not head:
            continue
        at = close + 1 + head.end()
        pattern = None
        if clean.startswith("<", at):
            end = closing_bracket(clean, at)
            pattern = tuple(a.strip() for a in split_declaration(clean[at + 1:end], ",") if a.strip())
            at = end + 1
        rest = re.match(r"\s*(:(?!:)[^{;]*)?([{;])", clean[at:])      # not `S<T>::Inner {`, a member's
        if not rest:
            continue
        params, defaults = [], []
        for p in (q.strip() for q in split_declaration(clean[t.end():close], ",") if q.strip()):
            pm = _TEMPLATE_PARAM.match(p)
            if not pm:
                raise LookupError(f"struct {base}: cannot read template parameter '{p}'")
            params.append(pm.group(1))
            defaults.append(pm.group(2).strip() if pm.group(2) else None)
        body = None
        if rest.group(2) == "{":
            open_at = at + rest.end() - 1
            body = clean[open_at + 1:closing_bracket(clean, open_at)]
        out.append(_Template(tuple(params), tuple(defaults), pattern, (rest.group(1) or "")[1:], body))
    return out


def _template_definition(src: _Source, name: str) -> "_Definition | None":
    """The definition of the template struct or class instance `name` (`Param<float>`: arrayfire's
    `template<typename T> struct Param { T *ptr; ... }`), its parameters put for its arguments word by word. The
    arguments a name leaves out take the primary template's defaults (`CuNTTHandler<>`); where a partial or
    explicit specialization fits them (mshadow's `Plan<Tensor<Device, dim, DType>, DType>`), the most specialized
    one is the definition, as the compiler chooses it. None where `name` names no template's instance."""
    m = _INSTANCE.fullmatch(name.strip())
    if not m:
        return None
    base = m.group(1)
    args = [a.strip() for a in split_declaration(m.group(2), ",") if a.strip()]
    templates = _templates_of(src.clean, base)
    if not templates:
        return None
    primaries = [t for t in templates if t.pattern is None]          # declarations and the definition
    primary = next((t for t in primaries if t.body is not None), primaries[0] if primaries else None)
    if primary is not None:                     # a default argument may be given where it is first declared
        primary = _Template(primary.params, tuple(next((t.defaults[i] for t in primaries if len(t.defaults) > i
                                                         and t.defaults[i] is not None), None)
                                                    for i in range(len(primary.params))),
                            None, primary.bases, primary.body)
    if primary is not None:
        if len(args) > len(primary.params) or any(d is None for d in primary.defaults[len(args):]):
            raise LookupError(f"struct {name}: {len(args)} template argument(s) for {base}'s {len(primary.params)} "
                              f"({', '.join(primary.params)})")
        args = args + list(primary.defaults[len(args):])
    fits = []
    for t in templates:
        if t.pattern is not None and t.body is not None:
            try:
                values = deduce(t.pattern, t.params, args)
            except ValueError as exc:           # `Plan<Tensor<gpu, 2, float>, float` and the like
                raise LookupError(f"struct {name}: cannot read the template arguments ({exc})") from None
            if values is not None:
                fits.append((t.pattern, t.params, t, values))
    if fits:
        try:
            _, _, chosen, values = most_specialized(fits)
        except ValueError as exc:
            raise LookupError(f"struct {name}: more than one specialization of {base} fits, {exc}") from None
    elif primary is not None and primary.body is not None:
        chosen, values = primary, dict(zip(primary.params, args))
    else:
        raise LookupError(f"struct {name}: no definition of {base} for these arguments (its primary template is "
                          "only declared and no specialization fits)")
    body, bases = chosen.body, chosen.bases
    for param, arg in values.items():
        body = re.sub(r"\b" + re.escape(param) + r"\b", lambda _m, a=arg: a, body)
        bases = re.sub(r"\b" + re.escape(param) + r"\b", lambda _m, a=arg: a, bases)
    return _Definition(_base_names(name, bases), body)


def _base_names(name: str, clause: str) -> tuple:
    """The base classes of a base clause (`public A, B<int>`): their type names. A virtual base is a LookupError."""
    out = []
    for b in _split_top(clause, ","):
        if re.search(r"\bvirtual\b", b):
            raise LookupError(f"struct {name}: virtual base class '{b}' is not laid out here")
        out.append(re.sub(r"^(?:(?:public|protected|private)\s+)", "", b).strip())
    return tuple(out)


def _definition(src: _Source, name: str) -> _Definition:
    clean = src.clean
    templated = _template_definition(src, name)
    if templated is not None:
        return templated
    tagged = re.search(r"\b(?:struct|class)\s+" + re.escape(name) + r"\s*(:[^{;]*)?\{", clean)
    if tagged:
        open_at = tagged.end() - 1
        return _Definition(_base_names(name, (tagged.group(1) or "")[1:]),
                           clean[open_at + 1:closing_bracket(clean, open_at)])
    for m in re.finditer(r"\btypedef\s+struct\s*(?:[A-Za-z_]\w*\s*)?\{", clean):
        open_at = m.end() - 1
        close = closing_bracket(clean, open_at)
        if re.match(r"\s*" + re.escape(name) + r"\s*;", clean[close + 1:]):
            return _Definition((), clean[open_at + 1:close])
    if name in RUNTIME_STRUCTS:
        return _Definition((), RUNTIME_STRUCTS[name])
    raise LookupError(f"struct {name}: no definition in the source")


def _layout_of(src: _Source, name: str, depth: int) -> StructLayout:
    if depth > 16:
        raise LookupError(f"struct {name}: nested more than 16 deep")
    definition = _definition(src, name)
    return _layout_body(src, name, definition.body, depth, definition.bases)


def _split_top(text: str, sep: str) -> list[str]:
    """The non-empty pieces of `text` split at `sep` outside brackets, stripped."""
    return [p.strip() for p in split_top_level(text, sep) if p.strip()]


_DECLARATOR = re.compile(r"^(\**)\s*([A-Za-z_]\w*)\s*((?:\[\s*\d+\s*\]\s*)*)$")


def _element(src: _Source, base: "str | None", pointer: bool, depth: int) -> tuple[int, int, tuple[Field, ...]]:
    """Size, alignment and fields (offsets from 0; a scalar's or pointer's path empty) of one element of type
    `base` (a pointer to it with `pointer`; None: a struct declared in place, whose pointee is told as '?')."""
    tag = re.sub(r"^struct ", "", base) if base else "?"
    if base and not base.startswith("struct "):       # `typedef unsigned int uint;`, `typedef struct S T;`
        tag = re.sub(r"^struct ", "", resolved_type(tag, src.typedefs))
    if pointer:
        return POINTER_BYTES, POINTER_BYTES, (Field("", 0, tag, True),)
    if tag in SCALAR_DTYPES:
        size = SCALAR_DTYPES[tag].itemsize
        return size, size, (Field("", 0, tag, False),)
    vector = _vector(tag)
    if vector:
        size, align, field = vector
        return size, align, (field,)
    sub = _layout_of(src, tag, depth + 1)
    return sub.size, sub.align, sub.fields


def _without_initializer(declarator: str) -> str:
    """`p = nullptr` -> `p`, `a[2] = {1, 2}` and `n{4}` -> `a[2]` and `n`."""
    cut = re.search(r"=|\{", declarator)
    return declarator[:cut.start()] if cut else declarator


# A member function's declaration: a name, its parameters, qualifiers (`__DH__ ~CParam()`, `T get(int i) const`).
_MEMBER_FUNCTION = re.compile(r"^[^()]*?([A-Za-z_~][\w:]*)\s*\((?:[^()]|\([^()]*\))*\)\s*"
                              r"(?:const|noexcept|override|final|=\s*0|=\s*default|=\s*delete|\s)*$")
_ATTRIBUTES = ("__align__", "alignas", "__attribute__", "__declspec")     # a field's, not a function


def _data_members(name: str, body: str) -> str:
    """A class body with what takes no room in an object dropped: access labels (`public:`), member functions
    (constructors and destructors with their bodies, declarations), static members, typedefs and using
    declarations. A virtual function (a vtable pointer) is a LookupError."""
    body = re.sub(r"\b(?:public|private|protected)\s*:(?!:)", ";", body)
    out, pos = [], 0
    for m in re.finditer(r"\{", body):
        if m.start() < pos:
            continue
        before = body[pos:m.start()]
        # a function's body: `) {`, `) const {`, `) : ptr(p) {` (an initializer list), not `n{4}` nor `struct {`
        if re.search(r"\)\s*(?:const\b|noexcept\b|override\b|final\b|\s)*$", before) or \
                re.search(r"\)\s*:\s*[^;]*$", before):
            start = max(before.rfind(";"), before.rfind("}")) + 1
            out.append(before[:start] + ";")
            pos = closing_bracket(body, m.start()) + 1
        else:
            out.append(body[pos:m.start() + 1])
            pos = m.start() + 1
    body = "".join(out) + body[pos:]
    kept = []
    for decl in _split_top(body, ";"):
        flat = re.sub(r"\s+", " ", decl)
        if re.match(r"virtual\b", flat) or " virtual " in f" {flat} ":
            raise LookupError(f"struct {name}: a virtual function ('{flat}') puts a vtable pointer in the object, "
                              "which is not laid out here")
        function = _MEMBER_FUNCTION.match(flat)
        if re.match(r"(?:static|typedef|using|friend|template)\b", flat) or \
                (function and function.group(1) not in _ATTRIBUTES):
            continue                  # static members, member types, member functions' declarations
        kept.append(decl)
    return ";".join(kept) + (";" if kept else "")


def _base_layout(src: _Source, derived: str, base: str, depth: int) -> "StructLayout | None":
    """The layout of base class `base` of `derived`; None for an empty one, which takes no room (the Itanium C++
    ABI's empty base optimization, which both the host compiler and nvcc follow)."""
    if depth > 16:
        raise LookupError(f"struct {derived}: base classes nested more than 16 deep")
    definition = _definition(src, base)
    return _layout_body(src, base, definition.body, depth + 1, definition.bases, empty_ok=True)


def _data_end(layout: StructLayout) -> int:
    return max(f.offset + f.dtype.itemsize * f.count for f in layout.fields)


def _layout_body(src: _Source, name: str, body: str, depth: int, bases: tuple = (),
                 empty_ok: bool = False) -> "StructLayout | None":
    """The layout of a struct with `body`: its base classes' subobjects first, in order, then its data members.
    `empty_ok`: a struct with no data (an empty base) is None, not a LookupError."""
    fields: list[Field] = []
    offset, align = 0, 1
    tail_of = None            # a base whose tail padding the next member might take: the ABI lets it, not done here
    for base in bases:
        sub = _base_layout(src, name, base, depth)
        if sub is None:
            continue
        if tail_of:
            raise LookupError(f"struct {name}: base class {tail_of} has tail padding that the next base may reuse, "
                              "which is not laid out here")
        offset = -(-offset // sub.align) * sub.align
        fields += [Field(f.path, offset + f.offset, f.ctype, f.pointer, f.count) for f in sub.fields]
        tail_of = base if _data_end(sub) < sub.size else None
        offset += sub.size
        align = max(align, sub.align)
    members = _split_top(_data_members(name, body), ";")
    if tail_of and members:
        raise LookupError(f"struct {name}: base class {tail_of} has tail padding that its members may reuse, which "
                          "is not laid out here")
    for decl in members:
        decl = re.sub(r"\s+", " ", decl)
        if re.match(r"(?:union|enum)\b", decl) or ":" in decl.replace("::", ""):
            raise LookupError(f"struct {name}: field '{decl}' (unions, enumerations declared in place and bit "
                              "fields are not laid out here)")
        inner = re.match(r"^struct\s*(?:[A-Za-z_]\w*\s*)?\{", decl)
        if inner:                     # struct { ... } a, b[2];
            close = closing_bracket(decl, inner.end() - 1)
            sub = _layout_body(src, f"{name}::(anonymous)", decl[inner.end():close], depth + 1)
            member = (sub.size, sub.align, sub.fields)
            declarators = _split_top(decl[close + 1:], ",")
            base = None
        else:
            first = re.match(r"^((?:const |volatile )*(?:struct )?[A-Za-z_][\w:]*(?: (?:int|long|char|short|"
                             r"double))*)\s*(.*)$", decl)
            if not first:
                raise LookupError(f"struct {name}: cannot read field '{decl}'")
            base = re.sub(r"\b(?:const|volatile)\b", "", first.group(1)).strip()
            declarators = _split_top(first.group(2), ",")
            member = None
        for d in declarators:
            d = _without_initializer(d)       # a default member initializer (`= nullptr`, `{0}`) moves nothing
            m = _DECLARATOR.match(d.strip())
            if not m:
                raise LookupError(f"struct {name}: cannot read field declarator '{d}' in '{decl}'")
            stars, field, dims = m.group(1), m.group(2), [int(x) for x in re.findall(r"\d+", m.group(3))]
            if len(stars) > 1:
                raise LookupError(f"struct {name}: field '{field}' is a pointer to a pointer")
            count = int(np.prod(dims)) if dims else 1
            size, a, element = member if member and not stars else _element(src, base, bool(stars), depth)
            offset = -(-offset // a) * a
            if len(element) == 1 and not element[0].path and not element[0].pointer:     # scalars: one field
                fields.append(Field(field, offset, element[0].ctype, False, count * element[0].count))
            else:                     # pointers and structs: a field per element, at its own offset
                for k in range(count):
                    prefix = field + (f"[{k}]" if dims else "")
                    fields += [Field(f"{prefix}.{f.path}" if f.path else prefix, offset + k * size + f.offset,
                                     f.ctype, f.pointer, f.count) for f in element]
            offset += size * count
            align = max(align, a)
        if offset > MAX_PARAM_BYTES:
            raise LookupError(f"struct {name}: larger than {MAX_PARAM_BYTES} bytes at field '{decl}', more than a "
                              "kernel's parameters may hold")
    if not fields and empty_ok:
        return None
    # a struct with no data (a functor, a tag) is one byte in C++; its members, if any, are empty structs too
    return StructLayout(name, max(1, -(-offset // align) * align), align, tuple(fields))
