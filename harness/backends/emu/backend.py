"""The `emu` backend: CUDA C kernels compiled with the host C++ compiler and run on CPU fibers with CUDA
execution semantics, plus checks a GPU run cannot give cheaply (guard bands, poisoned outputs and shared
memory, several thread schedules, barrier divergence, deadlock), isolated in a worker process."""
from __future__ import annotations

import os
import re
import signal
import weakref
from typing import Optional, Sequence

import numpy as np

from harness.backends.args import BufferArg, ResidentArg, ScalarArg, check_struct, plan_args
from harness.backends import faults
from harness.backends.base import (POISON_BYTES, Backend, Buffer, KernelFault, KernelTimeout, LaunchInfo, LaunchResult,
                                   Module, OutOfBounds, ResourceExhausted, SandboxViolation, Struct, Symbol, UninitializedRead, as_dim3,
                                   check_buffer_array)
from harness.backends.client import FORGED, LastWords, Worker, WorkerDied, WorkerTimedOut
from harness.backends.emu import guarded, races, sandbox, sites
from harness.backends.emu import staging as shm
from harness.backends.emu import toolchain as tc
from harness.backends.emu import watchdog
from harness.backends.emu.build import Built, build
from harness.backends.resident import ResidentBook
from harness.backends.emu.runs import LaunchSpec, Outcome, reached_buffers, reached_named, schedules as schedule_plan
from harness.backends.emu.sampling import BlockSampling, describe as describe_sample
from cudasrc.signatures import launch_name

__all__ = ["EmuBackend", "EmuModule", "UninitializedRead"]

MAX_THREADS = 1024
CUDA_LOCAL_BYTES = 512 * 1024     # the local memory one CUDA thread may use (CUDA C Programming Guide, table of limits)
DEFAULT_SCHEDULES = 5
SCHEDULES_ENV = "QCONFORM_EMU_SCHEDULES"
RACE_CHECK_ENV = "QCONFORM_EMU_RACE_CHECK"
ACCESSES_ENV = "QCONFORM_EMU_ACCESSES"        # every command's choice of accesses= (check, report, mutate, generate)
WARP_ORDER_ENV = "QCONFORM_EMU_WARP_ORDER"    # every command's choice of warp_order=
ACQUIRE_RULES = ("fence", "atomic")     # the race detector's acquire rule: PTX's, or the writer-side fence idiom's
WARP_ORDERS = ("collectives", "syncwarp")   # what orders a warp's lanes for the detector: every collective, or __syncwarp
MAX_DYNAMIC_SHARED = 227 * 1024   # sm_90 opt-in limit per block


def _or_env(value: "str | None", name: str, env: str) -> "tuple[str | None, str]":
    """An option given as `value`, else $`env`'s value where it is set (else None), and what to name in its error."""
    if value is None and os.environ.get(env):
        return os.environ[env], f"${env}"
    return value, name


def _instrumenting(name: str, value: object, sanitize: bool, clash: str) -> bool:
    """A True/False option that needs the race build's instrumentation, which AddressSanitizer's excludes."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected True or False, got {value!r}")
    if value and sanitize:
        raise ValueError(f"{name}: {clash}")
    return value


class EmuBackend(Backend):
    """CPU execution backend.

    schedules: runs per launch (>= 1; default $QCONFORM_EMU_SCHEDULES, else 5). Run 1: forward order, outputs
      poisoned 0xA5; run 2: forward, 0x5A (unwritten outputs, reads before writes); run 3: reverse order;
      run 4: warp-greedy (each warp runs ahead to the next block barrier: races between warps inside one
      barrier interval); runs 5..: seeded random orders. Shared memory gets the other poison pattern of each run.
    seed: seed of the random schedules (recorded in every fault message).
    block_sampling: "sampled[:N]" (default: run 1 on every block; run 2, the other poison pattern, on every block
      when run 1 left an output element holding the poison, else on the sample; the extra schedules on a
      deterministic block sample: see harness.backends.emu.sampling) or "all" (every schedule on every block).
    timeout_s: wall-clock limit for one block of a launch (the worker reports every finished block, so a large
      grid that keeps making progress is never cut short); where that cannot be watched (no memfd), for the
      whole launch. A timeout is the emulator's limit: judged `unchecked`, never `fail`.
    sanitize: AddressSanitizer build (out-of-bounds reads as well as writes).
    race_check: the happens-before race detector on run 1 (default $QCONFORM_EMU_RACE_CHECK, else on; always
      off with `sanitize`, whose instrumentation it cannot share): every pair of conflicting accesses to shared
      memory or to a buffer the kernel may write that the CUDA memory model leaves unordered is a DataRace,
      whatever the values (see docs/KERNELS.md, "The race detector"). The schedules stay a second opinion.
    fiber: "boost", "ucontext" or None/"auto" ($QCONFORM_EMU_FIBER).
    schedule: run every launch once, under this one policy ("forward", "reverse", "warp-greedy", "random"), in
      place of the checked schedules: what that interleaving alone does (`qconform generate --emu-schedule`).
      Nothing is compared across runs and the race detector is off (default), so no race or unwritten output
      is reported; bounds checks still run.
    memory_limit_mb, cpu_limit_s: the worker sandbox's limits (see harness.backends.emu.sandbox and
      SECURITY.md): address space of the worker (default 16384 MiB; none under `sanitize`, whose shadow
      memory is terabytes of address space) and CPU seconds over a worker's life (default 3600; a new worker
      starts with a fresh budget). Reaching either is the tool's limit, judged `unchecked`, except that a
      kernel whose own allocation fails is judged on what it does next (usually a crash: `fail`).
      The sandbox needs libseccomp (pyseccomp); without it the backend refuses to run unless
      $QCONFORM_EMU_SANDBOX=off says that the sources are trusted.
    barrier_sites: "same" (default): threads of a block that wait at __syncthreads() calls on different source
      lines are a BarrierDivergence (PTX's bar.sync is .aligned: the ISA asks every thread to execute the same
      barrier instruction); "any": that barrier completes once every thread has arrived, as current GPUs count,
      and each launch that did so gets a note (llama.cpp's tensor-core flash attention relies on it).
    acquire: the race detector's acquire rule. "fence" (default, the PTX memory model): a relaxed atomic (CUDA's
      atomicXxx) that reads what a fence and an atomic released acquires it at the reading thread's next fence;
      "atomic": it acquires at once, as the CUDA C++ Programming Guide's __threadfence() idiom (a fence on the
      writer's side only, its threadFenceReduction sample) and ScoRD's model read it. A reading, not a fix: by
      PTX the reader's plain accesses after such an atomic still race.
    warp_order: default $QCONFORM_EMU_WARP_ORDER, else "collectives". What orders two lanes of one warp for the
      race detector. "collectives": any warp collective naming both (__syncwarp, a shuffle, a vote, a match, a
      reduction, the int8 mma); "syncwarp": __syncwarp alone (a cooperative group's sync is one), as the CUDA C++
      Programming Guide promises memory ordering for it only and compute-sanitizer's racecheck reports a shared
      store and read that only a shuffle lies between (llama.cpp's mm_ids_helper: docs/KERNELS.md, "What orders
      a warp's lanes").
    lock_step: the lanes of a warp take turns access by access in every run (each lane makes its k-th access to
      memory before any makes its (k+1)-th), as lanes in lock step do, which GPUs before Volta did and a
      verifier's warp-synchronous reading assumes (GPUVerify's --warp-sync): what such code computes under that
      assumption. Where the lanes' paths differ, the turns are one interleaving of them. Built with the race
      detector's instrumentation (not with `sanitize`); a reading's schedules, not the CUDA memory model.
    accesses: default $QCONFORM_EMU_ACCESSES, else "source" with g++: the compiler passes that drop or move
      accesses are off, so each load and store of the source is made where it is written, as the CUDA C++
      abstract machine makes them (a race on a load whose value nothing uses is found; compute-sanitizer on a GPU
      does not see it); "compiled" (default with clang, whose passes cannot be named): optimised as a GPU build
      is, such a load dropped before it is made. See harness.backends.emu.toolchain.ACCESS_FLAGS; cost:
      docs/KERNELS.md, "The race detector".
    """
    name = "emu"

    def __init__(self, schedules: Optional[int] = None, seed: int = 0, timeout_s: float = 120.0,
                 sanitize: bool = False, fiber: Optional[str] = None, cxx: Optional[str] = None,
                 block_sampling: "str | BlockSampling | None" = None, race_check: Optional[bool] = None,
                 schedule: Optional[str] = None, memory_limit_mb: Optional[int] = sandbox.DEFAULT_MEMORY_MB,
                 cpu_limit_s: int = sandbox.DEFAULT_CPU_S, barrier_sites: str = "same", acquire: str = "fence",
                 lock_step: bool = False, accesses: Optional[str] = None, warp_order: Optional[str] = None):
        if barrier_sites not in ("same", "any"):
            raise ValueError(f"barrier_sites: expected 'same' or 'any', got {barrier_sites!r}")
        self.barrier_sites = barrier_sites
        if acquire not in ACQUIRE_RULES:
            raise ValueError(f"acquire: expected one of {ACQUIRE_RULES}, got {acquire!r}")
        self.acquire = acquire
        warp_order, what = _or_env(warp_order, "warp_order", WARP_ORDER_ENV)
        self.warp_order = WARP_ORDERS[0] if warp_order is None else warp_order
        if self.warp_order not in WARP_ORDERS:
            raise ValueError(f"{what}: expected one of {WARP_ORDERS}, got {self.warp_order!r}")
        if schedules is None:
            env = os.environ.get(SCHEDULES_ENV, str(DEFAULT_SCHEDULES))
            if not env.isdigit():
                raise ValueError(f"${SCHEDULES_ENV}: expected a positive integer, got {env!r}")
            schedules = int(env)
        if not isinstance(schedules, (int, np.integer)) or schedules < 1:
            raise ValueError(f"schedules: expected an integer >= 1, got {schedules!r}")
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s: expected a positive number of seconds, got {timeout_s!r}")
        self.schedules, self.seed, self.timeout_s, self.sanitize = int(schedules), int(seed), float(timeout_s), bool(sanitize)
        if race_check is None:
            env = os.environ.get(RACE_CHECK_ENV, "1")
            if env not in ("0", "1"):
                raise ValueError(f"${RACE_CHECK_ENV}: expected 0 or 1, got {env!r}")
            race_check = env == "1" and not sanitize and schedule is None
        self.race_check = _instrumenting("race_check", race_check, sanitize, "the race detector cannot be combined "
                                         "with sanitize (both instrument every access); pass race_check=False")
        self.lock_step = _instrumenting("lock_step", lock_step, sanitize, "it takes the race detector's "
                                        "instrumentation, which cannot be combined with sanitize (AddressSanitizer); "
                                        "pass sanitize=False")
        self.block_sampling = BlockSampling.parse(block_sampling)
        if schedule is not None:
            schedule_plan(1, 0, schedule)            # a clear error for an unknown policy
            self.schedules = 1
        self.schedule = schedule
        self.toolchain = tc.toolchain(fiber, cxx)
        accesses, what = _or_env(accesses, "accesses", ACCESSES_ENV)
        self.accesses = accesses or self.toolchain.default_accesses()
        self.toolchain.access_flags(self.accesses, what)        # a clear error before anything is built
        self._options = {"schedules": self.schedules, "seed": self.seed, "timeout_s": self.timeout_s,
                         "sanitize": self.sanitize, "fiber": self.toolchain.fiber, "cxx": self.toolchain.cxx,
                         "block_sampling": str(self.block_sampling), "race_check": self.race_check,
                         "schedule": self.schedule, "barrier_sites": self.barrier_sites, "acquire": self.acquire,
                         "lock_step": self.lock_step, "accesses": self.accesses, "warp_order": self.warp_order}
        preload = None
        if self.sanitize:
            preload = tc.asan_runtime(self.toolchain.cxx)
            if preload is None:
                raise ValueError("sanitize: the AddressSanitizer runtime (libasan) was not found for "
                                 f"{self.toolchain.cxx}")
        self.limits = sandbox.Limits(None if self.sanitize else memory_limit_mb, cpu_limit_s)
        self._options["memory_limit_mb"], self._options["cpu_limit_s"] = memory_limit_mb, cpu_limit_s
        extra_env = {}
        if sandbox.disabled_by_user():
            self.sandboxed = False
        else:
            why = sandbox.unavailable_reason()
            if why is not None:
                raise RuntimeError(f"emu: the worker sandbox is not available: {why}. Kernel sources are "
                                   f"untrusted code; to run them unsandboxed anyway (sources you trust), set "
                                   f"${sandbox.OFF_ENV}=off")
            self.sandboxed = True
            extra_env[sandbox.ENV] = self.limits.to_env()
        # large array arguments go through shared memory (not under AddressSanitizer: its buffers must be
        # exact heap allocations)
        self._staging = shm.StagingArea() if shm.available() and not preload else None
        self._worker = Worker("harness.backends.emu.worker", "emu-worker: ", "before the first schedule",
                              preload=preload,
                              progress=watchdog.ProgressCounter if watchdog.available() else None,
                              inherit={shm.ENV: self._staging.fd} if self._staging is not None else None,
                              extra_env=extra_env,
                              last_words=LastWords(signal.SIGUSR1, races.LAST_WORDS_END),
                              keep=(races.STDERR_PREFIX, races.STATE_PREFIX))
        self._finalizer = weakref.finalize(self, _shutdown, self._worker, self._staging)

    def load(self, source: str, flags: Sequence[str] = (), name: str = "kernel.cu") -> "EmuModule":
        built = build(source, flags, toolchain=self.toolchain, sanitize=self.sanitize,
                      race=self.race_check or self.lock_step, name=name,     # lock step turns in its entry points
                      accesses=self.accesses)
        return EmuModule(self, built)

    def spawn_config(self) -> tuple[str, dict]:
        """How to build the same backend in another process (qconform -j)."""
        return self.name, dict(self._options)

    def describe(self) -> dict:
        return {"backend": self.name, "fiber": self.toolchain.fiber, "cxx": self.toolchain.cxx_version,
                "schedules": self.schedules, "block_sampling": str(self.block_sampling), "seed": self.seed,
                "schedule": self.schedule or "all checked schedules",
                "sanitize": self.sanitize, "race_check": self.race_check, "barrier_sites": self.barrier_sites,
                "acquire": self.acquire, "lock_step": self.lock_step, "accesses": self.accesses,
                "warp_order": self.warp_order, "timeout_s": self.timeout_s,
                "sandbox": self.limits.describe() if self.sandboxed else f"off (${sandbox.OFF_ENV}=off)"}

    def close(self) -> None:
        self._finalizer()
        self._staging = None            # a later launch starts a worker again, without the shared file
        self._worker.inherit.clear()


def _shutdown(worker: Worker, staging: "shm.StagingArea | None") -> None:
    """Stop the worker and release the shared memory (the backend is done)."""
    worker.close()
    if staging is not None:
        staging.close()


def _coverage_summary(blocks: list[int], total: int, sample, grid) -> str:
    """'2 schedule(s) on all 18992 blocks, 3 on 6 of 18992 blocks: (0,0,0) ...'."""
    if not blocks:
        return "stopped before any schedule finished"
    full = sum(1 for n in blocks if n == total)
    parts = [f"{full} schedule(s) on all {total} blocks"]
    if len(blocks) > full:
        parts.append(f"{len(blocks) - full} on {describe_sample(grid, sample)}")
    return ", ".join(parts)


def _death_fault(launch: "LaunchInfo | None", exc: WorkerDied, spec: "LaunchSpec | None",
                 limits: sandbox.Limits) -> KernelFault:
    """What a worker that died during a request means (_death_cause); where the race detector had announced
    races before, a DataRace that says what then stopped the launch (a sandbox violation stays one)."""
    cause = _death_cause(launch, exc, spec, limits)
    if isinstance(cause, SandboxViolation):
        return cause
    return _with_announced_races(launch, exc.stderr_tail, spec, cause)


def _with_announced_races(launch: "LaunchInfo | None", stderr: str, spec: "LaunchSpec | None",
                          cause: KernelFault) -> KernelFault:
    """`cause` (what ended a request: the worker died, or it was stopped at the time limit), or, where the race
    detector had announced races of the launch before, the DataRace that says `cause` then stopped it. A race
    seen before a hang is a verdict on the kernel; the hang alone would only be the tool's limit."""
    found = races.from_stderr(stderr) if spec is not None else None
    if not found:
        return cause
    first = schedule_plan(spec.schedules, spec.seed, spec.only_schedule)[0]     # the detector watches run 1
    return races.fault(launch, races.resolve(found, spec.so_path), f"schedule {first}", cause)


def _death_cause(launch: "LaunchInfo | None", exc: WorkerDied, spec: "LaunchSpec | None",
                 limits: sandbox.Limits) -> KernelFault:
    """What a worker that died during a request means: the sandbox stopped the kernel (SandboxViolation), a
    limit of the tool was reached (unchecked: CPU time, a thread's fiber stack), the kernel hit a buffer's guard
    pages (OutOfBounds) or AddressSanitizer's checks, or it crashed (KernelCrash, with the faulting address)."""
    violation = sandbox.describe_violation(exc.stderr_tail, exc.how)
    if exc.how.startswith(FORGED):
        violation = (f"the worker's reply channel carried a forged message ({exc.how[len(FORGED) + 2:]}): the "
                     "kernel wrote into it; refused by the parent")
    if violation:
        return SandboxViolation(launch, f"{violation} during {exc.last_step}; the worker process was stopped and "
                                        "is replaced")
    if exc.how == f"exit status {sandbox.SETUP_FAILED_EXIT}":
        raise RuntimeError(f"emu: the worker could not sandbox itself, so it ran nothing:\n{exc.stderr_tail[-2000:]}")
    if exc.how == "signal SIGXCPU":
        return KernelTimeout(launch, f"the worker process used up its CPU time limit ({limits.cpu_s} s per worker, "
                                     f"option cpu_limit_s) during {exc.last_step}; this is the tool's limit, not a "
                                     "verdict on the kernel", tool_limit=True)
    where = f"the worker process died with {exc.how} during {exc.last_step}"
    overflow = guarded.stack_overflow(exc.stderr_tail)
    if overflow is not None:
        return ResourceExhausted(launch, f"{_stack_overflow(overflow)} ({where})")
    hit = guarded.locate(exc.stderr_tail) if spec is not None else None
    if hit is not None:
        return OutOfBounds(launch, f"{_guard_page_fault(spec, hit)} ({where})")
    if "AddressSanitizer" in exc.stderr_tail:
        report = exc.stderr_tail[exc.stderr_tail.find("==ERROR: AddressSanitizer"):][:2500]
        return OutOfBounds(launch, f"{_asan_summary(exc.stderr_tail)} ({where}); AddressSanitizer report:\n{report}")
    address = guarded.fault_address(exc.stderr_tail)
    near = guarded.nearest(exc.stderr_tail) if spec is not None and address else None
    if near is not None:       # far outside every buffer: which one it is nearest to helps find the index
        address += (f", outside every device buffer of the launch; the nearest is "
                    f"{_buffer_named(spec, near.arg)[0]}, {near.distance} bytes {near.side} it")
    return faults.died(launch, WorkerDied(f"{exc.how} ({address})" if address else exc.how,
                                          guarded.without_reports(exc.stderr_tail), exc.last_step))


def _stack_overflow(o: "guarded.StackOverflow") -> str:
    kib = o.stack_bytes // 1024
    how = (f"reached {o.reached} bytes below the top of" if o.reached is not None else "ran past the end of")
    return (f"stack overflow: {o.thread} {how} its {kib} KiB fiber stack "
            f"(large local arrays or deep calls). The emulator gives every thread a fixed {kib} KiB stack (no option "
            f"raises it), less than the {CUDA_LOCAL_BYTES // 1024} KiB of local memory a CUDA thread may use: this is "
            "the tool's limit, not a verdict on the kernel")


def _buffer_named(spec: LaunchSpec, index: int) -> tuple[str, object]:
    """("'x' (arg 0, 100 x float32)", the argument) for an argument's buffer line; for one of the resident buffers
    the launch reaches through pointers (runs.reached_buffers: the indices after the arguments'), ("'table (through
    __device__ variable t)' (resident buffer 't' (64 float32), 64 x float32)", the Buffer)."""
    if index >= len(spec.args):
        label, buf = reached_buffers(spec)[index - len(spec.args)]
        return reached_named(label, buf), buf
    a = spec.args[index]
    return f"'{spec.names[index]}' (arg {index}, {int(np.prod(a.shape, dtype=np.int64))} x {np.dtype(a.dtype)})", a


def _guard_page_fault(spec: LaunchSpec, hit: "guarded.GuardHit") -> str:
    """'write to 'x' (arg 0, 100 x float32) 8000 byte(s) before its start (element -2000): ...'."""
    name, a = _buffer_named(spec, hit.arg)
    size, elem = int(np.prod(a.shape, dtype=np.int64)), np.dtype(a.dtype).itemsize
    if hit.side == "after":
        pos = (f"{hit.distance + 1} byte(s) past its end (element {size + hit.distance // elem} of {size}) at byte "
               f"offset {size * elem + hit.distance}")
    else:
        pos = (f"{hit.distance} byte(s) before its start (element {-((hit.distance + elem - 1) // elem)}) at byte "
               f"offset {-hit.distance}")
    access = {"write": "write to", "read": "read of"}.get(hit.access, "access to")
    return (f"{access} {name} {pos}: it hit the "
            "inaccessible guard pages around the buffer")


def _asan_summary(report: str) -> str:
    """'heap-buffer-overflow: READ of size 4 at kernel.cu:2' from an AddressSanitizer report."""
    kind = re.search(r"ERROR: AddressSanitizer: ([\w-]+)", report)
    access = re.search(r"^(READ|WRITE) of size (\d+)", report, re.M)
    where = re.search(r" in .*? ([^\s/]+\.cu:\d+)", report)
    parts = [kind.group(1) if kind else "AddressSanitizer error"]
    if access:
        parts.append(f"{access.group(1)} of size {access.group(2)}")
    region = re.search(r"is located (\d+ bytes to the (?:right|left) of \d+-byte region)", report)
    if region:
        parts.append(f"{region.group(1)} (a device buffer)")
    if where:
        parts.append(f"at {where.group(1)}")
    return " ".join(parts)


class EmuModule(Module):
    def __init__(self, backend: EmuBackend, built: Built):
        self.backend = backend
        self.built = built
        self._sigs = {k.name: k for k in built.kernels}
        self._sizes: Optional[dict[str, tuple[int, ...]]] = None
        self._buffers = ResidentBook(backend._worker, "emu")
        self._symbols: Optional[dict[str, tuple[int, bool]]] = None   # name -> (bytes, writable), from the worker
        self._symbol_values: dict[str, "bytes | Struct"] = {}          # set_symbol's, sent with every launch
        self.last_stats: dict = {}

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(self._sigs)

    def _native_sizes(self, launch: LaunchInfo) -> dict[str, tuple[int, ...]]:
        if self._sizes is None:
            self._sizes = self._request({"op": "load", "path": str(self.built.path)}, launch)
        return self._sizes

    def _request(self, msg: dict, launch: "LaunchInfo | None", spec: Optional[LaunchSpec] = None):
        limit = self.backend.timeout_s
        try:
            reply = self.backend._worker.request(msg, limit)
        except WorkerTimedOut as exc:
            timeout = faults.timed_out(launch, exc, "a block did not finish" if exc.watched else "did not finish",
                                       limit, "the worker process was stopped. This is the CPU emulator's time "
                                       "limit, not a verdict on the kernel: it spins (waits for a thread that a "
                                       "cooperative fiber schedule never runs), hangs, or is too slow to emulate "
                                       "(run it on a GPU)", tool_limit=True)
            raise _with_announced_races(launch, exc.stderr_tail, spec, timeout) from None
        except WorkerDied as exc:
            raise _death_fault(launch, exc, spec, self.backend.limits) from None
        if reply.get("restart"):     # near its memory limit after the launch: the next request gets a new worker
            self.backend._worker.close()
        return faults.reply_value(reply, launch, "emu worker")

    # -- module symbols (file-scope __device__ / __constant__ variables) -------------------------------------
    def symbols(self) -> dict[str, tuple[int, bool]]:
        """name -> (size in bytes, writable from the host) of every file-scope __device__/__constant__ variable."""
        if self._symbols is None:
            self._symbols = self._request({"op": "symbols", "path": str(self.built.path)}, None)
        return self._symbols

    def _symbol(self, name: object, what: str) -> tuple[int, bool]:
        known = self.symbols()
        if name not in known:
            raise ValueError(f"{what}: no file-scope __device__ or __constant__ variable {name!r} in this module"
                             f" (it has: {', '.join(known) or 'none'})")
        return known[name]

    def set_symbol(self, name: str, array: "np.ndarray | Buffer | Struct") -> None:
        size, writable = self._symbol(name, "name")
        if not writable:
            raise ValueError(f"name: {name!r} is declared const, so the host cannot set it")
        if isinstance(array, Buffer):           # a pointer variable: the buffer's address, resolved at launch
            array = Struct(np.void(bytes(8)), ((0, array),))
        if isinstance(array, Struct):
            if not isinstance(array.value, np.void):
                raise ValueError(f"array: Struct.value must be a numpy structured scalar (np.void), got "
                                 f"{type(array.value).__name__}")
            check_struct(array, size, f"array: symbol {name!r}")
            for off, buf in array.pointers:
                self._buffers.live(buf, f"array: symbol {name!r} pointer at offset {off}")
            self._symbol_values[name] = array
            return
        if not isinstance(array, (np.ndarray, np.generic)):
            raise ValueError(f"array: expected a numpy array or scalar, a resident Buffer or a Struct for symbol "
                             f"{name!r}, got {type(array).__name__}")
        if array.nbytes != size:
            raise ValueError(f"array: symbol {name!r} is {size} bytes, the array has {array.nbytes} "
                             f"({array.dtype}, shape {np.shape(array)})")
        self._symbol_values[name] = np.ascontiguousarray(array).tobytes()

    # -- resident buffers ------------------------------------------------------------------------------
    @property
    def supports_resident_buffers(self) -> bool:
        return True

    def alloc(self, name: str, shape, dtype, init: Optional[np.ndarray] = None) -> Buffer:
        buf, data = self._buffers.new(name, shape, dtype, init)
        self._request({"op": "alloc", "path": str(self.built.path), "buffer": buf, "init": data,
                       "poison": POISON_BYTES[0], "sanitize": self.backend.sanitize}, None)
        self._buffers.add(buf)
        return buf

    def write(self, buf: Buffer, array: np.ndarray) -> None:
        buf = self._buffers.live(buf, "buf")
        self._request({"op": "write", "id": buf.id, "array": check_buffer_array(buf, array, "array")}, None)

    def read(self, buf: Buffer) -> np.ndarray:
        buf = self._buffers.live(buf, "buf")
        return self._request({"op": "read", "id": buf.id}, None)

    def free(self, buf: Buffer) -> None:
        if self._buffers.forget(buf, "buf"):
            self._request({"op": "free", "id": buf.id}, None)

    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: Sequence[object], outputs: Sequence[int] = ()) -> LaunchResult:
        name = launch_name(name)             # however the template arguments are spaced
        if name not in self._sigs:
            made = [k for k in self._sigs if k.startswith(name + "<")]
            raise ValueError(f"name: no kernel {name!r} in this module (it has {', '.join(self._sigs)})"
                             + (f"; {name} is a template: launch one of its instantiations, which the source "
                                "makes or cudasrc.instantiations.instantiated() adds" if made else ""))
        g, b = as_dim3(grid, "grid"), as_dim3(block, "block")
        if b[0] * b[1] * b[2] > MAX_THREADS:
            raise ValueError(f"block: {b[0] * b[1] * b[2]} threads per block; CUDA allows at most {MAX_THREADS}")
        if not isinstance(shared_bytes, (int, np.integer)) or not 0 <= shared_bytes <= MAX_DYNAMIC_SHARED:
            raise ValueError(f"shared_bytes: expected an integer in [0, {MAX_DYNAMIC_SHARED}], got {shared_bytes!r}")
        launch = LaunchInfo(name, g, b, int(shared_bytes))
        sig = self._sigs[name]
        sizes = self._native_sizes(launch)[name]
        plan = plan_args(sig, args, outputs, sizes, empty_ok=False, resident_ok=True, aggregates_ok=True)
        checked = [p.array if isinstance(p, BufferArg) else p.buffer if isinstance(p, ResidentArg) else p.value
                   for p in plan]
        outs = tuple(int(o) for o in outputs)
        for p in plan:
            if isinstance(p, ResidentArg):
                self._buffers.live(p.buffer, f"args[{p.index}] ({p.name})")
            elif isinstance(p, ScalarArg) and isinstance(p.value, Struct):
                for off, buf in p.value.pointers:
                    self._buffers.live(buf, f"args[{p.index}] ({p.name}) pointer at offset {off}")
            elif isinstance(p, ScalarArg) and isinstance(p.value, Symbol):
                what = f"args[{p.index}] ({p.name}: {p.ctype})"
                size, _ = self._symbol(p.value.name, what)
                if size != sizes[p.index]:
                    raise ValueError(f"{what}: symbol {p.value.name!r} is {size} bytes, the parameter {sizes[p.index]}")
        for sym, value in self._symbol_values.items():      # set_symbol's pointers: still held by the worker
            for off, buf in getattr(value, "pointers", ()):
                self._buffers.live(buf, f"symbol {sym!r} (set_symbol) pointer at offset {off}")
        be = self.backend
        # a grid-wide barrier waits for every block: a sample of them would never pass it
        sample = be.block_sampling.blocks(g) if be.schedules > 1 and not self.built.grid_sync else None
        staging = be._staging
        sent, staged_size = staging.place(checked) if staging is not None else (checked, 0)
        spec = LaunchSpec(str(self.built.path), name, g, b, int(shared_bytes), tuple(n for _, n in sig.params),
                          tuple(t.startswith("const ") and t.endswith("*") for t, _ in sig.params), sent, outs,
                          be.schedules, be.seed, be.sanitize, sample, staged_size, dict(self._symbol_values),
                          be.race_check, only_schedule=be.schedule, barrier_any_site=be.barrier_sites == "any",
                          atomic_acquire=be.acquire == "atomic", lock_step=be.lock_step,
                          collectives_order=be.warp_order == "collectives")
        plan = schedule_plan(be.schedules, be.seed, be.schedule)
        total = g[0] * g[1] * g[2]

        def coverage_of(blocks: list[int]) -> dict:
            return {"grid_blocks": total, "block_sampling": str(be.block_sampling),
                    "runs": [{"schedule": str(s), "blocks": n} for s, n in zip(plan, blocks)],
                    "sample": None if sample is None else list(sample),
                    "summary": _coverage_summary(blocks, total, sample, g)}
        try:
            outcome: Outcome = self._request({"op": "launch", "spec": spec}, launch, spec)
        except KernelFault as exc:
            exc.coverage = coverage_of([])      # the replay command still names the block sampling
            raise
        for i, result in outcome.arrays.items():   # plain arrays only: resident buffers stay in the worker
            target = args[i]
            if target.flags.writeable:
                np.copyto(target, result)
        self.last_stats = {"kernel_ms": outcome.kernel_ms, "kernel_cpu_ms": outcome.kernel_cpu_ms,
                           "switches": outcome.switches, "printf": outcome.printf, "blocks": outcome.blocks,
                           "race_accesses": outcome.race_accesses}
        coverage = coverage_of(outcome.blocks)
        if outcome.fault or outcome.races:
            err = None
            if outcome.fault:
                cls, detail = outcome.fault
                err = faults.fault_error(cls, launch, sites.resolve(detail, spec.so_path), "emu worker")
            if outcome.races:     # resolved here, not in the sandboxed worker: addr2line is a program to run
                found = races.resolve(races.parse(outcome.races), spec.so_path)
                err = races.fault(launch, found, outcome.race_where, err)
            if isinstance(err, KernelFault):
                err.coverage = coverage         # the runs up to the fault: how many blocks each covered
            raise err
        notes = [f"emu: {coverage['summary']}; run 1 {outcome.kernel_ms[0]:.1f} ms, "
                 f"{outcome.switches[0]} fiber switches"]
        notes += [f"emu: not compared: {why}" for why in outcome.left_out]
        caveats = []
        if outcome.mixed_barriers[0]:
            count, line_a, line_b = outcome.mixed_barriers
            caveats.append(f"emu: {count} __syncthreads() phase(s) of run 1 completed with threads at different call "
                           f"sites (lines {line_a} and {line_b}): PTX's bar.sync is "
                           ".aligned, so the ISA leaves this undefined; counted here as current GPUs count arrivals "
                           "(barrier_sites='any')")
        if outcome.later_block_waits[0]:
            count, first, where = outcome.later_block_waits
            caveats.append(f"emu: under {where}, {count} block(s) spun until blocks that ran after them made progress "
                           f"(first: {first}); emu held the waiting blocks while those ran, as a GPU keeps resident "
                           "blocks: a GPU ends this launch only when such blocks are resident at once (a grid that "
                           "fits the device whole, as a kernel sized by its SM count assumes)")
        if outcome.divisions_by_zero:
            caveats.append(f"emu: {outcome.divisions_by_zero} integer division(s) by zero in run 1: a GPU gives an "
                           "unspecified value and goes on (emu: quotient all ones, remainder the dividend); outputs "
                           "that depend on them are not defined")
        notes += caveats
        if outcome.race_accesses is not None:
            notes.append(f"emu race detector: no data race in {outcome.race_accesses} checked accesses of run 1")
        if outcome.printf:
            notes.append("device printf:\n" + outcome.printf)
        return LaunchResult(launch, None, tuple(notes), coverage, caveats=tuple(caveats))
