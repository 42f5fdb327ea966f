"""Small defects found reading the model and backend code as a newcomer (issue 20), each pinned by a test that
failed before its fix."""
from __future__ import annotations

import ast
import typing

import numpy as np
import pytest

from harness.model.chain import HostBuffers
from harness.model.program import BufferDecl, RowRef


def test_a_row_past_the_end_of_its_buffer_is_refused():
    # Chain.row_arg's bounds check read `not 0 <= lo and ...`, which never refused a position past the buffer
    # (numpy then handed back a short or empty slice for the kernel to write into).
    bufs = HostBuffers({"kc": BufferDecl("kc", (4, 8), "float32", "kv")})
    ref = RowRef("kc", 8)
    assert bufs.row_arg(ref, 3).size == 8                     # the last row
    for pos in (4, 5, -1):
        with pytest.raises(ValueError, match=r"kc\[pos\*8:\]: position -?\d is outside buffer kc"):
            bufs.row_arg(ref, pos)
    half = RowRef("kc", 12)                                   # rows that do not tile the buffer: the tail is short
    assert bufs.row_arg(half, 1).size == 12
    with pytest.raises(ValueError, match="outside buffer kc"):
        bufs.row_arg(half, 2)                                 # 24..36 of 32 elements


def test_the_emu_runs_module_annotates_only_names_it_defines():
    # `_argv` was annotated with an undefined `_Buffer` (postponed annotations hid it until a tool read them).
    from harness.backends.emu import runs
    for name, fn in vars(runs).items():
        if callable(fn) and getattr(fn, "__module__", None) == runs.__name__:
            typing.get_type_hints(fn)                         # NameError for an undefined annotation


def test_the_cli_package_docstring_names_every_subcommand():
    import harness.cli as cli
    doc = ast.get_docstring(ast.parse(open(cli.__file__).read()))
    missing = [module.rpartition(".")[2] for _, module in cli.COMMANDS if f"`{module.rpartition('.')[2]}`" not in doc]
    assert not missing, f"harness/cli/__init__.py's docstring omits {missing}"
