"""Preconditions and launch shapes the Q8 families (matmul, moe, embed, argmax) share. The generic building
blocks (parameter shorthands, kernel text, assembly) are in emitters/_kernel_text.py."""
from __future__ import annotations

from .contract import Precondition

# Warp-per-row GEMVs launch 256 threads (8 warps, 8 output rows) per block, as the family's host code does.
WARP_ROWS_PER_BLOCK = 8
INT_MAX = 2**31 - 1


# ---- preconditions the families share ------------------------------------------------------------------
def k_blocks(k: str = "K") -> Precondition:
    return Precondition(f"{k} % 32 == 0 and {k} >= 32", k,
                        "Q8_0 rows are whole 32-element blocks; a partial block would read past the row")


def int4_rows(k: str = "K") -> Precondition:
    return Precondition(f"{k} % 16 == 0", k, "16-byte int4 loads need every row start 16-byte aligned")


def fits_int(expr: str, param: str, what: str) -> Precondition:
    return Precondition(f"{expr} <= {INT_MAX}", param, f"{what} is computed in 32-bit int and would overflow")


def cache_row(pos: str = "pos", length: str = "L", n: str = "N", kd: str = "KD") -> tuple[Precondition, ...]:
    return (Precondition(f"0 <= {pos} < {length}", "d_pos", "the kernel writes cache row *d_pos unchecked"),
            Precondition(f"{n} <= {kd}", kd, "a cache row holds KD values; more outputs would spill into the next row"))


def warp_rows_grid(rows: str) -> tuple[str, str, str]:
    per = WARP_ROWS_PER_BLOCK
    return (f"({rows} + {per - 1}) // {per}", "1", "1")


BLOCK_256 = ("256", "1", "1")
ONE = ("1", "1", "1")
