"""Chain's host-offset rows and its token stream: a row past its buffer is refused, and the generated stream
has one definition (chain.generated_tokens), used by the kernel lane's free run."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import harness.model.chain as chain
from harness.model.chain import HostBuffers
from harness.model.program import BufferDecl, RowRef

HARNESS = Path(chain.__file__).resolve().parents[1]


def test_a_row_past_the_end_of_its_buffer_is_refused():
    # row_arg's bounds check read `not 0 <= lo and ...`, which never refused a position past the buffer
    # (numpy then handed back a short or empty slice for the kernel to write into).
    bufs = HostBuffers({"kc": BufferDecl("kc", (4, 8), "float32", "kv")})
    ref = RowRef("kc", 8)
    assert bufs.row_arg(ref, 3).size == 8                     # the last row
    for pos in (4, 5, -1):
        with pytest.raises(ValueError, match=r"kc\[pos\*8:\]: position -?\d is outside buffer kc"):
            bufs.row_arg(ref, pos)
    odd = RowRef("kc", 12)                                    # rows that do not tile the buffer: the tail is short
    assert bufs.row_arg(odd, 1).size == 12
    with pytest.raises(ValueError, match="outside buffer kc"):
        bufs.row_arg(odd, 2)                                  # elements 24..36 of 32


def test_every_function_chain_exports_has_a_caller_in_the_harness():
    # generated_tokens had none: the free run rebuilt the same stream inline.
    functions = [n for n in chain.__all__ if callable(getattr(chain, n)) and not isinstance(getattr(chain, n), type)]
    others = [p.read_text() for p in HARNESS.rglob("*.py") if p.resolve() != Path(chain.__file__).resolve()]
    called = {node.id if isinstance(node, ast.Name) else node.attr for text in others
              for node in ast.walk(ast.parse(text)) if isinstance(node, (ast.Name, ast.Attribute))}
    unused = [f for f in functions if f not in called]
    assert "generated_tokens" in functions and not unused, f"chain exports functions nobody calls: {unused}"
