"""A counter shared between the emu worker and its parent: the runtime adds one after every block it runs
(and the worker after every other step), so the parent can tell a long launch that makes progress from one
that is stuck. The launch time limit is then a limit on one block, whatever the size of the grid."""
from __future__ import annotations

import ctypes
import mmap
import os
from typing import Optional

ENV = "QCONFORM_EMU_PROGRESS_FD"


class ProgressCounter:
    """One 64-bit counter in an anonymous shared memory file (Linux memfd), inherited by the worker."""
    env = ENV       # the variable that names the file to the worker

    def __init__(self, fd: Optional[int] = None):
        self.owner = fd is None
        if fd is None:
            fd = os.memfd_create("qconform-emu-progress", 0)
            os.ftruncate(fd, mmap.PAGESIZE)
        self.fd = fd
        self.map = mmap.mmap(fd, mmap.PAGESIZE)
        self.cell = ctypes.c_uint64.from_buffer(self.map)
        self.address = ctypes.addressof(self.cell)
        self.seen = self.cell.value

    def bump(self) -> None:
        self.cell.value += 1

    def value(self) -> int:
        return int(self.cell.value)

    def advanced(self) -> bool:
        """True when the counter moved since the last call."""
        now = self.cell.value
        moved, self.seen = now != self.seen, now
        return moved

    def close(self) -> None:
        del self.cell
        self.map.close()
        if self.owner:
            os.close(self.fd)


def available() -> bool:
    return hasattr(os, "memfd_create")


def from_environment() -> Optional[ProgressCounter]:
    """The worker's side: the counter named by $QCONFORM_EMU_PROGRESS_FD, if the parent shared one."""
    fd = os.environ.get(ENV)
    return ProgressCounter(int(fd)) if fd and fd.isdigit() else None
