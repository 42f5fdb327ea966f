"""Compare the results of one launch run under several schedules / poison patterns (vectorized numpy)."""
from __future__ import annotations

import numpy as np


def element_bytes(a: np.ndarray) -> np.ndarray:
    """View of `a` as one row of raw bytes per element."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).reshape(-1, a.dtype.itemsize)


def where_index(a: np.ndarray, flat: int) -> str:
    if a.ndim <= 1:
        return f"index {flat}"
    return f"index {flat} {tuple(int(i) for i in np.unravel_index(flat, a.shape))}"


def unwritten(first: np.ndarray, second: np.ndarray, poisons: tuple[int, int]) -> np.ndarray:
    """Flat indices of elements holding poison pattern 0 in `first` and pattern 1 in `second`."""
    b0, b1 = element_bytes(first), element_bytes(second)
    return np.flatnonzero(np.all(b0 == poisons[0], axis=1) & np.all(b1 == poisons[1], axis=1))


def differing(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Flat indices of elements that differ bit for bit."""
    return np.flatnonzero(np.any(element_bytes(a) != element_bytes(b), axis=1))


def describe_unwritten(name: str, a: np.ndarray, idx: np.ndarray) -> str:
    return (f"{idx.size} of {a.size} elements of output '{name}' were not written (they hold the poison pattern "
            f"after runs with both patterns); first at {where_index(a, int(idx[0]))}")


def describe_difference(name: str, a: np.ndarray, b: np.ndarray, idx: np.ndarray, what_a: str, what_b: str) -> str:
    i = int(idx[0])
    va, vb = a.reshape(-1)[i], b.reshape(-1)[i]
    return (f"'{name}' differs at {idx.size} element(s); first at {where_index(a, i)}: {va!r} under {what_a}, "
            f"{vb!r} under {what_b}")
