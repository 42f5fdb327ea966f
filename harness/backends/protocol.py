"""Length-prefixed pickle messages between a backend (emu, gpu) and its worker process, and the worker's side
of the exchange: a private reply channel and the loop that answers each request."""
from __future__ import annotations

import fcntl
import io
import os
import pickle
import select
import struct
import sys
import time
import traceback
from typing import Callable, Optional

from harness import lifetimes

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


def _read_exact(fd: int, n: int, timeout_s: Optional[float], alive: Optional[Callable[[], bool]]) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while got < n:
        while deadline is not None:
            left = deadline - time.monotonic()
            if left > 0 and select.select([fd], [], [], left)[0]:
                break
            if alive is None or not alive():
                raise Timeout()
            deadline = time.monotonic() + timeout_s     # the other side made progress: a new time limit
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise Closed()
        got += k
    return buf


# What a message may name when it is read: numpy's reconstructors and the harness's own classes. A kernel
# runs inside the worker and could write into the reply pipe; a pickle naming anything else (os.system...)
# would run code in the parent, so it is refused instead (Forged).
_NUMPY_GLOBALS = {(m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("_reconstruct", "scalar")}
_NUMPY_GLOBALS |= {(m, "_frombuffer") for m in ("numpy.core.numeric", "numpy._core.numeric")}
_NUMPY_GLOBALS |= {("numpy", "dtype"), ("numpy", "ndarray")}
_BUILTIN_TYPES = {"set", "frozenset", "complex", "slice", "range", "bytearray"}


class Forged(Exception):
    """A message named something the reader does not load."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) in _NUMPY_GLOBALS or (module == "builtins" and name in _BUILTIN_TYPES):
            return super().find_class(module, name)
        if module.startswith(("harness.", "numpy.dtypes")):
            obj = super().find_class(module, name)
            if isinstance(obj, type):
                return obj
        raise Forged(f"{module}.{name}")


def receive(fd: int, timeout_s: Optional[float] = None, alive: Optional[Callable[[], bool]] = None):
    """The next message. With a time limit, Timeout when nothing arrives within timeout_s seconds and
    `alive()` (asked when the limit is reached) says the sender made no progress meanwhile. Forged when the
    message names a global other than numpy's reconstructors and the harness's classes."""
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, timeout_s, alive))
    data = _read_exact(fd, n, timeout_s, alive)
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except Forged:
        raise
    except Exception as exc:      # a malformed message: as untrustworthy as a forged one
        raise Forged(f"an unreadable message ({type(exc).__name__}: {exc})") from None


def reply_channel() -> int:
    """The worker's first step: a private copy of stdout for the replies (stdout itself then goes to stderr, so
    that what kernels, runtimes or libraries print cannot corrupt a reply), and death with the parent."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    lifetimes.die_with_parent()
    return reply_fd


def serve(reply_fd: int, handle: Callable[[dict], dict], out_of_memory: Callable[[MemoryError], dict],
          after: Optional[Callable[[], None]] = None) -> int:
    """Answer each request on stdin with handle(request) until the parent closes stdin (then 0). Running out of
    memory is the machine's limit: out_of_memory(exc) is the reply. Any other exception handle lets through is
    the harness's own error, replied as {"error": traceback}; the worker stays up. after(): once per reply."""
    in_fd = sys.stdin.fileno()
    while True:
        try:
            req = receive(in_fd)
        except Closed:
            return 0
        try:
            reply = handle(req)
        except MemoryError as exc:
            reply = out_of_memory(exc)
        except Exception:  # noqa: BLE001 - a harness bug: reported to the caller, the worker stays up
            reply = {"error": traceback.format_exc()}
        try:
            send(reply_fd, reply)
        except MemoryError:
            send(reply_fd, {"fault": ("ResourceExhausted", "the host is out of memory for the reply")})
        if after is not None:
            after()
