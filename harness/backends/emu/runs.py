"""Run one launch under several schedules and judge the results (inside the worker process)."""
from __future__ import annotations

import ctypes
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from harness.backends.base import GUARD_BYTES, POISON_BYTES, SENTINEL_BYTE, Buffer, Struct, Symbol
from harness.backends.guards import guard_fault

from . import checks, guarded
from .native import FAULT_NAMES, LATER_BLOCK_WAIT, NativeModule

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


# Run 0 covers every block. Run 1 (the other poison pattern) covers every block when run 0 left an output
# element holding the poison (a possibly unwritten element, confirmed or cleared only by a full run with the
# other pattern); otherwise it runs the block sample, like the extra schedules (runs 2 and later).
FULL_RUNS = 2


def _unwritten_candidates(spec: "LaunchSpec", first: dict[int, np.ndarray]) -> bool:
    a = POISON_BYTES[0]
    return any(checks.unwritten(first[i], first[i], (a, a)).size for i in spec.outputs)


ONE_SCHEDULE_POLICIES = ("forward", "reverse", "warp-greedy", "random")


def schedules(n: int, seed: int, only: Optional[str] = None) -> list[Schedule]:
    """Run 0 and 1 differ only in the poison (unwritten / uninitialized reads); later runs change the order:
    reverse, warp-greedy (each warp runs ahead to the next block barrier), then seeded random orders.
    `only`: a single run under that policy (what one interleaving does to the results; no comparison)."""
    a, b = POISON_BYTES
    if only is not None:
        if only not in ONE_SCHEDULE_POLICIES:
            raise ValueError(f"schedule: expected one of {', '.join(ONE_SCHEDULE_POLICIES)}, got {only!r}")
        return [Schedule(only, seed, a)]
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
    args: list                          # np.ndarray, Buffer (resident) or np.generic per parameter
    outputs: tuple[int, ...]
    schedules: int
    seed: int
    sanitize: bool
    block_sample: Optional[tuple[int, ...]] = None   # linear blocks of the extra schedules (None: every block)
    staging_size: int = 0                            # size of the shared file holding Staged arguments
    symbols: dict = field(default_factory=dict)      # host-set module symbols: name -> raw bytes
    race: bool = False                               # run 0 under the happens-before race detector
    only_schedule: Optional[str] = None              # a single run under this policy (EmuBackend(schedule=...))
    barrier_any_site: bool = False                   # a __syncthreads() completes whatever call sites its threads
    #                                                  reached (EmuBackend(barrier_sites="any"))
    atomic_acquire: bool = False                     # an atomic that reads a release acquires it by itself
    collectives_order: bool = True                   # every warp collective orders its lanes, not __syncwarp alone
    lock_step: bool = False                          # a warp's lanes take turns access by access (a race build)


@dataclass
class Outcome:
    arrays: dict[int, np.ndarray] = field(default_factory=dict)   # results of run 0 (array args only)
    fault: Optional[tuple[str, str]] = None                        # (fault class name, detail)
    printf: str = ""
    kernel_ms: list[float] = field(default_factory=list)
    kernel_cpu_ms: list[float] = field(default_factory=list)       # CPU time of the worker thread (robust to load)
    switches: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)                # blocks run per schedule
    sampled: list[bool] = field(default_factory=list)              # whether each run ran the block sample
    race_accesses: Optional[int] = None                            # accesses the race detector checked (run 0)
    races: str = ""                      # the detector's record lines of run 0 (harness.backends.emu.races), if any
    race_where: str = ""                 # the schedule (and block sample) they were found under
    left_out: list[str] = field(default_factory=list)   # schedules not compared, each with the reason
    divisions_by_zero: int = 0           # integer divisions by zero in run 1, finished with an unspecified value
    mixed_barriers: tuple = (0, 0, 0)    # barrier phases of run 1 completed from different call sites, two lines
    # the first run whose blocks were held while they spun on progress of blocks emu ran after them: how many,
    # the first such wait, the schedule (0: none)
    later_block_waits: tuple = (0, "", "")


class DeviceBuffer:
    """A device buffer: guard bands of SENTINEL_BYTE around the data (or an exact malloc under ASan).
    Filled with `init` (raw bytes of the right size) or, when init is None, with the `poison` byte."""

    @classmethod
    def adopt(cls, mod: NativeModule, raw: np.ndarray, nbytes: int) -> "DeviceBuffer":
        """A buffer over memory already laid out as sentinel band + data + sentinel (a staged argument, between
        guard pages in the shared file), not copied."""
        self = cls.__new__(cls)
        self.nbytes, self.sanitize, self.mod, self.raw = nbytes, False, mod, raw
        self.ptr = raw.ctypes.data + GUARD_BYTES
        return self

    def __init__(self, mod: NativeModule, nbytes: int, init: Optional[np.ndarray], poison: int, sanitize: bool):
        self.nbytes = nbytes
        self.sanitize = sanitize
        self.mod = mod
        if sanitize:
            self.ptr = mod.lib.emu_malloc(self.nbytes)
            self.raw = None
            self.fill(init, poison)
        else:
            # page-aligned, so the data (at GUARD_BYTES) is DEVICE_ALIGN-aligned; guard pages on both sides, the
            # sentinel band from the data's end to the end of its last page
            self.raw = guarded.guarded_bytes(2 * GUARD_BYTES + self.nbytes)
            self.raw[:GUARD_BYTES] = SENTINEL_BYTE
            self.raw[GUARD_BYTES + self.nbytes:] = SENTINEL_BYTE
            self.fill(init, poison)
            self.ptr = self.raw.ctypes.data + GUARD_BYTES

    def fill(self, init: Optional[np.ndarray], poison: int = 0) -> None:
        if self.sanitize:
            if init is None:
                ctypes.memset(self.ptr, poison, self.nbytes)
            else:
                ctypes.memmove(self.ptr, np.ascontiguousarray(init).ctypes.data, self.nbytes)
        elif init is None:
            self.raw[GUARD_BYTES:GUARD_BYTES + self.nbytes] = poison
        else:
            self.raw[GUARD_BYTES:GUARD_BYTES + self.nbytes] = np.ascontiguousarray(init).reshape(-1).view(np.uint8)

    def read(self, shape, dtype) -> np.ndarray:
        out = np.empty(shape, dtype)
        if self.sanitize:
            ctypes.memmove(out.ctypes.data, self.ptr, self.nbytes)
        else:
            out.reshape(-1).view(np.uint8)[:] = self.raw[GUARD_BYTES:GUARD_BYTES + self.nbytes]
        return out

    def release(self) -> None:
        if self.sanitize and self.ptr:
            self.mod.lib.emu_free(self.ptr)
            self.ptr = 0

    def rearm(self) -> None:
        """The guard bands set to SENTINEL_BYTE again (after a report of their damage)."""
        if not self.sanitize:
            self.raw[:GUARD_BYTES] = SENTINEL_BYTE
            self.raw[GUARD_BYTES + self.nbytes:] = SENTINEL_BYTE

    def bands(self) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """The guard bands before and after the data (None under AddressSanitizer, which has none)."""
        if self.sanitize:
            return None
        return self.raw[:GUARD_BYTES], self.raw[GUARD_BYTES + self.nbytes:]     # to the end of the last page


@dataclass
class Resident:
    """A resident buffer inside the worker (Module.alloc): its storage outlives launches."""
    buffer: Buffer
    storage: DeviceBuffer


def _is_array(a) -> bool:
    return isinstance(a, (np.ndarray, Buffer))


def _meta(a) -> tuple[tuple[int, ...], np.dtype]:
    return (a.shape, a.dtype)


def _by_value(mod: NativeModule, a: "Struct | Symbol", resident: dict[int, Resident]) -> np.void:
    """The raw bytes of a by-value aggregate: a module symbol's contents, or a struct with its pointer fields
    set to the addresses of resident buffers."""
    if isinstance(a, Symbol):
        return np.void(mod.symbol_bytes(a.name))
    raw = bytearray(a.value.tobytes())
    for off, buf in a.pointers:
        raw[off:off + 8] = int(resident[buf.id].storage.ptr).to_bytes(8, sys.byteorder)
    return np.void(bytes(raw))


def _argv(spec: LaunchSpec, bufs: dict[int, DeviceBuffer]):
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


def _guard_fault(spec: LaunchSpec, i: int, buf: "DeviceBuffer", sched: Schedule) -> Optional[str]:
    """The OutOfBounds detail when argument i's guard bands changed, else None."""
    bands = buf.bands()
    if bands is None:
        return None
    shape, dtype = _meta(spec.args[i])
    size = int(np.prod(shape, dtype=np.int64))
    resident = f", resident {spec.args[i]}" if isinstance(spec.args[i], Buffer) else ""
    detail = guard_fault(f"'{spec.names[i]}' (arg {i}, {size} x {dtype}{resident})", *bands, buf.nbytes,
                         dtype.itemsize)
    return None if detail is None else f"{detail} (schedule {sched})"


def reached_buffers(spec: LaunchSpec) -> list[tuple[str, Buffer]]:
    """Resident buffers the launch reaches through pointers in by-value structs and in set_symbol's variables
    (not passed as arguments themselves), each with its label: used in place, watched by the race detector like
    the buffers passed as pointers, and guarded like them (their buffer lines take the indices after the
    arguments', in this order)."""
    reached = [(f"{buf.name} (through {spec.names[i]})", buf) for i, a in enumerate(spec.args) if isinstance(a, Struct)
               for _, buf in a.pointers]
    reached += [(f"{buf.name} (through __device__ variable {name})", buf) for name, v in spec.symbols.items()
                if isinstance(v, Struct) for _, buf in v.pointers]
    passed = {a.id for a in spec.args if isinstance(a, Buffer)}
    return list({buf.id: (name, buf) for name, buf in reversed(reached) if buf.id not in passed}.values())


def reached_named(label: str, buf: Buffer) -> str:
    """"'t (through __device__ variable table)' (resident buffer 't' (64 float32), 64 x float32)": how reports
    name a buffer of reached_buffers."""
    return f"'{label}' (resident {buf}, {int(np.prod(buf.shape, dtype=np.int64))} x {np.dtype(buf.dtype)})"


def _reached_guard_fault(label: str, buf: Buffer, storage: "DeviceBuffer", sched: Schedule) -> Optional[str]:
    """The OutOfBounds detail when the guard bands of a resident buffer reached through a pointer changed, else
    None; the bands are set again, for the buffer outlives the launch."""
    bands = storage.bands()
    if bands is None:
        return None
    detail = guard_fault(reached_named(label, buf), *bands, storage.nbytes, buf.dtype.itemsize)
    if detail is not None:
        storage.rearm()
    return None if detail is None else f"{detail} (schedule {sched})"


def execute(mod: NativeModule, spec: LaunchSpec, resident: Optional[dict[int, Resident]] = None,
            staged: Optional[dict[int, np.ndarray]] = None) -> Outcome:
    """Run the launch under every schedule of its plan. Resident buffers (spec.args holding a Buffer) come from
    `resident`: a const one is used in place; an output one gets a poisoned copy per schedule; any other one
    starts every schedule from its contents before the launch. Afterwards each non-const resident buffer holds
    what the last run left in it. Const inputs are shared by all runs (`staged` ones in place, as the parent
    laid them out in shared memory) and not compared between runs."""
    kernel = mod.kernels[spec.kernel]
    resident = resident or {}
    reached = reached_buffers(spec)
    spec.symbols = {name: _by_value(mod, v, resident).tobytes() if isinstance(v, Struct) else v
                    for name, v in spec.symbols.items()}
    mod.reset_symbols(spec.symbols)
    spec.args = [_by_value(mod, a, resident) if isinstance(a, (Struct, Symbol)) else a for a in spec.args]
    staged = staged or {}
    arrays = [i for i, a in enumerate(spec.args) if _is_array(a)]
    in_place = {i: resident[spec.args[i].id].storage for i in arrays
                if isinstance(spec.args[i], Buffer) and spec.const[i] and i not in spec.outputs}
    for i in arrays:
        if isinstance(spec.args[i], np.ndarray) and spec.const[i] and i not in spec.outputs:
            in_place[i] = (DeviceBuffer.adopt(mod, staged[i], spec.args[i].nbytes) if i in staged and not spec.sanitize else
                           DeviceBuffer(mod, spec.args[i].nbytes, spec.args[i], 0, spec.sanitize))
    before = {i: resident[spec.args[i].id].storage.read(*_meta(spec.args[i])) for i in arrays
              if isinstance(spec.args[i], Buffer) and i not in in_place and i not in spec.outputs}
    copied = [i for i in arrays if i not in in_place]
    # Resident buffers reached through pointers are used in place: every run starts from their contents before the
    # launch (a kernel that updates them, `t[i] += 1`, reads the same in every schedule), and afterwards they hold
    # what run 0 left, as the resident arguments do.
    reached_before = {buf.id: resident[buf.id].storage.read(buf.shape, buf.dtype) for _, buf in reached}
    reached_after_run0: dict[int, np.ndarray] = {}
    runs: list[Optional[dict[int, np.ndarray]]] = []     # None: a block order left out (LaterBlockWait)
    plan = schedules(spec.schedules, spec.seed, spec.only_schedule)
    out = Outcome()
    results: dict[int, np.ndarray] = {}
    nblocks = spec.grid[0] * spec.grid[1] * spec.grid[2]
    def run_schedule(r: int, sched: Schedule, sample, detect: bool, record: bool):
        """One run of the plan: (return code, message, the copied arrays after it, guard damage); with `detect`,
        under the race detector (its races into `out`); with `record`, its statistics kept in `out`."""
        print(f"emu-worker: {spec.kernel} run {r + 1}/{len(plan)} schedule {sched}"
              + ("" if record else " again, under the race detector"), file=sys.stderr, flush=True)
        NativeModule.bump_progress()
        for _, buf in reached:       # each run starts from what the buffers held before the launch
            if r or not record:
                resident[buf.id].storage.fill(reached_before[buf.id])
        bufs = dict(in_place)
        for i in copied:
            a = spec.args[i]
            nbytes = a.nbytes
            if i in spec.outputs:
                bufs[i] = DeviceBuffer(mod, nbytes, None, sched.poison, spec.sanitize)
            else:
                bufs[i] = DeviceBuffer(mod, nbytes, before[i] if i in before else a, 0, spec.sanitize)
        for i, b in bufs.items():     # where the buffers lie: a fault in their guard pages names the argument
            print(guarded.buffer_line(i, b.ptr, b.nbytes, _meta(spec.args[i])[1].itemsize), file=sys.stderr,
                  flush=True)
        for k, (_, buf) in enumerate(reached):
            b = resident[buf.id].storage
            print(guarded.buffer_line(len(spec.args) + k, b.ptr, b.nbytes, buf.dtype.itemsize), file=sys.stderr,
                  flush=True)
        argv, keep = _argv(spec, bufs)
        mod.reset_symbols(spec.symbols)
        mod.set_barrier_sites(spec.barrier_any_site)
        mod.set_atomic_acquire(spec.atomic_acquire)
        mod.set_collectives_order(spec.collectives_order)
        mod.set_lockstep(spec.lock_step)
        m0 = mod.mixed_barriers()[0]
        s0, d0, t0, c0 = mod.switches(), mod.int_divisions_by_zero(), time.perf_counter(), time.thread_time()
        # Shared memory gets the other pattern: a value copied from unwritten shared memory into an output
        # then reads as "depends on the poison", not as "output never written".
        if detect:    # the memory the kernel may write; const inputs cannot take part in a race
            mod.race_begin([(bufs[i].ptr, bufs[i].nbytes, spec.names[i], spec.args[i].dtype.itemsize)
                            for i in copied] +
                           [(resident[buf.id].storage.ptr, resident[buf.id].storage.nbytes, name, buf.dtype.itemsize)
                            for name, buf in reached] +
                           [(addr, size, f"__device__ variable '{name}'", 0)
                            for name, (addr, size, writable) in mod.symbols.items() if writable])
        try:
            rc, msg = mod.run(kernel, argv, spec.grid, spec.block, spec.shared_bytes, sched.policy, sched.seed,
                              sched.shared_poison, r == 0 and record, sample)
            if detect:
                out.races, out.race_where = mod.race_report(), f"schedule {sched}{_on(sample, nblocks)}"
        finally:
            if detect:
                accesses = mod.race_end()
                if record:
                    out.race_accesses = accesses
        if record:
            out.blocks.append(nblocks if sample is None else len(sample))
            out.kernel_ms.append((time.perf_counter() - t0) * 1e3)
            out.kernel_cpu_ms.append((time.thread_time() - c0) * 1e3)
            out.switches.append(mod.switches() - s0)
            if r == 0:
                out.printf = mod.printf_output()
                out.divisions_by_zero = mod.int_divisions_by_zero() - d0
                mixed, line_a, line_b = mod.mixed_barriers()
                out.mixed_barriers = (mixed - m0, line_a, line_b)
        if record and not out.later_block_waits[0]:
            held, first = mod.later_block_waits()
            if held:
                out.later_block_waits = (held, first, f"schedule {sched}{_on(sample, nblocks)}")
        results = {i: bufs[i].read(*_meta(spec.args[i])) for i in copied}
        if r == 0 and record:
            reached_after_run0.update({buf.id: resident[buf.id].storage.read(buf.shape, buf.dtype)
                                       for _, buf in reached})
        damaged = [(i, _guard_fault(spec, i, bufs[i], sched)) for i in arrays]
        damaged += [(None, _reached_guard_fault(label, buf, resident[buf.id].storage, sched))
                    for label, buf in reached]
        for i in copied:
            bufs[i].release()
        del keep
        return rc, msg, results, damaged

    differing_kept = False       # a schedule after run 1 that differs from run 0 is kept (judge reports it)
    try:
        for r, sched in enumerate(plan):
            sample = spec.block_sample if r >= FULL_RUNS or (r == 1 and not _unwritten_candidates(spec, runs[0])) \
                else None
            out.sampled.append(sample is not None)
            waits_before = out.later_block_waits
            rc, msg, results, damaged = run_schedule(r, sched, sample, spec.race and r == 0, True)
            if rc == LATER_BLOCK_WAIT and sample is not None and not out.races:
                # a block of the sample waits for a block the sample leaves out: blocks that wait on each other
                # are checked together, so this schedule runs again on every block
                sample = None
                out.sampled[r] = False
                for record in (out.blocks, out.kernel_ms, out.kernel_cpu_ms, out.switches):
                    record.pop()
                out.later_block_waits = waits_before
                rc, msg, results, damaged = run_schedule(r, sched, sample, spec.race and r == 0, True)
            if rc == LATER_BLOCK_WAIT and r >= 2 and not out.races:
                # Another block order made a block wait for one that emu cannot hold it for (under the sanitizer,
                # beside grid.sync): this order cannot run here, the orders that ran are compared without it.
                out.left_out.append(f"schedule {sched}: {msg}")
                runs.append(None)
                continue
            if rc:
                out.arrays = _returned(spec, results)
                out.fault = (FAULT_NAMES.get(rc, "KernelCrash"), f"{msg} (schedule {sched}{_on(sample, nblocks)})")
                return out
            for i, dmg in damaged:
                if dmg:
                    out.arrays = _returned(spec, results)
                    out.fault = ("OutOfBounds", dmg + _on(sample, nblocks))
                    return out
            if out.races:       # the detector's verdict (with any fault above); the other schedules add nothing
                out.arrays = _returned(spec, results)
                return out
            if r >= 2:
                # judge reports the first later schedule that differs from run 0: the copies of one that does not
                # (or of any after it) need not stay, and with large buffers five copies exhaust the worker
                if differing_kept or not any(differing_from_first(runs[0][i], results[i], out.sampled[r],
                                                                  lambda i=i: _initial(spec, sched, i, before)).size
                                             for i in runs[0]):
                    results = runs[0]
                else:
                    differing_kept = True
            runs.append(results)
        ran = [r for r, run in enumerate(runs) if run is not None]
        out.fault = judge(spec, [plan[r] for r in ran], [runs[r] for r in ran],
                          lambda k, i: _initial(spec, plan[ran[k]], i, before), [out.sampled[r] for r in ran])
        if spec.race and out.fault and out.fault[0] == "RaceDetected":
            # The schedules disagree and run 0 had no race: a race may lie on a path only another schedule took.
            # Each other schedule runs again under the detector; its races, if any, are the verdict.
            for r in ran[1:]:
                sample = spec.block_sample if out.sampled[r] else None
                run_schedule(r, plan[r], sample, True, False)
                if out.races:       # the race explains the disagreement
                    out.fault = None
                    break
        out.arrays = _returned(spec, runs[0])
        return out
    finally:
        for i, b in in_place.items():
            if isinstance(spec.args[i], np.ndarray):
                b.release()
        final = runs[0] if runs else results     # run 0 ran every block; else what the faulting run left
        for i in copied:     # resident buffers keep what the launch left in them
            if isinstance(spec.args[i], Buffer) and i in final:
                resident[spec.args[i].id].storage.fill(final[i])
        if runs:             # reached ones too: what run 0 left (else what the faulting run left stays)
            for buf_id, contents in reached_after_run0.items():
                resident[buf_id].storage.fill(contents)


def _on(sample: Optional[tuple[int, ...]], nblocks: int) -> str:
    return "" if sample is None else f", run on {len(sample)} sampled of {nblocks} blocks"


def _initial(spec: LaunchSpec, sched: Schedule, i: int, before: dict[int, np.ndarray]) -> np.ndarray:
    """What argument i held when a run started: its poison for an output, else its contents before the launch."""
    a = spec.args[i]
    if i in spec.outputs:
        return np.full(a.nbytes, sched.poison, np.uint8).view(a.dtype).reshape(a.shape)
    return before[i] if i in before else a


def _returned(spec: LaunchSpec, results: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """The arrays copied back to the caller: plain (not resident) arrays the kernel may write."""
    return {i: a for i, a in results.items() if isinstance(spec.args[i], np.ndarray) and not spec.const[i]}


def differing_from_first(first: np.ndarray, run: np.ndarray, sampled: bool, initial=None) -> np.ndarray:
    """Flat indices where a run's array differs from run 0's. A run on a block sample left the other blocks'
    elements as they were when it started (`initial()`), so only the elements it changed count."""
    if run is first:
        return np.empty(0, np.intp)
    idx = checks.differing(first, run)
    if idx.size and sampled and initial is not None:
        idx = np.intersect1d(idx, checks.differing(initial(), run), assume_unique=True)
    return idx


def judge(spec: LaunchSpec, plan: list[Schedule], runs: list[dict[int, np.ndarray]],
          initial=None, sampled: "list[bool] | None" = None) -> Optional[tuple[str, str]]:
    """The first fault the runs show: unwritten outputs and poison-dependent results (runs 0 and 1), then
    differences between schedules. A run on a block sample left the other blocks' elements as they were when
    it started, so it is compared with run 0 where it changed an element: a sampled block that wrote a
    different value is a race (or, for run 1, a read of memory it had not written)."""
    if len(runs) < 2:
        return None
    sampled = sampled or [False] * len(runs)
    first, second = runs[0], runs[1]

    def diff(r: int, i: int) -> np.ndarray:
        return differing_from_first(first[i], runs[r][i], sampled[r],
                                    None if initial is None else lambda: initial(r, i))

    def where(r: int) -> str:
        return f" (on {len(spec.block_sample)} sampled blocks)" if sampled[r] else ""

    for i in spec.outputs:
        idx = checks.unwritten(first[i], second[i], (plan[0].poison, plan[1].poison))
        if idx.size:
            derived = np.setdiff1d(diff(1, i), idx, assume_unique=True)
            if derived.size:      # values computed from the poison: the kernel read the output before writing it
                return "UninitializedRead", (
                    "the result depends on the poison pattern, so the kernel read memory it had not written (an "
                    f"output before writing it; {idx.size} element(s) of it hold the poison itself, not written or "
                    "written back unchanged): " +
                    checks.describe_difference(spec.names[i], first[i], second[i], derived, str(plan[0]),
                                               str(plan[1]) + where(1)))
            return "UnwrittenOutput", checks.describe_unwritten(spec.names[i], first[i], idx)
    for i in first:
        idx = diff(1, i)
        if idx.size:
            return "UninitializedRead", (
                "the result depends on the poison pattern, so the kernel read memory it had not written "
                "(shared memory, or an output before writing it): " +
                checks.describe_difference(spec.names[i], first[i], second[i], idx, str(plan[0]),
                                           str(plan[1]) + where(1)))
    for r in range(2, len(runs)):
        for i in first:
            idx = diff(r, i)
            if idx.size:
                return "RaceDetected", ("thread schedules gave different results: " +
                                        checks.describe_difference(spec.names[i], first[i], runs[r][i], idx,
                                                                   str(plan[0]), str(plan[r]) + where(r)))
    return None
