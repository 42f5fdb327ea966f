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
`inner.x` for a nested struct's, numbers only; an array field takes the value in every element; the rest zero). Its
layout is the kernel's parameter type, read from the source (`with_layout`, cudasrc.structs)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

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

    @property
    def is_struct(self) -> bool:
        return self.fields is not None

    @property
    def is_null(self) -> bool:
        """A null pointer (`name:null`)."""
        return self.fill == NULL

    def with_layout(self, dtype: np.dtype, what: str) -> "ArgSpec":
        """This struct spec with the layout of the kernel's parameter (`what`: the struct, for messages); a
        ValueError names a field the struct does not have."""
        for path, _ in self.fields:
            if path not in dtype.names:
                raise ValueError(f"args: {self.name}: {what} has no field {path!r} (its fields: "
                                 f"{', '.join(dtype.names) or 'none'})")
        laid_out = replace(self, dtype=dtype)
        _filled(laid_out, None)              # each value fits its field, before anything is built
        return laid_out

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


_FIELD = re.compile(r"^(?P<path>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)=(?P<value>[^,{}=]+)$")


def _struct_spec(item: str, m: "re.Match") -> ArgSpec:
    if m.group("count") is not None or m.group("out"):
        raise ValueError(f"args: {item!r}: a struct passed by value is one value, neither an array nor an output")
    fill = m.group("fill") or "{}"
    if not (fill.startswith("{") and fill.endswith("}")):
        raise ValueError(f"args: {item!r}: a struct's value is `{{field=value,...}}`, got {fill!r}")
    fields = []
    for part in filter(None, fill[1:-1].split(",")):
        f = _FIELD.match(part)
        if not f:
            raise ValueError(f"args: {item!r}: {part!r} is not `field=number`")
        try:
            float(f.group("value"))
        except ValueError:
            raise ValueError(f"args: {item!r}: field {f.group('path')}: {f.group('value')!r} is not a number") \
                from None
        fields.append((f.group("path"), f.group("value")))
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
        if not spec.dtype.names:
            raise ValueError(f"args: {spec.name}: a struct spec needs the parameter's layout (ArgSpec.with_layout)")
        value = np.zeros(1, spec.dtype)
        for path, text in spec.fields:
            field = spec.dtype.fields[path][0].base
            # an integer literal exactly (2**53 + 1 stays itself), anything else as a float
            number = int(text) if re.fullmatch(r"\s*[+-]?\d+\s*", text) else float(text)
            if field.kind != "f" and (not float(number).is_integer() or (field.kind == "b" and number not in (0, 1))):
                raise ValueError(f"args: {spec.name}: field {path} is {field.name}: {text} is not "
                                 f"{'0 or 1' if field.kind == 'b' else 'an integer'}")
            if field.kind == "f" and np.isfinite(number) and abs(number) > float(np.finfo(field).max):
                raise ValueError(f"args: {spec.name}: field {path}: {text} does not fit {field.name} (it would be inf)")
            try:
                value[path] = number if field.kind == "f" else int(number)
            except OverflowError:
                raise ValueError(f"args: {spec.name}: field {path}: {text} does not fit {field.name}") from None
        return value
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
        args.append(a if s.count is not None else a[0])
        if s.output:
            outputs.append(i)
    return args, tuple(outputs)
