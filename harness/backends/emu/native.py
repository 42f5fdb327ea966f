"""ctypes view of one compiled emu module (used inside the worker process only)."""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

# Mirrors emu::FaultCode and emu::Policy in emu_runtime.cpp. Code 6 (BAD_LAUNCH) is a launch configuration
# outside the CUDA limits: a caller error, raised as ValueError (see harness.backends.emu.faults.fault_error).
FAULT_NAMES = {1: "BarrierDivergence", 2: "Deadlock", 3: "OutOfBounds", 4: "UnsupportedConstruct",
               5: "KernelCrash", 6: "BadLaunch"}
POLICIES = {"forward": 0, "reverse": 1, "random": 2, "warp-greedy": 3}


@dataclass(frozen=True)
class NativeKernel:
    name: str
    handle: int                  # address of the runtime's KernelEntry
    param_sizes: tuple[int, ...]


class NativeModule:
    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
        lib = self.lib
        lib.emu_kernel.restype = ctypes.c_void_p
        lib.emu_kernel_name.restype = ctypes.c_char_p
        lib.emu_switches.restype = ctypes.c_ulonglong
        lib.emu_printf_output.restype = ctypes.c_char_p
        lib.emu_malloc.restype = ctypes.c_void_p
        lib.emu_malloc.argtypes = [ctypes.c_ulonglong]
        lib.emu_free.argtypes = [ctypes.c_void_p]
        lib.emu_launch.restype = ctypes.c_int
        lib.emu_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint),
                                   ctypes.POINTER(ctypes.c_uint), ctypes.c_ulonglong, ctypes.c_int,
                                   ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.kernels: dict[str, NativeKernel] = {}
        for i in range(lib.emu_kernel_count()):
            n = lib.emu_kernel_nparams(i)
            name = lib.emu_kernel_name(i).decode()
            sizes = tuple(lib.emu_kernel_param_size(i, j) for j in range(n))
            self.kernels[name] = NativeKernel(name, lib.emu_kernel(i), sizes)

    def switches(self) -> int:
        return int(self.lib.emu_switches())

    def printf_output(self) -> str:
        return self.lib.emu_printf_output().decode(errors="replace")

    def run(self, kernel: NativeKernel, argv: ctypes.Array, grid, block, shared_bytes: int, policy: str,
            seed: int, poison: int, capture_printf: bool) -> tuple[int, str]:
        """One launch under one schedule. Returns (fault code, message); code 0 is success."""
        err = ctypes.create_string_buffer(4096)
        g = (ctypes.c_uint * 3)(*grid)
        b = (ctypes.c_uint * 3)(*block)
        rc = self.lib.emu_launch(kernel.handle, ctypes.cast(argv, ctypes.c_void_p), g, b, shared_bytes,
                                 POLICIES[policy], seed, poison, int(capture_printf), err, len(err))
        return rc, err.value.decode(errors="replace")
