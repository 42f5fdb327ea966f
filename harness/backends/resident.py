"""Which resident buffers (Module.alloc) a module handed out, and in which worker process each lives. A worker
that is stopped after a crash or a timeout takes its buffers with it: a later use of one is BufferLost, never
a read of whatever the new process has under that id. Shared by the emu and the gpu module."""
from __future__ import annotations

import itertools
from typing import Callable, Optional

import numpy as np

from .base import Buffer, BufferLost, check_buffer_array, check_buffer_request
from .client import Worker

_IDS = itertools.count(1)     # unique in the process, so unique within every module


class ResidentBook:
    """The buffers of one module, each with the generation of the worker process that holds it.

    backend: names the worker in messages; lost_because: why the last worker was stopped, for the message."""

    def __init__(self, worker: Worker, backend: str, lost_because: Optional[Callable[[], str]] = None):
        self.worker, self.backend = worker, backend
        self.lost_because = lost_because or (lambda: "after a crash or a timeout of an earlier launch")
        self.held: dict[int, tuple[Buffer, int]] = {}

    @staticmethod
    def new(name: str, shape, dtype, init: "np.ndarray | None") -> tuple[Buffer, "np.ndarray | None"]:
        """Module.alloc's arguments checked: the new handle and its initial contents (None: poisoned)."""
        name, dims, dt = check_buffer_request(name, shape, dtype, init)
        buf = Buffer(name, dims, dt, next(_IDS))
        return buf, None if init is None else check_buffer_array(buf, init, "init")

    def add(self, buf: Buffer) -> None:
        """Record `buf` as allocated in the current worker process."""
        self.held[buf.id] = (buf, self.worker.generation)

    def _holds(self, generation: int) -> bool:
        return generation == self.worker.generation and self.worker.alive()

    def _entry(self, buf: object, what: str) -> tuple[Buffer, int]:
        if not isinstance(buf, Buffer):
            raise ValueError(f"{what}: expected a Buffer from this module's alloc, got {type(buf).__name__}")
        held = self.held.get(buf.id)
        if held is None or held[0] != buf:
            raise ValueError(f"{what}: {buf} is not a live resident buffer of this module (not allocated by it, "
                             "or was freed)")
        return held

    def live(self, buf: object, what: str) -> Buffer:
        """`buf`, checked to be this module's and still held by the running worker process."""
        handle, generation = self._entry(buf, what)
        if not self._holds(generation):
            raise BufferLost(None, f"{what}: resident {handle} was lost: the {self.backend} worker process that held "
                                   f"it was stopped ({self.lost_because()}); allocate it again")
        return handle

    def forget(self, buf: object, what: str) -> bool:
        """Drop `buf` (Module.free); True when its worker process still holds it and must release it (a lost
        buffer can be freed: nothing is left to release)."""
        handle, generation = self._entry(buf, what)
        del self.held[handle.id]
        return self._holds(generation)
