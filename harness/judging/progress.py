"""Progress of long work, one mechanism for every kind (cases judged, decode steps, bytes written): a rich bar
on a terminal; plain lines when the stream is not one (a CI log), one when a group of work starts (a kernel
family), when the count reaches its total, and at least every interval; nothing when disabled."""
from __future__ import annotations

import sys
import threading
import time
from typing import Optional, TextIO

from harness.interrupts import start_helper

LINE_INTERVAL_S = 30.0
BYTES = "bytes"


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """Use as a context manager. ``case(label, name)`` names the work starting (a new group's first label prints
    a line), ``advance(n, note)`` counts work done, ``show(label, done, total)`` sets the count (and the total, once
    it is known: a count never goes back). unit BYTES counts bytes and shows MB and the rate. `heartbeat`: a
    line every interval even while nothing advances (one case or step may take minutes)."""

    def __init__(self, total: int = 0, enabled: bool = True, *, title: str = "qconform", unit: str = "cases",
                 stream: Optional[TextIO] = None, interval_s: float = LINE_INTERVAL_S, tty: Optional[bool] = None,
                 heartbeat: bool = False):
        self.total, self.enabled, self.title, self.unit = int(total), bool(enabled), title, unit
        self.interval_s = interval_s
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.heartbeat = heartbeat
        self.done = 0
        self.retried = 0             # units resubmitted after their worker died (set by the caller)
        self.group: Optional[str] = None
        self.label = ""
        self._bar = None
        self._task = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: Optional[threading.Thread] = None
        self.t0 = self.last_line = 0.0

    def __enter__(self) -> "Progress":
        self.t0 = self.last_line = time.monotonic()
        if self.enabled and self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                       TimeElapsedColumn, TransferSpeedColumn)
            count = (DownloadColumn(), TransferSpeedColumn()) if self.unit == BYTES else (MofNCompleteColumn(),)
            self._bar = Bar(TextColumn("[bold]{task.description}"), BarColumn(), *count, TimeElapsedColumn(),
                            TextColumn("{task.fields[note]}"), console=Console(file=self.stream), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.title, total=self.total or None, note="")
        elif self.enabled and self.heartbeat:
            self._ticker = threading.Thread(target=self._tick, name="qconform-progress", daemon=True)
            start_helper(self._ticker)
        return self

    def _tick(self) -> None:
        while not self._stop.wait(min(self.interval_s, 5.0)):
            if time.monotonic() - self.last_line >= self.interval_s:
                self._line(f"in {self.label or 'the first ' + ('case' if self.unit == 'cases' else 'step')}")

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elif self.enabled and self.total and exc[0] is None:
            self._line("finished")

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    # -- what callers report ---------------------------------------------------------------------------------------
    def case(self, label: str, name: str = "") -> None:
        """Work on `label` starts (`name`: the item, shown on the bar); its group is the text before the first /."""
        self.label = label
        if self._bar is not None:
            self._bar.update(self._task, note=name or label)
            return
        group = label.split("/", 1)[0]
        if self.enabled and (group != self.group or self._due()):
            self._line(f"now {label}")
        self.group = group

    def advance(self, n: int = 1, note: str = "") -> None:
        self.done += int(n)
        self._report(note or (f"in {self.label}" if self.label else ""))

    def show(self, label: str, done: int, total: int) -> None:
        """The count is `done` of `total` (the callback form of long computations: progress(label, done, total))."""
        self.total = max(self.total, int(total))
        self.done = max(self.done, int(done))
        self.label = label
        self._report(label)

    def _report(self, note: str) -> None:
        if self._bar is not None:
            note = f"{note} ({self.retried} retried)" if self.retried else note
            self._bar.update(self._task, completed=self.done, total=self.total or None, note=note)
        elif self.enabled and self._due():
            self._line(note)

    def _due(self) -> bool:
        return time.monotonic() - self.last_line >= self.interval_s

    # -- plain lines -----------------------------------------------------------------------------------------------
    def _count(self, now: float) -> str:
        if self.unit == BYTES:
            pct = 100.0 * self.done / self.total if self.total else 100.0
            rate = self.done / max(now - self.t0, 1e-9) / 1e6
            return f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB ({pct:.0f}%, {rate:.1f} MB/s)"
        retried = f", {self.retried} retried after a worker died" if self.retried else ""
        return f"{self.done}/{self.total} {self.unit} done, {self.total - self.done} left{retried}"

    def _line(self, what: str) -> None:
        with self._lock:
            now = self.last_line = time.monotonic()
            if self.unit == BYTES:
                text = f"done, {self._count(now)}" if what == "finished" else f"{self._count(now)} {what}".rstrip()
            else:
                text = f"{self._count(now)}, {_clock(now - self.t0)} elapsed; {what}"
            print(f"{self.title}: {text}", file=self.stream, flush=True)


__all__ = ["BYTES", "LINE_INTERVAL_S", "Progress"]
