"""The parent side of a worker process (the emu backend's, the gpu backend's): start, request with a time
limit, detect death, kill and restart. A worker announces each step it enters on stderr as a line
`<prefix><step>`, so that a timeout or a crash can say where the work was. What a timeout or a death means
for the caller (which KernelFault) is harness.backends.faults' job."""
from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Protocol

from harness.cache import CACHE_ENV, cache_root

from . import protocol

_REPO_ROOT = str(Path(__file__).resolve().parents[2])


# A new worker imports numpy and the harness before it can count progress: on a loaded machine that takes
# seconds, which must not count against a launch's per-block limit (but a worker never ready is stuck).
STARTUP_LIMIT_S = 120.0


TAIL_CHARS = 20000       # the end of a dead worker's stderr kept beside the lines it keeps whole
FORGED = "a reply the parent refused to read"     # WorkerDied.how of a worker whose reply was forged


class WorkerDied(Exception):
    def __init__(self, how: str, stderr_tail: str, last_step: str):
        self.how, self.stderr_tail, self.last_step = how, stderr_tail, last_step
        super().__init__(how)


class WorkerTimedOut(Exception):
    def __init__(self, last_step: str, watched: bool = False, stderr_tail: str = ""):
        self.last_step = last_step
        self.watched = watched      # the limit applied to one block (progress counter), not the request
        self.stderr_tail = stderr_tail      # what the worker printed during the request, before it was stopped
        super().__init__(last_step)


@dataclass(frozen=True)
class LastWords:
    """How to let a worker speak before it is killed at the time limit: send `signal`, wait up to half of
    `grace_s` for a stderr line `end`, and where it has not come, send `signal` again and wait the rest (the emu's
    race detector answers the first at its next tracked access, exactly, and the second at once)."""
    signal: int
    end: str
    grace_s: float = 2.0


class ProgressCounter(Protocol):
    """A counter the worker advances as it works, shared with the parent through an inherited file
    (harness.backends.emu.watchdog's): `env` names the variable that tells the worker its descriptor."""
    env: str
    fd: int

    def advanced(self) -> bool: ...

    def value(self) -> int: ...

    def close(self) -> None: ...


class Worker:
    """One worker process, started on the first request and again after it was stopped or died.

    module: the worker's `python -m` module; step_prefix: how it marks its steps on stderr; first_step: the
    step named when it died or hung before announcing one. `generation` counts the starts, so that a caller
    can tell that state kept in an earlier process (loaded modules, resident buffers) is gone.
    progress: makes a fresh shared counter for each process the worker starts; the worker counts finished
    work in it (the emu: every block), and the time limit restarts at each count (the emu's per-block limit).
    Without it (the gpu's worker) the limit bounds the whole request. inherit: environment variable -> file
    descriptor the worker inherits (the emu's shared staging file); the caller owns those files.
    preload: a library the worker loads first (LD_PRELOAD: AddressSanitizer's runtime). extra_env: more
    environment for the worker (the emu's sandbox limits). last_words: asked for before a worker is killed at
    the time limit. keep: prefixes of stderr lines that a dead worker's tail keeps whole, however long the
    rest (the emu's race announcements); the rest is cut to its last TAIL_CHARS."""

    def __init__(self, module: str, step_prefix: str, first_step: str, *, preload: Optional[str] = None,
                 progress: "Optional[Callable[[], ProgressCounter]]" = None,
                 inherit: "Mapping[str, int] | None" = None, extra_env: "Mapping[str, str] | None" = None,
                 last_words: Optional[LastWords] = None, keep: tuple[str, ...] = ()):
        self.last_words, self.keep = last_words, keep
        self.preload = preload
        self.extra_env = dict(extra_env or {})
        self.module, self.step_prefix, self.first_step = module, step_prefix, first_step
        self.proc: Optional[subprocess.Popen] = None
        self.err = None
        self.err_mark = 0
        self.generation = 0      # counts worker processes started: state held by an earlier one is gone
        self.make_progress = progress
        self.progress: Optional[ProgressCounter] = None
        self.inherit = dict(inherit or {})

    def _start(self) -> None:
        self.generation += 1
        self.started = time.monotonic()
        env = dict(os.environ)
        env["PYTHONPATH"] = _REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONDONTWRITEBYTECODE"] = "1"     # a sandboxed worker may not write .pyc files
        env[CACHE_ENV] = str(cache_root())       # absolute: the worker runs in another folder
        env.update(self.extra_env)
        if self.preload:   # AddressSanitizer must be the first library in the process
            env["LD_PRELOAD"] = self.preload
            env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0")
        self.err = tempfile.TemporaryFile()
        # The worker's stderr shares this file's offset: with O_APPEND its writes land at the end even while the
        # parent seeks to read what it wrote (the last words come while the parent polls for them).
        fcntl.fcntl(self.err.fileno(), fcntl.F_SETFL, fcntl.fcntl(self.err.fileno(), fcntl.F_GETFL) | os.O_APPEND)
        fds: tuple[int, ...] = ()
        if self.make_progress is not None:
            self.progress = self.make_progress()
            env[self.progress.env] = str(self.progress.fd)
            fds = (self.progress.fd,)
        for name, fd in self.inherit.items():
            env[name] = str(fd)
            fds += (fd,)
        self.proc = subprocess.Popen([sys.executable, "-m", self.module], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env, pass_fds=fds,
                                     start_new_session=True, cwd=_REPO_ROOT)
        # cwd: `python -m` puts its folder first on the import path, which a sandboxed worker may read; the
        # folder qconform was started in (a checkout, with secrets) must not be that folder
        # Its own process group: close() ends the worker and anything it started; a terminal's Ctrl-C goes to
        # the parent only, which then closes its workers.
        protocol.widen_pipe(self.proc.stdin.fileno())
        protocol.widen_pipe(self.proc.stdout.fileno())
        self.err_mark = 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _stderr_since_mark(self) -> str:
        self.err.seek(self.err_mark)
        return self.err.read().decode(errors="replace")

    def _last_step(self, text: str) -> str:
        steps = re.findall(rf"^{re.escape(self.step_prefix)}(.*)$", text, re.M)
        return steps[-1] if steps else self.first_step

    def request(self, msg: dict, timeout_s: Optional[float]):
        """Send `msg` and wait for the reply. The time limit restarts whenever the worker shows progress (a
        block finished), so it bounds one block, not the launch; without the shared counter it bounds the
        whole request."""
        if not self.alive():
            self.close()
            self._start()
        self.err.seek(0, os.SEEK_END)
        self.err_mark = self.err.tell()
        try:
            protocol.send(self.proc.stdin.fileno(), msg)
            alive = None
            if self.progress is not None:
                counter, proc, started = self.progress, self.proc, self.started

                def alive() -> bool:   # progress made, or a worker still starting (it counts once when ready)
                    starting = counter.value() == 0 and time.monotonic() - started < STARTUP_LIMIT_S
                    return counter.advanced() or (starting and proc.poll() is None)
                counter.advanced()     # start from the current count
            return protocol.receive(self.proc.stdout.fileno(), timeout_s, alive)
        except protocol.Timeout:
            self._ask_last_words()
            text = self._stderr_since_mark()
            watched = self.progress is not None
            self.close()
            raise WorkerTimedOut(self._last_step(text), watched, text) from None
        except protocol.Forged as exc:
            text = self._stderr_since_mark()
            self.close()
            raise WorkerDied(f"{FORGED}: it named {exc}", "", self._last_step(text)) from None
        except (protocol.Closed, BrokenPipeError):
            rc = self.proc.wait()
            text = self._stderr_since_mark()
            how = (f"signal {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals()
                   else f"exit status {rc}")
            kept, rest = [], []
            for ln in text.splitlines():
                if not ln.startswith(self.step_prefix):
                    (kept if ln.startswith(self.keep) else rest).append(ln)
            tail = "\n".join(kept + ["\n".join(rest)[-TAIL_CHARS:]])
            self.close()
            raise WorkerDied(how, tail, self._last_step(text)) from None

    def _ask_last_words(self) -> None:
        """Signal a worker about to be killed at the time limit, and wait (a short grace) until it has written
        its last words, died, or the grace is over."""
        if self.last_words is None:
            return
        end = self.last_words.end.encode()
        for _ in range(2):
            if not self.alive():
                return
            self.proc.send_signal(self.last_words.signal)
            deadline = time.monotonic() + self.last_words.grace_s / 2
            while time.monotonic() < deadline and self.proc.poll() is None:
                self.err.seek(self.err_mark)
                if end in self.err.read():
                    return
                time.sleep(0.01)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()       # our own child, by its handle
            try:        # whatever the worker started (nothing, under the sandbox) is in its process group
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                if f:
                    f.close()
            self.proc = None
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        if self.err is not None:
            self.err.close()
            self.err = None
