"""Large array arguments travel to the emu worker through shared memory instead of the pipe: the parent
writes each one once into an anonymous shared file (Linux memfd), already laid out as a device buffer
(guard band, data, guard band); the worker maps the file and runs a const input in place. A 311 MB LM-head
weight is then copied once per launch instead of pickled, piped, unpickled and copied per schedule."""
from __future__ import annotations

import ctypes
import mmap
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np

from harness.backends.base import GUARD_BYTES, SENTINEL_BYTE

from .guarded import GUARD_REGION, protect, round_up

MIN_STAGED_BYTES = 64 * 1024     # smaller arrays are cheaper to pickle
ALIGN = 256                      # cudaMalloc alignment of the data


@dataclass(frozen=True)
class Staged:
    """An array argument placed in the shared file: its own pages from `offset - GUARD_BYTES` (`region` bytes:
    sentinel band, data at `offset`, sentinel band to the end of the last page), guard pages either side."""
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    region: int = 0

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def available() -> bool:
    return hasattr(os, "memfd_create")


class StagingArea:
    """The parent's side: one shared file per worker, reused by every request (one request at a time)."""

    def __init__(self):
        self.fd = os.memfd_create("qconform-emu-staging", 0)
        self.size = 0
        self.map: Optional[mmap.mmap] = None

    def _reserve(self, size: int) -> None:
        if size <= self.size:
            return
        size = max(size, 2 * self.size, 1 << 20)
        size = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
        if self.map is not None:
            self.map.close()
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size)
        self.size = size

    def place(self, args: list) -> tuple[list, int]:
        """`args` with every large numpy array replaced by a Staged handle; and the file size to map."""
        # each argument in its own pages, GUARD_REGION apart (the worker makes the gaps inaccessible; a memfd
        # is sparse, so the gaps cost no memory)
        layout, top = [], GUARD_REGION
        for a in args:
            if isinstance(a, np.ndarray) and a.nbytes >= MIN_STAGED_BYTES:
                region = round_up(2 * GUARD_BYTES + a.nbytes)
                layout.append((top + GUARD_BYTES, region))
                top += region + GUARD_REGION
            else:
                layout.append(None)
        if top == GUARD_REGION:
            return list(args), 0
        self._reserve(top)
        buf = np.frombuffer(self.map, np.uint8)
        out = []
        for a, place in zip(args, layout):
            if place is None:
                out.append(a)
                continue
            off, region = place
            buf[off - GUARD_BYTES:off] = SENTINEL_BYTE
            buf[off:off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            buf[off + a.nbytes:off - GUARD_BYTES + region] = SENTINEL_BYTE
            out.append(Staged(off, tuple(a.shape), a.dtype, region))
        del buf
        return out, self.size

    def close(self) -> None:
        if self.map is not None:
            self.map.close()
            self.map = None
        os.close(self.fd)


ENV = "QCONFORM_EMU_STAGING_FD"


def from_environment() -> "Optional[StagingView]":
    fd = os.environ.get(ENV)
    return StagingView(int(fd)) if fd and fd.isdigit() else None


class StagingView:
    """The worker's side: the shared file mapped at the size the last request named."""

    def __init__(self, fd: int):
        self.fd, self.size, self.map, self.address = fd, 0, None, 0

    def views(self, staged: dict[int, Staged], size: int) -> dict[int, np.ndarray]:
        """Per argument index, the pages of a staged argument (sentinel band + data + sentinel band), a view
        into the shared file (no copy). Everything else in the file is made inaccessible: guard pages."""
        if not staged:
            return {}
        if size != self.size:
            if self.map is not None:
                try:
                    self.map.close()
                except BufferError:     # a view from an earlier request is still alive: let it go with it
                    pass
            self.map = mmap.mmap(self.fd, size)
            self.size = size
            probe = ctypes.c_char.from_buffer(self.map)
            self.address = ctypes.addressof(probe)
            del probe
        protect(self.address, self.size, False)
        for s in staged.values():
            protect(self.address + s.offset - GUARD_BYTES, s.region, True)
        return {i: np.frombuffer(self.map, np.uint8, count=s.region, offset=s.offset - GUARD_BYTES)
                for i, s in staged.items()}
