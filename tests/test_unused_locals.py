"""No local variable of the project's modules is assigned and never read (pyflakes' UnusedVariable): such a
name misleads a reader into looking for where it is used, or hides a value that should have been checked."""
from __future__ import annotations

import ast

import pytest

from tests.test_architecture import REPO, ROOTS

checker = pytest.importorskip("pyflakes.checker", reason="pyflakes (the `test` extra) is not installed")
messages = pytest.importorskip("pyflakes.messages")


def test_no_unused_local_variables():
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            w = checker.Checker(ast.parse(path.read_text(), str(path)), filename=str(path.relative_to(REPO)))
            found += [str(m) for m in w.messages if isinstance(m, messages.UnusedVariable)]
    assert not found, "\n".join(found)
