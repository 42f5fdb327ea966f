"""The GPU worker process: it alone holds the CUDA context of its device, loads modules, keeps resident
buffers and runs launches, so that a hung or crashed kernel never takes the caller down.

Neither CUDA nor PyCUDA can stop a running kernel from the host, and NVIDIA documents that after a sticky
error (illegal address, trap, launch failure) the context is unusable and the process must be restarted.
So on a timeout or a sticky error this process replies with the fault and `retire`, touches the device no
more, and the parent kills it and starts a fresh one for the next launch. A non-sticky error (a launch the
driver refuses: bad dimensions, too many resources) leaves the context as it is.

Requests arrive on stdin and replies leave on a private copy of stdout (harness.backends.protocol, as for the
emu worker); each step is announced on stderr as `gpu-worker: <step>`, so that a hang the parent
has to cut short still says where it was.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, Optional

import numpy as np

from harness.backends.args import BufferArg, ResidentArg, ScalarArg
from harness.backends.base import GUARD_BYTES, POISON_BYTES, SENTINEL_BYTE, LaunchInfo
from harness.backends.device_lock import DeviceLock
from harness.backends.faults import HARNESS_ERROR
from harness.backends.gpu import TimingPlan, import_driver, runs_disagree, timing_summary, unwritten_report
from harness.backends.guards import guard_fault

STEP_PREFIX = "gpu-worker: "
DEFAULT_SHARED_LIMIT = 48 * 1024    # static + dynamic shared memory a block gets without opting in


def step(text: str) -> None:
    os.write(2, f"{STEP_PREFIX}{text}\n".encode())


class Fault(Exception):
    """A per-request failure, sent back as a fault of class `kind`; `retire` asks the parent to kill this process."""

    def __init__(self, kind: str, detail: str, retire: bool = False):
        super().__init__(detail)
        self.kind, self.detail, self.retire = kind, detail, retire


class _Alloc:
    """A device allocation framed by guard bands: [guard | data (nbytes) | guard]."""

    def __init__(self, dev: "Device", what: str, nbytes: int, itemsize: int = 1):
        self.what, self.nbytes, self.itemsize = what, nbytes, itemsize
        self.mem = dev.guarded(f"allocating {what} ({nbytes} bytes)", dev.cuda.mem_alloc, 2 * GUARD_BYTES + nbytes)
        self.base = int(self.mem)
        self.data = self.base + GUARD_BYTES
        dev.guarded(f"filling the guard bands of {what}", dev.cuda.memset_d8, self.base, SENTINEL_BYTE, GUARD_BYTES)
        dev.guarded(f"filling the guard bands of {what}", dev.cuda.memset_d8, self.data + nbytes, SENTINEL_BYTE,
                    GUARD_BYTES)

    def read(self, dev: "Device", offset: int, nbytes: int) -> np.ndarray:
        host = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            dev.guarded(f"copying {self.what} back", dev.cuda.memcpy_dtoh, host, self.base + offset)
        return host

    def guard_report(self, dev: "Device") -> Optional[str]:
        return guard_fault(self.what, self.read(dev, 0, GUARD_BYTES),
                           self.read(dev, GUARD_BYTES + self.nbytes, GUARD_BYTES), self.nbytes, self.itemsize)

    def free(self) -> None:
        try:
            self.mem.free()
        except Exception:   # noqa: BLE001 - a context in trouble may refuse; the process goes with it anyway
            pass


class Device:
    """The one CUDA context of this process, its modules and its resident buffers."""

    def __init__(self, index: int, lock_key: str):
        self.cuda = cuda = import_driver()
        step("initialising the CUDA driver")
        cuda.init()
        self.device = cuda.Device(index)
        step(f"creating a CUDA context on device {index}")
        try:
            self.context = self.device.make_context()    # current for the life of this process
        except cuda.Error as exc:
            raise Fault("ContextFailure", f"could not create a CUDA context on device {index} "
                                          f"({self.device.name()}): {type(exc).__name__}: {exc}") from None
        self.modules: dict[str, object] = {}
        self.resident: dict[int, _Alloc] = {}
        self.lock = DeviceLock(lock_key)

    # -- error handling --------------------------------------------------------------------------------
    def healthy(self) -> bool:
        """Does the context still work? A sticky error makes every later call fail, a synchronize included."""
        try:
            self.cuda.Context.synchronize()
            return True
        except self.cuda.Error:
            return False

    def guarded(self, what: str, call: Callable, *args, launch: bool = False):
        """One CUDA call. Out of memory (device or host) is ResourceExhausted; another CUDA error is a
        KernelCrash that retires this process when it left the context broken, and a refused launch
        (LaunchRefused) when `launch` and the context is intact."""
        step(what)
        try:
            return call(*args)
        except self.cuda.MemoryError as exc:
            raise Fault("ResourceExhausted", f"{what}: the device is out of memory: {exc}",
                        retire=not self.healthy()) from None
        except MemoryError as exc:
            raise Fault("ResourceExhausted", f"{what}: the host is out of memory: {exc}") from None
        except self.cuda.Error as exc:
            if self.healthy():
                if launch:
                    raise Fault("LaunchRefused", f"{what}: the driver refused the launch ({type(exc).__name__}: "
                                                 f"{exc}); not a sticky error, the context stays") from None
                raise Fault("KernelCrash", f"{what} failed: {type(exc).__name__}: {exc}") from None
            raise Fault("KernelCrash", f"{what} failed: {type(exc).__name__}: {exc}; a sticky error: the worker "
                                       f"process is restarted for the next launch", retire=True) from None

    def wait(self, what: str, limit_s: float) -> None:
        """Wait for the device's queued work with a deadline; a kernel still running then retires this process
        (nothing can stop it, and every later call would wait for it)."""
        done = self.guarded("recording an event", self.cuda.Event)
        self.guarded("recording an event", done.record)
        deadline = time.monotonic() + limit_s
        pause = 1e-4
        step(f"waiting for {what}")
        while not self.guarded(f"waiting for {what}", done.query):
            if time.monotonic() > deadline:
                raise Fault("KernelTimeout", f"{what} was still running after {limit_s:g} s; a running kernel "
                                             f"cannot be stopped, so the worker process is killed and a new one "
                                             f"runs the next launch", retire=True)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        self.guarded(f"synchronizing after {what}", self.cuda.Context.synchronize)

    # -- modules ---------------------------------------------------------------------------------------
    def load(self, key: str, cubin: bytes) -> None:
        if key in self.modules:
            return
        step("loading a module")
        try:
            self.modules[key] = self.cuda.module_from_buffer(cubin)
        except self.cuda.Error as exc:
            if not self.healthy():
                raise Fault("KernelCrash", f"loading the module failed and left the context broken: {exc}",
                            retire=True) from None
            raise Fault("BuildError", f"the CUDA driver rejected the compiled module: {exc}") from None

    def function(self, key: str, name: str):
        try:
            return self.modules[key].get_function(name)
        except KeyError:
            raise Fault(HARNESS_ERROR, f"module {key[:12]} is not loaded in this worker") from None
        except self.cuda.Error as exc:
            raise Fault("BuildError", f"kernel {name} is not in the compiled module under that name (a template "
                                      f"or static kernel cannot be launched by name): {exc}") from None

    # -- resident buffers ------------------------------------------------------------------------------
    def alloc(self, buf_id: int, what: str, nbytes: int, itemsize: int, init: Optional[bytes]) -> None:
        a = _Alloc(self, what, nbytes, itemsize)
        try:
            if nbytes:
                if init is None:
                    self.guarded(f"poisoning {what}", self.cuda.memset_d8, a.data, POISON_BYTES[0], nbytes)
                else:
                    self.guarded(f"copying {what} to the device", self.cuda.memcpy_htod, a.data,
                                 np.frombuffer(init, np.uint8))
        except Fault as f:
            if not f.retire:
                a.free()
            raise
        self.resident[buf_id] = a

    def write(self, buf_id: int, data: bytes) -> None:
        a = self.resident[buf_id]
        if a.nbytes:
            self.guarded(f"copying {a.what} to the device", self.cuda.memcpy_htod, a.data,
                         np.frombuffer(data, np.uint8))

    def read(self, buf_id: int) -> bytes:
        a = self.resident[buf_id]
        damage = a.guard_report(self)
        if damage:
            raise Fault("OutOfBounds", f"reading {damage}")
        return a.read(self, GUARD_BYTES, a.nbytes).tobytes()

    def free(self, buf_id: int) -> None:
        a = self.resident.pop(buf_id, None)
        if a is not None:
            a.free()

    # -- timing ----------------------------------------------------------------------------------------
    def measure(self, enqueue: Callable[[], None], plan: TimingPlan, limit_s: float, what: str) -> dict:
        """Back-to-back work between one pair of events per batch, after `plan.warmup_ms` of wall time of the
        same work (so that clocks have left idle); the per-launch median and spread of the batches."""
        cuda = self.cuda
        t0, chunk, warm = time.perf_counter(), 1, 0
        while True:
            for _ in range(chunk):
                enqueue()
            self.wait(f"the warm-up {what}", limit_s * chunk)
            warm += chunk
            if (time.perf_counter() - t0) * 1e3 >= plan.warmup_ms:
                break
            chunk = min(2 * chunk, plan.launches)
        warmup_ms = (time.perf_counter() - t0) * 1e3
        batch_ms = []
        for b in range(plan.batches):
            start = self.guarded("creating events", cuda.Event)
            end = self.guarded("creating events", cuda.Event)
            self.guarded("recording an event", start.record)
            for _ in range(plan.launches):
                enqueue()
            self.guarded("recording an event", end.record)
            self.wait(f"timed batch {b + 1} of {plan.batches} ({what})", limit_s * plan.launches)
            batch_ms.append(float(self.guarded("reading the event timer", start.time_till, end)))
        return timing_summary(batch_ms, plan, warmup_ms, warm)

    def copy_bandwidth(self, nbytes: int, plan: TimingPlan, limit_s: float, lock_wait_s: float) -> dict:
        with self.lock.held(exclusive=True, wait_s=lock_wait_s) as busy:
            if busy:
                return {"skipped": f"copy bandwidth not measured: {busy}"}
            src = _Alloc(self, "the copy source", nbytes)
            dst = _Alloc(self, "the copy destination", nbytes)
            try:
                self.guarded("filling the copy source", self.cuda.memset_d8, src.data, 0x3C, nbytes)
                def copy() -> None:
                    self.guarded("a device-to-device copy", self.cuda.memcpy_dtod, dst.data, src.data, nbytes)
                summary = self.measure(copy, plan, limit_s, "copy")
            finally:
                src.free()
                dst.free()
        # bytes read plus bytes written per copy, over the per-copy median
        summary["gbps"] = 2 * nbytes / (summary["per_launch_ms"] * 1e-3) / 1e9
        return summary


class Launch:
    """One checked launch: allocate, run once per poison pattern, verify guards and outputs, optionally time."""

    def __init__(self, dev: Device, req: dict):
        self.dev, self.cuda = dev, dev.cuda
        self.info: LaunchInfo = req["info"]
        self.plan = req["plan"]
        self.timing: Optional[TimingPlan] = req["timing"]
        self.limit_s: float = req["timeout_s"]
        self.lock_wait_s: float = req["lock_wait_s"]
        self.function = dev.function(req["key"], req.get("symbol") or self.info.kernel)
        self.buffers = [p for p in self.plan if isinstance(p, BufferArg)]
        self.resident = [p for p in self.plan if isinstance(p, ResidentArg)]
        self.allocs: dict[int, _Alloc] = {}
        self.snapshots: dict[int, _Alloc] = {}

    def run(self) -> dict:
        retired = False
        try:
            self._check_limits()
            with self.dev.lock.held(exclusive=False, wait_s=self.lock_wait_s):
                # a launch goes ahead even without the lock (it only keeps this launch out of a timing window)
                result = self._checked_runs()
            if self.timing:
                result["timing"] = self._time()
            return result
        except Fault as f:
            retired = f.retire
            raise
        finally:
            if not retired:    # freeing memory a running or broken kernel uses could wait for ever
                for a in (*self.allocs.values(), *self.snapshots.values()):
                    a.free()

    def _check_limits(self) -> None:
        cuda, info, dev = self.cuda, self.info, self.dev
        threads = info.block[0] * info.block[1] * info.block[2]
        limit = dev.guarded("reading the kernel's thread limit", self.function.get_attribute,
                            cuda.function_attribute.MAX_THREADS_PER_BLOCK)
        if threads > limit:
            raise Fault("LaunchRefused", f"block: {info.block} is {threads} threads; the compiled kernel allows at "
                                         f"most {limit} per block on this device (registers, __launch_bounds__)")
        static = dev.guarded("reading the kernel's static shared memory", self.function.get_attribute,
                             cuda.function_attribute.SHARED_SIZE_BYTES)
        if static + info.shared_bytes > DEFAULT_SHARED_LIMIT:   # beyond 48 KiB in all, a kernel must opt in
            optin = dev.guarded("reading the device's shared memory limit", dev.device.get_attribute,
                                cuda.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            if info.shared_bytes + static > optin:
                raise Fault("LaunchRefused", f"shared_bytes: {info.shared_bytes} dynamic + {static} static bytes "
                                             f"exceed the device's {optin} bytes per block")
            dev.guarded("opting into large dynamic shared memory", self.function.set_attribute,
                        cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, info.shared_bytes)

    def _pointer(self, p) -> np.uintp:
        if isinstance(p, BufferArg):
            return np.uintp(self.allocs[p.index].data)
        return np.uintp(self.dev.resident[p.buffer.id].data)

    def _kernel_args(self) -> list[object]:
        out = []
        for p in self.plan:
            if isinstance(p, ScalarArg):
                v = p.value
                if v.dtype == np.float16:    # PyCUDA packs scalars by struct code: half as its bits,
                    v = v.view(np.uint16)
                elif v.dtype == np.bool_:    # and a C++ bool as the one byte it is
                    v = v.view(np.uint8)
                out.append(v)
            else:
                out.append(self._pointer(p))
        return out

    def _enqueue(self) -> None:
        info, kargs = self.info, self.kargs
        self.dev.guarded("the launch", lambda: self.function(*kargs, grid=info.grid, block=info.block,
                                                             shared=info.shared_bytes), launch=True)

    def _prepare(self, pattern: Optional[int], first: bool) -> None:
        """Guard bands and poison are set on the device; only real data crosses from the host. Const inputs go
        up once; anything the kernel may write starts from the caller's data for every run, and a resident
        in/out buffer from its contents before the launch (a device-side snapshot)."""
        dev, cuda = self.dev, self.cuda
        for buf in self.buffers:
            n = buf.array.nbytes
            if first:
                self.allocs[buf.index] = _Alloc(dev, buf.what, n, buf.itemsize)
            elif buf.const:
                continue
            if n == 0:
                continue
            if buf.is_output:
                dev.guarded(f"poisoning {buf.what}", cuda.memset_d8, self.allocs[buf.index].data, pattern, n)
            else:
                dev.guarded(f"copying {buf.what} to the device", cuda.memcpy_htod, self.allocs[buf.index].data,
                            buf.array)
        for r in self.resident:
            a, n = dev.resident[r.buffer.id], r.buffer.nbytes
            if n == 0 or r.const:
                continue
            if r.is_output:
                dev.guarded(f"poisoning {r.what}", cuda.memset_d8, a.data, pattern, n)
            elif first:
                snap = self.snapshots[r.index] = _Alloc(dev, f"the snapshot of {r.what}", n)
                dev.guarded(f"keeping {r.what} as it was", cuda.memcpy_dtod, snap.data, a.data, n)
            else:
                self._restore(r)

    def _restore(self, r: ResidentArg) -> None:
        snap = self.snapshots.get(r.index)
        if snap is not None:
            self.dev.guarded(f"restoring {r.what}", self.cuda.memcpy_dtod, self.dev.resident[r.buffer.id].data,
                             snap.data, r.buffer.nbytes)

    def _download(self, when: str) -> dict[int, np.ndarray]:
        """Verify every guard band; return the data of what the kernel may have written and must be seen."""
        damage, data = [], {}
        for buf in self.buffers:
            a = self.allocs[buf.index]
            if (d := a.guard_report(self.dev)):
                damage.append(d)
            if not buf.const:
                data[buf.index] = a.read(self.dev, GUARD_BYTES, a.nbytes)
        for r in self.resident:
            a = self.dev.resident[r.buffer.id]
            if (d := a.guard_report(self.dev)):
                damage.append(d.replace(a.what, r.what, 1))
            if r.is_output:
                data[r.index] = a.read(self.dev, GUARD_BYTES, a.nbytes)
        if damage:
            raise Fault("OutOfBounds", f"{when}: " + " | ".join(damage))
        return data

    def _checked_runs(self) -> dict:
        outputs = [p for p in (*self.buffers, *self.resident) if p.is_output]
        patterns = POISON_BYTES if outputs else (None,)
        runs: dict[int, list[np.ndarray]] = {p.index: [] for p in outputs}
        data: dict[int, np.ndarray] = {}
        for k, pattern in enumerate(patterns):
            self._prepare(pattern, first=k == 0)
            if k == 0:
                self.kargs = self._kernel_args()
            self._enqueue()
            self.dev.wait("the kernel", self.limit_s)
            data = self._download("after the launch" + (f" with poison 0x{pattern:02X}" if pattern else ""))
            for p in outputs:
                runs[p.index].append(data[p.index])
        unwritten = [r for p in outputs if (r := unwritten_report(p, runs[p.index]))]
        if unwritten:
            raise Fault("UnwrittenOutput", " | ".join(unwritten))
        notes = [r for p in outputs if (r := runs_disagree(p, runs[p.index]))]
        arrays = {b.index: data[b.index] for b in self.buffers if not b.const}
        return {"arrays": arrays, "notes": notes}

    def _time(self) -> dict:
        with self.dev.lock.held(exclusive=True, wait_s=self.lock_wait_s) as busy:
            if busy:
                return {"skipped": f"timing skipped: {busy}"}
            try:
                return self.dev.measure(self._enqueue, self.timing, self.limit_s, "launch")
            finally:
                for r in self.resident:    # timed repeats must not change what the caller keeps on the device
                    if r.is_output or r.const:
                        continue
                    self._restore(r)


def handle(dev: Optional[Device], req: dict) -> tuple[Optional[Device], dict]:
    op = req["op"]
    if op == "open":
        return Device(req["device"], req["lock_key"]), {"ok": None}
    if dev is None:
        raise Fault(HARNESS_ERROR, f"request {op!r} before the device was opened")
    if op == "load":
        dev.load(req["key"], req["cubin"])
        return dev, {"ok": None}
    if op == "resolve":
        dev.function(req["key"], req.get("symbol") or req["name"])
        return dev, {"ok": None}
    if op == "launch":
        return dev, {"ok": Launch(dev, req).run()}
    if op == "alloc":
        dev.alloc(req["id"], req["what"], req["nbytes"], req["itemsize"], req["init"])
        return dev, {"ok": None}
    if op == "write":
        dev.write(req["id"], req["data"])
        return dev, {"ok": None}
    if op == "read":
        return dev, {"ok": dev.read(req["id"])}
    if op == "free":
        dev.free(req["id"])
        return dev, {"ok": None}
    if op == "copy_bandwidth":
        return dev, {"ok": dev.copy_bandwidth(req["nbytes"], req["plan"], req["timeout_s"], req["lock_wait_s"])}
    raise Fault(HARNESS_ERROR, f"unknown request {op!r}")


def main() -> int:
    from harness.backends import protocol
    reply_fd = protocol.reply_channel()
    device: list[Optional[Device]] = [None]

    def answer(req: dict) -> dict:
        try:
            device[0], reply = handle(device[0], req)
        except Fault as f:
            reply = {"fault": (f.kind, f.detail), "retire": f.retire}
        return reply

    def out_of_memory(exc: MemoryError) -> dict:
        return {"fault": ("ResourceExhausted", f"the host is out of memory: {exc}"), "retire": False}

    return protocol.serve(reply_fd, answer, out_of_memory, after=lambda: step("idle"))


if __name__ == "__main__":
    sys.exit(main())
