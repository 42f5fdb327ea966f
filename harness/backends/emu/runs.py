"""Run one launch under several schedules and judge the results (inside the worker process)."""
from __future__ import annotations

import ctypes
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from harness.backends.base import GUARD_BYTES, POISON_BYTES, SENTINEL_BYTE

from . import checks
from .native import FAULT_NAMES, NativeModule

DEVICE_ALIGN = 256     # cudaMalloc alignment


@dataclass(frozen=True)
class Schedule:
    policy: str      # forward | reverse | warp-greedy | random
    seed: int
    poison: int

    @property
    def shared_poison(self) -> int:
        a, b = POISON_BYTES
        return b if self.poison == a else a

    def __str__(self) -> str:
        s = f"{self.policy}" + (f"(seed {self.seed})" if self.policy == "random" else "")
        return f"{s}, poison 0x{self.poison:02X}"


def schedules(n: int, seed: int) -> list[Schedule]:
    """Run 0 and 1 differ only in the poison (unwritten / uninitialized reads); later runs change the order:
    reverse, warp-greedy (each warp runs ahead to the next block barrier), then seeded random orders."""
    a, b = POISON_BYTES
    out = [Schedule("forward", 0, a), Schedule("forward", 0, b), Schedule("reverse", 0, a),
           Schedule("warp-greedy", 0, b)]
    for k in range(4, n):
        out.append(Schedule("random", seed + k - 4, b if k % 2 else a))
    return out[:n]


@dataclass
class LaunchSpec:
    so_path: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    names: tuple[str, ...]              # parameter names
    const: tuple[bool, ...]             # pointer to const: not copied back to the caller
    args: list                          # np.ndarray or np.generic per parameter
    outputs: tuple[int, ...]
    schedules: int
    seed: int
    sanitize: bool


@dataclass
class Outcome:
    arrays: dict[int, np.ndarray] = field(default_factory=dict)   # results of run 0 (array args only)
    fault: Optional[tuple[str, str]] = None                        # (fault class name, detail)
    printf: str = ""
    kernel_ms: list[float] = field(default_factory=list)
    switches: list[int] = field(default_factory=list)


class _Buffer:
    """A device buffer: guard bands of SENTINEL_BYTE around the data (or an exact malloc under ASan)."""

    def __init__(self, mod: NativeModule, src: np.ndarray, poison: Optional[int], sanitize: bool):
        self.nbytes = src.nbytes
        self.sanitize = sanitize
        self.mod = mod
        init = np.full(self.nbytes, poison, np.uint8) if poison is not None else src.reshape(-1).view(np.uint8)
        if sanitize:
            self.ptr = mod.lib.emu_malloc(self.nbytes)
            ctypes.memmove(self.ptr, init.ctypes.data, self.nbytes)
        else:
            store = np.empty(2 * GUARD_BYTES + self.nbytes + DEVICE_ALIGN, np.uint8)
            shift = (-(store.ctypes.data + GUARD_BYTES)) % DEVICE_ALIGN
            self.raw = store[shift:shift + 2 * GUARD_BYTES + self.nbytes]
            self.raw[:] = SENTINEL_BYTE
            self.raw[GUARD_BYTES:GUARD_BYTES + self.nbytes] = init
            self.ptr = self.raw.ctypes.data + GUARD_BYTES

    def read(self, like: np.ndarray) -> np.ndarray:
        out = np.empty(like.shape, like.dtype)
        if self.sanitize:
            ctypes.memmove(out.ctypes.data, self.ptr, self.nbytes)
            self.mod.lib.emu_free(self.ptr)
        else:
            out.reshape(-1).view(np.uint8)[:] = self.raw[GUARD_BYTES:GUARD_BYTES + self.nbytes]
        return out

    def damage(self) -> Optional[tuple[str, int]]:
        if self.sanitize:
            return None
        return checks.guard_damage(self.raw, GUARD_BYTES, self.nbytes, SENTINEL_BYTE)


def _argv(spec: LaunchSpec, bufs: dict[int, _Buffer]):
    keep, addrs = [], []
    for i, a in enumerate(spec.args):
        if i in bufs:
            cell = ctypes.c_void_p(bufs[i].ptr)
        else:
            raw = np.asarray(a).tobytes()
            cell = ctypes.create_string_buffer(raw, max(len(raw), 8))
        keep.append(cell)
        addrs.append(ctypes.addressof(cell))
    return (ctypes.c_void_p * max(1, len(addrs)))(*addrs), keep


def _guard_fault(spec: LaunchSpec, i: int, side: str, off: int, sched: Schedule) -> str:
    a = spec.args[i]
    elem = a.dtype.itemsize
    if side == "after":
        first = a.size + off // elem
        pos = f"{off + 1} byte(s) past its end (element {first} of {a.size})"
    else:
        pos = f"{off} byte(s) before its start (element {-((off + elem - 1) // elem)})"
    return (f"write to '{spec.names[i]}' (arg {i}, {a.size} x {a.dtype}) {pos}: its guard band changed "
            f"(schedule {sched})")


def execute(mod: NativeModule, spec: LaunchSpec) -> Outcome:
    kernel = mod.kernels[spec.kernel]
    arrays = [i for i, a in enumerate(spec.args) if isinstance(a, np.ndarray)]
    runs: list[dict[int, np.ndarray]] = []
    plan = schedules(spec.schedules, spec.seed)
    out = Outcome()
    for r, sched in enumerate(plan):
        print(f"emu-worker: {spec.kernel} run {r + 1}/{len(plan)} schedule {sched}", file=sys.stderr, flush=True)
        bufs = {i: _Buffer(mod, spec.args[i], sched.poison if i in spec.outputs else None, spec.sanitize)
                for i in arrays}
        argv, keep = _argv(spec, bufs)
        s0, t0 = mod.switches(), time.perf_counter()
        # Shared memory gets the other pattern: a value copied from unwritten shared memory into an output
        # then reads as "depends on the poison", not as "output never written".
        rc, msg = mod.run(kernel, argv, spec.grid, spec.block, spec.shared_bytes, sched.policy, sched.seed,
                          sched.shared_poison, r == 0)
        out.kernel_ms.append((time.perf_counter() - t0) * 1e3)
        out.switches.append(mod.switches() - s0)
        if r == 0:
            out.printf = mod.printf_output()
        results = {i: bufs[i].read(spec.args[i]) for i in arrays}
        if rc:
            out.arrays = results
            out.fault = (FAULT_NAMES.get(rc, "KernelCrash"), f"{msg} (schedule {sched})")
            return out
        for i in arrays:
            dmg = bufs[i].damage()
            if dmg:
                out.arrays = results
                out.fault = ("OutOfBounds", _guard_fault(spec, i, *dmg, sched))
                return out
        runs.append(results)
        del keep
    out.fault = judge(spec, plan, runs)
    out.arrays = {i: a for i, a in runs[0].items() if not spec.const[i]}
    return out


def judge(spec: LaunchSpec, plan: list[Schedule], runs: list[dict[int, np.ndarray]]) -> Optional[tuple[str, str]]:
    if len(runs) < 2:
        return None
    first, second = runs[0], runs[1]
    for i in spec.outputs:
        idx = checks.unwritten(first[i], second[i], (plan[0].poison, plan[1].poison))
        if idx.size:
            return "UnwrittenOutput", checks.describe_unwritten(spec.names[i], first[i], idx)
    for i in first:
        idx = checks.differing(first[i], second[i])
        if idx.size:
            return "UninitializedRead", (
                "the result depends on the poison pattern, so the kernel read memory it had not written "
                "(shared memory, or an output before writing it): " +
                checks.describe_difference(spec.names[i], first[i], second[i], idx, str(plan[0]), str(plan[1])))
    for r in range(2, len(runs)):
        for i in first:
            idx = checks.differing(first[i], runs[r][i])
            if idx.size:
                return "RaceDetected", ("thread schedules gave different results: " +
                                        checks.describe_difference(spec.names[i], first[i], runs[r][i], idx,
                                                                   str(plan[0]), str(plan[r])))
    return None
