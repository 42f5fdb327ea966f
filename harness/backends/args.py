"""Launch arguments checked against a kernel's parameter list, before anything runs; the one validator of
every backend.

In: a `KernelSignature`, the caller's arguments and output indices. Out: a plan, one `BufferArg` (an array
that goes to its own device buffer), `ResidentArg` (a resident device buffer, used in place) or `ScalarArg`
(passed by value: a numpy scalar, a `Struct`, or a module `Symbol`) per parameter, or a ValueError that names
the argument and the rule it breaks."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from cudasrc.signatures import KernelSignature, is_function_pointer
from cudasrc.types import SCALAR_DTYPES, VECTOR_BYTES, element_ctype
from .base import Buffer, Struct, Symbol


@dataclass(frozen=True)
class BufferArg:
    """An array argument: copied to a guarded device buffer, and back into `array` after the launch."""
    index: int
    name: str
    ctype: str
    array: np.ndarray
    is_output: bool

    @property
    def what(self) -> str:
        return f"args[{self.index}] ({self.name}: {self.ctype})"

    @property
    def const(self) -> bool:
        """A const pointee cannot be written by the kernel: uploaded once, never copied back."""
        return self.ctype.startswith("const ")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape

    @property
    def itemsize(self) -> int:
        return self.array.itemsize

    @property
    def nbytes(self) -> int:
        return self.array.nbytes


@dataclass(frozen=True)
class ResidentArg:
    """A resident buffer (Module.alloc) passed in place: no copy. As an output it is poisoned before each run
    and must be written in full; otherwise it keeps its contents (in/out, partial writes allowed)."""
    index: int
    name: str
    ctype: str
    buffer: Buffer
    is_output: bool

    @property
    def what(self) -> str:
        return f"args[{self.index}] ({self.name}: {self.ctype}, resident buffer {self.buffer.name!r})"

    @property
    def const(self) -> bool:
        return self.ctype.startswith("const ")

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def itemsize(self) -> int:
        return self.buffer.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.buffer.nbytes


@dataclass(frozen=True)
class ScalarArg:
    index: int
    name: str
    ctype: str
    value: "np.generic | Struct | Symbol"   # a scalar of exactly the C type's dtype; a struct; a module symbol


# The pointee types through which C++ lets a kernel read any object's bytes: an array of any dtype may stand behind
# them (`signed char`, int8_t and uint8_t, spelled so, mean numbers and keep their dtype).
BYTE_POINTEES = frozenset({"char", "unsigned char"})


def check_pointee(param_ctype: str, what: str, array: "np.ndarray | Buffer") -> None:
    """ValueError (`what` first) where `array` cannot stand for what the pointer parameter `param_ctype` points to:
    a scalar's dtype, a whole number of vectors, or bytes for a type without a dtype; a `char` pointer takes any."""
    base = element_ctype(param_ctype).replace("volatile ", "").strip()
    wrapped = re.fullmatch(r"cuda::(?:std::)?atomic<\s*(.+?)\s*(?:,[^<>]*)?>", base)
    if wrapped:          # libcu++ lays out cuda::atomic<T> as a T
        base = wrapped.group(1)
    noun = str(array) if isinstance(array, Buffer) else "the array"
    if base in BYTE_POINTEES:
        return               # C's byte pointer, which may point to anything (ggml's `const char * K` holds halves)
    if base in SCALAR_DTYPES:
        want = SCALAR_DTYPES[base]
        if array.dtype != want:
            raise ValueError(f"{what}: the kernel takes {param_ctype}, so {noun} must have dtype {want}, "
                             f"got {array.dtype}")
    elif base in VECTOR_BYTES:
        if array.nbytes % VECTOR_BYTES[base]:
            raise ValueError(f"{what}: the kernel reads {base} vectors ({VECTOR_BYTES[base]} bytes), so the "
                             f"byte size of {noun} must be a multiple of that, got {array.nbytes}")
    elif base != "void" and not (array.dtype == np.uint8 or array.dtype.kind == "V"):
        # A struct (or any type without a dtype): its bytes, as uint8 or as a structured array laid out like it.
        raise ValueError(f"{what}: no numpy dtype is known for the pointee type {base!r}; pass its bytes (a uint8 "
                         "array) or a structured array laid out as the C type")


def _aggregate(arg: object, ctype: str, what: str, size: int) -> "Struct | Symbol":
    """A by-value struct, array-in-struct or function-pointer argument, checked against the compiled size."""
    if isinstance(arg, Symbol):
        if not isinstance(arg.name, str) or not arg.name.isidentifier():
            raise ValueError(f"{what}: Symbol name must be a C identifier, got {arg.name!r}")
        return arg
    if is_function_pointer(ctype):
        raise ValueError(f"{what}: a function-pointer parameter takes Symbol('<__device__ variable holding the "
                         f"function>'), got {type(arg).__name__}")
    if isinstance(arg, np.void):
        arg = Struct(arg)
    if not isinstance(arg, Struct) or not isinstance(arg.value, np.void):
        raise ValueError(f"{what}: a by-value parameter of type {ctype!r} (a struct, or a typedef'd function "
                         f"pointer) takes a numpy structured scalar (np.void) of {size} bytes, a Struct, or a "
                         f"Symbol naming a __device__ variable that holds the value; got {type(arg).__name__}")
    return check_struct(arg, size, what)


def check_struct(arg: Struct, size: int, what: str) -> Struct:
    """A Struct checked against the compiled size (`size` bytes) of the struct it fills: its pointer fields at
    distinct 8-byte-aligned offsets inside it, each a resident Buffer."""
    if arg.value.dtype.itemsize != size:
        raise ValueError(f"{what}: the compiled struct is {size} bytes, the value has {arg.value.dtype.itemsize} "
                         f"(dtype {arg.value.dtype}); lay it out as the C struct, padding included")
    seen = set()
    for off, buf in arg.pointers:
        if not isinstance(buf, Buffer):
            raise ValueError(f"{what}: Struct.pointers maps byte offsets to resident Buffers, got "
                             f"{type(buf).__name__} at offset {off!r}")
        if isinstance(off, bool) or not isinstance(off, (int, np.integer)) or off % 8 or not 0 <= off <= size - 8:
            raise ValueError(f"{what}: pointer offset {off!r} must be a multiple of 8 in [0, {size - 8}]")
        if int(off) in seen:
            raise ValueError(f"{what}: pointer offset {off} is given twice")
        seen.add(int(off))
    return arg


def _output_indices(outputs: Sequence[int], n_args: int) -> list[int]:
    if isinstance(outputs, (str, bytes)):
        raise ValueError(f"outputs: expected a sequence of argument indices, got {outputs!r}")
    seen: list[int] = []
    for o in outputs:
        if isinstance(o, bool) or not isinstance(o, (int, np.integer)) or not 0 <= int(o) < n_args:
            raise ValueError(f"outputs: {o!r} is not an argument index in [0, {n_args})")
        if int(o) in seen:
            raise ValueError(f"outputs: index {o} is listed twice")
        seen.append(int(o))
    return seen


def plan_args(sig: KernelSignature, args: Sequence[object], outputs: Sequence[int],
              native_sizes: Optional[Sequence[int]] = None, empty_ok: bool = True,
              resident_ok: bool = False, aggregates_ok: bool = False) -> list["BufferArg | ResidentArg | ScalarArg"]:
    """Check `args` against the kernel signature and say how each one travels. Arrays must be
    C-contiguous numpy arrays of the pointee's dtype (whole vectors for a vector pointee), writeable unless
    the pointer is const, and must not overlap (each gets its own device buffer); by-value parameters take
    numpy scalars of exactly the parameter's dtype (and, where `native_sizes` gives the compiled parameter
    sizes, of that size); None for a pointer passes a null pointer (an optional input the kernel tests for). An
    output is a non-const pointer, listed once. A backend whose buffers cannot be
    empty passes `empty_ok=False`. A backend with resident buffers passes `resident_ok=True`: a `Buffer` may
    then stand for a pointer argument (its dtype checked like an array's), each at most once. A backend that
    passes structs and module symbols by value passes `aggregates_ok=True` (with `native_sizes`): a struct
    parameter then takes a `Struct` (or a bare np.void) of the compiled size, a function-pointer parameter a
    `Symbol`, and any by-value parameter a `Symbol`."""
    if aggregates_ok and native_sizes is None:
        raise TypeError("plan_args: aggregates_ok needs native_sizes (the compiled parameter sizes)")
    if isinstance(args, (str, bytes, np.ndarray)):
        raise ValueError(f"args: expected a sequence of arrays and numpy scalars, got {type(args).__name__}")
    args = list(args)
    params = sig.params
    if len(args) != len(params):
        raise ValueError(f"args: kernel {sig.name} takes {len(params)} parameters "
                         f"({', '.join(t + ' ' + n for t, n in params)}), got {len(args)} arguments")
    out_set = set(_output_indices(outputs, len(args)))
    plan: list[BufferArg | ResidentArg | ScalarArg] = []
    for i, (arg, (ctype, pname)) in enumerate(zip(args, params)):
        what = f"args[{i}] ({pname}: {ctype})"
        if ctype.endswith("*") and isinstance(arg, Buffer) and resident_ok:
            check_pointee(ctype, what, arg)
            if i in out_set and ctype.startswith("const "):
                raise ValueError(f"outputs: args[{i}] ({pname}) is a const pointer, so the kernel cannot write it")
            plan.append(ResidentArg(i, pname, ctype, arg, i in out_set))
        elif ctype.endswith("*") and arg is None:
            if i in out_set:
                raise ValueError(f"outputs: args[{i}] ({pname}) is a null pointer, so the kernel cannot write it")
            plan.append(ScalarArg(i, pname, ctype, np.uint64(0)))      # the pointer's 8 bytes, all zero
        elif ctype.endswith("*"):
            if not isinstance(arg, np.ndarray):
                raise ValueError(f"{what}: the kernel takes a pointer, so pass a numpy array"
                                 f"{' or a resident Buffer' if resident_ok else ''}, got {type(arg).__name__}")
            if not arg.flags.c_contiguous:
                raise ValueError(f"{what}: the array must be C-contiguous (copy it with np.ascontiguousarray)")
            if arg.size == 0 and not empty_ok:
                raise ValueError(f"{what}: the array is empty; this backend's buffers need at least one element")
            check_pointee(ctype, what, arg)
            const = ctype.startswith("const ")
            if not const and not arg.flags.writeable:
                raise ValueError(f"{what}: the kernel may write through this pointer, so the results are copied "
                                 "back, but the array is read-only (not writeable)")
            if i in out_set and const:
                raise ValueError(f"outputs: args[{i}] ({pname}) is a const pointer, so the kernel cannot write it")
            plan.append(BufferArg(i, pname, ctype, arg, i in out_set))
        else:
            if i in out_set:
                raise ValueError(f"outputs: args[{i}] ({pname}) is passed by value and cannot be an output")
            want = SCALAR_DTYPES.get(ctype.replace("const ", "", 1) if ctype.startswith("const ") else ctype)
            if aggregates_ok and (want is None or isinstance(arg, Symbol)):
                plan.append(ScalarArg(i, pname, ctype, _aggregate(arg, ctype, what, native_sizes[i])))
                continue
            if want is None:
                raise ValueError(f"{what}: by-value parameters of type {ctype!r} are not supported")
            if not isinstance(arg, np.generic) or arg.dtype != want:
                got = f"{type(arg).__name__}" + (f" ({arg.dtype})" if isinstance(arg, np.generic) else "")
                raise ValueError(f"{what}: pass a numpy scalar of dtype {want} (e.g. np.{want.name}(...)), got {got}")
            if native_sizes is not None and want.itemsize != native_sizes[i]:
                raise ValueError(f"{what}: the compiled parameter is {native_sizes[i]} bytes, {want} has "
                                 f"{want.itemsize}")
            plan.append(ScalarArg(i, pname, ctype, arg))
    resident = [p for p in plan if isinstance(p, ResidentArg)]
    for x, a in enumerate(resident):
        for b in resident[x + 1:]:
            if a.buffer.id == b.buffer.id:
                raise ValueError(f"args: args[{a.index}] and args[{b.index}] are the same resident buffer "
                                 f"{a.buffer.name!r}; aliasing arguments are not supported")
    buffers = [p for p in plan if isinstance(p, BufferArg)]
    for x, a in enumerate(buffers):
        for b in buffers[x + 1:]:
            if np.may_share_memory(a.array, b.array):
                raise ValueError(f"args: args[{a.index}] and args[{b.index}] overlap in memory; each pointer "
                                 "argument gets its own device buffer, so aliasing arguments are not supported")
    return plan
