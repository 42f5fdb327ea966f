"""Positions in CUDA source text as the compiler numbers them: the line of an index (`#line` directives honoured),
the bracket closing an opening one (strings and character literals skipped) and the brace depth."""
from __future__ import annotations

import re

from harness.backends.base import UnsupportedConstruct
from cudasrc.signatures import closing_bracket, namespace_blocks, scope_at, skip_string

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


class BraceDepth:
    """Brace depth at increasing positions of one text, scanning each character once (strings skipped). A
    namespace's braces do not count: what a namespace holds is at file scope, as C++ sees it."""

    def __init__(self, text: str):
        self.text, self.depth, self.j = text, 0, 0
        self.blocks = namespace_blocks(text) if "namespace" in text else []
        self.skip = {i for open_, close, _ in self.blocks for i in (open_, close)}

    def scope(self, pos: int) -> str:
        return scope_at(self.blocks, pos)

    def at(self, pos: int) -> int:
        """Depth just before `pos`; positions must not decrease from call to call."""
        text, depth, j, skip = self.text, self.depth, self.j, self.skip
        while j < pos:
            c = text[j]
            if c in "\"'":
                j = skip_string(text, j)
                continue
            if j not in skip:
                depth += (c == "{") - (c == "}")
            j += 1
        self.depth, self.j = depth, j
        return depth
