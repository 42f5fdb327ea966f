"""Which blocks the extra schedules run (block sampling).

Blocks of one launch are independent in this kernel family (no grid-wide synchronisation), so every block
runs under the first schedule (both poison runs) and the extra schedules (reverse, warp-greedy, random) run a
deterministic sample. A source with a grid-wide barrier (cooperative groups' grid.sync) runs every block under
every schedule: a sample would wait at the barrier for blocks that never run. Per grid dimension the sample keeps the first two and the last two coordinates (the
first block, the tail block of a partial tile and its neighbour) and `interior` more picked by a seeded
generator; the sample is every combination of those coordinates, so each tail is run together with the
first, last and some middle coordinates of the other dimensions. The same grid and size give the same sample;
a sample of more than half the grid is replaced by the whole grid.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

DEFAULT_INTERIOR = 2
_SPEC = re.compile(r"^(all|sampled(?::(\d+))?)$")


@dataclass(frozen=True)
class BlockSampling:
    """`--schedules`: 'all' (every schedule on every block) or 'sampled[:N]' (N interior coordinates per grid
    dimension besides the first and last two; default 2)."""
    interior: Optional[int] = DEFAULT_INTERIOR      # None: all blocks under every schedule

    @classmethod
    def parse(cls, text: "str | BlockSampling | None") -> "BlockSampling":
        if isinstance(text, BlockSampling):
            return text
        if text is None:
            return cls()
        m = _SPEC.match(str(text).strip().lower())
        if not m:
            raise ValueError(f"--schedules: expected 'all', 'sampled' or 'sampled:N' (N >= 0 interior block "
                             f"coordinates per grid dimension), got {text!r}")
        if m.group(1) == "all":
            return cls(None)
        return cls(int(m.group(2)) if m.group(2) is not None else DEFAULT_INTERIOR)

    def __str__(self) -> str:
        return "all" if self.interior is None else f"sampled:{self.interior}"

    def blocks(self, grid: tuple[int, int, int]) -> Optional[tuple[int, ...]]:
        """Sorted linear block indices (x fastest) for the extra schedules; None when that is every block."""
        if self.interior is None:
            return None
        coords = [_coordinates(n, self.interior, d, grid) for d, n in enumerate(grid)]
        if 2 * np.prod([len(c) for c in coords]) > np.prod(grid):
            return None           # a sample of more than half the grid saves too little to be worth a gap
        gx, gy = grid[0], grid[1]
        ids = (coords[2][:, None, None] * (gy * gx) + coords[1][None, :, None] * gx + coords[0][None, None, :])
        return tuple(int(i) for i in np.sort(ids.reshape(-1)))


def _coordinates(n: int, interior: int, dim: int, grid: tuple[int, int, int]) -> np.ndarray:
    edges = {0, 1, n - 2, n - 1}
    middle = np.arange(2, n - 2)
    if interior and middle.size:
        rng = np.random.default_rng([dim, *grid])       # deterministic: depends on the grid only
        edges.update(int(i) for i in rng.choice(middle, size=min(interior, middle.size), replace=False))
    return np.array(sorted(c for c in edges if 0 <= c < n), dtype=np.int64)


def describe(grid: tuple[int, int, int], sample: Optional[tuple[int, ...]], limit: int = 12) -> str:
    """'6 of 18992 blocks: (0,0,0) (1,0,0) ...' for a report."""
    total = grid[0] * grid[1] * grid[2]
    if sample is None:
        return f"all {total} blocks"
    shown = " ".join(f"({i % grid[0]},{i // grid[0] % grid[1]},{i // (grid[0] * grid[1])})" for i in sample[:limit])
    return f"{len(sample)} of {total} blocks: {shown}" + (" ..." if len(sample) > limit else "")
