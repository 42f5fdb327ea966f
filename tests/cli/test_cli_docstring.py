"""The CLI package says which subcommands it has."""
from __future__ import annotations

import ast

import harness.cli as cli


def test_the_cli_package_docstring_names_every_subcommand():
    doc = ast.get_docstring(ast.parse(open(cli.__file__).read()))
    missing = [m.rpartition(".")[2] for _, m in cli.COMMANDS if f"`{m.rpartition('.')[2]}`" not in doc]
    assert not missing, f"harness/cli/__init__.py's docstring omits {missing}"
