"""A lock per GPU, shared by every process on the machine, so that timing windows do not overlap.

Kernel times mean what they say only when nothing else runs on the device meanwhile. Parallel test workers
(pytest-xdist) and parallel reports each drive the same device from their own process, so a timing window
takes the device's lock exclusively, and every other launch takes it shared: a launch waits for a timing
window to end, and a timing window waits for the launches in flight. The lock is an flock on a file named
after the device (its PCI bus id where known), in $QCONFORM_GPU_LOCK_DIR or the system's temporary folder:
one machine, one set of devices. The kernel releases it when the holding process dies, so a worker killed
after a hung kernel never leaves the device locked.
"""
from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

LOCK_DIR_ENV = "QCONFORM_GPU_LOCK_DIR"


def lock_path(device_key: str) -> Path:
    root = Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "qconform-gpu-locks")
    root.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", device_key)
    return root / f"{safe}.lock"


class DeviceLock:
    """The lock of one device, held through an open file of this process."""

    def __init__(self, device_key: str):
        self.path = lock_path(device_key)
        self.fd: Optional[int] = None

    def _open(self) -> int:
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        return self.fd

    def _holder(self) -> str:
        try:
            text = self.path.read_text().strip()
        except OSError:
            text = ""
        return text or "another process"

    @contextmanager
    def held(self, exclusive: bool, wait_s: float) -> Iterator[Optional[str]]:
        """Yield None once the lock is held; after `wait_s` seconds without it, yield why it is not held
        (the caller decides whether to go on without it)."""
        fd = self._open()
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = time.monotonic() + wait_s
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield (f"{self._holder()} kept the device busy for more than {wait_s:g} s "
                           f"(lock {self.path.name})")
                    return
                time.sleep(pause)
                pause = min(2 * pause, 0.05)
        try:
            if exclusive:   # say who times, for the message of a process that gives up waiting
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"process {os.getpid()} (timing)".encode(), 0)
            yield None
        finally:
            if exclusive:
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
