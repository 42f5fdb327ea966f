"""Launch arguments checked against a kernel's parameter list, before anything runs; the one validator of
every backend.

In: a `KernelSignature`, the caller's arguments and output indices. Out: a plan, one `BufferArg` (an array
that goes to its own device buffer) or `ScalarArg` (a numpy scalar passed by value) per parameter, or a
ValueError that names the argument and the rule it breaks."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from cudasrc.signatures import KernelSignature
from cudasrc.types import SCALAR_DTYPES, VECTOR_BYTES, element_ctype


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


@dataclass(frozen=True)
class ScalarArg:
    index: int
    name: str
    ctype: str
    value: np.generic       # exactly the dtype of the C type, ready to be packed by value


def _pointee_check(param_ctype: str, what: str, array: np.ndarray) -> None:
    base = element_ctype(param_ctype).replace("volatile ", "").strip()
    if base in SCALAR_DTYPES:
        want = SCALAR_DTYPES[base]
        if array.dtype != want:
            raise ValueError(f"{what}: the kernel takes {param_ctype}, so the array must have dtype {want}, "
                             f"got {array.dtype}")
    elif base in VECTOR_BYTES:
        if array.nbytes % VECTOR_BYTES[base]:
            raise ValueError(f"{what}: the kernel reads {base} vectors ({VECTOR_BYTES[base]} bytes), so the "
                             f"array's byte size must be a multiple of that, got {array.nbytes}")
    elif base != "void":
        raise ValueError(f"{what}: no numpy dtype is known for the pointee type {base!r}")


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
              native_sizes: Optional[Sequence[int]] = None, empty_ok: bool = True) -> list["BufferArg | ScalarArg"]:
    """Check `args` against the kernel signature and say how each one travels. Arrays must be
    C-contiguous numpy arrays of the pointee's dtype (whole vectors for a vector pointee), writeable unless
    the pointer is const, and must not overlap (each gets its own device buffer); by-value parameters take
    numpy scalars of exactly the parameter's dtype (and, where `native_sizes` gives the compiled parameter
    sizes, of that size). An output is a non-const pointer, listed once. A backend whose buffers cannot be
    empty passes `empty_ok=False`."""
    if isinstance(args, (str, bytes, np.ndarray)):
        raise ValueError(f"args: expected a sequence of arrays and numpy scalars, got {type(args).__name__}")
    args = list(args)
    params = sig.params
    if len(args) != len(params):
        raise ValueError(f"args: kernel {sig.name} takes {len(params)} parameters "
                         f"({', '.join(t + ' ' + n for t, n in params)}), got {len(args)} arguments")
    out_set = set(_output_indices(outputs, len(args)))
    plan: list[BufferArg | ScalarArg] = []
    for i, (arg, (ctype, pname)) in enumerate(zip(args, params)):
        what = f"args[{i}] ({pname}: {ctype})"
        if ctype.endswith("*"):
            if not isinstance(arg, np.ndarray):
                raise ValueError(f"{what}: the kernel takes a pointer, so pass a numpy array, "
                                 f"got {type(arg).__name__}")
            if not arg.flags.c_contiguous:
                raise ValueError(f"{what}: the array must be C-contiguous (copy it with np.ascontiguousarray)")
            if arg.size == 0 and not empty_ok:
                raise ValueError(f"{what}: the array is empty; this backend's buffers need at least one element")
            _pointee_check(ctype, what, arg)
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
            want = SCALAR_DTYPES.get(ctype)
            if want is None:
                raise ValueError(f"{what}: by-value parameters of type {ctype!r} are not supported")
            if not isinstance(arg, np.generic) or arg.dtype != want:
                got = f"{type(arg).__name__}" + (f" ({arg.dtype})" if isinstance(arg, np.generic) else "")
                raise ValueError(f"{what}: pass a numpy scalar of dtype {want} (e.g. np.{want.name}(...)), got {got}")
            if native_sizes is not None and want.itemsize != native_sizes[i]:
                raise ValueError(f"{what}: the compiled parameter is {native_sizes[i]} bytes, {want} has "
                                 f"{want.itemsize}")
            plan.append(ScalarArg(i, pname, ctype, arg))
    buffers = [p for p in plan if isinstance(p, BufferArg)]
    for x, a in enumerate(buffers):
        for b in buffers[x + 1:]:
            if np.may_share_memory(a.array, b.array):
                raise ValueError(f"args: args[{a.index}] and args[{b.index}] overlap in memory; each pointer "
                                 "argument gets its own device buffer, so aliasing arguments are not supported")
    return plan
