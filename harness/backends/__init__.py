"""Execution backends behind one interface: `emu` (CPU), `gpu` (PyCUDA), `auto` (gpu where a GPU is present).

In: CUDA C source (any source, not only qconform's) and launches (kernel name, grid, block, shared bytes, numpy
arguments, which arguments are outputs). Out: the outputs written back into the caller's arrays, a
`LaunchResult` (timing, notes), or a `KernelFault` naming the kernel, the launch and what went wrong. Arguments
are checked by the one validator in `args`; compiled modules are cached through harness.cache."""
from __future__ import annotations

from .base import (  # noqa: F401  (re-exported API)
    Backend, BarrierDivergence, Buffer, BufferLost, BuildError, ConfinementRefused, ContextFailure, DataRace,
    Deadlock, KernelCrash, KernelFault, KernelTimeout, LaunchInfo, LaunchRefused, LaunchResult, Module, OutOfBounds,
    RaceDetected, ResourceExhausted, SandboxViolation, UninitializedRead, UnsupportedConstruct, UnwrittenOutput,
)

BACKEND_NAMES = ("emu", "gpu", "auto")


def gpu_unavailable_reason() -> "str | None":
    """None when a CUDA GPU and PyCUDA are usable here, else why not (imports PyCUDA lazily)."""
    from . import gpu
    return gpu.unavailable_reason()


def get_backend(name: str = "auto", **options) -> Backend:
    if name == "auto":
        name = "gpu" if gpu_unavailable_reason() is None else "emu"
    if name == "emu":
        from harness.backends.emu.backend import EmuBackend
        return EmuBackend(**options)
    if name == "gpu":
        from .gpu import GpuBackend
        return GpuBackend(**options)
    raise ValueError(f"backend: unknown backend {name!r}; expected one of {', '.join(BACKEND_NAMES)}")
