"""Faults the emu backend adds to the common family in harness.backends.base."""
from __future__ import annotations

from harness.backends import base


class UninitializedRead(base.KernelFault):
    """The result depended on the poison pattern: the kernel read shared memory, or an output, before writing it."""


def fault_class(name: str) -> type:
    if name == "UninitializedRead":
        return UninitializedRead
    cls = getattr(base, name, None)
    if isinstance(cls, type) and issubclass(cls, base.KernelFault):
        return cls
    return base.KernelCrash
