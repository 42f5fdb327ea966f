"""Greedy token selection: the lowest index of the maximum, a tie/margin report, and an exact emulation of
the seed's gk_argmax_adv block-tree reduction (which does not always return the lowest tied index)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference._validate import float_array, positive_int

KERNEL_INIT = np.float32(-1e30)   # gk_argmax_adv's initial best value (index 0)


def _logits(logits) -> np.ndarray:
    v = float_array("logits", logits, ndim=1)
    if v.size == 0:
        raise ValueError("logits: must not be empty")
    if np.isnan(v).any():
        raise ValueError(f"logits: NaN at index {int(np.argmax(np.isnan(v)))}; the greedy token is undefined")
    return v


def argmax_first(logits) -> int:
    """The lowest index holding the maximum (ties go to the lower index). NaN raises ValueError."""
    return int(np.argmax(_logits(logits)))


@dataclass(frozen=True)
class ArgmaxReport:
    """index: argmax_first; value: the max; ties: every index holding the max (ascending);
    runner_up: the best index other than `index` (the next tied index on a tie); margin: value minus the
    runner-up's value (0.0 on a tie; inf with a single logit)."""

    index: int
    value: float
    ties: tuple
    runner_up: "int | None"
    margin: float

    @property
    def is_tie(self) -> bool:
        return len(self.ties) > 1


def argmax_report(logits) -> ArgmaxReport:
    v = _logits(logits)
    i = int(np.argmax(v))
    ties = tuple(int(t) for t in np.flatnonzero(v == v[i]))
    if v.size == 1:
        return ArgmaxReport(i, float(v[i]), ties, None, float("inf"))
    rest = v.copy()
    rest[i] = -np.inf
    j = int(np.argmax(rest))
    if rest[j] == -np.inf and v[i] == -np.inf:
        j = ties[1] if len(ties) > 1 else j
    return ArgmaxReport(i, float(v[i]), ties, j, float(v[i] - v[j]) if len(ties) == 1 else 0.0)


def argmax_kernel_tree(logits, block: int = 256) -> int:
    """The index gk_argmax_adv<<<1, block>>> returns, emulated exactly on float32 logits.

    Thread t scans i = t, t + block, ... keeping the first strictly greater value (start: -1e30f at index 0);
    the shared-memory tree (strides block/2, ..., 1) then keeps the left operand unless the right is strictly
    greater. The last merge (stride 1) prefers the even threads, the one before it threads with bit 1 clear, and
    so on: among the maximal logits the winner is the thread t = i mod block whose bits, read from the least
    significant up, are smallest (t with the smallest bit-reversed value), and within that thread the smallest
    i. So a tie between indices 1 and 2 returns 2, between 1 and 256 returns 256, between 5 and 300 returns 300.
    NaN never wins; values <= -1e30 never win (index 0 if nothing beats -1e30).
    """
    b = positive_int("block", block)
    if b & (b - 1):
        raise ValueError(f"block: the tree reduction needs a power-of-two block size, got {b}")
    v = float_array("logits", logits, ndim=1, dtype=np.float32)
    rows = -(-v.size // b)
    grid = np.full(rows * b, np.nan, dtype=np.float32)
    grid[: v.size] = v
    grid = grid.reshape(rows, b)                              # column t = thread t's strided scan
    with np.errstate(invalid="ignore"):
        usable = grid > KERNEL_INIT                           # NaN and <= -1e30 never replace the initial best
    masked = np.where(usable, grid, -np.inf)
    best_row = np.argmax(masked, axis=0)                      # first row of the column max: the first strictly greater
    has = usable.any(axis=0)
    bv = np.where(has, masked[best_row, np.arange(b)], KERNEL_INIT).astype(np.float32)
    bi = np.where(has, best_row * b + np.arange(b), 0)
    k = b // 2
    while k > 0:
        take = bv[k:2 * k] > bv[:k]
        bv[:k] = np.where(take, bv[k:2 * k], bv[:k])
        bi[:k] = np.where(take, bi[k:2 * k], bi[:k])
        k //= 2
    return int(bi[0])
