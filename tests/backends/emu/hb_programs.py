"""Random straight-line kernels and an independent happens-before oracle, for the race detector's differential test.

A program is one statement list that every thread of every block runs: guarded reads, stores and atomicAdds of a
`__shared__` array and of a global buffer, `__syncthreads()` (never guarded), and `__syncwarp(mask)` executed by
exactly the lanes of its mask that exist in the warp. Indices and guards are affine in the thread and block
indices, so the oracle evaluates every access of every thread concretely.

The oracle does not use vector clocks (the detector's mechanism): it propagates, statement by statement, the set
of lanes whose later accesses a given access happens before. A barrier adds the whole block, a `__syncwarp` adds
its mask once one of its lanes is in the set; threads of different blocks are never ordered (no fences are
generated). Two accesses race when they touch one element, one of them writes, they are not both atomic, and
neither happens before the other. Atomics order nothing by themselves; the one place where they could (an atomic
read that saw another thread's atomic write, followed by a plain access of the same element by the reader: PTX's
observation order) depends on the schedule, so programs where it can arise are not judged (`Program.judgeable`)."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

SHARED_LEN = 4          # __shared__ int s[SHARED_LEN]
ATOMICS = ("atomic", "atomic_block")
# Every kernel's lines before its statements ({name}: the kernel's); `live` is the mask of the lanes its warp has.
HEADER = ("__global__ void {name}(int* g, int* out) {{",
          f"  __shared__ int s[{SHARED_LEN}];",
          "  int t = threadIdx.x, acc = 0;",
          "  unsigned lane = t % 32, live = (t / 32 + 1) * 32 <= (int)blockDim.x ? 0xffffffffu"
          " : (1u << (blockDim.x % 32)) - 1u;",
          f"  if (t < {SHARED_LEN}) s[t] = 0;",
          "  __syncthreads();")
ACCESSES = ("read", "write") + ATOMICS
GLOBAL_LEN = 6          # int* g, GLOBAL_LEN elements


@dataclass(frozen=True)
class Stmt:
    kind: str                   # "read", "write", "atomic" (device scope), "atomic_block", "barrier", "syncwarp"
    buf: str = ""               # "s" or "g"
    index: tuple = (0, 0, 0)    # (a, b, c): element (a*t + b*blockIdx.x + c) % len
    guard: tuple = ("all",)     # ("all",) | ("mod", k, r) | ("lt", n) | ("warp", w)
    mask: int = 0               # syncwarp: lanes

    def element(self, t: int, block: int) -> int:
        a, b, c = self.index
        return (a * t + b * block + c) % (SHARED_LEN if self.buf == "s" else GLOBAL_LEN)

    def runs(self, t: int) -> bool:
        g = self.guard
        if g[0] == "all":
            return True
        if g[0] == "mod":
            return t % g[1] == g[2]
        if g[0] == "lt":
            return t < g[1]
        return t // 32 == g[1]

    def guard_c(self) -> str:
        g = self.guard
        if g[0] == "all":
            return "true"
        if g[0] == "mod":
            return f"t % {g[1]} == {g[2]}"
        if g[0] == "lt":
            return f"t < {g[1]}"
        return f"t / 32 == {g[1]}"


@dataclass(frozen=True)
class Program:
    name: str
    stmts: tuple
    block: int
    grid: int

    def source(self) -> str:
        """The kernel: one statement a line, so that a race's two source lines name two statements."""
        lines = [HEADER[0].format(name=self.name), *HEADER[1:]]
        lines += ["  " + _statement_c(st) for st in self.stmts]
        lines += ["  out[blockIdx.x * blockDim.x + t] = acc;", "}"]
        return "\n".join(lines) + "\n"

    def first_statement_line(self) -> int:
        """1-based line of stmts[0] in source()."""
        return len(HEADER) + 1

    def judgeable(self) -> bool:
        """False where an atomic read could order a later plain access (see the module's docstring): a thread's
        plain access of a place it updated atomically before, where another thread also updates it atomically."""
        atomic_by: dict[tuple, set] = {}          # place -> (block, thread) of every atomic there
        for block in range(self.grid):
            for t in range(self.block):
                for st in self.stmts:
                    if st.kind in ATOMICS and st.runs(t):
                        atomic_by.setdefault(self._place(st, t, block), set()).add((block, t))
        for block in range(self.grid):
            for t in range(self.block):
                seen_atomic = set()
                for st in self.stmts:
                    if st.kind not in ACCESSES or not st.runs(t):
                        continue
                    place = self._place(st, t, block)
                    if st.kind in ATOMICS:
                        seen_atomic.add(place)
                    elif place in seen_atomic and atomic_by[place] - {(block, t)}:
                        return False
        return True

    def _place(self, st: Stmt, t: int, block: int) -> tuple:
        # shared memory is per block; global memory is one
        return ("s", block, st.element(t, block)) if st.buf == "s" else ("g", 0, st.element(t, block))

    def races(self) -> "tuple[set, set]":
        """({(region, lower statement line, higher statement line)}: every pair of racing statements,
        {(region, element)}: every element raced on)."""
        events = []                  # (place, kind, block, thread, statement index)
        for block in range(self.grid):
            for t in range(self.block):
                for i, st in enumerate(self.stmts):
                    if st.kind in ACCESSES and st.runs(t):
                        events.append((self._place(st, t, block), st.kind, block, t, i))
        by_place: dict[tuple, list] = {}
        for e in events:
            by_place.setdefault(e[0], []).append(e)
        after = {}                   # (block, thread, statement) -> lanes of the block it happens before, per statement
        found, elements = set(), set()
        for place, evs in by_place.items():
            for x, y in combinations(evs, 2):
                if x[1] == "read" and y[1] == "read":
                    continue
                if _morally_strong(x, y):
                    continue
                if (x[2], x[3]) == (y[2], y[3]):
                    continue                                    # program order
                if x[2] == y[2] and self._ordered(x, y, after):
                    continue
                lo, hi = sorted((x[4], y[4]))
                line = self.first_statement_line()
                found.add((place[0], lo + line, hi + line))
                elements.add((place[0], place[2]))
        return found, elements

    def _ordered(self, x, y, after) -> bool:
        first, second = (x, y) if x[4] <= y[4] else (y, x)
        if first[4] == second[4]:
            return False             # one statement, two threads: nothing between them
        key = (first[3], first[4])
        if key not in after:
            after[key] = self._reach(first[3], first[4])
        return second[3] in after[key][second[4]]

    def _reach(self, t: int, i: int) -> dict:
        """For each statement j > i: the threads whose access at j the access of thread t at statement i happens
        before (within one block)."""
        reach, out = {t}, {}
        for j in range(i + 1, len(self.stmts)):
            out[j] = frozenset(reach)
            st = self.stmts[j]
            if st.kind == "barrier":
                reach = set(range(self.block))
            elif st.kind == "syncwarp":
                for w in range((self.block + 31) // 32):
                    lanes = {w * 32 + l for l in range(32) if st.mask >> l & 1 and w * 32 + l < self.block}
                    if lanes & reach:
                        reach |= lanes
        return out


def _morally_strong(x: tuple, y: tuple) -> bool:
    """Two atomics that never race: both of device scope, or both in one block (events: (place, kind, block, ...))."""
    if x[1] not in ATOMICS or y[1] not in ATOMICS:
        return False
    return (x[1] == "atomic" and y[1] == "atomic") or x[2] == y[2]


def _statement_c(st: Stmt) -> str:
    if st.kind == "barrier":
        return "__syncthreads();"
    if st.kind == "syncwarp":
        return f"if ({st.mask:#x}u >> lane & 1u) __syncwarp({st.mask:#x}u & live);"
    a, b, c = st.index
    n = SHARED_LEN if st.buf == "s" else GLOBAL_LEN
    at = f"{st.buf}[({a} * t + {b} * (int)blockIdx.x + {c}) % {n}]"
    body = {"read": f"acc += {at};", "write": f"{at} = t + {len(st.guard)};", "atomic": f"atomicAdd(&{at}, 1);",
            "atomic_block": f"atomicAdd_block(&{at}, 1);"}[st.kind]
    return f"if ({st.guard_c()}) {body}"


def random_program(rng: np.random.Generator, name: str) -> Program:
    """A program of 3 to 9 statements over a block of 2 to 40 threads (so a warp may be partial or there may be
    two warps) and 1 to 3 blocks."""
    block = int(rng.choice([2, 3, 4, 5, 8, 33, 40]))
    grid = int(rng.choice([1, 1, 2, 3]))
    stmts = []
    for _ in range(int(rng.integers(3, 10))):
        kind = str(rng.choice(["read", "read", "write", "write", "atomic", "atomic", "atomic_block", "barrier",
                               "syncwarp", "syncwarp"]))
        if kind == "barrier":
            stmts.append(Stmt("barrier"))
            continue
        if kind == "syncwarp":
            lanes = rng.choice(min(block, 32), size=int(rng.integers(1, min(block, 32) + 1)), replace=False)
            stmts.append(Stmt("syncwarp", mask=int(sum(1 << int(l) for l in lanes))))
            continue
        buf = "s" if rng.random() < 0.6 else "g"
        index = (int(rng.integers(0, 3)), int(rng.integers(0, 2)) if buf == "g" else 0, int(rng.integers(0, 4)))
        g = rng.integers(0, 4)
        guard = (("all",), ("mod", int(rng.integers(2, 4)), 0), ("lt", int(rng.integers(1, 4))),
                 ("warp", int(rng.integers(0, 2))))[g]
        if guard[0] == "mod":
            guard = ("mod", guard[1], int(rng.integers(0, guard[1])))
        stmts.append(Stmt(kind, buf, index, guard))
    return Program(name, tuple(stmts), block, grid)


def programs(seed: int, count: int) -> list[Program]:
    rng = np.random.default_rng(seed)
    return [random_program(rng, f"p{seed}_{k}") for k in range(count)]
