"""Positions in CUDA source text as the compiler numbers them: the line of an index (`#line` directives honoured) and
the bracket closing an opening one (strings and character literals skipped)."""
from __future__ import annotations

import re

from harness.backends.base import UnsupportedConstruct
from cudasrc.signatures import closing_bracket

_LINE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*line[ \t]+(\d+)", re.M)


def line_of(text: str, pos: int) -> int:
    """The line of text[pos] as the compiler numbers it: a `#line N` directive numbers the line after it N (a
    source with headers inlined keeps its own line numbers that way)."""
    last = None
    for last in _LINE_DIRECTIVE.finditer(text, 0, pos):
        pass
    if last is None:
        return text.count("\n", 0, pos) + 1
    return int(last.group(1)) + text.count("\n", text.find("\n", last.end()) + 1, pos)


def matching(text: str, i: int) -> int:
    """Index of the bracket closing the one at text[i]."""
    try:
        return closing_bracket(text, i)
    except ValueError:
        raise UnsupportedConstruct(None, f"unbalanced '{text[i]}' at line {line_of(text, i)}") from None
