"""Progress of long byte-streaming work (writing or exporting a checkpoint): a rich bar on a terminal, plain
periodic lines otherwise (a log stays readable), nothing when disabled."""
from __future__ import annotations

import sys
import time


class ByteProgress:
    """``with ByteProgress("writing x.gguf", total_bytes, enabled) as p: p.advance(n, note)``."""

    PLAIN_EVERY_S = 10.0

    def __init__(self, label: str, total: int, enabled: bool = True, stream=None):
        self.label, self.total, self.enabled = label, int(total), bool(enabled)
        self.stream = stream or sys.stderr
        self.done = 0
        self._bar = None
        self._task = None
        self._t0 = self._last = 0.0

    def __enter__(self) -> "ByteProgress":
        self._t0 = self._last = time.monotonic()
        if self.enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                       TransferSpeedColumn)
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[note]}"),
                                 console=Console(file=self.stream), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, note="")
        return self

    def advance(self, nbytes: int, note: str = "") -> None:
        self.done += int(nbytes)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, advance=nbytes, note=note)
            return
        now = time.monotonic()
        if now - self._last >= self.PLAIN_EVERY_S:
            self._last = now
            print(f"{self.label}: {self._summary(now)} {note}".rstrip(), file=self.stream, flush=True)

    def _summary(self, now: float) -> str:
        pct = 100.0 * self.done / self.total if self.total else 100.0
        rate = self.done / max(now - self._t0, 1e-9) / 1e6
        return f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB ({pct:.0f}%, {rate:.1f} MB/s)"

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
        elif self.enabled and exc[0] is None:
            print(f"{self.label}: done, {self._summary(time.monotonic())}", file=self.stream, flush=True)
