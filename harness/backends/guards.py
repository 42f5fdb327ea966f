"""The guard-band check of every backend: each device buffer is framed by GUARD_BYTES of SENTINEL_BYTE on both
sides; after a launch, a changed guard byte is a write outside the buffer. One message format for all."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .base import SENTINEL_BYTE


def guard_damage(before: np.ndarray, after: np.ndarray, nbytes: int, itemsize: int = 1) -> Optional[str]:
    """None when both bands (the GUARD_BYTES just before the buffer and just past its end) still hold
    SENTINEL_BYTE; else where they changed: for each side, the changed byte nearest the data, as bytes from the
    buffer's edge, element index and byte offset from the buffer's first byte (-1 is the byte just before it,
    `nbytes` the byte just past its end), and how many guard bytes changed."""
    size = nbytes // itemsize if itemsize else 0
    found = []
    past = np.flatnonzero(np.asarray(after) != SENTINEL_BYTE)
    if past.size:
        i = int(past[0])
        found.append(f"{i + 1} byte(s) past its end (element {(nbytes + i) // itemsize} of {size}) at byte offset "
                     f"{nbytes + i}, {past.size} guard byte(s) changed after it")
    ahead = np.flatnonzero(np.asarray(before) != SENTINEL_BYTE)
    if ahead.size:
        d = len(before) - int(ahead[-1])
        found.append(f"{d} byte(s) before its start (element {-((d + itemsize - 1) // itemsize)}) at byte offset {-d}, "
                     f"{ahead.size} guard byte(s) changed before it")
    return " and ".join(found) if found else None


def guard_fault(what: str, before: np.ndarray, after: np.ndarray, nbytes: int, itemsize: int = 1) -> Optional[str]:
    """The OutOfBounds detail for buffer `what` ("'y' (arg 1, 64 x float32)"), or None when its guards hold."""
    where = guard_damage(before, after, nbytes, itemsize)
    return None if where is None else f"write to {what} {where}: its guard band changed"
