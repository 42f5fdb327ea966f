"""A stand-in for `pycuda.driver` and `pycuda.compiler`, enough to drive the GPU backend on a CPU.

Used through the backend's $QCONFORM_GPU_DRIVER hook (`driver()`, `compiler()` below), so that the caller and
the GPU worker process both get it; it is configured by the JSON in $QCONFORM_FAKE_CUDA (see `configure`).
Device memory is a set of bytearrays addressed like device pointers; a "kernel" is a Python function of
KERNELS, found by name, that reads and writes that memory through the pointers it is given. Errors behave like
CUDA's: a kernel fault surfaces at the next query/synchronize and is sticky, so every later call in that
context fails; a hung kernel never completes (queries say "not ready", a synchronize or copy blocks for ever).
Every call is appended to the JSON-lines log named in the configuration, with the process id, so that a test
can check call sequences across worker processes.
"""
from __future__ import annotations

import builtins
import json
import os
import re
import sys
import time
import types
from pathlib import Path
from typing import Callable

import numpy as np

CONFIG_ENV = "QCONFORM_FAKE_CUDA"


class Error(Exception):
    pass


class LogicError(Error):
    pass


class LaunchError(Error):
    pass


class MemoryError(Error):   # noqa: A001 - PyCUDA's name
    pass


class RuntimeError(Error):  # noqa: A001 - PyCUDA's name
    pass


class CompileError(Error):
    def __init__(self, msg, command_line=(), stdout="", stderr=""):
        super().__init__(msg)
        self.stdout, self.stderr = stdout, stderr


class _Enum:
    def __init__(self, *names):
        for n in names:
            setattr(self, n, n)


def _block_forever(what: str):
    """What a real driver call does while a hung kernel runs: never return (the worker is killed)."""
    while True:
        time.sleep(3600)


class _Log(list):
    def __init__(self, path: str | None):
        super().__init__()
        self.path = path

    def append(self, item):
        super().append(item)
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps([os.getpid(), *item], default=str) + "\n")


class FakeDriver:
    """One simulated machine: devices, contexts, memory, registered kernels and the call log.

    Options (all JSON-able, from $QCONFORM_FAKE_CUDA): device_count, max_threads, static_shared (bytes per
    kernel), event_times (ms returned by time_till, cycled), init_error, context_error (make_context fails),
    compute_mode (DEFAULT, EXCLUSIVE_PROCESS, PROHIBITED), oom_above (mem_alloc fails beyond this many bytes),
    all_symbols (any C-linkage kernel is found; launching one without an emulation is refused),
    init_delay_s (cuInit takes this long), host_oom_above (a copy to the host of more bytes fails with
    Python's MemoryError), log (path)."""

    def __init__(self, device_count: int = 1, max_threads: int = 1024, static_shared: int = 0,
                 event_times=(1.0,), init_error: str | None = None, context_error: str | None = None,
                 compute_mode: str = "DEFAULT", oom_above: int | None = None, all_symbols: bool = False,
                 init_delay_s: float = 0.0, host_oom_above: int | None = None, log: str | None = None):
        self.device_count, self.max_threads, self.static_shared = device_count, max_threads, static_shared
        self.event_times = list(event_times)
        self.init_error, self.context_error, self.compute_mode = init_error, context_error, compute_mode
        self.oom_above, self.all_symbols, self.init_delay_s = oom_above, all_symbols, init_delay_s
        self.host_oom_above = host_oom_above
        self.calls = _Log(log)
        self.kernels: dict[str, Callable] = dict(KERNELS)
        self.compiled: list[tuple[str, tuple]] = []
        self.contexts: list["Ctx"] = []
        self.stack: list["Ctx"] = []
        self._next_addr = 1 << 32

    # -- memory --------------------------------------------------------------------------------------
    def current(self) -> "Ctx":
        if not self.stack:
            raise LogicError("no current context")
        return self.stack[-1]

    def locate(self, addr: int) -> tuple[bytearray, int]:
        for alloc in self.current().allocs.values():
            if alloc.base <= addr < alloc.base + len(alloc.mem) or (addr == alloc.base and not alloc.mem):
                return alloc.mem, addr - alloc.base
        raise LogicError(f"address 0x{addr:x} is in no allocation of the current context")

    def view(self, ptr, dtype, count: int) -> np.ndarray:
        """A writable numpy view of device memory: what a kernel body uses to touch buffers."""
        mem, off = self.locate(int(ptr))
        return np.frombuffer(mem, dtype=dtype, count=count, offset=off)

    # -- module ---------------------------------------------------------------------------------------
    def driver_module(self) -> types.ModuleType:
        drv = self
        m = types.ModuleType("pycuda.driver")
        for cls in (Error, LogicError, LaunchError, MemoryError, RuntimeError, CompileError):
            setattr(m, cls.__name__, cls)
        m.function_attribute = _Enum("MAX_THREADS_PER_BLOCK", "SHARED_SIZE_BYTES", "MAX_DYNAMIC_SHARED_SIZE_BYTES")
        m.device_attribute = _Enum("MULTIPROCESSOR_COUNT", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "COMPUTE_MODE")
        m.compute_mode = _Enum("DEFAULT", "EXCLUSIVE_THREAD", "EXCLUSIVE_PROCESS", "PROHIBITED")

        def init():
            drv.calls.append(("init",))
            time.sleep(drv.init_delay_s)
            if drv.init_error:
                raise RuntimeError(drv.init_error)

        class Device:
            def __init__(self, index):
                self.index = index

            @staticmethod
            def count():
                return drv.device_count

            def name(self):
                return f"Fake GPU {self.index}"

            def pci_bus_id(self):
                return f"0000:{self.index + 1:02x}:00.0"

            def compute_capability(self):
                return (9, 0)

            def total_memory(self):
                return 1 << 30

            def get_attribute(self, attr):
                return {"MULTIPROCESSOR_COUNT": 4, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
                        "COMPUTE_MODE": drv.compute_mode}[attr]

            def make_context(self):
                drv.calls.append(("make_context",))
                if drv.context_error:
                    raise RuntimeError(drv.context_error)
                ctx = Ctx(drv, self.index)
                drv.contexts.append(ctx)
                drv.stack.append(ctx)
                drv.calls.append(("context_made", ctx.id))
                return ctx

        class Context:
            @staticmethod
            def pop():
                drv.calls.append(("pop",))
                drv.stack.pop()

            @staticmethod
            def synchronize():
                ctx = drv.current()
                drv.calls.append(("synchronize", ctx.id))
                ctx.wait_idle()
                ctx.raise_pending()

        def _ctx_call(name, *args):
            ctx = drv.current()
            drv.calls.append((name, ctx.id, *args))
            ctx.check_sticky()
            return ctx

        def mem_alloc(nbytes):
            ctx = _ctx_call("mem_alloc", nbytes)
            if drv.oom_above is not None and nbytes > drv.oom_above:
                raise MemoryError("cuMemAlloc failed: out of memory")
            alloc = Alloc(drv, ctx, drv._next_addr, nbytes)
            drv._next_addr += (nbytes + 4095) // 4096 * 4096 + 4096
            ctx.allocs[alloc.base] = alloc
            return alloc

        def memcpy_htod(dest, src):
            ctx = _ctx_call("memcpy_htod", int(dest), len(memoryview(src).cast("B")))
            ctx.wait_idle()
            mem, off = drv.locate(int(dest))
            data = memoryview(src).cast("B")
            mem[off:off + len(data)] = data

        def memcpy_dtoh(dest, src):
            ctx = _ctx_call("memcpy_dtoh", int(src), dest.nbytes)
            ctx.wait_idle()
            if drv.host_oom_above is not None and dest.nbytes > drv.host_oom_above:
                raise builtins.MemoryError(f"cannot allocate {dest.nbytes} bytes of pinned staging memory")
            mem, off = drv.locate(int(src))
            dest.reshape(-1).view(np.uint8)[:] = np.frombuffer(mem, np.uint8, dest.nbytes, off)

        def memcpy_dtod(dest, src, size):
            _ctx_call("memcpy_dtod", int(dest), int(src), size)
            if size >= 64 << 20:   # a bandwidth measurement's copy: only its (fake) time matters, not its bytes
                return
            dmem, doff = drv.locate(int(dest))
            smem, soff = drv.locate(int(src))
            np.copyto(np.frombuffer(dmem, np.uint8, size, doff), np.frombuffer(smem, np.uint8, size, soff))

        def memset_d8(dest, data, size):
            _ctx_call("memset_d8", int(dest), data, size)
            mem, off = drv.locate(int(dest))
            np.frombuffer(mem, np.uint8, size, off).fill(data)

        class Event:
            def __init__(self):
                self.ctx = _ctx_call("Event")

            def record(self):
                _ctx_call("record")
                return self

            def query(self):
                drv.calls.append(("query", self.ctx.id))
                if self.ctx.hung:
                    return False
                self.ctx.raise_pending()
                return True

            def synchronize(self):
                drv.calls.append(("event_synchronize", self.ctx.id))
                self.ctx.wait_idle()
                self.ctx.raise_pending()
                return self

            def time_till(self, end):
                drv.calls.append(("time_till",))
                t = drv.event_times[0]
                drv.event_times = drv.event_times[1:] + drv.event_times[:1]
                return t

        def module_from_buffer(cubin):
            ctx = _ctx_call("module_from_buffer")
            return FakeModule(drv, ctx, cubin.decode())

        m.init, m.Device, m.Context, m.Event = init, Device, Context, Event
        m.mem_alloc, m.memcpy_htod, m.memcpy_dtoh, m.memcpy_dtod, m.memset_d8 = (
            mem_alloc, memcpy_htod, memcpy_dtoh, memcpy_dtod, memset_d8)
        m.module_from_buffer = module_from_buffer
        m.get_driver_version = lambda: 13000
        return m

    def compiler_module(self) -> types.ModuleType:
        drv = self
        m = types.ModuleType("pycuda.compiler")

        def compile(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None, code=None,
                    cache_dir=None, include_dirs=None):
            drv.calls.append(("compile", tuple(options or ()), no_extern_c, arch, cache_dir))
            if "#error" in source:
                raise CompileError("nvcc compilation of kernel.cu failed", stderr="kernel.cu(1): error: planted")
            return source.encode()

        m.compile = compile
        return m


class Ctx:
    _ids = 0

    def __init__(self, drv: FakeDriver, device: int):
        Ctx._ids += 1
        self.id, self.drv, self.device = Ctx._ids, drv, device
        self.allocs: dict[int, Alloc] = {}
        self.pending: Exception | None = None
        self.sticky: Exception | None = None
        self.hung = False
        self.detached = False

    def push(self):
        self.drv.calls.append(("push", self.id))
        self.drv.stack.append(self)

    def detach(self):
        self.drv.calls.append(("detach", self.id))
        if self.hung:
            _block_forever("detach")
        self.detached = True

    def wait_idle(self):
        if self.hung:
            _block_forever("synchronize")

    def check_sticky(self):
        if self.detached:
            raise LogicError("context was destroyed")
        if self.sticky:
            raise type(self.sticky)(str(self.sticky))

    def raise_pending(self):
        self.check_sticky()
        if self.pending:
            self.sticky, self.pending = self.pending, None
            raise type(self.sticky)(str(self.sticky))


class Alloc:
    def __init__(self, drv, ctx, base, nbytes):
        self.drv, self.ctx, self.base, self.mem = drv, ctx, base, bytearray(nbytes)

    def __int__(self):
        return self.base

    def free(self):
        self.drv.calls.append(("free", self.ctx.id, self.base))
        self.ctx.wait_idle()
        self.ctx.allocs.pop(self.base, None)


class FakeModule:
    def __init__(self, drv, ctx, text):
        self.drv, self.ctx, self.text = drv, ctx, text

    def get_function(self, name):
        self.drv.calls.append(("get_function", self.ctx.id, name))
        # Only a C-linkage kernel is found under its plain name, as with a real cubin; a template's instantiation
        # under its mangled name (`_Z2tkILi4EEvPf`: the instantiation's text must be in the source).
        m = re.match(r"_ZN?((?:\d+[A-Za-z_]\w*?)+)I", name)
        if m:
            base, rest = "", m.group(1)         # the last of the length-prefixed names: the kernel's own
            while rest:
                n = re.match(r"\d+", rest)
                base, rest = rest[n.end():n.end() + int(n.group())], rest[n.end() + int(n.group()):]
            found = re.search(r"template\s+__global__\s+void\s+" + re.escape(base) + r"\s*<", self.text)
        else:
            found = re.search(r'extern "C"\s+__global__\s+void\s+' + re.escape(name) + r"\b", self.text) \
                and (name in self.drv.kernels or self.drv.all_symbols)
        if not found:
            raise LogicError(f"cuModuleGetFunction failed: named symbol not found ({name})")
        return FakeFunction(self.drv, self.ctx, name)


class FakeFunction:
    def __init__(self, drv, ctx, name):
        self.drv, self.ctx, self.name = drv, ctx, name

    def get_attribute(self, attr):
        return {"MAX_THREADS_PER_BLOCK": self.drv.max_threads, "SHARED_SIZE_BYTES": self.drv.static_shared}[attr]

    def set_attribute(self, attr, value):
        self.drv.calls.append(("set_attribute", attr, value))

    def __call__(self, *args, grid, block, shared=0):
        ctx = self.drv.current()
        self.drv.calls.append(("launch", ctx.id, self.name, grid, block, shared,
                               tuple(np.asarray(a).dtype.name for a in args)))
        ctx.check_sticky()
        kernel = self.drv.kernels.get(self.name)
        if kernel is None:    # all_symbols: found, but not emulated; refused at once, not sticky
            raise LogicError(f"cuLaunchKernel failed: the fake driver does not emulate kernel {self.name}")
        if ctx.hung:
            return
        try:
            kernel(self.drv, grid, block, *args)
        except _Hang:
            ctx.hung = True
        except _Refuse as exc:   # rejected by cuLaunchKernel itself (bad configuration): nothing ran
            raise LogicError(str(exc)) from None
        except Error as exc:     # a device-side fault: reported later, then sticky
            ctx.pending = exc


# ------------------------------------------------------------------------------------------------------
# Kernels the fake emulates (by name)
# ------------------------------------------------------------------------------------------------------

class _Hang(Exception):
    pass


class _Refuse(Exception):
    pass


def _axpy(drv, grid, block, x, y, n, a, *, write=None, extra=0):
    """y[i] = a * x[i] for the first `write` elements (default all), plus `extra` floats past the end."""
    n = int(n)
    xs, ys = drv.view(x, np.float32, n), drv.view(y, np.float32, n + extra)
    count = n if write is None else write
    ys[:count] = a * xs[:count]
    ys[n:n + extra] = 0


def _bump(drv, grid, block, x, y, n, a):
    """Updates its input in place (x += 1) and writes y = x."""
    xs, ys = drv.view(x, np.float32, int(n)), drv.view(y, np.float32, int(n))
    xs += 1
    ys[:] = xs


def _underrun(drv, grid, block, x, y, n, a):
    """Writes y[-1] (the byte range just before the buffer) and nothing else."""
    drv.view(int(y) - 4, np.float32, 1)[0] = 1.0


def _illegal_address(drv, grid, block, *args):
    raise LaunchError("cuCtxSynchronize failed: an illegal memory access was encountered")


def _trap(drv, grid, block, *args):
    raise LaunchError("cuCtxSynchronize failed: unspecified launch failure")


def _hang(drv, grid, block, *args):
    raise _Hang()


def _hang_in_driver(drv, grid, block, *args):
    """The launch call itself never returns (a driver stuck in a call): only the caller's limit ends it."""
    _block_forever("cuLaunchKernel")


def _refused(drv, grid, block, *args):
    raise _Refuse("cuLaunchKernel failed: too many resources requested for launch")


def _flag(drv, grid, block, y, on):
    """A kernel with a C++ bool parameter: y[0] = on ? 1 : 0; the byte must be exactly 0 or 1."""
    v = np.asarray(on)
    assert v.dtype == np.uint8 and int(v) in (0, 1), f"bool passed as {v.dtype} {v!r}"
    drv.view(y, np.int32, 1)[0] = int(v)


def _kv_write(drv, grid, block, cache, row, pos, n):
    """cache[pos, :] = row: a partial write into an in/out buffer (a KV-cache row)."""
    n, pos = int(n), int(pos)
    drv.view(int(cache) + 4 * n * pos, np.float32, n)[:] = drv.view(row, np.float32, n)


def _scale_past_end(drv, grid, block, x, y, n, a):
    n = int(n)
    xs, ys = drv.view(x, np.float32, n), drv.view(y, np.float32, n + 1)
    ys[:n] = np.float32(a) * xs
    ys[n] = np.float32(a) * xs[0]


def _scale_before_start(drv, grid, block, x, y, n, a):
    n = int(n)
    drv.view(int(y) - 4, np.float32, n)[:] = np.float32(a) * drv.view(x, np.float32, n)


def _to_half(drv, grid, block, x, y, n):
    n = int(n)
    drv.view(y, np.float16, n)[:] = drv.view(x, np.float32, n).astype(np.float16)


def _dp4a_rows(drv, grid, block, a, b, out, words):
    rows, words = grid[0], int(words)
    av = drv.view(a, np.int8, rows * words * 4).reshape(rows, 4 * words).astype(np.int32)
    bv = drv.view(b, np.int8, words * 4).astype(np.int32)
    drv.view(out, np.int32, rows)[:] = av @ bv


def _reverse_shared(drv, grid, block, x, y, n):
    n = int(n)
    drv.view(y, np.float32, n)[:] = drv.view(x, np.float32, n)[::-1]


KERNELS: dict[str, Callable] = {
    "axpy": _axpy,
    "_ZN3moe5taxpyILi4EEEvPKfPfif": _axpy,        # moe::taxpy<4>: a template's instantiation, by its symbol
    "overrun": lambda d, g, b, *a: _axpy(d, g, b, *a, extra=1),
    "skip_last": lambda d, g, b, x, y, n, a: _axpy(d, g, b, x, y, n, a, write=int(n) - 1),
    "crash": _illegal_address,
    "trap": _trap,
    "hang": _hang,
    "hang_in_driver": _hang_in_driver,
    "refused": _refused,
    "bump": _bump,
    "underrun": _underrun,
    "flag": _flag,
    "kv_write": _kv_write,
    # the kernels of tests/backends/gpu/test_device.py, so that `pytest -m gpu` runs them in a dry run
    "scale": lambda d, g, b, x, y, n, a: _axpy(d, g, b, x, y, n, a),
    "scale_past_end": _scale_past_end,
    "scale_before_start": _scale_before_start,
    "scale_skip_last": lambda d, g, b, x, y, n, a: _axpy(d, g, b, x, y, n, a, write=int(n) - 1),
    "wild_write": _illegal_address,
    "to_half": _to_half,
    "dp4a_rows": _dp4a_rows,
    "reverse_shared": _reverse_shared,
}


# ------------------------------------------------------------------------------------------------------
# The $QCONFORM_GPU_DRIVER hook
# ------------------------------------------------------------------------------------------------------

_MACHINES: dict[str, FakeDriver] = {}


def machine() -> FakeDriver:
    """This process's fake machine for the current configuration (a new one when the configuration changes)."""
    text = os.environ.get(CONFIG_ENV, "{}")
    if text not in _MACHINES:
        _MACHINES[text] = FakeDriver(**json.loads(text))
    return _MACHINES[text]


def driver() -> types.ModuleType:
    drv = machine()
    if not hasattr(drv, "_driver_module"):
        drv._driver_module = drv.driver_module()
    return drv._driver_module


def compiler() -> types.ModuleType:
    drv = machine()
    if not hasattr(drv, "_compiler_module"):
        drv._compiler_module = drv.compiler_module()
    return drv._compiler_module


class FakeSetup:
    """What a test holds: the configuration in force and the call log of every process that used it."""

    def __init__(self, monkeypatch, log: Path, **config):
        self.monkeypatch, self.log, self.config = monkeypatch, log, {**config, "log": str(log)}
        self.apply()

    def apply(self) -> None:
        self.monkeypatch.setenv("QCONFORM_GPU_DRIVER", __name__)
        self.monkeypatch.setenv(CONFIG_ENV, json.dumps(self.config, sort_keys=True))

    def set(self, **changes) -> None:
        """Change the configuration: later processes (and this one) see a fresh fake machine."""
        self.config.update(changes)
        self.apply()

    def calls(self) -> list[list]:
        """[pid, call, *args] for every call so far, in order."""
        if not self.log.exists():
            return []
        return [json.loads(ln) for ln in self.log.read_text().splitlines() if ln]

    def names(self, since: int = 0) -> list[str]:
        return [c[1] for c in self.calls()[since:]]


def configure(monkeypatch, tmp_path: Path, **config) -> FakeSetup:
    return FakeSetup(monkeypatch, tmp_path / "fake-cuda-calls.jsonl", **config)


if __name__ == "__main__":   # pragma: no cover - python -m tests.backends.gpu.fake_pycuda prints the kernels it emulates
    print(" ".join(sorted(KERNELS)), file=sys.stdout)
