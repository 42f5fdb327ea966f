"""The `emu` backend: CUDA C kernels compiled with the host C++ compiler and run on CPU fibers with CUDA
execution semantics, plus checks a GPU run cannot give cheaply (guard bands, poisoned outputs and shared
memory, several thread schedules, barrier divergence, deadlock), isolated in a worker process."""
from __future__ import annotations

import os
import re
import weakref
from typing import Optional, Sequence

import numpy as np

from harness.backends.args import BufferArg, plan_args
from harness.backends.emu import toolchain as tc
from harness.backends.emu.build import Built, build
from harness.backends.emu.client import Worker, WorkerDied, WorkerTimedOut
from harness.backends.emu.faults import fault_error
from harness.backends.emu.runs import LaunchSpec, Outcome

from harness.backends.base import (Backend, KernelCrash, KernelTimeout, LaunchInfo, LaunchResult, Module, OutOfBounds,
                   UninitializedRead, as_dim3)

__all__ = ["EmuBackend", "EmuModule", "UninitializedRead"]

MAX_THREADS = 1024
DEFAULT_SCHEDULES = 5
SCHEDULES_ENV = "QCONFORM_EMU_SCHEDULES"
MAX_DYNAMIC_SHARED = 227 * 1024   # sm_90 opt-in limit per block


class EmuBackend(Backend):
    """CPU execution backend.

    schedules: runs per launch (>= 1; default $QCONFORM_EMU_SCHEDULES, else 5). Run 1: forward order, outputs
      poisoned 0xA5; run 2: forward, 0x5A (unwritten outputs, reads before writes); run 3: reverse order;
      run 4: warp-greedy (each warp runs ahead to the next block barrier: races between warps inside one
      barrier interval); runs 5..: seeded random orders. Shared memory gets the other poison pattern of each run.
    seed: seed of the random schedules (recorded in every fault message).
    timeout_s: wall-clock limit for one launch, all schedules together.
    sanitize: AddressSanitizer build (out-of-bounds reads as well as writes).
    fiber: "boost", "ucontext" or None/"auto" ($QCONFORM_EMU_FIBER).
    """
    name = "emu"

    def __init__(self, schedules: Optional[int] = None, seed: int = 0, timeout_s: float = 120.0,
                 sanitize: bool = False, fiber: Optional[str] = None, cxx: Optional[str] = None):
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
        self.toolchain = tc.toolchain(fiber, cxx)
        preload = None
        if self.sanitize:
            preload = tc.asan_runtime(self.toolchain.cxx)
            if preload is None:
                raise ValueError("sanitize: the AddressSanitizer runtime (libasan) was not found for "
                                 f"{self.toolchain.cxx}")
        self._worker = Worker(preload)
        self._finalizer = weakref.finalize(self, self._worker.close)

    def load(self, source: str, flags: Sequence[str] = (), name: str = "kernel.cu") -> "EmuModule":
        built = build(source, flags, toolchain=self.toolchain, sanitize=self.sanitize, name=name)
        return EmuModule(self, built)

    def describe(self) -> dict:
        return {"backend": self.name, "fiber": self.toolchain.fiber, "cxx": self.toolchain.cxx_version,
                "schedules": self.schedules, "seed": self.seed, "sanitize": self.sanitize,
                "timeout_s": self.timeout_s}

    def close(self) -> None:
        self._worker.close()


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
        self.last_stats: dict = {}

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(self._sigs)

    def _native_sizes(self, launch: LaunchInfo) -> dict[str, tuple[int, ...]]:
        if self._sizes is None:
            self._sizes = self._request({"op": "load", "path": str(self.built.path)}, launch)
        return self._sizes

    def _request(self, msg: dict, launch: LaunchInfo):
        try:
            reply = self.backend._worker.request(msg, self.backend.timeout_s)
        except WorkerTimedOut as exc:
            raise KernelTimeout(launch, f"did not finish within {self.backend.timeout_s:g} s (last step: "
                                        f"{exc.last_step}); the worker process was stopped") from None
        except WorkerDied as exc:
            detail = f"the worker process died with {exc.how} during {exc.last_step}"
            if "AddressSanitizer" in exc.stderr_tail:
                report = exc.stderr_tail[exc.stderr_tail.find("==ERROR: AddressSanitizer"):][:2500]
                raise OutOfBounds(launch, f"{_asan_summary(exc.stderr_tail)} ({detail}); AddressSanitizer report:\n"
                                          f"{report}") from None
            tail = exc.stderr_tail[-3000:]
            raise KernelCrash(launch, detail + (f"; its last output:\n{tail}" if tail else "")) from None
        if "error" in reply:
            raise RuntimeError(f"emu worker failed on {launch}:\n{reply['error']}")
        return reply["ok"]

    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: Sequence[object], outputs: Sequence[int] = ()) -> LaunchResult:
        if name not in self._sigs:
            raise ValueError(f"name: no kernel {name!r} in this module (it has {', '.join(self._sigs)})")
        g, b = as_dim3(grid, "grid"), as_dim3(block, "block")
        if b[0] * b[1] * b[2] > MAX_THREADS:
            raise ValueError(f"block: {b[0] * b[1] * b[2]} threads per block; CUDA allows at most {MAX_THREADS}")
        if not isinstance(shared_bytes, (int, np.integer)) or not 0 <= shared_bytes <= MAX_DYNAMIC_SHARED:
            raise ValueError(f"shared_bytes: expected an integer in [0, {MAX_DYNAMIC_SHARED}], got {shared_bytes!r}")
        launch = LaunchInfo(name, g, b, int(shared_bytes))
        sig = self._sigs[name]
        sizes = self._native_sizes(launch)[name]
        plan = plan_args(sig, args, outputs, sizes, empty_ok=False)
        checked = [p.array if isinstance(p, BufferArg) else p.value for p in plan]
        outs = tuple(int(o) for o in outputs)
        spec = LaunchSpec(str(self.built.path), name, g, b, int(shared_bytes), tuple(n for _, n in sig.params),
                          tuple(t.startswith("const ") and t.endswith("*") for t, _ in sig.params), checked, outs, self.backend.schedules, self.backend.seed, self.backend.sanitize)
        outcome: Outcome = self._request({"op": "launch", "spec": spec}, launch)
        for i, result in outcome.arrays.items():
            target = args[i]
            if target.flags.writeable:
                np.copyto(target, result)
        self.last_stats = {"kernel_ms": outcome.kernel_ms, "switches": outcome.switches, "printf": outcome.printf}
        if outcome.fault:
            cls, detail = outcome.fault
            raise fault_error(cls, launch, detail)
        notes = [f"emu: {len(outcome.kernel_ms)} schedule(s), run 1 {outcome.kernel_ms[0]:.1f} ms, "
                 f"{outcome.switches[0]} fiber switches"]
        if outcome.printf:
            notes.append("device printf:\n" + outcome.printf)
        return LaunchResult(launch, None, tuple(notes))
