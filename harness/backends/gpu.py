"""The GPU backend: kernels compiled by nvcc through PyCUDA and launched on a CUDA device.

It gives the same guarantees as the CPU backend where a GPU can give them cheaply: every array travels to
a plain device allocation (never managed memory) framed by guard bands of SENTINEL_BYTE that are verified
after each launch, outputs are poisoned with each of POISON_BYTES in turn and must be written in full,
scalars pass by value with their type checked against the kernel's signature, and every CUDA call is
checked. A sticky CUDA error (illegal address, trap, launch failure) fails the launch with KernelCrash
and retires the CUDA context; the next load or launch compiles nothing again but loads the module into a
fresh context, so one crashing case never poisons the rest of a run.

The first half of this module is pure numpy (source preparation, argument marshalling, guard and poison
bookkeeping) and is tested without a GPU; the second half talks to PyCUDA, which is imported lazily so
that this module imports everywhere.
"""
from __future__ import annotations

import atexit
import importlib
import os
import re
import statistics
import time
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import numpy as np

from harness.backends.args import BufferArg, ScalarArg, plan_args
from harness.cache import cache_dir, cache_entry, content_key
from cudasrc.signatures import KernelSignature, kernel_signatures

from .base import (
    GUARD_BYTES, POISON_BYTES, SENTINEL_BYTE, Backend, BuildError, KernelCrash, KernelTimeout, LaunchInfo,
    LaunchResult, Module, OutOfBounds, UnwrittenOutput, as_dim3,
)

class LaunchRefused(KernelCrash):
    """The device cannot run this kernel with this launch configuration (threads per block beyond what the
    compiled kernel's registers allow, shared memory beyond the device's limit). Not sticky: the context stays."""


# ------------------------------------------------------------------------------------------------------
# Pure helpers (no PyCUDA)
# ------------------------------------------------------------------------------------------------------

_KERNEL_KEYWORD = re.compile(r"\b__global__\b")
_HALF_USE = re.compile(r"\b(__half2?|half2?|__float2half\w*|__half2float|__hadd\w*|__hmul\w*)\b")
_BF16_USE = re.compile(r"\b(__nv_bfloat16\w*|__float2bfloat16\w*|__bfloat162float)\b")


def prepare_source(source: str) -> str:
    """The text nvcc compiles: every kernel given C linkage, and the fp16/bf16 headers where used.

    PyCUDA looks kernels up by their symbol name. Wrapping the whole file in `extern "C" { }` (PyCUDA's
    default) breaks C++ headers such as <cuda_fp16.h>, so each `__global__` gets its own `extern "C"`
    instead, on the same line so that compiler messages keep their line numbers. Kernel strings decoded
    from other emitters rely on their host program for <cuda_fp16.h>; it is added when the source uses
    half types, followed by `#line 1` for the same reason.
    """
    out, last = [], 0
    for m in _KERNEL_KEYWORD.finditer(source):
        before = source[:m.start()].rstrip()
        last_line = before[before.rfind("\n") + 1:].lstrip()
        # A template kernel (after `template <...>`, not after an `#include <...>`) cannot have C linkage.
        template = before.endswith(">") and not last_line.startswith("#")
        if not (before.endswith('extern "C"') or template):
            out.append(source[last:m.start()])
            out.append('extern "C" ')
            last = m.start()
    out.append(source[last:])
    text = "".join(out)
    prelude = []
    if _HALF_USE.search(source) and "cuda_fp16.h" not in source:
        prelude.append("#include <cuda_fp16.h>")
    if _BF16_USE.search(source) and "cuda_bf16.h" not in source:
        prelude.append("#include <cuda_bf16.h>")
    if prelude:
        text = "\n".join(prelude) + "\n#line 1\n" + text
    return text


def validate_flags(flags: Sequence[str]) -> tuple[str, ...]:
    if isinstance(flags, (str, bytes)) or not all(isinstance(f, str) and f for f in flags):
        raise ValueError(f"flags: expected a sequence of non-empty nvcc option strings, got {flags!r}")
    return tuple(flags)


def device_index_for_worker(count: int, env: "os._Environ[str] | dict[str, str]" = os.environ) -> int:
    """Which device this process uses: $QCONFORM_GPU if set, else pytest-xdist worker i -> device i % count."""
    if count < 1:
        raise ValueError("device count: no CUDA device to choose from")
    chosen = env.get("QCONFORM_GPU", "").strip()
    if chosen:
        if not chosen.isdigit() or int(chosen) >= count:
            raise ValueError(f"QCONFORM_GPU: expected a device index in 0..{count - 1}, got {chosen!r}")
        return int(chosen)
    worker = env.get("PYTEST_XDIST_WORKER", "")
    m = re.fullmatch(r"gw(\d+)", worker)
    return int(m.group(1)) % count if m else 0


def guard_damage(before: np.ndarray, after: np.ndarray, nbytes: int, what: str) -> Optional[str]:
    """None when both guard bands (read back from the device) still hold SENTINEL_BYTE, else where they changed.

    Offsets are in bytes relative to the buffer's first byte: -1 is the byte just before it, `nbytes` the
    byte just past its end."""
    found = []
    for side, band, origin in (("before", before, -GUARD_BYTES), ("after", after, nbytes)):
        bad = np.flatnonzero(band != SENTINEL_BYTE)
        if bad.size:
            found.append(f"{bad.size} guard byte(s) {side} the buffer changed, the first at byte offset "
                         f"{int(bad[0]) + origin} relative to the buffer start (buffer is {nbytes} bytes)")
    return f"{what}: " + "; ".join(found) if found else None


def elements_holding(data: np.ndarray, itemsize: int, pattern: int) -> np.ndarray:
    """Per element: does every byte of it equal `pattern`?"""
    if itemsize == 0 or data.size == 0:
        return np.zeros(0, dtype=bool)
    return np.all(data.reshape(-1, itemsize) == pattern, axis=1)


def unwritten_report(buf: BufferArg, runs: Sequence[np.ndarray]) -> Optional[str]:
    """After one run per poison pattern: the elements that held the pattern every time were never written."""
    itemsize = buf.array.itemsize
    mask = None
    for pattern, data in zip(POISON_BYTES, runs):
        held = elements_holding(data, itemsize, pattern)
        mask = held if mask is None else mask & held
    if mask is None or not mask.any():
        return None
    idx = np.flatnonzero(mask)
    first = np.unravel_index(int(idx[0]), buf.array.shape) if buf.array.ndim else ()
    return (f"{buf.what}: {idx.size} of {mask.size} element(s) were never written (still poison after runs "
            f"with bytes {', '.join(f'0x{p:02X}' for p in POISON_BYTES)}); the first at index "
            f"{tuple(int(i) for i in first)}")


def runs_disagree(buf: BufferArg, runs: Sequence[np.ndarray]) -> Optional[str]:
    """Elements written in every run but to different values: the kernel read its output, or is nondeterministic."""
    if len(runs) < 2 or buf.array.nbytes == 0:
        return None
    itemsize = buf.array.itemsize
    written = np.ones(buf.array.size, dtype=bool)
    for pattern, data in zip(POISON_BYTES, runs):
        written &= ~elements_holding(data, itemsize, pattern)
    rows = [d.reshape(-1, itemsize) for d in runs]
    differ = np.any(rows[0] != rows[1], axis=1) & written
    if not differ.any():
        return None
    first = int(np.flatnonzero(differ)[0])
    return (f"{buf.what}: {int(differ.sum())} written element(s) differ between the two poisoned runs "
            f"(first at flat index {first}); the kernel reads output memory before writing it, or is "
            f"not deterministic")


def check_timing(timing: object) -> Optional[tuple[int, int]]:
    if timing is None:
        return None
    ok = (isinstance(timing, (tuple, list)) and len(timing) == 2
          and all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in timing)
          and timing[0] >= 0 and timing[1] >= 1)
    if not ok:
        raise ValueError(f"timing: expected (warmup >= 0, repeats >= 1) as two ints, got {timing!r}")
    return int(timing[0]), int(timing[1])


# ------------------------------------------------------------------------------------------------------
# Finding the toolkit and the device
# ------------------------------------------------------------------------------------------------------

# The GPU backend searches the system's CUDA toolkit before the NVIDIA wheels: its cubins must load on the local
# driver, which a newer wheel nvcc can outrun. harness.toolchain.finder does the search, in this order.
GPU_NVCC_SOURCES = ("env", "path", "cuda_home", "system", "wheel")


def find_nvcc() -> Optional[str]:
    """$QCONFORM_NVCC (an unusable one is an error), else nvcc on PATH, $CUDA_HOME/$CUDA_PATH, the system
    toolkit, and last the `toolchain` extra's wheel."""
    from harness.toolchain.finder import locate
    found, _source = locate("nvcc", GPU_NVCC_SOURCES, os.environ)
    return str(found) if found else None


def nvcc_identity(nvcc: str) -> str:
    """The nvcc release and build, part of the cubin cache key (a toolkit change must not reuse old cubins)."""
    from harness.toolchain.finder import nvcc_version
    return nvcc_version(nvcc)


def _import_driver():
    return importlib.import_module("pycuda.driver")


def unavailable_reason() -> Optional[str]:
    """None when PyCUDA, a CUDA driver, a device and nvcc are all usable here; else a sentence saying why not."""
    try:
        cuda = _import_driver()
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "pycuda":
            return "PyCUDA is not installed (pip install pycuda, which builds against the local CUDA toolkit)"
        return f"PyCUDA cannot be imported: {exc}"
    except ImportError as exc:   # the extension links libcuda.so.1, the driver library
        return f"PyCUDA is installed but the CUDA driver library could not be loaded: {exc}"
    try:
        cuda.init()
        count = cuda.Device.count()
    except cuda.Error as exc:
        return f"the CUDA driver could not be initialised (no driver or no device): {exc}"
    if count < 1:
        return "the CUDA driver reports no device"
    try:
        device_index_for_worker(count)
    except ValueError as exc:
        return str(exc)
    from harness.toolchain.finder import ToolchainNotFound
    try:
        nvcc = find_nvcc()
    except ToolchainNotFound as exc:
        return str(exc)
    if nvcc is None:
        return ("nvcc was not found ($QCONFORM_NVCC, PATH, $CUDA_HOME/bin, the system CUDA toolkit, the toolchain "
                "extra's wheel); PyCUDA compiles kernels with it")
    return None


# ------------------------------------------------------------------------------------------------------
# Device sessions: one CUDA context per device and process, replaced after a sticky error
# ------------------------------------------------------------------------------------------------------

class _DeviceSession:
    """Owns the CUDA context of one device in this process and the modules loaded into it.

    The context is pushed only around each operation, so several backends (and PyCUDA's own stack
    discipline) never see a stale current context. Modules loaded into a retired context are reloaded
    from their cubin on next use.
    """

    def __init__(self, cuda, index: int):
        self.cuda = cuda
        self.index = index
        self.device = cuda.Device(index)
        self.context = None
        self.loaded: dict[str, object] = {}       # cubin key -> pycuda module in the current context
        self.copy_gbps: dict[tuple[int, int, int], float] = {}

    def _ensure_context(self) -> None:
        if self.context is None:
            self.context = self.device.make_context()   # creates and pushes
            self.cuda.Context.pop()
            self.loaded = {}

    @contextmanager
    def active(self) -> Iterator[object]:
        self._ensure_context()
        self.context.push()
        try:
            yield self.cuda
        finally:
            try:
                self.cuda.Context.pop()
            except self.cuda.Error:
                pass    # a context broken by a sticky error may refuse even this; it is retired anyway

    def retire(self) -> None:
        """Drop the context after a sticky error: its modules go with it; the next use makes a new one."""
        self.loaded = {}
        ctx, self.context = self.context, None
        if ctx is not None:
            try:
                ctx.detach()
            except self.cuda.Error:
                pass

    def module(self, key: str, cubin: bytes):
        mod = self.loaded.get(key)
        if mod is None:
            mod = self.cuda.module_from_buffer(cubin)
            self.loaded[key] = mod
        return mod


_SESSIONS: dict[int, _DeviceSession] = {}


def _session(cuda, index: int) -> _DeviceSession:
    sess = _SESSIONS.get(index)
    if sess is None or sess.cuda is not cuda:
        sess = _DeviceSession(cuda, index)
        _SESSIONS[index] = sess
    return sess


@atexit.register
def _retire_all() -> None:
    for sess in list(_SESSIONS.values()):
        sess.retire()
    _SESSIONS.clear()


# ------------------------------------------------------------------------------------------------------
# Backend and module
# ------------------------------------------------------------------------------------------------------

class GpuBackend(Backend):
    """Runs kernels on CUDA device `device` (default: $QCONFORM_GPU, else xdist worker i -> device i % count).

    `launch_timeout_s` bounds each launch: a kernel still running then raises KernelTimeout and its
    context is retired (a GPU kernel cannot be interrupted; the driver tears it down with the context).
    """

    name = "gpu"

    def __init__(self, device: Optional[int] = None, launch_timeout_s: float = 60.0):
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"the gpu backend is unavailable: {reason}")
        if not launch_timeout_s > 0:
            raise ValueError(f"launch_timeout_s: must be positive, got {launch_timeout_s!r}")
        self.cuda = _import_driver()
        count = self.cuda.Device.count()
        if device is None:
            device = device_index_for_worker(count)
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) or not 0 <= device < count:
            raise ValueError(f"device: expected a device index in 0..{count - 1}, got {device!r}")
        self.device_index = int(device)
        self.launch_timeout_s = float(launch_timeout_s)
        self.nvcc = find_nvcc()
        self.session = _session(self.cuda, self.device_index)

    # -- compile ---------------------------------------------------------------------------------------
    @property
    def arch(self) -> str:
        major, minor = self.session.device.compute_capability()
        return f"sm_{major}{minor}"

    def load(self, source: str, flags: Sequence[str] = ()) -> "GpuModule":
        if not isinstance(source, str) or not source.strip():
            raise ValueError("source: expected non-empty CUDA C source text")
        flags = validate_flags(flags)
        sigs = kernel_signatures(source)
        if not sigs:
            raise ValueError("source: no __global__ kernel found")
        text = prepare_source(source)
        options = [*flags, "-arch", self.arch]
        key = content_key(text, *options, nvcc_identity(self.nvcc))
        cubin = self._cached_cubin(key, text, flags)
        module = GpuModule(self, source, flags, sigs, key, cubin)
        module.loaded()   # load now so that a module the driver rejects fails here, not at first launch
        return module

    def _cached_cubin(self, key: str, text: str, flags: tuple[str, ...]) -> bytes:
        def make(tmp) -> None:
            compiler = importlib.import_module("pycuda.compiler")
            try:
                # PyCUDA's SourceModule is compile() + module_from_buffer(); its own cache writes in place, which
                # parallel test workers could read half-written, so compile uncached and cache through ours.
                cubin = compiler.compile(text, nvcc=self.nvcc, options=list(flags), no_extern_c=True,
                                         arch=self.arch, cache_dir=False)
            except self.cuda.CompileError as exc:
                log = "\n".join(s for s in (getattr(exc, "stdout", ""), getattr(exc, "stderr", "")) if s)
                raise BuildError(f"nvcc could not compile the source for {self.arch}: {exc}\n{log}".rstrip()) from exc
            tmp.write_bytes(cubin)

        return cache_entry(cache_dir("gpu-cubin") / f"{key}.cubin", make)[0].read_bytes()

    # -- facts -----------------------------------------------------------------------------------------
    def describe(self) -> dict:
        dev, cuda = self.session.device, self.cuda
        drv = cuda.get_driver_version()
        attr = cuda.device_attribute
        return {
            "backend": self.name,
            "device_index": self.device_index,
            "device": dev.name(),
            "compute_capability": "%d.%d" % dev.compute_capability(),
            "multiprocessors": dev.get_attribute(attr.MULTIPROCESSOR_COUNT),
            "memory_bytes": int(dev.total_memory()),
            "driver": f"{drv // 1000}.{drv % 1000 // 10}",
            "pycuda": getattr(importlib.import_module("pycuda"), "VERSION_TEXT", "?"),
            "nvcc": nvcc_identity(self.nvcc).splitlines()[-1] if self.nvcc else None,
        }

    def copy_bandwidth_gbps(self, nbytes: int = 512 << 20, warmup: int = 2, repeats: int = 10) -> float:
        """Device-to-device copy bandwidth in GB/s (1e9 bytes/s), counting bytes read plus bytes written.

        The median over `repeats` event-timed copies of `nbytes` after `warmup` untimed ones: the ceiling a
        bandwidth-bound kernel's achieved (read + written) bytes per second is compared with.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 1 << 20:
            raise ValueError(f"nbytes: expected an int of at least 1 MiB, got {nbytes!r}")
        check_timing((warmup, repeats))
        key = (int(nbytes), warmup, repeats)
        if key not in self.session.copy_gbps:    # measured once per process and device
            self.session.copy_gbps[key] = self._measure_copy(int(nbytes), warmup, repeats)
        return self.session.copy_gbps[key]

    def _measure_copy(self, nbytes: int, warmup: int, repeats: int) -> float:
        times = []
        with self.session.active() as cuda:
            src = dst = None
            try:
                src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
                cuda.memset_d8(src, 0x3C, nbytes)
                for i in range(warmup + repeats):
                    start, end = cuda.Event(), cuda.Event()
                    start.record()
                    cuda.memcpy_dtod(dst, src, nbytes)
                    end.record()
                    end.synchronize()
                    if i >= warmup:
                        times.append(start.time_till(end))
            finally:
                for buf in (src, dst):
                    if buf is not None:
                        buf.free()
        ms = statistics.median(times)
        return 2 * nbytes / (ms * 1e-3) / 1e9


class GpuModule(Module):
    def __init__(self, backend: GpuBackend, source: str, flags: tuple[str, ...], sigs: list[KernelSignature],
                 key: str, cubin: bytes):
        self.backend = backend
        self.source = source
        self.flags = flags
        self.signatures = {s.name: s for s in sigs}
        self.key = key
        self.cubin = cubin

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(self.signatures)

    def loaded(self):
        """The PyCUDA module in the device's current context (reloaded after a context was retired)."""
        sess = self.backend.session
        with sess.active() as cuda:
            try:
                return sess.module(self.key, self.cubin)
            except cuda.Error as exc:
                raise BuildError(f"the CUDA driver rejected the compiled module: {exc}") from exc

    def resolve(self, name: str) -> None:
        """Check that kernel `name` can be launched: BuildError if the compiled module lacks it."""
        self._signature(name)
        with self.backend.session.active():
            self.function(name)

    def function(self, name: str):
        """The kernel's PyCUDA function in the current context (call inside the session's active block)."""
        cuda = self.backend.cuda
        try:
            return self.backend.session.module(self.key, self.cubin).get_function(name)
        except cuda.Error as exc:
            raise BuildError(f"kernel {name} is not in the compiled module under that name (a template or "
                             f"static kernel cannot be launched by name): {exc}") from exc

    def _signature(self, name: str) -> KernelSignature:
        try:
            return self.signatures[name]
        except KeyError:
            raise ValueError(f"name: no kernel {name!r} in this module; it has {', '.join(self.signatures)}") \
                from None

    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: Sequence[object], outputs: Sequence[int] = (),
               timing: "tuple[int, int] | None" = None) -> LaunchResult:
        sig = self._signature(name)
        grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")
        if isinstance(shared_bytes, bool) or not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
            raise ValueError(f"shared_bytes: expected a non-negative int, got {shared_bytes!r}")
        plan = plan_args(sig, args, outputs)
        timing = check_timing(timing)
        info = LaunchInfo(name, grid3, block3, int(shared_bytes))
        self.loaded()
        return _Launch(self.backend, self, info, plan, timing).run()


class _Launch:
    """One checked launch: allocate, run once per poison pattern, verify, copy back, optionally time."""

    def __init__(self, backend: GpuBackend, module: GpuModule, info: LaunchInfo,
                 plan: list["BufferArg | ScalarArg"], timing: Optional[tuple[int, int]]):
        self.backend, self.module, self.info, self.plan, self.timing = backend, module, info, plan, timing
        self.buffers = [p for p in plan if isinstance(p, BufferArg)]
        self.outputs = [b for b in self.buffers if b.is_output]
        self.allocs: dict[int, object] = {}
        self.timed_out = False

    def run(self) -> LaunchResult:
        sess = self.backend.session
        try:
            with sess.active() as cuda:
                self.cuda = cuda
                try:
                    function = self.module.function(self.info.kernel)
                    self._check_limits(function)
                    return self._checked_runs(function)
                finally:
                    if not self.timed_out:   # freeing memory a running kernel uses would wait for it
                        self._free()
        except _CudaFailure as failure:
            sess.retire()
            raise failure.fault from failure.cause

    # -- steps -----------------------------------------------------------------------------------------
    def _check_limits(self, function) -> None:
        cuda, info = self.cuda, self.info
        threads = info.block[0] * info.block[1] * info.block[2]
        limit = self._guarded("reading the kernel's thread limit", function.get_attribute,
                              cuda.function_attribute.MAX_THREADS_PER_BLOCK)
        if threads > limit:
            raise LaunchRefused(info, f"block: {info.block} is {threads} threads; the compiled kernel allows at "
                                      f"most {limit} per block on this device (registers, __launch_bounds__)")
        if info.shared_bytes > 48 * 1024:   # above 48 KiB dynamic shared memory must be opted into
            optin = self._guarded("reading the device's shared memory limit",
                                  self.backend.session.device.get_attribute,
                                  cuda.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            static = self._guarded("reading the kernel's static shared memory", function.get_attribute,
                                   cuda.function_attribute.SHARED_SIZE_BYTES)
            if info.shared_bytes + static > optin:
                raise LaunchRefused(info, f"shared_bytes: {info.shared_bytes} dynamic + {static} static bytes exceed "
                                          f"the device's {optin} bytes per block")
            self._guarded("opting into large dynamic shared memory", function.set_attribute,
                          cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, info.shared_bytes)

    def _guarded(self, step: str, call, *args):
        """Run one CUDA call; a CUDA error becomes KernelCrash (after which the context is retired)."""
        try:
            return call(*args)
        except self.cuda.MemoryError as exc:
            raise MemoryError(f"{self.info}: {step}: the device is out of memory: {exc}") from exc
        except self.cuda.Error as exc:
            raise _CudaFailure(KernelCrash(self.info, f"{step} failed: {type(exc).__name__}: {exc}; the CUDA "
                                                      f"context was retired and later launches use a fresh one"),
                               exc) from exc

    def _upload(self, poison: Optional[int], first: bool) -> None:
        """Guard bands and poison are set on the device (memset); only real data crosses from the host.
        Const inputs go up once; anything the kernel may write goes up fresh for every run."""
        cuda = self.cuda
        for buf in self.buffers:
            n = buf.array.nbytes
            if first:
                self.allocs[buf.index] = self._guarded(f"allocating {buf.what}", cuda.mem_alloc, 2 * GUARD_BYTES + n)
                base = int(self.allocs[buf.index])
                self._guarded(f"filling the guard bands of {buf.what}", cuda.memset_d8, base, SENTINEL_BYTE, GUARD_BYTES)
                self._guarded(f"filling the guard bands of {buf.what}", cuda.memset_d8, base + GUARD_BYTES + n,
                              SENTINEL_BYTE, GUARD_BYTES)
            elif buf.const:
                continue
            data = int(self.allocs[buf.index]) + GUARD_BYTES
            if n == 0:
                continue
            if buf.is_output:
                self._guarded(f"poisoning {buf.what}", cuda.memset_d8, data, poison, n)
            else:
                self._guarded(f"copying {buf.what} to the device", cuda.memcpy_htod, data, buf.array)

    def _read(self, buf: BufferArg, offset: int, nbytes: int) -> np.ndarray:
        host = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            self._guarded(f"copying {buf.what} back", self.cuda.memcpy_dtoh, host,
                          int(self.allocs[buf.index]) + offset)
        return host

    def _download(self, when: str) -> dict[int, np.ndarray]:
        """Verify every guard band; return the data bytes of each buffer the kernel may have written."""
        damage, data = [], {}
        for buf in self.buffers:
            n = buf.array.nbytes
            before, after = self._read(buf, 0, GUARD_BYTES), self._read(buf, GUARD_BYTES + n, GUARD_BYTES)
            if (d := guard_damage(before, after, n, buf.what)):
                damage.append(d)
            if not buf.const:
                data[buf.index] = self._read(buf, GUARD_BYTES, n)
        if damage:
            raise OutOfBounds(self.info, f"{when}: " + " | ".join(damage))
        return data

    def _kernel_args(self) -> list[object]:
        out = []
        for p in self.plan:
            if isinstance(p, BufferArg):
                out.append(np.uintp(int(self.allocs[p.index]) + GUARD_BYTES))
            elif p.value.dtype == np.float16:   # PyCUDA packs scalars by struct code; pass half as its bits
                out.append(p.value.view(np.uint16))
            else:
                out.append(p.value)
        return out

    def _launch_once(self, function, kargs: list[object]) -> None:
        info = self.info
        self._guarded("the launch", lambda: function(*kargs, grid=info.grid, block=info.block,
                                                     shared=info.shared_bytes))
        self._wait("the kernel")

    def _wait(self, what: str) -> None:
        """Wait for the device with a deadline; surface any asynchronous error via a context synchronize."""
        cuda = self.cuda
        done = self._guarded("recording an event", cuda.Event)
        self._guarded("recording an event", done.record)
        deadline = time.monotonic() + self.backend.launch_timeout_s
        pause = 1e-4
        while not self._guarded(f"waiting for {what}", done.query):
            if time.monotonic() > deadline:
                self.timed_out = True
                raise _CudaFailure(KernelTimeout(self.info, f"{what} was still running after "
                                                            f"{self.backend.launch_timeout_s:g} s; the CUDA context "
                                                            f"was retired"), None)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        self._guarded(f"synchronizing after {what}", cuda.Context.synchronize)

    def _checked_runs(self, function) -> LaunchResult:
        kargs: list[object] = []
        patterns = POISON_BYTES if self.outputs else (None,)
        runs: dict[int, list[np.ndarray]] = {b.index: [] for b in self.outputs}
        data: dict[int, np.ndarray] = {}
        for k, pattern in enumerate(patterns):
            self._upload(pattern, first=k == 0)
            if k == 0:
                kargs = self._kernel_args()
            self._launch_once(function, kargs)
            data = self._download("after the launch" + (f" with poison 0x{pattern:02X}" if pattern else ""))
            for b in self.outputs:
                runs[b.index].append(data[b.index])
        for b in self.buffers:
            if not b.const:
                b.array.reshape(-1).view(np.uint8)[:] = data[b.index]
        unwritten = [r for b in self.outputs if (r := unwritten_report(b, runs[b.index]))]
        if unwritten:
            raise UnwrittenOutput(self.info, " | ".join(unwritten))
        notes = tuple(r for b in self.outputs if (r := runs_disagree(b, runs[b.index])))
        elapsed = self._time(function, kargs) if self.timing else None
        return LaunchResult(self.info, elapsed_ms=elapsed, notes=notes)

    def _time(self, function, kargs: list[object]) -> float:
        """Median kernel time in ms over the timed repeats (CUDA events), after untimed warm-up launches."""
        warmup, repeats = self.timing
        cuda, info = self.cuda, self.info
        for _ in range(warmup):
            self._launch_once(function, kargs)
        times = []
        for _ in range(repeats):
            start, end = self._guarded("creating events", cuda.Event), self._guarded("creating events", cuda.Event)
            self._guarded("recording an event", start.record)
            self._guarded("the timed launch", lambda: function(*kargs, grid=info.grid, block=info.block,
                                                               shared=info.shared_bytes))
            self._guarded("recording an event", end.record)
            self._wait("the timed kernel")
            times.append(self._guarded("reading the event timer", start.time_till, end))
        self._download("after the timed launches")
        return float(statistics.median(times))

    def _free(self) -> None:
        for alloc in self.allocs.values():
            try:
                alloc.free()
            except Exception:   # noqa: BLE001 - freeing in a broken context fails; the context goes anyway
                pass
        self.allocs = {}


class _CudaFailure(Exception):
    """Carries a KernelFault out of the active-context block so that the context is retired before raising."""

    def __init__(self, fault, cause):
        super().__init__(str(fault))
        self.fault, self.cause = fault, cause

