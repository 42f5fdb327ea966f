"""The GPU backend: kernels compiled by nvcc (confined: harness.confine), launched through PyCUDA on a CUDA device.

It gives the same guarantees as the CPU backend where a GPU can give them cheaply: every array travels to
a plain device allocation (never managed memory) framed by guard bands of SENTINEL_BYTE that are verified
after each launch, outputs are poisoned with each of POISON_BYTES in turn and must be written in full,
scalars pass by value with their type checked against the kernel's signature, and every CUDA call is
checked. All CUDA work runs in a worker process (harness.backends.gpu_worker), as on the CPU backend: a
kernel that hangs (KernelTimeout) or leaves a sticky error (KernelCrash) costs that process, which is
killed and replaced for the next launch, never the caller.

This module is the caller's side. Its first half is pure numpy (source preparation, argument marshalling,
poison and timing bookkeeping), shared with the worker and tested without a GPU; PyCUDA is imported lazily, so
that this module imports everywhere. The worker client, its protocol, the fault table, the guard-band check and
the resident-buffer book are the ones the emu backend uses too (harness.backends.client, protocol, faults,
guards, resident)."""
from __future__ import annotations

import importlib
import os
import re
import statistics
import weakref
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from harness.backends.args import BufferArg, ResidentArg, plan_args
from harness import confine
from harness.backends.device_code import copies_first, device_headers, write_header_copies
from harness.cache import cache_dir, cache_entry, content_key, scratch_folder
from harness.toolchain import host_libraries
from harness.toolchain.compile import cubin_of
from harness.toolchain.cubin import kernel_symbol
from cudasrc.host_code import Program, program_of
from cudasrc.preprocess import defines_of
from cudasrc.signatures import (GRID_GROUP, HEAD_WINDOW, TEMPLATE_HEAD, KernelSignature, kernel_signatures,
                                launch_name, program_kernel_signatures, strip_comments, template_kernels)

from . import faults
from .base import (  # noqa: F401  (LaunchRefused, ContextFailure, BufferLost: the faults of this backend, named here)
    POISON_BYTES, Backend, Buffer, BufferLost, BuildError, ContextFailure, LaunchInfo, LaunchRefused, LaunchResult,
    Module, ResourceExhausted, UnsupportedConstruct, as_dim3, build_error, check_buffer_array, check_flags,
)
from .client import Worker, WorkerDied, WorkerTimedOut
from .resident import ResidentBook


# ------------------------------------------------------------------------------------------------------
# Pure helpers (no PyCUDA)
# ------------------------------------------------------------------------------------------------------

_KERNEL_KEYWORD = re.compile(r"\b__global__\b")
# The specifiers of a kernel's declaration before and after `__global__` (`static void __global__ k`, `__global__
# static void k`)
_SPECIFIERS_BEFORE = re.compile(r"(?:\b(?:static|inline|void)\s+)*\Z")
_STATIC_AFTER = re.compile(r"\s+(?:__launch_bounds__\s*\([^;{}]*?\)\s*)*static\b")
# What a cubin is built from: the device code (harness.backends.device_code), part of its cache key
DEVICE_CODE = "device-code-1"
_HALF_USE = re.compile(r"\b(__half2?|half2?|__float2half\w*|__half2float|__hadd\w*|__hmul\w*)\b")
_BF16_USE = re.compile(r"\b(__nv_bfloat16\w*|__float2bfloat16\w*|__bfloat162float)\b")


def c_linkage(source: str) -> "dict[int, int | None]":
    """The kernels of `source` with C linkage: the line of each one's `__global__` -> where prepare_source puts its
    `extern "C"` (None where the source has one), the start of its declaration (`extern "C" static` is no C++;
    `extern "C" void __global__ k` is). A template kernel, a `static` one (whose symbol nvcc mangles whatever its
    linkage) and an overloaded one keep C++ linkage: GpuModule finds their mangled symbols in the cubin."""
    try:
        overloads = {k.line for k in kernel_signatures(source) if k.overloaded}
    except ValueError:            # a parameter list the reader cannot read: nvcc says what is wrong with it
        overloads = set()
    linked = {}
    for m in _KERNEL_KEYWORD.finditer(source):
        before = source[:m.start()].rstrip()
        last_line = before[before.rfind("\n") + 1:].lstrip()
        # A template kernel (after `template <...>`, perhaps then `__launch_bounds__(...)` and preprocessor lines; not
        # after an `#include <...>`) cannot have C linkage.
        head = source[max(0, m.start() - HEAD_WINDOW):m.start()]       # `static ` keeps its space
        template = TEMPLATE_HEAD.search(head) is not None and not re.match(r"#\s*include\b", last_line)
        lead = _SPECIFIERS_BEFORE.search(source, max(0, m.start() - 200), m.start())
        static = "static" in lead.group(0) or _STATIC_AFTER.match(source, m.end()) is not None
        line = source.count("\n", 0, m.start()) + 1
        if before.endswith('extern "C"'):
            linked[line] = None
        elif not (template or static or line in overloads):
            linked[line] = lead.start()
    return linked


def prepare_source(source: str, linked: "dict[int, int | None] | None" = None) -> str:
    """The text nvcc compiles: the kernels that can have it given C linkage (c_linkage), and the fp16/bf16 headers
    where used.

    PyCUDA looks kernels up by their symbol name. Wrapping the whole file in `extern "C" { }` (PyCUDA's
    default) breaks C++ headers such as <cuda_fp16.h>, so each `__global__` gets its own `extern "C"`
    instead, on the same line so that compiler messages keep their line numbers. Kernel strings decoded
    from other emitters rely on their host program for <cuda_fp16.h>; it is added when the source uses
    half types, followed by `#line 1` for the same reason. `linked`: c_linkage(source), where the caller has it.
    """
    out, last = [], 0
    for at in sorted(at for at in (c_linkage(source) if linked is None else linked).values() if at is not None):
        out.append(source[last:at])
        out.append('extern "C" ')
        last = at
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


def elements_holding(data: np.ndarray, itemsize: int, pattern: int) -> np.ndarray:
    """Per element: does every byte of it equal `pattern`?"""
    if itemsize == 0 or data.size == 0:
        return np.zeros(0, dtype=bool)
    return np.all(data.reshape(-1, itemsize) == pattern, axis=1)


def unwritten_report(buf: "BufferArg | ResidentArg", runs: Sequence[np.ndarray]) -> Optional[str]:
    """After one run per poison pattern: the elements that held the pattern every time were never written."""
    itemsize = buf.itemsize
    mask = None
    for pattern, data in zip(POISON_BYTES, runs):
        held = elements_holding(data, itemsize, pattern)
        mask = held if mask is None else mask & held
    if mask is None or not mask.any():
        return None
    idx = np.flatnonzero(mask)
    first = np.unravel_index(int(idx[0]), buf.shape) if len(buf.shape) else ()
    return (f"{buf.what}: {idx.size} of {mask.size} element(s) were never written (still poison after runs "
            f"with bytes {', '.join(f'0x{p:02X}' for p in POISON_BYTES)}); the first at index "
            f"{tuple(int(i) for i in first)}")


def runs_disagree(buf: "BufferArg | ResidentArg", runs: Sequence[np.ndarray]) -> Optional[str]:
    """Elements written in every run but to different values: the kernel read its output, or is nondeterministic."""
    if len(runs) < 2 or buf.nbytes == 0:
        return None
    itemsize = buf.itemsize
    written = np.ones(buf.nbytes // itemsize, dtype=bool)
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


@dataclass(frozen=True)
class TimingPlan:
    """How a launch (or a copy) is timed: after `warmup_ms` of wall time of the same work back to back (clocks
    leave idle), `batches` batches of `launches` back-to-back launches, each batch between one pair of events
    (no host round trip inside a batch). The per-launch time of each batch is its event time / `launches`;
    the median over batches is reported, with the spread."""
    batches: int
    launches: int
    warmup_ms: float


def check_timing(timing: object, warmup_ms: float) -> Optional[TimingPlan]:
    """`timing` as a launch takes it: None, or (batches >= 1, launches per batch >= 1)."""
    if timing is None:
        return None
    ok = (isinstance(timing, (tuple, list)) and len(timing) == 2
          and all(isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in timing)
          and timing[0] >= 1 and timing[1] >= 1)
    if not ok:
        raise ValueError(f"timing: expected (batches >= 1, launches per batch >= 1) as two ints, got {timing!r}")
    return TimingPlan(int(timing[0]), int(timing[1]), float(warmup_ms))


def timing_summary(batch_ms: Sequence[float], plan: TimingPlan, warmup_ms: float, warmup_launches: int) -> dict:
    """The per-launch median over the batches and the spread (max - min) / median of the per-launch times."""
    per = sorted(float(t) / plan.launches for t in batch_ms)
    median = float(statistics.median(per))
    return {"per_launch_ms": median, "min_ms": per[0], "max_ms": per[-1],
            "spread": (per[-1] - per[0]) / median if median > 0 else None,
            "batches": plan.batches, "launches_per_batch": plan.launches,
            "warmup_ms": round(float(warmup_ms), 3), "warmup_launches": int(warmup_launches)}


def timing_note(timing: dict) -> str:
    if "skipped" in timing:
        return timing["skipped"]
    spread = f"{100 * timing['spread']:.1f}%" if timing.get("spread") is not None else "n/a"
    return (f"timing: {timing['per_launch_ms']:.6g} ms per launch, median of {timing['batches']} batches of "
            f"{timing['launches_per_batch']} back-to-back launches (min {timing['min_ms']:.6g}, max "
            f"{timing['max_ms']:.6g}, spread {spread}) after {timing['warmup_ms']:.0f} ms of warm-up")


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


# A module that stands in for PyCUDA (its `driver()` and `compiler()` return modules shaped like
# pycuda.driver and pycuda.compiler): the fake driver of the tests and of `ci/gpu-check.sh`'s dry run. Read in
# the caller and in the worker process alike, which inherits the environment. Without it, nvcc is run by
# qconform, confined (harness.toolchain.compile.cubin_of), and PyCUDA loads the cubin.
DRIVER_ENV = "QCONFORM_GPU_DRIVER"


def _stand_in():
    name = os.environ.get(DRIVER_ENV, "").strip()
    return importlib.import_module(name) if name else None


def import_driver():
    stand_in = _stand_in()
    return stand_in.driver() if stand_in else importlib.import_module("pycuda.driver")


def _pycuda_include() -> list[str]:
    """-I PyCUDA's folder of device headers (pycuda-complex.hpp, pycuda-helpers.hpp), which its compile() always
    passes: a source written for PyCUDA includes them."""
    try:
        from importlib.resources import files
        folder = files("pycuda") / "cuda"
    except (ModuleNotFoundError, TypeError):
        return []
    return [f"-I{folder}"] if folder.is_dir() else []


def _pycuda_version() -> str:
    stand_in = _stand_in()
    if stand_in:
        return f"stand-in {stand_in.__name__} (${DRIVER_ENV})"
    return getattr(importlib.import_module("pycuda"), "VERSION_TEXT", "?")


def compute_mode_problem(cuda, index: int) -> Optional[str]:
    """Why the device's compute mode keeps this harness off it, or None. Every backend runs its CUDA work in a
    worker process, and parallel test workers each have one: exclusive-process mode admits only one of them
    at a time (the others fail to create a context), prohibited mode none."""
    modes = getattr(cuda, "compute_mode", None)
    attr = getattr(cuda.device_attribute, "COMPUTE_MODE", None)
    if modes is None or attr is None:
        return None
    mode = cuda.Device(index).get_attribute(attr)
    if mode == modes.PROHIBITED:
        return (f"device {index} is in prohibited compute mode: no process may create a CUDA context on it "
                f"(nvidia-smi -c DEFAULT, as its administrator)")
    if mode == modes.EXCLUSIVE_PROCESS:
        return (f"device {index} is in exclusive-process compute mode: only one process at a time may hold a "
                f"CUDA context, but each backend runs its kernels in a worker process and parallel test workers "
                f"have one each; ask its administrator for the default mode (nvidia-smi -c DEFAULT)")
    return None


def unavailable_reason() -> Optional[str]:
    """None when PyCUDA, a CUDA driver, a device and nvcc are all usable here; else a sentence saying why not."""
    try:
        cuda = import_driver()
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
        index = device_index_for_worker(count)
    except ValueError as exc:
        return str(exc)
    try:
        problem = compute_mode_problem(cuda, index)
    except cuda.Error as exc:
        return f"the compute mode of device {index} could not be read: {exc}"
    if problem:
        return problem
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
# Backend and module: the caller's side of the worker process
# ------------------------------------------------------------------------------------------------------

# Seconds a request may take beyond the kernels' own limits (copies, allocations, module loads).
REQUEST_SLACK_S = 120.0
# Seconds a new worker process may take to start and create its context.
WORKER_START_S = 120.0


class GpuBackend(Backend):
    """Runs kernels on CUDA device `device` (default: $QCONFORM_GPU, else xdist worker i -> device i % count).

    launch_timeout_s: a kernel still running after this many seconds raises KernelTimeout; the worker process
      that runs it is killed (a GPU kernel cannot be interrupted) and the next launch gets a new one.
    warmup_ms: wall time of back-to-back work before each timed measurement, so that clocks leave idle.
    lock_wait_s: how long a timing window waits for the device's lock (other processes launching or timing on
      the same device) before the timing is skipped, with the reason in the result.
    """

    name = "gpu"

    def __init__(self, device: Optional[int] = None, launch_timeout_s: float = 60.0, warmup_ms: float = 75.0,
                 lock_wait_s: float = 120.0):
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(f"the gpu backend is unavailable: {reason}")
        for what, v in (("launch_timeout_s", launch_timeout_s), ("lock_wait_s", lock_wait_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{what}: must be a positive number of seconds, got {v!r}")
        if isinstance(warmup_ms, bool) or not isinstance(warmup_ms, (int, float)) or not warmup_ms >= 0:
            raise ValueError(f"warmup_ms: must be a non-negative number of milliseconds, got {warmup_ms!r}")
        self.cuda = import_driver()     # device facts only: this process never creates a context
        count = self.cuda.Device.count()
        if device is None:
            device = device_index_for_worker(count)
        if isinstance(device, bool) or not isinstance(device, (int, np.integer)) or not 0 <= device < count:
            raise ValueError(f"device: expected a device index in 0..{count - 1}, got {device!r}")
        self.device_index = int(device)
        self.device = self.cuda.Device(self.device_index)
        self.launch_timeout_s, self.warmup_ms = float(launch_timeout_s), float(warmup_ms)
        self.lock_wait_s = float(lock_wait_s)
        self.nvcc = find_nvcc()
        self._worker = Worker("harness.backends.gpu_worker", "gpu-worker: ", "starting the worker process")
        self._finalizer = weakref.finalize(self, self._worker.close)
        self._opened = 0                    # the worker generation that has its context
        self._loaded: set[tuple[int, str]] = set()
        self._copy_gbps: dict[tuple, float] = {}
        self.restarts: list[str] = []       # why each worker was killed, for the report

    # -- the worker ------------------------------------------------------------------------------------
    @property
    def lock_key(self) -> str:
        try:
            return f"gpu-{self.device.pci_bus_id()}"
        except Exception:    # noqa: BLE001 - a driver without the query: the index names the device here
            return f"gpu-index-{self.device_index}"

    def _ensure_open(self, launch: Optional[LaunchInfo]) -> None:
        if self._worker.alive() and self._opened == self._worker.generation:
            return
        self._send({"op": "open", "device": self.device_index, "lock_key": self.lock_key}, launch, WORKER_START_S)
        self._opened = self._worker.generation

    def _send(self, msg: dict, launch: Optional[LaunchInfo], limit_s: float):
        try:
            reply = self._worker.request(msg, limit_s)
        except WorkerTimedOut as exc:
            self.restarts.append(f"timeout in {exc.last_step}")
            raise faults.timed_out(launch, exc, "the worker process did not answer", limit_s,
                                   "it was killed and the next launch gets a new one", tool_limit=False) from None
        except WorkerDied as exc:
            self.restarts.append(f"died with {exc.how} in {exc.last_step}")
            raise faults.died(launch, exc) from None
        except MemoryError as exc:
            raise ResourceExhausted(launch, f"the host is out of memory for the reply: {exc}") from None
        if reply.get("retire"):
            self.restarts.append(reply["fault"][1])
            self._worker.close()     # after a timeout or a sticky error the process is not used again
        return faults.reply_value(reply, launch, "gpu worker")

    def request(self, msg: dict, launch: Optional[LaunchInfo] = None, limit_s: Optional[float] = None):
        """One request to the worker (started, and its context created, if need be)."""
        self._ensure_open(launch)
        return self._send(msg, launch, REQUEST_SLACK_S if limit_s is None else limit_s)

    def ensure_module(self, key: str, cubin: bytes, launch: Optional[LaunchInfo] = None) -> None:
        """Load the cubin into the current worker (again after a restart)."""
        self._ensure_open(launch)
        if (self._worker.generation, key) not in self._loaded:
            self._send({"op": "load", "key": key, "cubin": cubin}, launch, REQUEST_SLACK_S)
            self._loaded.add((self._worker.generation, key))

    def close(self) -> None:
        self._worker.close()

    # -- compile ---------------------------------------------------------------------------------------
    @property
    def arch(self) -> str:
        major, minor = self.device.compute_capability()
        return f"sm_{major}{minor}"

    def load(self, source: str, flags: Sequence[str] = ()) -> "GpuModule":
        if not isinstance(source, str) or not source.strip():
            raise ValueError("source: expected non-empty CUDA C source text")
        flags = check_flags(flags)
        headers = confine.own_headers(source, flags)     # a changed header is a new build
        sigs = program_kernel_signatures(source, {h.name: t for h, t in headers.items()}, defines_of(flags))
        if not sigs and not template_kernels(source):
            raise ValueError("source: no __global__ kernel found")
        clean = strip_comments(source)
        cooperative = GRID_GROUP.search(clean)
        if cooperative:
            line = clean.count("\n", 0, cooperative.start()) + 1
            raise UnsupportedConstruct(None, f"cooperative groups' grid group (line {line}): its grid.sync needs a "
                                             "cooperative launch (cudaLaunchCooperativeKernel), which the GPU backend "
                                             "does not make, and in a normal launch it is undefined; the emu backend "
                                             "runs it")
        # the device code, as emu builds it: host functions dropped from the source and its headers (device_code)
        program = program_of([source, *headers.values()])
        device_code = program.device_code(source)
        linked = c_linkage(device_code)
        text = prepare_source(device_code, linked)
        key = content_key(text, *flags, "-arch", self.arch, nvcc_identity(self.nvcc), *confine.header_digests(headers),
                          DEVICE_CODE, host_libraries.digest())
        cubin = self._cached_cubin(key, text, flags, headers, program)
        module = GpuModule(self, source, flags, sigs, key, cubin, frozenset(linked))
        self.ensure_module(key, cubin)   # a module the driver rejects fails here, not at the first launch
        return module

    def _cached_cubin(self, key: str, text: str, flags: tuple[str, ...], headers: dict, program: Program) -> bytes:
        def make(tmp) -> None:
            with scratch_folder("gpu") as work:
                copies = work / "device-headers"
                write_header_copies(device_headers(headers, program), copies)
                # a host library's header the toolkit lacks (cuBLAS's) found in qconform's declarations, searched last
                device_flags = (*copies_first(flags, flags, headers, copies), *host_libraries.nvcc_flags())
                if _stand_in() is None:
                    # nvcc as PyCUDA's compile() runs it, but confined (the source is untrusted: harness.confine),
                    # and cached through qconform's cache, which parallel workers never read half-written
                    cubin, log = cubin_of(text, self.nvcc, [*device_flags, *_pycuda_include(), "-arch", self.arch])
                    if cubin is None:
                        log = log.replace(str(copies), "")        # each header named at its own path
                        raise build_error(f"nvcc could not compile the source for {self.arch}:", log, log)
                else:
                    cubin = self._stand_in_cubin(text, device_flags)
            tmp.write_bytes(cubin)

        return cache_entry(cache_dir("gpu-cubin") / f"{key}.cubin", make)[0].read_bytes()

    def _stand_in_cubin(self, text: str, flags: tuple[str, ...]) -> bytes:
        """The stand-in driver's compile (the tests', and `ci/gpu-check.sh`'s dry run), shaped like PyCUDA's."""
        try:
            return _stand_in().compiler().compile(text, nvcc=self.nvcc, options=list(flags), no_extern_c=True,
                                                  arch=self.arch, cache_dir=False)
        except self.cuda.CompileError as exc:
            log = "\n".join(s for s in (getattr(exc, "stdout", ""), getattr(exc, "stderr", "")) if s)
            raise BuildError(f"nvcc could not compile the source for {self.arch}: {exc}\n{log}".rstrip()) from exc

    # -- facts -----------------------------------------------------------------------------------------
    def describe(self) -> dict:
        dev, cuda = self.device, self.cuda
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
            "pycuda": _pycuda_version(),
            "nvcc": nvcc_identity(self.nvcc).splitlines()[-1] if self.nvcc else None,
            "launch_timeout_s": self.launch_timeout_s,
            "warmup_ms": self.warmup_ms,
            "worker_restarts": list(self.restarts),
        }

    def copy_bandwidth(self, nbytes: int = 512 << 20, batches: int = 5, copies: int = 10) -> dict:
        """Device-to-device copy bandwidth under the same warm-up and batching as kernel timing: GB/s (1e9
        bytes/s) counting bytes read plus bytes written, the ceiling a bandwidth-bound kernel's achieved
        (read + written) bytes per second is compared with. A dict: `gbps` and the timing summary, or
        `skipped` with the reason (another process held the device). Measured once per backend."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 1 << 20:
            raise ValueError(f"nbytes: expected an int of at least 1 MiB, got {nbytes!r}")
        plan = check_timing((batches, copies), self.warmup_ms)
        key = (int(nbytes), plan)
        if key not in self._copy_gbps:
            limit = self.launch_timeout_s * (plan.batches + 2) * plan.launches + self.lock_wait_s + REQUEST_SLACK_S
            self._copy_gbps[key] = self.request({"op": "copy_bandwidth", "nbytes": int(nbytes), "plan": plan,
                                                 "timeout_s": self.launch_timeout_s, "lock_wait_s": self.lock_wait_s},
                                                None, limit)
        return dict(self._copy_gbps[key])

    def copy_bandwidth_gbps(self, nbytes: int = 512 << 20, batches: int = 5, copies: int = 10) -> float:
        """copy_bandwidth()'s GB/s; RuntimeError saying why when it was not measured."""
        result = self.copy_bandwidth(nbytes, batches, copies)
        if "skipped" in result:
            raise RuntimeError(result["skipped"])
        return float(result["gbps"])


class GpuModule(Module):
    def __init__(self, backend: GpuBackend, source: str, flags: tuple[str, ...], sigs: list[KernelSignature],
                 key: str, cubin: bytes, c_linked: frozenset = frozenset()):
        self.backend = backend
        self.c_linked = c_linked                  # the lines of the source's kernels with C linkage (c_linkage)
        self.source = source
        self.flags = flags
        self.signatures = {s.name: s for s in sigs}
        self.key = key
        self.cubin = cubin
        self._symbols: dict[str, str] = {}       # an instantiation's name -> its mangled symbol
        self._buffers = ResidentBook(backend._worker, "gpu",
                                     lambda: backend.restarts[-1] if backend.restarts else "stopped")

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(self.signatures)

    def resolve(self, name: str) -> None:
        """Check that kernel `name` can be launched: BuildError if the compiled module lacks it."""
        sig = self._signature(name)
        symbol = self._symbol(sig)
        self.backend.ensure_module(self.key, self.cubin)
        self.backend.request({"op": "resolve", "key": self.key, "name": sig.name, "symbol": symbol})

    def _signature(self, name: str) -> KernelSignature:
        """Kernel `name`'s signature, however its template arguments are spaced (launch_name)."""
        try:
            return self.signatures[launch_name(name)]
        except KeyError:
            template = name in template_kernels(self.source) or "<" in name
            raise ValueError(f"name: no kernel {name!r} in this module; it has {', '.join(self.signatures)}"
                             + ("; a template kernel launches by an instantiation the source makes, or that "
                                "cudasrc.instantiations.instantiated() adds" if template else "")) from None

    def _symbol(self, sig: KernelSignature) -> str:
        """The symbol the driver knows kernel `sig` by: its name (C linkage, which prepare_source gives the source's
        plain kernels), or the mangled name of an instantiation, of a header's, a static or an overloaded plain
        kernel, read from the cubin."""
        if sig.name not in self._symbols:
            if "<" not in sig.name and not sig.header and sig.line in self.c_linked:
                return sig.name
            symbol, others = kernel_symbol(self.cubin, sig.spelling if sig.overloaded else sig.name, sig.scope,
                                           sig.ctypes if sig.overloaded else None)
            if symbol is None and "<" not in sig.name:
                raise BuildError(f"kernel {sig.name!r}" + (f" of {sig.header}" if sig.header else "")
                                 + ": not among the compiled module's kernels")
            if symbol is None:
                raise BuildError(f"kernel {sig.name!r}: the compiled module has no instantiation spelled so"
                                 + (f" (it has {', '.join(others)}; name the instantiation as the compiler spells "
                                    "it)" if others else ""))
            self._symbols[sig.name] = symbol
        return self._symbols[sig.name]

    # -- resident buffers ------------------------------------------------------------------------------
    @property
    def supports_resident_buffers(self) -> bool:
        return True

    def alloc(self, name: str, shape, dtype, init: "np.ndarray | None" = None) -> Buffer:
        buf, data = self._buffers.new(name, shape, dtype, init)
        self.backend.ensure_module(self.key, self.cubin)
        self.backend.request({"op": "alloc", "id": buf.id, "what": f"resident buffer {buf.name!r}",
                              "nbytes": buf.nbytes, "itemsize": buf.dtype.itemsize,
                              "init": None if data is None else data.tobytes()})
        self._buffers.add(buf)
        return buf

    def write(self, buf: Buffer, array: np.ndarray) -> None:
        handle = self._buffers.live(buf, "buf")
        data = check_buffer_array(handle, array, "array")
        self.backend.request({"op": "write", "id": handle.id, "data": data.tobytes()})

    def read(self, buf: Buffer) -> np.ndarray:
        handle = self._buffers.live(buf, "buf")
        data = self.backend.request({"op": "read", "id": handle.id})
        return np.frombuffer(data, dtype=handle.dtype).reshape(handle.shape).copy()

    def free(self, buf: Buffer) -> None:
        if self._buffers.forget(buf, "buf"):
            self.backend.request({"op": "free", "id": buf.id})

    # -- launch ----------------------------------------------------------------------------------------
    def launch(self, name: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: Sequence[object], outputs: Sequence[int] = (),
               timing: "tuple[int, int] | None" = None) -> LaunchResult:
        """`timing` = (batches, launches per batch): after the checked runs, time the kernel (TimingPlan); the
        result's elapsed_ms is the per-launch median, `timing` says how it was measured or why it was not."""
        sig = self._signature(name)
        name = sig.name
        grid3, block3 = as_dim3(grid, "grid"), as_dim3(block, "block")
        if isinstance(shared_bytes, bool) or not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
            raise ValueError(f"shared_bytes: expected a non-negative int, got {shared_bytes!r}")
        plan = plan_args(sig, args, outputs, resident_ok=True)
        for p in plan:
            if isinstance(p, ResidentArg):
                self._buffers.live(p.buffer, p.what)
        tplan = check_timing(timing, self.backend.warmup_ms)
        info = LaunchInfo(name, grid3, block3, int(shared_bytes))
        be = self.backend
        waits = len(POISON_BYTES) + (0 if tplan is None else
                                     (tplan.batches + 2) * tplan.launches + int(tplan.warmup_ms / 1e3) + 1)
        limit = be.launch_timeout_s * waits + 2 * be.lock_wait_s + REQUEST_SLACK_S
        symbol = self._symbol(sig)
        be.ensure_module(self.key, self.cubin, info)
        result = be.request({"op": "launch", "key": self.key, "info": info, "symbol": symbol, "plan": plan,
                             "timing": tplan,
                             "timeout_s": be.launch_timeout_s, "lock_wait_s": be.lock_wait_s}, info, limit)
        try:
            for p in plan:
                if isinstance(p, BufferArg) and not p.const:
                    p.array.reshape(-1).view(np.uint8)[:] = result["arrays"][p.index]
        except MemoryError as exc:
            raise ResourceExhausted(info, f"the host is out of memory copying the results back: {exc}") from None
        notes = list(result["notes"])
        timing_info = result.get("timing")
        elapsed = None
        if timing_info is not None:
            notes.append(timing_note(timing_info))
            elapsed = timing_info.get("per_launch_ms")
        return LaunchResult(info, elapsed_ms=elapsed, notes=tuple(notes), timing=timing_info)
