"""Argument specs of a race scan, and the arrays they generate from a seed.

One spec per kernel parameter, in order, written `name:dtype[count]=fill` for an array (pointer parameter)
and `name:dtype=value` for a by-value scalar; `!out` after an array makes it a checked output (poisoned
before the launch, must be written in full). Fills: `zeros` (the default), `iota`, a number (every element),
`random(lo,hi)` (uniform integers in [lo, hi) for integer dtypes, uniform floats for float dtypes),
`distinct(lo,hi,k)` (integers, each run of k elements k different draws from [lo, hi): a top-k routing table of k
experts per token, which a kernel may assume holds no expert twice in a row), `values(a,b,...)` (exactly these, one
per element: an MoE's expert bounds, an offsets table). The dtypes
numpy lacks are spelled `bfloat16`, `fp8e4m3` and `fp8e5m2`: their fills are numbers, encoded into the bit patterns
the kernel reads (`harness.racescan.encodings`: nearest code, ties to even, saturating).
An integer scalar may be `range(lo,hi)`: its domain, every value in [lo, hi) a valid launch; `make_args` takes
the value from `at` (default lo) and `harness.racescan.sweep` launches over the domain.
A pointer the kernel may be given as null (an optional input it tests with `if (bias)`) is `name:null`.
A struct passed by value is `name:struct` (every byte zero) or `name:struct={field=value,...}` (the fields named,
`inner.x` for a nested struct's; the rest zero). A value is a number (an array field takes it in every element),
`values(a,b,...)` for an array field (one per element: arrayfire's `dims`), or, for a pointer field, `@dtype[count]=fill`:
an array of its own, filled as a pointer parameter's is, that the field points at (`p:struct={ptr=@float32[2048]=
random(-1,1),n=2048}`; FlashAttention's and arrayfire's parameter structs carry their tensors so). The kernel reads and
writes that array in place and the race detector watches it, but it is no checked output: an output the schedules
compare is a pointer parameter. Its layout is the kernel's parameter type, read from the source (`with_layout`,
cudasrc.structs). A pointer to structs whose fields are all of one scalar type, with no padding (a graph's
`struct Node { int x, y; }`), takes an array of that type, its elements the structs' fields in order
(`nodes:int32[1024]=values(...)` for 512 Nodes; `as_elements`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Mapping, Optional

import numpy as np

from harness.racescan.encodings import ENCODINGS

_SPEC = re.compile(r"^(?P<name>[A-Za-z_]\w*):(?P<dtype>[a-z0-9]+)(?:\[(?P<count>\d+)\])?"
                   r"(?:=(?P<fill>[^!]+))?(?P<out>!out)?$")
_RANDOM = re.compile(r"^random\((?P<lo>-?[\d.]+),(?P<hi>-?[\d.]+)\)$")
NULL = "null"                   # the dtype word (and the fill) of a null pointer spec
_RANGE = re.compile(r"^range\((?P<lo>-?\d+),(?P<hi>-?\d+)\)$")
_VALUES = re.compile(r"^values\((?P<list>[^()]*)\)$")
_DISTINCT = re.compile(r"^distinct\((?P<lo>-?\d+),(?P<hi>-?\d+),(?P<k>\d+)\)$")


@dataclass(frozen=True)
class ArgSpec:
    name: str
    dtype: np.dtype
    count: Optional[int]        # None: a by-value scalar
    fill: str
    output: bool
    encoding: Optional[str] = None   # bfloat16, fp8e4m3 or fp8e5m2: `dtype` holds its codes
    fields: Optional[tuple[tuple[str, str], ...]] = None   # a struct by value: the fields given; `dtype` its layout
    elements: Optional[str] = None   # an array of these structs, given as their scalars (`Node*` as int32: a Node
                                     # {int x, y;} two of them): passed as its bytes (as_elements)

    @property
    def is_struct(self) -> bool:
        return self.fields is not None

    @property
    def is_null(self) -> bool:
        """A null pointer (`name:null`)."""
        return self.fill == NULL

    def with_layout(self, dtype: np.dtype, what: str, pointers: "Mapping[str, str] | None" = None) -> "ArgSpec":
        """This struct spec with the layout of the kernel's parameter (`what`: the struct, for messages; `pointers`:
        its pointer fields' paths and pointee types); a ValueError names a field the struct does not have, an array
        given to a field that is no pointer, or a number other than 0 given to a pointer."""
        pointers = dict(pointers or {})
        for path, text in self.fields:
            if path not in dtype.names:
                raise ValueError(f"args: {self.name}: {what} has no field {path!r} (its fields: "
                                 f"{', '.join(dtype.names) or 'none'})")
            if text.startswith("@") and path not in pointers:
                raise ValueError(f"args: {self.name}: field {path} of {what} is no pointer; `@dtype[count]=fill` "
                                 "is the array a pointer field points at")
            if path in pointers and not text.startswith("@") and text.strip() not in ("0", "0.0"):
                raise ValueError(f"args: {self.name}: field {path} of {what} is a pointer ({pointers[path]}*): give "
                                 f"it `{path}=@dtype[count]=fill`, or leave it out for a null pointer")
        laid_out = replace(self, dtype=dtype)
        _filled(laid_out, None)              # each value fits its field, before anything is built
        return laid_out

    def as_elements(self, struct: str, count: int) -> "ArgSpec":
        """This array spec for a pointer to `struct`, whose layout is `count` scalars of this spec's dtype with no
        padding: each `count` elements of it one struct. A ValueError says where the spec or the layout
        does not fit."""
        if self.count is None or self.count % count:
            raise ValueError(f"args: {self.name}: the kernel takes {struct}*, {count} {self.dtype} each; give a "
                             f"multiple of {count} elements (got {self.count})")
        return replace(self, elements=struct)

    @property
    def arrays(self) -> "tuple[tuple[str, ArgSpec], ...]":
        """The arrays a struct spec's pointer fields point at: (field path, the array's spec, named `name.path`)."""
        return tuple((path, _pointee_spec(self.name, path, text)) for path, text in (self.fields or ())
                     if text.startswith("@"))

    @property
    def domain(self) -> Optional[range]:
        """The values a swept scalar (`range(lo,hi)`) takes; None for every other spec."""
        m = _RANGE.match(self.fill) if self.count is None else None
        return range(int(m.group("lo")), int(m.group("hi"))) if m else None

    def __str__(self) -> str:
        if self.is_null:
            return f"{self.name}:null"
        if self.is_struct:
            return f"{self.name}:struct" + ("={" + ",".join(f"{k}={v}" for k, v in self.fields) + "}"
                                            if self.fields else "")
        shape = "" if self.count is None else f"[{self.count}]"
        return f"{self.name}:{self.encoding or self.dtype.name}{shape}={self.fill}{'!out' if self.output else ''}"


def parse_args(text: str) -> list[ArgSpec]:
    """Specs separated by whitespace; a ValueError names the spec and the rule it breaks."""
    specs = []
    for item in text.split():
        m = _SPEC.match(item)
        if not m and re.search(r":struct=\{[^}]*!out[^}]*\}", item):
            raise ValueError(f"args: {item!r}: an array behind a struct's pointer is read and written in place and "
                             "watched by the race detector, but it is no checked output; pass an output the "
                             "schedules compare as a pointer parameter")
        if not m:
            raise ValueError(f"args: {item!r} is not `name:dtype[count]=fill[!out]` or `name:dtype=value`")
        if m.group("dtype") == "struct":
            specs.append(_struct_spec(item, m))
            continue
        if m.group("dtype") == NULL:
            if m.group("count") is not None or m.group("fill") or m.group("out"):
                raise ValueError(f"args: {item!r}: a null pointer is `name:null`, with no count, fill or !out")
            specs.append(ArgSpec(m.group("name"), np.dtype(np.uint64), None, NULL, False))
            continue
        encoding = m.group("dtype") if m.group("dtype") in ENCODINGS else None
        try:
            dtype = ENCODINGS[encoding][0] if encoding else np.dtype(m.group("dtype"))
        except TypeError:
            raise ValueError(f"args: {item!r}: unknown dtype {m.group('dtype')!r} (numpy's names, or "
                             f"{', '.join(ENCODINGS)})") from None
        count = None if m.group("count") is None else int(m.group("count"))
        fill = m.group("fill") or ("zeros" if count is not None else "")
        if count is None and (not fill or m.group("out")):
            raise ValueError(f"args: {item!r}: a scalar needs `=value` and cannot be an output")
        if count == 0:
            raise ValueError(f"args: {item!r}: an array needs at least one element")
        if _RANGE.match(fill):
            if encoding:
                raise ValueError(f"args: {item!r}: range(lo,hi) is the domain of an integer scalar, not of "
                                 f"{encoding}")
            _check_domain(item, dtype, count, fill)
        elif fill.startswith("distinct("):
            _check_distinct(item, dtype, count, encoding, fill)
        elif fill.startswith("values("):
            _check_values(item, dtype, count, encoding, fill)
        elif fill not in ("zeros", "iota") and not _RANDOM.match(fill):
            try:
                float(fill)
            except ValueError:
                raise ValueError(f"args: {item!r}: fill {fill!r} is not zeros, iota, a number, random(lo,hi), "
                                 f"distinct(lo,hi,k) or values(a,b,...)") from None
        if count is not None and m.group("out") and fill != "zeros":
            raise ValueError(f"args: {item!r}: an output is poisoned before the launch; it takes no fill")
        specs.append(ArgSpec(m.group("name"), dtype, count, fill, bool(m.group("out")), encoding))
    return specs


_FIELD = re.compile(r"^(?P<path>[A-Za-z_]\w*(?:\[\d+\])?(?:\.[A-Za-z_]\w*(?:\[\d+\])?)*)=(?P<value>[^{}]+)$")


def _top_level_parts(text: str) -> list[str]:
    """`text` split at the commas outside parentheses (`p=@float32[8]=random(-1,1),n=8`: two parts)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [p for p in parts + [text[start:]] if p]


def _pointee_spec(struct: str, path: str, text: str) -> ArgSpec:
    """The array spec `@dtype[count]=fill` of pointer field `path`, named `struct.path`; a ValueError says why not."""
    item = f"{struct}:struct field {path}={text}"
    try:
        spec, = parse_args("field:" + text[1:])
    except ValueError as exc:
        raise ValueError(f"args: {item!r}: {re.sub(r'^args: .*?: ', '', str(exc), count=1)}") from None
    if spec.count is None or spec.is_struct or spec.is_null:
        raise ValueError(f"args: {item!r}: a pointer field points at an array, `@dtype[count]=fill`")
    if spec.output:
        raise ValueError(f"args: {item!r}: an array behind a struct's pointer is read and written in place and "
                         "watched by the race detector, but it is no checked output; pass an output the "
                         "schedules compare as a pointer parameter")
    if spec.domain is not None:
        raise ValueError(f"args: {item!r}: range(lo,hi) is a swept scalar's domain, not an array's fill")
    return replace(spec, name=f"{struct}.{path}")


def _struct_spec(item: str, m: "re.Match") -> ArgSpec:
    if m.group("count") is not None or m.group("out"):
        raise ValueError(f"args: {item!r}: a struct passed by value is one value, neither an array nor an output")
    fill = m.group("fill") or "{}"
    if not (fill.startswith("{") and fill.endswith("}")):
        raise ValueError(f"args: {item!r}: a struct's value is `{{field=value,...}}`, got {fill!r}")
    fields = []
    for part in _top_level_parts(fill[1:-1]):
        f = _FIELD.match(part)
        if not f:
            raise ValueError(f"args: {item!r}: {part!r} is not `field=number`, `field=values(a,b,...)` or "
                             "`field=@dtype[count]=fill`")
        path, value = f.group("path"), f.group("value")
        if any(p == path for p, _ in fields):
            raise ValueError(f"args: {item!r}: field {path} is given twice")
        if value.startswith("@"):
            _pointee_spec(m.group("name"), path, value)
        elif value.startswith("values("):
            texts = _value_texts(value)
            if not texts or not all(texts):
                raise ValueError(f"args: {item!r}: field {path}: {value!r} is not values(a,b,...)")
            for t in texts:
                try:
                    float(t)
                except ValueError:
                    raise ValueError(f"args: {item!r}: field {path}: {t!r} in values(...) is not a number") from None
        else:
            try:
                float(value)
            except ValueError:
                raise ValueError(f"args: {item!r}: field {path}: {value!r} is not a number, values(a,b,...) or "
                                 "@dtype[count]=fill") from None
        fields.append((path, value))
    return ArgSpec(m.group("name"), np.dtype(np.void), None, fill, False, fields=tuple(fields))


def _check_distinct(item: str, dtype: np.dtype, count: Optional[int], encoding: Optional[str], fill: str) -> None:
    m = _DISTINCT.match(fill)
    if not m:
        raise ValueError(f"args: {item!r}: {fill!r} is not distinct(lo,hi,k) with integers lo < hi and k >= 1")
    lo, hi, k = int(m.group("lo")), int(m.group("hi")), int(m.group("k"))
    if count is None or encoding or dtype.kind not in "iu":
        raise ValueError(f"args: {item!r}: distinct(lo,hi,k) fills an integer array, not "
                         f"{'a scalar' if count is None else encoding or dtype.name}")
    if not 1 <= k <= hi - lo:
        raise ValueError(f"args: {item!r}: distinct({lo},{hi},{k}) needs 1 <= k <= hi - lo: [{lo}, {hi}) has "
                         f"{max(hi - lo, 0)} values")
    if count % k:
        raise ValueError(f"args: {item!r}: {count} elements are not whole runs of k={k} distinct values")
    info = np.iinfo(dtype)
    if lo < info.min or hi - 1 > info.max:
        raise ValueError(f"args: {item!r}: distinct({lo},{hi},{k}) does not fit {dtype.name} [{info.min}, {info.max}]")


def _value_texts(fill: str) -> list[str]:
    """The numbers of a `values(a,b,...)` fill, as written; [] where `fill` is not one."""
    m = _VALUES.match(fill)
    return [t.strip() for t in m.group("list").split(",")] if m else []


def _check_values(item: str, dtype: np.dtype, count: Optional[int], encoding: Optional[str], fill: str) -> None:
    texts = _value_texts(fill)
    if not texts or not all(texts):
        raise ValueError(f"args: {item!r}: {fill!r} is not values(a,b,...), numbers separated by commas")
    if count is None:
        raise ValueError(f"args: {item!r}: values(...) fills an array; a scalar is `name:dtype=value`")
    if len(texts) != count:
        raise ValueError(f"args: {item!r}: values(...) gives {len(texts)} numbers for {count} elements")
    for t in texts:
        try:
            number = float(t)
        except ValueError:
            raise ValueError(f"args: {item!r}: {t!r} in values(...) is not a number") from None
        if dtype.kind in "iub" and not encoding:
            info = np.iinfo(dtype) if dtype.kind != "b" else None
            if not re.fullmatch(r"[+-]?\d+", t) or (info and not info.min <= int(t) <= info.max) or \
                    (info is None and t not in ("0", "1")):
                raise ValueError(f"args: {item!r}: {t} in values(...) is not an integer that {dtype.name} holds")
        elif not encoding and np.isfinite(number) and abs(number) > float(np.finfo(dtype).max):
            raise ValueError(f"args: {item!r}: {t} in values(...) does not fit {dtype.name} (it would be inf)")


def _distinct_rows(rng: "np.random.Generator", lo: int, hi: int, k: int, rows: int) -> np.ndarray:
    """`rows` runs of k different integers of [lo, hi), each run a uniform draw without replacement."""
    if rows * (hi - lo) <= 1 << 22:         # one vectorized draw (sort random keys per row), 64 MiB at most
        return np.argsort(rng.random((rows, hi - lo)), axis=1)[:, :k] + lo
    return np.stack([rng.choice(hi - lo, k, replace=False) for _ in range(rows)]) + lo


def _check_domain(item: str, dtype: np.dtype, count: Optional[int], fill: str) -> None:
    m = _RANGE.match(fill)
    lo, hi = int(m.group("lo")), int(m.group("hi"))
    if count is not None or dtype.kind not in "iu":
        raise ValueError(f"args: {item!r}: range(lo,hi) is the domain of an integer scalar, not of "
                         f"{'an array' if count is not None else dtype.name}")
    if lo >= hi:
        raise ValueError(f"args: {item!r}: range({lo},{hi}) is empty (it needs lo < hi)")
    info = np.iinfo(dtype)
    if lo < info.min or hi - 1 > info.max:
        raise ValueError(f"args: {item!r}: range({lo},{hi}) does not fit {dtype.name} [{info.min}, {info.max}]")


def _filled(spec: ArgSpec, rng: "np.random.Generator | None") -> np.ndarray:
    n = spec.count if spec.count is not None else 1
    if spec.is_struct:
        if spec.dtype.names is None:
            raise ValueError(f"args: {spec.name}: a struct spec needs the parameter's layout (ArgSpec.with_layout)")
        value = np.zeros(1, spec.dtype)
        for path, text in spec.fields:
            field_type = spec.dtype.fields[path][0]
            field = field_type.base
            if text.startswith("@"):
                continue                  # a pointer: set to its array's address at the launch (StructArrays)
            texts = _value_texts(text)
            if texts:
                count = int(np.prod(field_type.shape)) if field_type.shape else 1
                if not field_type.shape or len(texts) != count:
                    raise ValueError(f"args: {spec.name}: field {path} holds {count} element(s): values(...) gives "
                                     f"{len(texts)}")
                for k, t in enumerate(texts):
                    _set_field(spec.name, value, path, field, t, k)
                continue
            _set_field(spec.name, value, path, field, text, None)
        return value
    return _filled_plain(spec, rng, n)


def _set_field(struct: str, value: np.ndarray, path: str, field: np.dtype, text: str, index: "int | None") -> None:
    """Field `path` of the struct `value` (element `index` of an array field; None: every element) set to `text`."""
    where = path if index is None else f"{path}[{index}]"
    # an integer literal exactly (2**53 + 1 stays itself), anything else as a float
    number = int(text) if re.fullmatch(r"\s*[+-]?\d+\s*", text) else float(text)
    if field.kind != "f" and (not float(number).is_integer() or (field.kind == "b" and number not in (0, 1))):
        raise ValueError(f"args: {struct}: field {where} is {field.name}: {text} is not "
                         f"{'0 or 1' if field.kind == 'b' else 'an integer'}")
    if field.kind == "f" and np.isfinite(number) and abs(number) > float(np.finfo(field).max):
        raise ValueError(f"args: {struct}: field {where}: {text} does not fit {field.name} (it would be inf)")
    try:
        number = number if field.kind == "f" else int(number)
        if index is None:
            value[path] = number
        else:
            value[path][0][index] = number
    except OverflowError:
        raise ValueError(f"args: {struct}: field {where}: {text} does not fit {field.name}") from None


def _filled_plain(spec: ArgSpec, rng: "np.random.Generator | None", n: int) -> np.ndarray:
    m = _RANDOM.match(spec.fill)
    if spec.encoding:              # the values as float64, then their codes
        values = _filled(ArgSpec(spec.name, np.dtype("float64"), spec.count, spec.fill, spec.output), rng)
        return ENCODINGS[spec.encoding][1](values)
    if spec.fill == "zeros":
        return np.zeros(n, spec.dtype)
    if spec.fill == "iota":
        return np.arange(n).astype(spec.dtype)
    texts = _value_texts(spec.fill)
    if texts:
        if spec.dtype.kind in "iub":
            return np.array([int(t) for t in texts], dtype=np.int64).astype(spec.dtype)
        return np.array([float(t) for t in texts], dtype=np.float64).astype(spec.dtype)
    d = _DISTINCT.match(spec.fill)
    if d:
        lo, hi, k = int(d.group("lo")), int(d.group("hi")), int(d.group("k"))
        return _distinct_rows(rng, lo, hi, k, n // k).reshape(n).astype(spec.dtype)
    if m:
        lo, hi = float(m.group("lo")), float(m.group("hi"))
        if spec.dtype.kind in "iub":
            return rng.integers(int(lo), int(hi), n).astype(spec.dtype)
        return rng.uniform(lo, hi, n).astype(spec.dtype)
    return np.full(n, float(spec.fill) if spec.dtype.kind == "f" else int(float(spec.fill)), spec.dtype)


@dataclass(frozen=True)
class StructArrays:
    """A struct argument whose pointer fields point at arrays of their own (`field=@dtype[count]=fill`): `value`,
    its bytes with those fields null, and each (byte offset, name, array). A launch makes the arrays the module's
    resident buffers and the fields their addresses (harness.racescan.scan.launch), and copies back what the kernel
    left in them."""
    value: np.void
    arrays: tuple


def make_args(specs: list[ArgSpec], seed: int, at: Optional[dict] = None) -> tuple[list, tuple[int, ...]]:
    """The launch arguments and output indices of `specs`, every random value drawn from `seed`. A swept
    scalar (`range(lo,hi)`) takes `at[name]` (default lo); it draws nothing, so the arrays are the same at every
    point of a sweep."""
    at = dict(at or {})
    unknown = set(at) - {s.name for s in specs if s.domain is not None}
    if unknown:
        raise ValueError(f"at: {', '.join(sorted(unknown))} is not a swept scalar (`name:dtype=range(lo,hi)`) of the specs")
    rng = np.random.default_rng(seed)
    args, outputs = [], []
    for i, s in enumerate(specs):
        if s.is_null:
            args.append(None)                 # a null pointer (the backends' plan_args)
            continue
        if s.domain is not None:
            value = at.get(s.name, s.domain.start)
            if value not in s.domain:
                raise ValueError(f"at: {s.name}={value} is outside its domain [{s.domain.start}, {s.domain.stop})")
            args.append(s.dtype.type(value))
            continue
        a = _filled(s, rng)
        if s.elements is not None:            # the structs' bytes: what the kernel's pointer takes
            a = a.view(np.uint8)
        if s.is_struct and s.arrays:
            args.append(StructArrays(a[0], tuple((s.dtype.fields[path][1], spec.name, _filled(spec, rng))
                                                 for path, spec in s.arrays)))
            continue
        args.append(a if s.count is not None else a[0])
        if s.output:
            outputs.append(i)
    return args, tuple(outputs)
