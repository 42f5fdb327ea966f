"""How long the processes qconform starts live: none outlives the run that started it.

- A worker or compiler dies with the process (or thread) that started it: `die_with_parent()` in a worker,
  `dies_with_caller()` as a compiler's preexec_fn (Linux's PR_SET_PDEATHSIG).
- That signal reaches only the program started, not what it starts in turn: g++ dies with its judge process,
  but its cc1plus goes on alone for seconds (and, started by a judge that ignored SIGINT, ignores a terminal's
  Ctrl-C too). So the command line's process adopts every orphan among its descendants (`adopt_orphans()`:
  PR_SET_CHILD_SUBREAPER) and, when a signal ends the run, kills and reaps what is left (`end_descendants()`).
Elsewhere than Linux each is a no-op: the workers still end when they next read their closed stdin."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable, Optional

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl():
    """libc's prctl, or None (not Linux)."""
    import ctypes
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _kill_me_with_parent(prctl, parent: int) -> None:
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:          # the parent died before the request took effect
        os._exit(0)


def die_with_parent() -> None:
    """Have the kernel kill this worker when its parent dies (Linux): a worker stuck in a hung kernel never
    reads its closed stdin, so without this it would outlive a killed test run and keep a core busy."""
    prctl = _prctl()
    if prctl is not None:   # elsewhere the worker still exits when it next reads a closed stdin
        _kill_me_with_parent(prctl, os.getppid())


def dies_with_caller() -> Optional[Callable[[], None]]:
    """A preexec_fn for subprocess: the program started (a compiler) is killed when the thread that started
    it dies, so a judge process killed mid-build leaves no nvcc or g++ behind (None where there is no
    prctl). prctl is looked up here, in the parent: the forked child must not enter the dynamic loader,
    whose lock another thread may have held at the fork."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()
    return lambda: _kill_me_with_parent(prctl, parent)


def adopt_orphans() -> bool:
    """Make this process the one that inherits its descendants whose parents die (Linux 3.4+), so that
    `end_descendants` can reach them. False where the kernel cannot."""
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def children() -> list[int]:
    """The live and unreaped children of this process, from /proc."""
    pid = os.getpid()
    tasks = Path(f"/proc/{pid}/task")
    try:
        return sorted({int(c) for t in tasks.iterdir() for c in (t / "children").read_text().split()})
    except OSError:
        pass                    # a kernel without the children files (or a thread that ended): scan /proc
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue        # it ended meanwhile
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def end_descendants(within_s: float = 5.0) -> list[int]:
    """Kill (SIGKILL) and reap every child of this process, then the orphans their deaths hand over to it
    (`adopt_orphans`), until none is left or `within_s` has passed. Returns the pids ended. Only on the way
    out: the handles other code keeps of these children (Popen, multiprocessing) no longer reap them."""
    ended: list[int] = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        pids = children()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in pids:        # a child's own children are handed over before it can be reaped: next round
            while time.monotonic() < deadline:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        ended.append(pid)
                        break
                except ChildProcessError:
                    break       # reaped by another handle meanwhile
                time.sleep(0.005)
    return ended
