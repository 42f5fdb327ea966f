"""Map a fault name reported by the emu worker process to its KernelFault class."""
from __future__ import annotations

from harness.backends import base
from harness.backends.base import UninitializedRead  # noqa: F401  (re-exported for older imports)


def fault_class(name: str) -> type:
    cls = getattr(base, name, None)
    if isinstance(cls, type) and issubclass(cls, base.KernelFault):
        return cls
    return base.KernelCrash
