"""SIGINT and SIGTERM: where they are received and where they end the work.

- `install_signal_handlers()` (the command line's main thread): either signal raises `Interrupted` there, so
  every `finally` and `except BaseException` cleanup runs; a second one is ignored while that cleanup runs, a
  third ends the process at once.
- `raise_if_interrupted()`: a checkpoint before an output is committed (a rename into place). A library that
  catches every exception can swallow `Interrupted`; the signal is still recorded, and the checkpoint raises it
  again, so an interrupted write is never committed.
- Helper threads (`helper_pool`, `start_helper`) block both signals from their start, and so do the threads
  libraries start while their modules load (NumPy's BLAS threads: the command line imports its commands inside
  `interrupts_blocked()`). The kernel may deliver a
  process-directed signal to any thread that does not block it, and CPython answers it only in the main thread:
  taken by another thread it merely sets a flag, and a main thread asleep in a blocking call (a sleep, a lock, a
  select) keeps sleeping. Blocked in every helper, the signals go to the main thread, which wakes at once.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
_received: list[int] = []


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException, like KeyboardInterrupt, so `except Exception` lets it by)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum


def _on_signal(signum, _frame) -> None:
    _received.append(signum)
    if len(_received) == 1:
        raise Interrupted(signum)
    if len(_received) >= 3:             # a third signal during the cleanup: stop at once
        os._exit(128 + signum)
    # the second one is ignored: the cleanup of the first is under way


def received_signal() -> Optional[int]:
    """The first SIGINT / SIGTERM this run received, or None."""
    return _received[0] if _received else None


def raise_if_interrupted() -> None:
    """Raise `Interrupted` again if a signal arrived and was swallowed on its way up (call before a commit)."""
    if _received:
        raise Interrupted(_received[0])


def install_signal_handlers() -> None:
    """SIGINT and SIGTERM raise Interrupted in the main thread (no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        return
    _received.clear()
    for s in INTERRUPTS:
        signal.signal(s, _on_signal)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)     # deliverable even if the parent blocked them


@contextlib.contextmanager
def interrupts_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM blocked in this thread for the body: every thread started meanwhile keeps them blocked
    from its first instruction (a thread inherits the mask of the thread that starts it). One arriving
    meanwhile stays pending and is answered as the body ends."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def start_helper(thread: threading.Thread) -> None:
    """Start `thread` with SIGINT and SIGTERM blocked."""
    with interrupts_blocked():
        thread.start()


class _HelperPool(ThreadPoolExecutor):
    def submit(self, *args, **kwargs):       # map() submits through here too; threads start inside submit
        with interrupts_blocked():
            return super().submit(*args, **kwargs)


def helper_pool(max_workers: Optional[int] = None, **kwargs) -> ThreadPoolExecutor:
    """A ThreadPoolExecutor whose threads leave the interrupts to the main thread."""
    return _HelperPool(max_workers, **kwargs)
