"""Map a fault name reported by the emu worker process to its KernelFault class."""
from __future__ import annotations

from harness.backends import base


BAD_LAUNCH = "BadLaunch"   # emu::BAD_LAUNCH: grid/block/shared size outside the CUDA limits


def fault_class(name: str) -> type:
    cls = getattr(base, name, None)
    if isinstance(cls, type) and issubclass(cls, base.KernelFault):
        return cls
    return base.KernelCrash


def fault_error(name: str, launch: "base.LaunchInfo | None", detail: str) -> Exception:
    """The exception for a fault the worker reported: a bad launch configuration is the caller's error
    (ValueError, like the backend's own argument checks); everything else is a KernelFault."""
    if name == BAD_LAUNCH:
        return ValueError(f"launch: {launch}: {detail}" if launch else f"launch: {detail}")
    return fault_class(name)(launch, detail)
