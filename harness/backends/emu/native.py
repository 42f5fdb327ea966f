"""ctypes view of one compiled emu module (used inside the worker process only)."""
from __future__ import annotations

import ctypes
import mmap
import os
from dataclasses import dataclass
from typing import Sequence

# Mirrors emu::FaultCode and emu::Policy in emu_runtime.cpp. Code 6 (BAD_LAUNCH) is a launch configuration
# outside the CUDA limits: a caller error, raised as ValueError (see harness.backends.faults.fault_error). Data
# races stop no launch: they come from race_report (harness.backends.emu.races).
FAULT_NAMES = {1: "BarrierDivergence", 2: "Deadlock", 3: "OutOfBounds", 4: "UnsupportedConstruct",
               5: "KernelCrash", 6: "BadLaunch", 7: "LaunchRefused", 8: "ResourceExhausted", 9: "LaterBlockWait"}
TOOL_LIMIT = 8    # the emulator's own memory (fiber stacks, race shadow) could not be had: unchecked
LATER_BLOCK_WAIT = 9   # a block spins on progress only a block run after it could make: unchecked
POLICIES = {"forward": 0, "reverse": 1, "random": 2, "warp-greedy": 3}


@dataclass(frozen=True)
class NativeKernel:
    name: str
    handle: int                  # address of the runtime's KernelEntry
    param_sizes: tuple[int, ...]


class _StackPool:
    """The fiber stacks every module of the worker shares (one launch runs at a time): mapped once, on demand,
    instead of one reservation per loaded module (emu_use_stacks in emu_runtime.cpp)."""
    def __init__(self):
        self.map: "mmap.mmap | None" = None
        self.address = 0

    def lend(self, lib) -> None:
        need = int(lib.emu_stack_pool_bytes())
        if self.map is None:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
            try:
                self.map = mmap.mmap(-1, need, flags=flags)
            except OSError as exc:     # the worker's address-space limit: the tool's, reported as such
                raise MemoryError(f"the emulator's fiber stacks ({need >> 20} MiB) could not be mapped: "
                                  f"{os.strerror(exc.errno or 12)}") from None
            self.address = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        lib.emu_use_stacks(ctypes.c_void_p(self.address), ctypes.c_ulonglong(len(self.map)))


class NativeModule:
    progress_address: "int | None" = None    # a shared counter the runtime bumps after every block (the watchdog)
    stacks = _StackPool()

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        lib = self.lib
        lib.emu_stack_pool_bytes.restype = ctypes.c_ulonglong
        lib.emu_use_stacks.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
        lib.emu_race_track.restype = ctypes.c_int
        NativeModule.stacks.lend(lib)
        lib.emu_kernel.restype = ctypes.c_void_p
        lib.emu_kernel_name.restype = ctypes.c_char_p
        lib.emu_switches.restype = ctypes.c_ulonglong
        lib.emu_int_divisions_by_zero.restype = ctypes.c_ulonglong
        lib.emu_set_barrier_sites.argtypes = [ctypes.c_int]
        lib.emu_set_atomic_acquire.argtypes = [ctypes.c_int]
        lib.emu_set_collectives_order.argtypes = [ctypes.c_int]
        lib.emu_set_lockstep.argtypes = [ctypes.c_int]
        lib.emu_mixed_barriers.restype = ctypes.c_ulonglong
        lib.emu_mixed_barrier_line.restype = ctypes.c_int
        lib.emu_mixed_barrier_line.argtypes = [ctypes.c_int]
        lib.emu_later_block_waits.restype = ctypes.c_ulonglong
        lib.emu_later_block_wait_first.restype = ctypes.c_char_p
        lib.emu_printf_output.restype = ctypes.c_char_p
        lib.emu_malloc.restype = ctypes.c_void_p
        lib.emu_malloc.argtypes = [ctypes.c_ulonglong]
        lib.emu_free.argtypes = [ctypes.c_void_p]
        lib.emu_race_track.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_char_p, ctypes.c_int]
        lib.emu_race_end.restype = ctypes.c_ulonglong
        lib.emu_race_report.restype = ctypes.c_char_p
        lib.emu_launch.restype = ctypes.c_int
        lib.emu_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint),
                                   ctypes.POINTER(ctypes.c_uint), ctypes.c_ulonglong, ctypes.c_int,
                                   ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                   ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        self.kernels: dict[str, NativeKernel] = {}
        for i in range(lib.emu_kernel_count()):
            n = lib.emu_kernel_nparams(i)
            name = lib.emu_kernel_name(i).decode()
            sizes = tuple(lib.emu_kernel_param_size(i, j) for j in range(n))
            self.kernels[name] = NativeKernel(name, lib.emu_kernel(i), sizes)
        lib.emu_symbol_name.restype = ctypes.c_char_p
        lib.emu_symbol_addr.restype = ctypes.c_void_p
        lib.emu_symbol_size.restype = ctypes.c_ulonglong
        # name -> (address, bytes, writable); the image at load, restored before every run so that no run
        # sees what an earlier one (or launch) left in a __device__ variable.
        self.symbols: dict[str, tuple[int, int, bool]] = {}
        self._symbol_images: dict[str, bytes] = {}
        for i in range(lib.emu_symbol_count()):
            name = lib.emu_symbol_name(i).decode()
            addr, size = lib.emu_symbol_addr(i), int(lib.emu_symbol_size(i))
            self.symbols[name] = (addr, size, bool(lib.emu_symbol_writable(i)))
            self._symbol_images[name] = ctypes.string_at(addr, size)

    def reset_symbols(self, values: "dict[str, bytes]") -> None:
        """Every writable symbol back to its image at load, then the host-set `values` (name -> raw bytes)."""
        for name, (addr, size, writable) in self.symbols.items():
            if writable:
                ctypes.memmove(addr, values.get(name, self._symbol_images[name]), size)

    def symbol_bytes(self, name: str) -> bytes:
        addr, size, _ = self.symbols[name]
        return ctypes.string_at(addr, size)

    @classmethod
    def bump_progress(cls) -> None:
        """Tell the parent's watchdog that the worker is busy between blocks (buffers, comparisons)."""
        if cls.progress_address:
            ctypes.c_uint64.from_address(cls.progress_address).value += 1

    def race_begin(self, tracked: "Sequence[tuple[int, int, str, int]]") -> None:
        """Check the next launches for data races on the shared areas and the buffers `tracked`:
        (address, bytes, name, element size) each."""
        self.lib.emu_race_begin()
        for ptr, nbytes, name, elem in tracked:      # the runtime copies the name
            err = self.lib.emu_race_track(ptr, nbytes, name.encode(), elem)
            if err:      # the shadow (cell_bytes per tracked byte) does not fit: the tool's limit, not the kernel's
                self.race_end()
                raise MemoryError(f"the race detector's shadow of {name} ({nbytes} bytes tracked) could not be "
                                  f"mapped: {os.strerror(err)}")

    def race_report(self) -> str:
        """The distinct races of the launch (before race_end): record lines, see harness.backends.emu.races."""
        return self.lib.emu_race_report().decode(errors="replace")

    def race_end(self) -> int:
        """Stop checking; returns the number of tracked accesses checked."""
        return int(self.lib.emu_race_end())

    def switches(self) -> int:
        return int(self.lib.emu_switches())

    def set_barrier_sites(self, any_site: bool) -> None:
        """Whether a __syncthreads() that threads reach at different call sites completes (the hardware's count of
        arrivals) instead of faulting (PTX: bar.sync is .aligned)."""
        self.lib.emu_set_barrier_sites(int(any_site))

    def set_atomic_acquire(self, by_itself: bool) -> None:
        """Whether an atomic that reads a released value acquires it by itself (the CUDA C++ Programming Guide's
        writer-side __threadfence() idiom, as ScoRD reads it) instead of at the reading thread's next fence (PTX)."""
        self.lib.emu_set_atomic_acquire(int(by_itself))

    def set_collectives_order(self, on: bool) -> None:
        """Whether every warp collective orders the lanes it names for the race detector (shuffles and votes too), or
        __syncwarp alone does."""
        self.lib.emu_set_collectives_order(int(on))

    def set_lockstep(self, on: bool) -> None:
        """Whether the lanes of a warp take turns access by access (lock step; only a race build's entry points
        take the turns)."""
        self.lib.emu_set_lockstep(int(on))

    def mixed_barriers(self) -> tuple[int, int, int]:
        """Barrier phases so far that threads completed from different call sites, and two of those lines."""
        return (int(self.lib.emu_mixed_barriers()), int(self.lib.emu_mixed_barrier_line(0)),
                int(self.lib.emu_mixed_barrier_line(1)))

    def later_block_waits(self) -> tuple[int, str]:
        """The last launch's blocks that spun until blocks emu ran after them made progress (held meanwhile), and
        what the first one waited on."""
        return (int(self.lib.emu_later_block_waits()),
                self.lib.emu_later_block_wait_first().decode(errors="replace"))

    def int_divisions_by_zero(self) -> int:
        """Integer divisions by zero (or INT_MIN / -1) finished with a GPU's unspecified value so far."""
        return int(self.lib.emu_int_divisions_by_zero())

    def printf_output(self) -> str:
        return self.lib.emu_printf_output().decode(errors="replace")

    def run(self, kernel: NativeKernel, argv: ctypes.Array, grid, block, shared_bytes: int, policy: str,
            seed: int, poison: int, capture_printf: bool, blocks: "Sequence[int] | None" = None) -> tuple[int, str]:
        """One launch under one schedule, on every block or on the linear block indices `blocks`.
        Returns (fault code, message); code 0 is success."""
        err = ctypes.create_string_buffer(4096)
        g = (ctypes.c_uint * 3)(*grid)
        b = (ctypes.c_uint * 3)(*block)
        only = None if blocks is None else (ctypes.c_ulonglong * max(1, len(blocks)))(*blocks)
        rc = self.lib.emu_launch(kernel.handle, ctypes.cast(argv, ctypes.c_void_p), g, b, shared_bytes,
                                 POLICIES[policy], seed, poison, int(capture_printf),
                                 None if only is None else ctypes.cast(only, ctypes.c_void_p),
                                 0 if blocks is None else len(blocks), NativeModule.progress_address, err, len(err))
        return rc, err.value.decode(errors="replace")
