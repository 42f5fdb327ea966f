"""A stand-in for `pycuda.driver` and `pycuda.compiler`, enough to drive the GPU backend on a CPU.

Device memory is a set of bytearrays addressed like device pointers; a "kernel" is a Python function
registered by name that reads and writes that memory through the pointers it is given. Errors behave like
CUDA's: a kernel fault surfaces at the next query/synchronize and is sticky, so every later call in that
context fails until a fresh context is made. Every call is recorded in `calls` for sequence checks.
"""
from __future__ import annotations

import re
import sys
import types
from typing import Callable

import numpy as np


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


class FakeDriver:
    """One simulated machine: devices, contexts, memory, registered kernels and the call log."""

    def __init__(self, device_count: int = 1, max_threads: int = 1024):
        self.device_count = device_count
        self.max_threads = max_threads
        self.calls: list[tuple] = []
        self.kernels: dict[str, Callable] = {}
        self.compiled: list[tuple[str, tuple]] = []
        self.event_times = [1.0]          # ms returned by time_till, cycled
        self.init_error: Exception | None = None
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
        m.device_attribute = _Enum("MULTIPROCESSOR_COUNT", "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")

        def init():
            drv.calls.append(("init",))
            if drv.init_error:
                raise drv.init_error

        class Device:
            def __init__(self, index):
                self.index = index

            @staticmethod
            def count():
                return drv.device_count

            def name(self):
                return f"Fake GPU {self.index}"

            def compute_capability(self):
                return (9, 0)

            def total_memory(self):
                return 1 << 30

            def get_attribute(self, attr):
                return {"MULTIPROCESSOR_COUNT": 4, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448}[attr]

            def make_context(self):
                ctx = Ctx(drv, self.index)
                drv.contexts.append(ctx)
                drv.stack.append(ctx)
                drv.calls.append(("make_context", ctx.id))
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
                ctx.raise_pending()

        def _ctx_call(name, *args):
            ctx = drv.current()
            drv.calls.append((name, ctx.id, *args))
            ctx.check_sticky()
            return ctx

        def mem_alloc(nbytes):
            ctx = _ctx_call("mem_alloc", nbytes)
            alloc = Alloc(drv, ctx, drv._next_addr, nbytes)
            drv._next_addr += (nbytes + 4095) // 4096 * 4096 + 4096
            ctx.allocs[alloc.base] = alloc
            return alloc

        def memcpy_htod(dest, src):
            _ctx_call("memcpy_htod", int(dest), len(memoryview(src).cast("B")))
            mem, off = drv.locate(int(dest))
            data = memoryview(src).cast("B")
            mem[off:off + len(data)] = data

        def memcpy_dtoh(dest, src):
            _ctx_call("memcpy_dtoh", int(src), dest.nbytes)
            mem, off = drv.locate(int(src))
            dest.reshape(-1).view(np.uint8)[:] = np.frombuffer(mem, np.uint8, dest.nbytes, off)

        def memcpy_dtod(dest, src, size):
            _ctx_call("memcpy_dtod", int(dest), int(src), size)

        def memset_d8(dest, data, size):
            _ctx_call("memset_d8", int(dest), data, size)
            mem, off = drv.locate(int(dest))
            mem[off:off + size] = bytes([data]) * size

        class Event:
            def __init__(self):
                self.ctx = _ctx_call("Event")

            def record(self):
                _ctx_call("record")
                return self

            def query(self):
                drv.calls.append(("query", self.ctx.id))
                self.ctx.raise_pending()
                return True

            def synchronize(self):
                drv.calls.append(("event_synchronize", self.ctx.id))
                self.ctx.raise_pending()
                return self

            def time_till(self, end):
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
            drv.compiled.append((source, tuple(options or ()), no_extern_c, arch, cache_dir))
            if "#error" in source:
                raise CompileError("nvcc compilation of kernel.cu failed", stderr="kernel.cu(1): error: planted")
            return source.encode()

        m.compile = compile
        return m

    def install(self, monkeypatch) -> None:
        pkg = types.ModuleType("pycuda")
        pkg.VERSION_TEXT = "fake"
        pkg.driver, pkg.compiler = self.driver_module(), self.compiler_module()
        monkeypatch.setitem(sys.modules, "pycuda", pkg)
        monkeypatch.setitem(sys.modules, "pycuda.driver", pkg.driver)
        monkeypatch.setitem(sys.modules, "pycuda.compiler", pkg.compiler)


class Ctx:
    _ids = 0

    def __init__(self, drv: FakeDriver, device: int):
        Ctx._ids += 1
        self.id, self.drv, self.device = Ctx._ids, drv, device
        self.allocs: dict[int, Alloc] = {}
        self.pending: Exception | None = None
        self.sticky: Exception | None = None
        self.detached = False

    def push(self):
        self.drv.calls.append(("push", self.id))
        self.drv.stack.append(self)

    def detach(self):
        self.drv.calls.append(("detach", self.id))
        self.detached = True

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
        self.ctx.allocs.pop(self.base, None)


class FakeModule:
    def __init__(self, drv, ctx, text):
        self.drv, self.ctx, self.text = drv, ctx, text

    def get_function(self, name):
        self.drv.calls.append(("get_function", self.ctx.id, name))
        # Only a C-linkage kernel is found under its plain name, as with a real cubin.
        if not re.search(r'extern "C"\s+__global__\s+void\s+' + re.escape(name) + r"\b", self.text) \
                or name not in self.drv.kernels:
            raise LogicError(f"cuModuleGetFunction failed: named symbol not found ({name})")
        return FakeFunction(self.drv, self.ctx, name)


class FakeFunction:
    def __init__(self, drv, ctx, name):
        self.drv, self.ctx, self.name = drv, ctx, name

    def get_attribute(self, attr):
        return {"MAX_THREADS_PER_BLOCK": self.drv.max_threads, "SHARED_SIZE_BYTES": 0}[attr]

    def set_attribute(self, attr, value):
        self.drv.calls.append(("set_attribute", attr, value))

    def __call__(self, *args, grid, block, shared=0):
        ctx = self.drv.current()
        self.drv.calls.append(("launch", ctx.id, self.name, grid, block, shared,
                               tuple(np.asarray(a).dtype.name for a in args)))
        ctx.check_sticky()
        try:
            self.drv.kernels[self.name](self.drv, grid, block, *args)
        except Error as exc:     # a device-side fault: reported later, then sticky
            ctx.pending = exc
