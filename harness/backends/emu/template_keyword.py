"""The `template` keyword nvcc lets a source leave out and g++ does not.

A call of a member template through a dependent class, `vec_cast<T, S>::cast<N>(dst, src)`, needs the keyword
(`vec_cast<T, S>::template cast<N>(...)`): without it C++ reads `cast < N > (...)` as two comparisons. nvcc's front
end accepts the call as meant; g++, which builds emu's host copy, rejects it when the template is instantiated
(flashinfer's vec_dtypes.cuh, every cast between a half and a float vector). emu's rewrite adds the keyword where
the name after `>::` is one that a file of the program (the source or one of its own headers) declares as a member
function template.
"""
from __future__ import annotations

import re

from harness.backends.emu.source_text import BraceDepth
from cudasrc.signatures import closing_bracket

_TEMPLATE = re.compile(r"\btemplate\s*<")
# the declared name: the last identifier before the parameter list (specifiers and a return type before it)
_DECLARED_NAME = re.compile(r"([A-Za-z_]\w*)\s*\($")
_DECLARATION = re.compile(r"[^;{}()=]*\(")


def member_template_names(text: str) -> frozenset:
    """The names `text` declares as function templates inside a class or struct body (brace depth one or more,
    a namespace's braces not counted)."""
    names = set()
    depth = BraceDepth(text)
    for m in _TEMPLATE.finditer(text):
        if depth.at(m.start()) < 1:
            continue
        try:
            head_end = closing_bracket(text, m.end() - 1)
        except ValueError:
            continue
        declaration = _DECLARATION.match(text, head_end + 1)
        if declaration:
            name = _DECLARED_NAME.search(declaration.group())
            if name and name.group(1) != "operator":
                names.add(name.group(1))
    return frozenset(names)


def program_member_templates(texts) -> frozenset:
    """member_template_names of every file of a program together (the source and its own headers): a header may
    declare the member template that another file calls."""
    return frozenset().union(*(member_template_names(t) for t in texts if "template" in t))


def with_template_keywords(text: str, names: frozenset) -> str:
    """`text` with `template` written before each member template of `names` (program_member_templates of the
    program `text` is a file of) that a template id's `>::` names followed by its own argument list
    (`X<T>::cast<N>`), where the keyword is missing."""
    if not names or ">" not in text:
        return text
    pattern = re.compile(r">(\s*::\s*)(" + "|".join(sorted(map(re.escape, names))) + r")(?=\s*<)")
    return pattern.sub(lambda m: f">{m.group(1)}template {m.group(2)}", text)
