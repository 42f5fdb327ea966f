"""The interface every execution backend implements, and the faults a launch can raise.

A backend compiles CUDA C source into a module; a module launches a kernel by name with numpy
arrays and numpy scalars. Arrays are copied to device buffers before the launch and back into the
same arrays after it; the arrays named in `outputs` are poisoned before the launch and must be
written in full. Every fault names the kernel, the launch and what was seen.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import numpy as np

# Outputs are poisoned with these byte patterns, one per run; an element that still holds the pattern
# after runs with both patterns was not written (one pattern alone could be a legitimately written value).
POISON_BYTES = (0xA5, 0x5A)
# Guard bands around every buffer are filled with this byte and verified after the launch.
SENTINEL_BYTE = 0xC3
GUARD_BYTES = 256


@dataclass(frozen=True)
class LaunchInfo:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    def __str__(self) -> str:
        g = "x".join(map(str, self.grid))
        b = "x".join(map(str, self.block))
        return f"{self.kernel}<<<{g}, {b}, {self.shared_bytes}>>>"


class KernelFault(RuntimeError):
    """A kernel misbehaved. `launch` says which launch; `detail` says what was seen."""

    def __init__(self, launch: "LaunchInfo | None", detail: str):
        self.launch = launch
        self.detail = detail
        where = f"{launch}: " if launch else ""
        super().__init__(f"{type(self).__name__}: {where}{detail}")


class OutOfBounds(KernelFault):
    """A write (or, under a sanitizer, a read) outside a buffer: a guard band was changed."""


class UnwrittenOutput(KernelFault):
    """Elements of an output still hold the poison pattern after the launch."""


class RaceDetected(KernelFault):
    """Different thread schedules gave different results for the same launch."""


class BarrierDivergence(KernelFault):
    """Threads of a block reached different barriers, or some exited while others wait."""


class Deadlock(KernelFault):
    """No thread of a block can make progress."""


class KernelCrash(KernelFault):
    """The kernel crashed (signal, illegal address, sticky CUDA error)."""


class KernelTimeout(KernelFault):
    """The launch did not finish in its time limit."""


class UninitializedRead(KernelFault):
    """The result depended on the poison pattern: the kernel read shared memory, or an output, before writing it."""


class UnsupportedConstruct(KernelFault):
    """The source uses something this backend cannot run; the message names the construct."""


class ResourceExhausted(KernelFault):
    """The case needs more host or device memory than there is: a limit of the machine, not the kernel's
    fault; the case is unchecked, and the run goes on with the next one."""


class BuildError(RuntimeError):
    """The source did not compile for this backend (compiler output attached)."""


@dataclass(frozen=True)
class Buffer:
    """A handle to a resident device buffer (Module.alloc): passed to launch in place of an array, it is used
    where it lives, without a copy. `id` is unique within its backend."""
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    id: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


class Module(ABC):
    """Compiled source: launch its kernels by name."""

    @property
    @abstractmethod
    def kernel_names(self) -> tuple[str, ...]: ...

    @abstractmethod
    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: Sequence[object], outputs: Sequence[int] = ()) -> "LaunchResult": ...

    # Resident buffers (model-level work: KV cache, activations kept on the device between launches).
    @property
    def supports_resident_buffers(self) -> bool:
        return False

    def alloc(self, name: str, shape, dtype, init: "np.ndarray | None" = None) -> Buffer:
        """A resident device buffer framed by guard bands; poisoned when `init` is None, else a copy of it."""
        raise NotImplementedError(f"{type(self).__name__}: this backend has no resident buffers")

    def write(self, buf: Buffer, array: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__}: this backend has no resident buffers")

    def read(self, buf: Buffer) -> np.ndarray:
        """A copy of the buffer's contents."""
        raise NotImplementedError(f"{type(self).__name__}: this backend has no resident buffers")

    def free(self, buf: Buffer) -> None:
        raise NotImplementedError(f"{type(self).__name__}: this backend has no resident buffers")


@dataclass
class LaunchResult:
    """What a launch reports besides the arrays it wrote back."""
    launch: LaunchInfo
    elapsed_ms: "float | None" = None    # GPU: kernel time per launch (median of timed batches) where asked for
    notes: tuple[str, ...] = ()
    timing: "dict | None" = None         # GPU: how elapsed_ms was measured (batches, spread), or why it was not


class Backend(ABC):
    name: str = "?"

    @abstractmethod
    def load(self, source: str, flags: Sequence[str] = ()) -> Module: ...

    def describe(self) -> dict:
        return {"backend": self.name}


def as_dim3(value: "Sequence[int] | int", what: str) -> tuple[int, int, int]:
    """Normalise grid/block to three positive ints; raise ValueError naming the argument otherwise."""
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"{what}: expected 1 to 3 positive sizes, got {tuple(value)!r}")
    return dims + (1,) * (3 - len(dims))  # type: ignore[return-value]
