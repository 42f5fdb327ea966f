"""Launch arguments of the emu backend: the one validator (harness.backends.args.plan_args) for arrays and
scalars, plus resident Buffers (Module.alloc) in pointer positions."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from cudasrc.signatures import KernelSignature
from cudasrc.types import SCALAR_DTYPES, element_ctype
from harness.backends.args import BufferArg, plan_args
from harness.backends.base import Buffer


def check_args(sig: KernelSignature, args: Sequence[object], outputs: Sequence[int],
               native_sizes: Sequence[int]) -> tuple[list, tuple[int, ...]]:
    """Validated (args, outputs): every array and scalar through plan_args (same rules and messages as every
    backend); a Buffer must sit in a pointer position and hold the pointee's dtype, and no Buffer may be
    passed twice (aliasing arguments are not supported)."""
    args = list(args)
    stand_in = list(args)
    params = sig.params
    for i, a in enumerate(args):
        if not isinstance(a, Buffer) or i >= len(params):
            continue
        ctype, pname = params[i]
        what = f"args[{i}] ({pname}: {ctype})"
        if not ctype.endswith("*"):
            raise ValueError(f"{what}: a resident {a} can only be passed to a pointer parameter")
        want = SCALAR_DTYPES.get(element_ctype(ctype).replace("volatile ", "").strip())
        if want is not None and a.dtype != want:
            raise ValueError(f"{what}: expected a buffer of {want}, got {a}")
        stand_in[i] = np.empty(1, dtype=want if want is not None else a.dtype)   # checked by plan_args' rules
    plan = plan_args(sig, stand_in, outputs, native_sizes, empty_ok=False)
    checked = [args[p.index] if isinstance(args[p.index], Buffer) else
               (p.array if isinstance(p, BufferArg) else p.value) for p in plan]
    bufs = [i for i, a in enumerate(checked) if isinstance(a, Buffer)]
    for x in range(len(bufs)):
        for y in range(x + 1, len(bufs)):
            if checked[bufs[x]].id == checked[bufs[y]].id:
                raise ValueError(f"args: args[{bufs[x]}] and args[{bufs[y]}] are the same {checked[bufs[x]]}; "
                                 "aliasing arguments are not supported")
    return checked, tuple(int(o) for o in outputs)
