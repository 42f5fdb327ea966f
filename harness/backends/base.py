"""The interface every execution backend implements, and the faults a launch can raise.

A backend compiles CUDA C source into a module; a module launches a kernel by name with numpy
arrays and numpy scalars. Arrays are copied to device buffers before the launch and back into the
same arrays after it; the arrays named in `outputs` are poisoned before the launch and must be
written in full. Every fault names the kernel, the launch and what was seen.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
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
    """A kernel misbehaved. `launch` says which launch; `detail` says what was seen.

    tool_limit: the fault is the tool's limit, not the kernel's (an emulator too slow to finish a block):
    judged `unchecked`, never `fail`. coverage: the emu's blocks run under each schedule up to the fault
    (LaunchResult.coverage), so that the report and the replay command can name the block sampling."""

    def __init__(self, launch: "LaunchInfo | None", detail: str, *, tool_limit: bool = False,
                 coverage: "dict | None" = None):
        self.launch = launch
        self.detail = detail
        self.tool_limit = tool_limit
        self.coverage = coverage
        where = f"{launch}: " if launch else ""
        super().__init__(f"{type(self).__name__}: {where}{detail}")

    def __reduce__(self):
        # Exceptions pickle as cls(*args), which a fault's keyword fields do not survive: a verdict raised in a
        # process pool or a Dask worker must reach the caller whole, not as an unpickling error.
        return _rebuilt_fault, (type(self), self.args, self.__dict__)


def _rebuilt_fault(cls: type, args: tuple, state: dict) -> KernelFault:
    fault = cls.__new__(cls)
    Exception.__init__(fault, *args)
    fault.__dict__.update(state)
    return fault


class OutOfBounds(KernelFault):
    """A write (or, under a sanitizer, a read) outside a buffer: a guard band was changed."""


class UnwrittenOutput(KernelFault):
    """Elements of an output still hold the poison pattern after the launch."""


class RaceDetected(KernelFault):
    """Different thread schedules gave different results for the same launch."""


RACE_SCOPES = ("warp", "block", "grid")      # a race's scope, narrowest first (DataRace.scope, DataRace.kinds)
# What a race's stores did to the bytes, from the narrowest claim to none (DataRace.kinds): "same" (two plain
# stores, each leaving the bytes as they were), "kept" (every store wrote the bytes its racing reads and stores
# saw), "differ", "?" (not known)
RACE_VALUES = ("same", "kept", "differ", "?")


class DataRace(KernelFault):
    """Two accesses to the same memory, at least one a write and not both atomic, that the CUDA memory model
    leaves unordered within one launch (the emu's happens-before detector), whatever values they carry.

    races: the distinct races told in detail, the first one first, each naming both accesses with its extent;
    distinct: how many distinct races the launch had (more than len(races) where some were left out);
    stopped_by: the fault that stopped the launch after the races ("Class: detail"), or None;
    same_value: every race of the launch is two plain stores that left the bytes as they were (a same-value
    write-write race: benign by GPUVerify's and compute-sanitizer racecheck's convention, a race all the same);
    scope: the widest conflict of the launch's races: "warp" (only lanes of one warp: ordered under the lock-step
    execution that GPUs before Volta had), "block", "grid", or "?" where not known;
    kinds: (scope, values) of each distinct race, values one of RACE_VALUES, so that a reader with another notion
    of a race (a verifier that calls same-value stores benign, or checks one block's threads only) can count the
    races it would; races whose details the runtime did not keep are one ("?", "?")."""

    def __init__(self, launch: "LaunchInfo | None", detail: str, *, races: Sequence[str] = (),
                 distinct: "int | None" = None, stopped_by: "str | None" = None, same_value: bool = False,
                 scope: str = "?", kinds: Sequence[tuple[str, str]] = (), tool_limit: bool = False,
                 coverage: "dict | None" = None):
        super().__init__(launch, detail, tool_limit=tool_limit, coverage=coverage)
        self.races = tuple(races)
        self.distinct = len(self.races) if distinct is None else distinct
        self.stopped_by = stopped_by
        self.same_value = same_value
        self.scope = scope
        self.kinds = tuple((str(s), str(v)) for s, v in kinds)


class BarrierDivergence(KernelFault):
    """Threads of a block reached different barriers, or some exited while others wait."""


class Deadlock(KernelFault):
    """No thread of a block can make progress."""


class KernelCrash(KernelFault):
    """The kernel crashed (signal, illegal address, sticky CUDA error)."""


class SandboxViolation(KernelFault):
    """The kernel tried something only host code can do (start a process, write a file, use the network...);
    the CPU backend's sandbox refused it and stopped the worker process."""


class KernelTimeout(KernelFault):
    """The launch did not finish in its time limit."""


class LaterBlockWait(KernelFault):
    """A block spins on an atomic that no thread of its block changes while blocks that the CPU backend runs
    after it have not run yet: on a GPU, whose blocks run at once, another block may release it; the backend runs
    blocks one after another and cannot tell. The tool's limit (unchecked), never the kernel's fault."""

    def __init__(self, launch: "LaunchInfo | None", detail: str, *, tool_limit: bool = True,
                 coverage: "dict | None" = None):
        super().__init__(launch, detail, tool_limit=tool_limit, coverage=coverage)


class UninitializedRead(KernelFault):
    """The result depended on the poison pattern: the kernel read shared memory, or an output, before writing it."""


class UnsupportedConstruct(KernelFault):
    """The source uses something this backend cannot run; the message names the construct. The backend's limit,
    not a verdict on the kernel (a GPU may run it): `unchecked`, never `fail`."""

    def __init__(self, launch: "LaunchInfo | None", detail: str, *, tool_limit: bool = True,
                 coverage: "dict | None" = None):
        super().__init__(launch, detail, tool_limit=tool_limit, coverage=coverage)


class ResourceExhausted(KernelFault):
    """The case needs more host or device memory than there is (or than the tool's own limits allow): a limit
    of the machine or the tool, not the kernel's fault (tool_limit); the case is unchecked, and the run goes on
    with the next one."""

    def __init__(self, launch: "LaunchInfo | None", detail: str, *, tool_limit: bool = True,
                 coverage: "dict | None" = None):
        super().__init__(launch, detail, tool_limit=tool_limit, coverage=coverage)


class LaunchRefused(KernelCrash):
    """The device cannot run this kernel with this launch configuration (threads per block beyond what the
    compiled kernel's registers allow, shared memory beyond the device's limit, a launch the driver refuses).
    Not sticky: the context and the worker stay."""


class ContextFailure(KernelFault):
    """No CUDA context could be created on the device (out of memory, exclusive or prohibited compute mode,
    a driver in trouble): nothing was compiled wrong and no kernel ran."""


class BufferLost(KernelCrash):
    """A resident buffer lived in a worker process that was stopped after a crash, a timeout or a sticky error."""


class BuildError(RuntimeError):
    """The source did not compile for this backend (compiler output attached)."""


class ConfinementRefused(BuildError):
    """The compile failed because the compiler was not allowed to read a file the source includes (harness.confine:
    only the source's own folder, the -I folders and the system's and the toolchain's). qconform's rule, not a fault
    of the kernel's code: its cases are `unchecked`, with the refused path and the -I that would allow it."""


# nvcc's error for a name that its toolkit's CUB does not have (one an older or newer CUB has)
_OTHER_CUB = re.compile(r'namespace "cub" has no member "(\w+)"')
# nvcc failing inside itself: NVVM's verifier on the module it made, an internal assertion. No source's fault.
_COMPILER_FAILED = re.compile(r"^(?!.*#\s*error).*(?:Broken module found|[Ii]nternal [Cc]ompiler [Ee]rror).*$",
                              re.M | re.I)


def build_error(headline: str, excerpt: str, log: str) -> "BuildError | UnsupportedConstruct":
    """The error of a compile that failed: `headline`, then `excerpt` (the compiler's lines worth showing) for a
    BuildError; where confinement refused a file that `log` (the compiler's whole output) names, a
    ConfinementRefused that says so first (harness.confine.explain), then the excerpt. A source written for another
    CUB than the toolkit's, or one nvcc fails on inside itself (NVVM's "Broken module found"), is
    UnsupportedConstruct: the toolkit here cannot build it, which says nothing of it."""
    from harness import confine
    other = _OTHER_CUB.search(log)
    if other:
        return UnsupportedConstruct(None, f"cub::{other.group(1)} is not in the CUB of the CUDA toolkit that compiles "
                                          "here (CUB 3, CUDA 13, dropped CUB 2's functors; qconform gives back "
                                          "cub::Sum, Max and Min only): the kernel was written for another CUB; nvcc "
                                          f"said: {other.group(0)}")
    failed = _COMPILER_FAILED.search(log)
    if failed:
        return UnsupportedConstruct(None, f"nvcc failed inside itself ({failed.group(0).strip()}): the toolkit here "
                                          "cannot build this source, which says nothing of it; another toolkit "
                                          "version may")
    why = confine.explain(log)
    if not why:
        return BuildError(f"{headline}\n{excerpt}".rstrip())
    lines = [line for line in excerpt.splitlines() if line != why]
    return ConfinementRefused("\n".join([why, *lines]).rstrip())


# Flags whose value the build reads (a folder whose headers are part of the module, a macro): one string each, so
# that every reader of the flags (the headers found, the cache key, the compilers' confinement) sees the same value.
_JOINED_VALUE = ("-I", "-D", "-U", "-isystem", "-idirafter", "-iquote", "-include", "-imacros")


def check_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """`flags` as a tuple, each a non-empty string starting with '-'; a flag that takes a value has it in the same
    string (`-Iinclude`, not `-I`, `include`). ValueError names the flag."""
    if isinstance(flags, (str, bytes)):
        raise ValueError(f"flags: expected a sequence of compiler option strings, got the string {flags!r}")
    out = []
    for f in flags:
        if not isinstance(f, str) or not f.startswith("-"):
            raise ValueError(f"flags: each flag must be a string starting with '-', got {f!r}")
        if f in _JOINED_VALUE:
            raise ValueError(f"flags: {f!r} needs its value in the same string ('{f}VALUE', e.g. "
                             f"'-I/path/to/headers'): the headers it names are part of the build")
        out.append(f)
    return tuple(out)


def source_flags(paths: Sequence["str | Path"], include_dirs: Sequence["str | Path"] = ()) -> tuple[str, ...]:
    """The compile flags of a source made of the files `paths`: -I each one's own folder first (a backend compiles a
    copy elsewhere, and `#include "x.h"` looks beside the including file), then -I each of `include_dirs`; absolute,
    each folder once."""
    folders = [Path(p).resolve().parent for p in paths] + [Path(d).resolve() for d in include_dirs]
    return tuple(f"-I{d}" for d in dict.fromkeys(folders))


@dataclass(frozen=True)
class Buffer:
    """Handle of a resident device buffer (Module.alloc): it keeps its contents between launches, so a
    sequence of launches (one decode step) passes data along without copies through the caller. `id` is
    unique within the module that allocated it."""
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    id: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __str__(self) -> str:
        return f"buffer '{self.name}' ({'x'.join(map(str, self.shape))} {self.dtype})"


@dataclass(frozen=True)
class Struct:
    """A by-value argument of a struct (or struct-wrapped array) parameter: `value`, a numpy structured scalar
    laid out as the C struct (np.void; its size must equal the compiled parameter's), with the device-pointer
    fields at the byte offsets in `pointers` set to resident buffers (Module.alloc). The kernel uses those
    buffers in place: they are neither copied per schedule nor guard-checked (the race detector watches them),
    so pass through a struct only what the kernel reads (a graph in CSR form), and outputs as plain pointer
    parameters."""
    value: np.void
    pointers: tuple[tuple[int, Buffer], ...] = ()


@dataclass(frozen=True)
class Symbol:
    """A by-value argument taken from the module: the current contents of its file-scope `__device__` or
    `__constant__` variable `name` (e.g. a device function's address held in a `__device__` function-pointer
    variable, as a host program would fetch it with cudaMemcpyFromSymbol)."""
    name: str


def check_buffer_request(name: str, shape, dtype, init) -> tuple[str, tuple[int, ...], np.dtype]:
    """Validate Module.alloc's arguments: (name, shape, dtype) normalised, or ValueError naming the rule."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: a buffer needs a non-empty string name, got {name!r}")
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise ValueError(f"shape: expected a sequence of positive sizes for buffer '{name}', got {shape!r}") from None
    if not dims or any(d < 1 for d in dims):
        raise ValueError(f"shape: buffer '{name}' needs at least one dimension and positive sizes, got {shape!r}")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype: {dtype!r} is not a numpy dtype (buffer '{name}')") from None
    if dt.hasobject or dt.itemsize == 0:
        raise ValueError(f"dtype: buffer '{name}' needs a fixed-size numeric dtype, got {dt}")
    if init is not None:
        check_buffer_array(Buffer(name, dims, dt, -1), init, "init")
    return name, dims, dt


def check_buffer_array(buf: Buffer, array, what: str) -> np.ndarray:
    """`array` as the contents of `buf`: same shape and dtype exactly (no silent casts or reshapes)."""
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{what}: expected a numpy array for {buf}, got {type(array).__name__}")
    if array.shape != buf.shape or array.dtype != buf.dtype:
        raise ValueError(f"{what}: {buf} takes a {buf.shape} {buf.dtype} array, got {array.shape} {array.dtype}")
    return np.ascontiguousarray(array)


class Module(ABC):
    """Compiled source: launch its kernels by name.

    Resident buffers (where `supports_resident_buffers`): `alloc` makes a device buffer with guard bands,
    filled with `init` or poisoned; `write` / `read` copy whole contents in and out; `free` releases it. A
    Buffer passed in `launch(args=...)` is used in place. An index in `outputs` naming a Buffer is poisoned
    before the launch and must be written in full; other Buffers keep their contents (read, or partly
    written: a KV-cache row). Every check of an array argument applies to Buffers too."""

    @property
    @abstractmethod
    def kernel_names(self) -> tuple[str, ...]: ...

    @abstractmethod
    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: Sequence[object], outputs: Sequence[int] = ()) -> "LaunchResult": ...

    @property
    def supports_resident_buffers(self) -> bool:
        return False

    def alloc(self, name: str, shape, dtype, init: "np.ndarray | None" = None) -> Buffer:
        raise NotImplementedError(f"{type(self).__name__}: resident buffers are not supported by this backend")

    def write(self, buf: Buffer, array: np.ndarray) -> None:
        raise NotImplementedError(f"{type(self).__name__}: resident buffers are not supported by this backend")

    def read(self, buf: Buffer) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__}: resident buffers are not supported by this backend")

    def free(self, buf: Buffer) -> None:
        raise NotImplementedError(f"{type(self).__name__}: resident buffers are not supported by this backend")

    def set_symbol(self, name: str, array: "np.ndarray | Buffer | Struct") -> None:
        """Set the module's file-scope `__constant__` / `__device__` variable `name` for the launches that
        follow (as cudaMemcpyToSymbol does): `array`'s bytes must fill it exactly. A resident Buffer sets a
        pointer variable (`__device__ float* y;`) to its address; a Struct, a struct variable with pointer
        fields."""
        raise NotImplementedError(f"{type(self).__name__}: setting module symbols is not supported by this backend")


@dataclass
class LaunchResult:
    """What a launch reports besides the arrays it wrote back."""
    launch: LaunchInfo
    elapsed_ms: "float | None" = None    # GPU: kernel time per launch (median of timed batches) where asked for
    notes: tuple[str, ...] = ()
    coverage: "dict | None" = None       # emu: blocks run under each schedule (block sampling), for the report
    timing: "dict | None" = None         # GPU: how elapsed_ms was measured (batches, spread), or why it was not
    caveats: tuple[str, ...] = ()        # the notes that qualify a clean result (an undefined barrier, a division
    #                                      by zero): also in `notes`; a caller that shows only verdicts shows these


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
