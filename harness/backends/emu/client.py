"""The parent side of the emu worker process: start, request with a time limit, detect death."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from . import protocol

_REPO_ROOT = str(Path(__file__).resolve().parents[3])


class WorkerDied(Exception):
    def __init__(self, how: str, stderr_tail: str, last_step: str):
        self.how, self.stderr_tail, self.last_step = how, stderr_tail, last_step
        super().__init__(how)


class WorkerTimedOut(Exception):
    def __init__(self, last_step: str):
        self.last_step = last_step
        super().__init__(last_step)


class Worker:
    def __init__(self, preload: Optional[str] = None):
        self.preload = preload
        self.proc: Optional[subprocess.Popen] = None
        self.err = None
        self.err_mark = 0

    def _start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _REPO_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        if self.preload:   # AddressSanitizer must be the first library in the process
            env["LD_PRELOAD"] = self.preload
            env.setdefault("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=0")
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.backends.emu.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, env=env)
        protocol.widen_pipe(self.proc.stdin.fileno())
        protocol.widen_pipe(self.proc.stdout.fileno())
        self.err_mark = 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _stderr_since_mark(self) -> str:
        self.err.seek(self.err_mark)
        return self.err.read().decode(errors="replace")

    def _last_step(self, text: str) -> str:
        steps = re.findall(r"^emu-worker: (.*)$", text, re.M)
        return steps[-1] if steps else "before the first schedule"

    def request(self, msg: dict, timeout_s: Optional[float]):
        if not self.alive():
            self.close()
            self._start()
        self.err.seek(0, os.SEEK_END)
        self.err_mark = self.err.tell()
        try:
            protocol.send(self.proc.stdin.fileno(), msg)
            return protocol.receive(self.proc.stdout.fileno(), timeout_s)
        except protocol.Timeout:
            text = self._stderr_since_mark()
            self.close()
            raise WorkerTimedOut(self._last_step(text)) from None
        except (protocol.Closed, BrokenPipeError):
            rc = self.proc.wait()
            text = self._stderr_since_mark()
            how = (f"signal {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.valid_signals()
                   else f"exit status {rc}")
            tail = "\n".join(ln for ln in text.splitlines() if not ln.startswith("emu-worker: "))[-20000:]
            self.close()
            raise WorkerDied(how, tail, self._last_step(text)) from None

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()       # our own child, by its handle
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                if f:
                    f.close()
            self.proc = None
        if self.err is not None:
            self.err.close()
            self.err = None
