"""Run one kernel on a backend and classify the outcome as a race verdict."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from harness.backends.base import (Backend, BuildError, ConfinementRefused, DataRace, KernelFault, LaunchRefused,
                                   Module, Struct, UnsupportedConstruct)

from .spec import StructArrays

# The faults that report a race. With the happens-before detector on, only its report is a race: an
# unordered conflicting pair by the memory model (DataRace). The schedules' faults then say something else:
# two schedules disagreeing where the detector's run had no such pair (RaceDetected) is a result that depends
# on the thread order (the order of atomics, a float sum: `order-dependent`), and a result that depends on the
# poison (UninitializedRead) is a read of memory nobody wrote (`fault`). Without the detector the schedules
# are the only race signal, and both count as races.
DETECTOR_FAULTS = ("DataRace", "HappensBeforeRace")
RACE_FAULTS = ("RaceDetected", "UninitializedRead") + DETECTOR_FAULTS

KINDS = ("race", "order-dependent", "fault", "clean", "unsupported", "unchecked")


@dataclass(frozen=True)
class Verdict:
    kind: str                  # one of KINDS: race | order-dependent (schedules disagree, no race by the memory
    #                            model) | fault (another kernel fault) | clean | unsupported | unchecked (tool limit)
    fault: Optional[str]       # the fault or error class, where there was one
    detail: str                # the backend's message, whole
    races: int = 0             # distinct races the happens-before detector reported (DataRace), else 0
    same_value: bool = False   # each of them two plain stores that left the bytes as they were (DataRace.same_value)
    scope: str = ""            # the races' widest conflict, "warp", "block", "grid" or "?" (DataRace.scope), else ""
    kinds: tuple = ()          # (scope, same value) of each distinct race (DataRace.kinds)
    at: tuple = ()             # (name, value) of the swept scalars at the launch that gave the verdict (sweep)
    points: int = 1            # launches run to reach the verdict (a sweep runs several)
    caveats: tuple = ()        # what the backend says qualifies the launches that ran clean (LaunchResult.caveats)
    excused: Optional["Verdict"] = None    # a sweep under a Reading: the first race it did not count (its point in
    #                                        .at), where one came before this verdict; the memory model's verdict
    excused_points: int = 0    # launches of that sweep whose races the reading did not count

    @property
    def reported_race(self) -> bool:
        return self.kind == "race"


def _kind(exc: KernelFault, detector: bool) -> str:
    names = {c.__name__ for c in type(exc).__mro__}
    if names & set(DETECTOR_FAULTS):
        return "race"
    if not names & set(RACE_FAULTS):
        return "fault"
    if not detector:
        return "race"
    return "order-dependent" if "RaceDetected" in names else "fault"


def classify(exc: BaseException, detector: bool = False) -> Verdict:
    """The verdict of `exc`; `detector`: the backend ran the happens-before race detector (see RACE_FAULTS)."""
    name, detail = type(exc).__name__, str(exc)
    if isinstance(exc, ConfinementRefused):     # qconform's rule kept the compiler from a header: nothing was judged
        return Verdict("unchecked", name, detail)
    if isinstance(exc, (UnsupportedConstruct, BuildError, LaunchRefused)):    # no device runs it: no race verdict
        return Verdict("unsupported", name, detail)
    if isinstance(exc, KernelFault):
        if exc.tool_limit:
            return Verdict("unchecked", name, detail)
        race = isinstance(exc, DataRace)
        return Verdict(_kind(exc, detector), name, detail, exc.distinct if race else 0, race and exc.same_value,
                       exc.scope if race else "", exc.kinds if race else ())
    raise exc


def has_detector(backend: "Backend | Module") -> bool:
    """Whether `backend` (or a module's backend) runs the happens-before race detector."""
    return bool(getattr(getattr(backend, "backend", backend), "race_check", False))


def launch(module: Module, kernel: str, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
           args: Sequence[object], outputs: Sequence[int] = ()):
    """module.launch with the specs' arguments: a StructArrays' arrays become resident buffers of the module for
    this launch (its pointer fields their addresses), what the kernel left in them is copied back into the arrays,
    and the buffers are freed."""
    made: list = []
    try:
        given = []
        for a in args:
            if isinstance(a, StructArrays):
                pointers = []
                for offset, name, array in a.arrays:
                    buf = module.alloc(name, array.shape, array.dtype, init=array)
                    made.append((buf, array))
                    pointers.append((offset, buf))
                a = Struct(a.value, tuple(pointers))
            given.append(a)
        result = module.launch(kernel, grid, block, shared_bytes, given, outputs)
        for buf, array in made:
            array[...] = module.read(buf)
        return result
    finally:
        for buf, _ in made:
            try:
                module.free(buf)
            except KernelFault:       # the worker is gone with its buffers (the launch's own fault propagates)
                pass


def scan(backend: "Backend | Module", source: "str | None", kernel: str, grid: Sequence[int], block: Sequence[int],
         shared_bytes: int, args: Sequence[object], outputs: Sequence[int] = (), name: str = "kernel.cu") -> Verdict:
    """Load `source` on `backend` (or use the loaded module `backend`, with source None), launch `kernel` once
    (the backend runs its schedules and checks) and classify the result. `name`: the file name the compilers'
    messages give the source. Bad launch arguments (ValueError) are the caller's error and propagate."""
    try:
        module = backend.load(source, name=name) if source is not None else backend
        launch(module, kernel, grid, block, shared_bytes, args, outputs)
    except (KernelFault, BuildError) as exc:
        return classify(exc, has_detector(backend))
    return Verdict("clean", None, "")
