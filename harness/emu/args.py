"""Check launch arguments against a kernel's parameter list before anything runs (ValueError on mismatch)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from emitters.contract import CTYPE_DTYPES, element_ctype, normalize_ctype
from harness.backends.base import Buffer
from harness.cuda_source import KernelSignature

_DTYPES = dict(CTYPE_DTYPES)
_DTYPES.update({
    "unsigned int": "uint32", "unsigned": "uint32", "short": "int16", "unsigned short": "uint16",
    "unsigned long": "uint64", "unsigned long long": "uint64", "size_t": "uint64", "bool": "bool",
    "int8_t": "int8", "uint8_t": "uint8", "int16_t": "int16", "uint16_t": "uint16", "int32_t": "int32",
    "uint32_t": "uint32", "int64_t": "int64", "uint64_t": "uint64", "half": "float16",
    # vector element types: arrays of the lane type
    "char4": "int8", "char2": "int8", "uchar4": "uint8", "int2": "int32", "int4": "int32", "uint4": "uint32",
    "float2": "float32", "float4": "float32", "__half2": "float16",
})


def _expected(ctype: str) -> Optional[np.dtype]:
    base = element_ctype(ctype)
    base = base.replace("volatile ", "").strip()
    name = _DTYPES.get(base)
    return np.dtype(name) if name else None


def check_args(sig: KernelSignature, args: Sequence[object], outputs: Sequence[int],
               native_sizes: Sequence[int]) -> tuple[list, tuple[int, ...]]:
    """Validated (args, outputs). Arrays must be C-contiguous numpy arrays (or resident Buffers) of the
    parameter's element type; by-value parameters take numpy scalars of exactly the parameter's type."""
    params = sig.params
    if len(args) != len(params):
        raise ValueError(f"args: kernel {sig.name} takes {len(params)} arguments "
                         f"({', '.join(t + ' ' + n for t, n in params)}), got {len(args)}")
    checked: list = []
    for i, ((ctype, pname), a) in enumerate(zip(params, args)):
        ctype = normalize_ctype(ctype)
        what = f"args[{i}] ({pname}: {ctype})"
        if ctype.endswith("*") and isinstance(a, Buffer):
            want = _expected(ctype)
            if want is not None and a.dtype != want:
                raise ValueError(f"{what}: expected a buffer of {want}, got {a}")
            checked.append(a)
        elif ctype.endswith("*"):
            if not isinstance(a, np.ndarray):
                raise ValueError(f"{what}: a pointer parameter takes a numpy array or a resident Buffer, got "
                                 f"{type(a).__name__}")
            if not a.flags.c_contiguous:
                raise ValueError(f"{what}: the array must be C-contiguous (copy it with np.ascontiguousarray)")
            if a.size == 0:
                raise ValueError(f"{what}: the array is empty; a device buffer needs at least one element")
            want = _expected(ctype)
            if want is not None and a.dtype != want:
                raise ValueError(f"{what}: expected an array of {want}, got {a.dtype}")
            if not ctype.startswith("const ") and not a.flags.writeable:
                raise ValueError(f"{what}: the kernel may write through this pointer, so the results are copied "
                                 "back, but the array is read-only")
            checked.append(a)
        else:
            want = _expected(ctype)
            if want is None:
                raise ValueError(f"{what}: by-value parameters of type {ctype!r} are not supported by emu")
            if not isinstance(a, np.generic):
                raise ValueError(f"{what}: a by-value parameter takes a numpy scalar np.{want} "
                                 f"(e.g. np.{want}(...)), got {type(a).__name__}")
            if a.dtype != want:
                raise ValueError(f"{what}: expected a numpy scalar of type {want}, got {a.dtype}")
            if a.dtype.itemsize != native_sizes[i]:
                raise ValueError(f"{what}: compiled parameter size is {native_sizes[i]} bytes, {a.dtype} has "
                                 f"{a.dtype.itemsize}")
            checked.append(a)
    outs = []
    for o in outputs:
        if not isinstance(o, (int, np.integer)) or not 0 <= int(o) < len(args):
            raise ValueError(f"outputs: {o!r} is not an argument index in [0, {len(args)})")
        if not isinstance(args[int(o)], (np.ndarray, Buffer)):
            raise ValueError(f"outputs: args[{int(o)}] ({params[int(o)][1]}) is not an array")
        outs.append(int(o))
    bufs = [i for i, a in enumerate(checked) if isinstance(a, Buffer)]
    for x in range(len(bufs)):
        for y in range(x + 1, len(bufs)):
            if checked[bufs[x]].id == checked[bufs[y]].id:
                raise ValueError(f"args: args[{bufs[x]}] and args[{bufs[y]}] are the same {checked[bufs[x]]}; "
                                 "aliasing arguments are not supported")
    arrays = [i for i, a in enumerate(checked) if isinstance(a, np.ndarray)]
    for x in range(len(arrays)):
        for y in range(x + 1, len(arrays)):
            if np.may_share_memory(checked[arrays[x]], checked[arrays[y]]):
                raise ValueError(f"args: args[{arrays[x]}] and args[{arrays[y]}] overlap in memory; each pointer "
                                 "argument gets its own device buffer, so aliasing arguments are not supported")
    return checked, tuple(dict.fromkeys(outs))
