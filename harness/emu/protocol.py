"""Length-prefixed pickle messages between the emu backend and its worker process."""
from __future__ import annotations

import os
import pickle
import select
import struct
import time
from typing import Optional

_HEADER = struct.Struct("<Q")


def send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Timeout(Exception):
    pass


class Closed(Exception):
    pass


def _read_exact(fd: int, n: int, deadline: Optional[float]) -> bytes:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Timeout()
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise Closed()
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def receive(fd: int, timeout_s: Optional[float] = None):
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))
