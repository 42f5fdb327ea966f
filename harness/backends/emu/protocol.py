"""Length-prefixed pickle messages between the emu backend and its worker process."""
from __future__ import annotations

import fcntl
import os
import pickle
import select
import struct
import time
from typing import Optional

_HEADER = struct.Struct("<Q")
_F_SETPIPE_SZ = 1031          # Linux: enlarge a pipe's buffer (fewer wake-ups for megabyte arrays)


def widen_pipe(fd: int, size: int = 1 << 20) -> None:
    try:
        fcntl.fcntl(fd, _F_SETPIPE_SZ, size)
    except OSError:
        pass        # not Linux, or above the system limit: the default size still works


def send(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    for part in (_HEADER.pack(len(data)), data):
        view = memoryview(part)
        while view:
            n = os.write(fd, view)
            view = view[n:]


class Timeout(Exception):
    pass


class Closed(Exception):
    pass


def _read_exact(fd: int, n: int, deadline: Optional[float]) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise Timeout()
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise Closed()
        got += k
    return buf


def receive(fd: int, timeout_s: Optional[float] = None):
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return pickle.loads(_read_exact(fd, n, deadline))
