"""Progress of a conformance run: a rich bar on a terminal; plain lines when stderr is not one (a CI log),
one when a kernel family starts and at least every 30 s, with cases done, cases left and the time so far."""
from __future__ import annotations

import sys
import threading
import time
from typing import Optional, TextIO

LINE_INTERVAL_S = 30.0


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class CaseProgress:
    """Use as a context manager; call `case(label, name)` before a case and `advance()` after it (with the
    number of units retried after a cluster worker died, when there were any)."""

    def __init__(self, total: int, enabled: bool = True, stream: Optional[TextIO] = None,
                 interval_s: float = LINE_INTERVAL_S, tty: Optional[bool] = None):
        self.total, self.enabled, self.interval_s = total, enabled, interval_s
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self.retried = 0
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.family: Optional[str] = None
        self.label = ""
        self._bar = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None

    def __enter__(self) -> "CaseProgress":
        if self.enabled and self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[case]}"), transient=False,
                                 console=None)
            self._bar.__enter__()
            self._task = self._bar.add_task("judging", total=self.total, case="")
        elif self.enabled:
            # a case can take minutes at production shapes: a line at least every interval even then
            self._ticker = threading.Thread(target=self._tick, name="qconform-progress", daemon=True)
            self._ticker.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(min(self.interval_s, 5.0)):
            if time.monotonic() - self.last_line >= self.interval_s:
                self._line(f"in {self.label or 'the first case'}")

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elif self.enabled and self.total and exc[0] is None:
            self._line("finished")

    def case(self, label: str, name: str) -> None:
        self.label = label
        if self._bar is not None:
            self._bar.update(self._task, case=name)
            return
        family = label.split("/", 1)[0]
        if self.enabled and (family != self.family or time.monotonic() - self.last_line >= self.interval_s):
            self._line(f"now {label}")
        self.family = family

    def advance(self, retried: int = 0) -> None:
        self.done += 1
        self.retried = retried
        if self._bar is not None:
            self._bar.update(self._task, advance=1,
                             description=f"judging ({retried} retried)" if retried else "judging")
        elif self.enabled and time.monotonic() - self.last_line >= self.interval_s:
            self._line(f"in {self.label}")

    def _line(self, what: str) -> None:
        with self._lock:
            self.last_line = time.monotonic()
            retried = f", {self.retried} retried after a worker died" if self.retried else ""
            print(f"qconform: {self.done}/{self.total} cases done, {self.total - self.done} left{retried}, "
                  f"{_clock(self.last_line - self.t0)} elapsed; {what}", file=self.stream, flush=True)
