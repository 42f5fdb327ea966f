"""What a worker process reports, as the caller's exceptions, for every backend alike: one table of fault
names (a worker sends a fault as the name of its class in harness.backends.base and a detail), and what a
worker that timed out or died means for the launch it was running."""
from __future__ import annotations

from typing import Optional

from . import base
from .client import WorkerDied, WorkerTimedOut

BAD_LAUNCH = "BadLaunch"   # grid/block/shared size outside the CUDA limits (emu::BAD_LAUNCH): the caller's error
HARNESS_ERROR = "Error"    # the worker was asked something it cannot do (a harness bug, not the kernel's)


def fault_class(name: str) -> Optional[type]:
    """The KernelFault subclass of harness.backends.base named `name`, or None."""
    cls = getattr(base, name, None)
    if isinstance(cls, type) and issubclass(cls, base.KernelFault):
        return cls
    return None


def fault_error(name: str, launch: "base.LaunchInfo | None", detail: str, worker: str = "worker") -> Exception:
    """The exception for a fault a worker reported: a bad launch configuration is the caller's error
    (ValueError, like the backends' own argument checks), a module the driver rejects a BuildError, a fault of
    the kernel its KernelFault; anything else is the harness's own error (RuntimeError)."""
    if name == BAD_LAUNCH:
        return ValueError(f"launch: {launch}: {detail}" if launch else f"launch: {detail}")
    if name == "BuildError":
        return base.BuildError(detail)
    cls = fault_class(name)
    if cls is not None:
        return cls(launch, detail)
    where = f" on {launch}" if launch else ""
    return RuntimeError(f"{worker} failed{where}" + ("" if name == HARNESS_ERROR else f" ({name})") + f": {detail}")


def reply_value(reply: dict, launch: "base.LaunchInfo | None", worker: str):
    """A worker's reply {"ok": value} | {"fault": (name, detail)} | {"error": traceback} as its value, or the
    exception it stands for raised."""
    if "fault" in reply:
        name, detail = reply["fault"]
        raise fault_error(name, launch, detail, worker)
    if "error" in reply:
        where = f" on {launch}" if launch else ""
        raise RuntimeError(f"{worker} failed{where}:\n{reply['error']}")
    return reply["ok"]


def timed_out(launch: "base.LaunchInfo | None", exc: WorkerTimedOut, what: str, limit_s: float, then: str, *,
              tool_limit: bool) -> base.KernelTimeout:
    """The KernelTimeout of a request the worker did not answer in time: `<what> within <limit> s (last step:
    ...); <then>`. tool_limit: the limit is the tool's (an emulator too slow), so the case is unchecked."""
    return base.KernelTimeout(launch, f"{what} within {limit_s:g} s (last step: {exc.last_step}); {then}",
                              tool_limit=tool_limit)


def died(launch: "base.LaunchInfo | None", exc: WorkerDied) -> base.KernelCrash:
    """The KernelCrash of a worker that died during a request, with the end of what it printed."""
    tail = exc.stderr_tail[-3000:]
    return base.KernelCrash(launch, f"the worker process died with {exc.how} during {exc.last_step}"
                                    + (f"; its last output:\n{tail}" if tail else ""))
