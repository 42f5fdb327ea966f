"""Run one kernel on a backend and classify the outcome as a race verdict."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from harness.backends.base import Backend, BuildError, DataRace, KernelFault, Module, UnsupportedConstruct

# The faults that report a race: two schedules disagreeing (RaceDetected), a result that depends on the
# poison pattern (a read before the write that should precede it: UninitializedRead), and the happens-before
# detector's report of an unordered conflicting pair (its own fault class, a RaceDetected subclass or named here).
RACE_FAULTS = ("RaceDetected", "UninitializedRead", "DataRace", "HappensBeforeRace")

KINDS = ("race", "fault", "clean", "unsupported", "unchecked")


@dataclass(frozen=True)
class Verdict:
    kind: str                  # race | fault (another kernel fault) | clean | unsupported | unchecked (tool limit)
    fault: Optional[str]       # the fault or error class, where there was one
    detail: str                # the backend's message (first 500 characters)
    races: int = 0             # distinct races the happens-before detector reported (DataRace), else 0

    @property
    def reported_race(self) -> bool:
        return self.kind == "race"


def _is_race(exc: KernelFault) -> bool:
    return any(c.__name__ in RACE_FAULTS for c in type(exc).__mro__)


def classify(exc: BaseException) -> Verdict:
    name, detail = type(exc).__name__, str(exc)[:500]
    if isinstance(exc, (UnsupportedConstruct, BuildError)):
        return Verdict("unsupported", name, detail)
    if isinstance(exc, KernelFault):
        if exc.tool_limit:
            return Verdict("unchecked", name, detail)
        return Verdict("race" if _is_race(exc) else "fault", name, detail,
                       exc.distinct if isinstance(exc, DataRace) else 0)
    raise exc


def scan(backend: "Backend | Module", source: "str | None", kernel: str, grid: Sequence[int], block: Sequence[int],
         shared_bytes: int, args: Sequence[object], outputs: Sequence[int] = ()) -> Verdict:
    """Load `source` on `backend` (or use the loaded module `backend`, with source None), launch `kernel` once
    (the backend runs its schedules and checks) and classify the result. Bad launch arguments (ValueError)
    are the caller's error and propagate."""
    try:
        module = backend.load(source) if source is not None else backend
        module.launch(kernel, grid, block, shared_bytes, args, outputs)
    except (KernelFault, BuildError) as exc:
        return classify(exc)
    return Verdict("clean", None, "")
