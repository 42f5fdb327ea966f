"""Matching template arguments against a partial specialization's pattern, as C++ deduces them.

Expression-template libraries pass kernels structs whose layout lives in a partial specialization: mshadow's
`Plan<Tensor<Device, dim, DType>, DType>` holds a pointer and a stride while the primary `Plan<ExpType, DType>`
holds nothing. `deduce()` says whether arguments (`mshadow::Tensor<mshadow::gpu, 2, float>`, `float`) fit a pattern
and what each of its parameters stands for; `most_specialized()` picks among several that fit, as the compiler's
partial ordering does. Names compare by their last component (`mshadow::gpu` is `gpu`): a source's namespaces
are not resolved here."""
from __future__ import annotations

import re
from typing import NamedTuple, Optional, Sequence

# a (qualified) name, a number, or one character of punctuation
_TOKEN = re.compile(r"\s*(?:([A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)|(\d[\w.']*)|(\S))")


class _Node(NamedTuple):
    """A name, number or symbol, or a template's instance."""
    key: str                     # what compares: a name's last component (`gpu` for `mshadow::gpu`)
    text: str                    # as written
    args: Optional[tuple]        # a template instance's arguments, one node sequence each; None for the others


def parse(text: str) -> tuple:
    """The node sequence of a type or template argument's text; ValueError for unbalanced angle brackets."""
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            break
        tokens.append((m.group(1) or m.group(2) or m.group(3), m.start(m.lastindex)))
        pos = m.end()
    nodes, _ = _sequence(text, tokens, 0, top=True)
    return nodes


def _sequence(text: str, tokens: list, i: int, top: bool = False) -> "tuple[tuple, int]":
    """Nodes from tokens[i] up to a `,` or `>` that closes an enclosing list (not consumed)."""
    out = []
    while i < len(tokens):
        tok, at = tokens[i]
        if tok in (",", ">") and not top:
            break
        if tok in (",", ">"):
            raise ValueError(f"unexpected '{tok}' in '{text}'")
        if i + 1 < len(tokens) and tokens[i + 1][0] == "<" and re.match(r"[A-Za-z_]", tok):
            args, i = [], i + 2
            while True:
                arg, i = _sequence(text, tokens, i)
                if i >= len(tokens):
                    raise ValueError(f"unbalanced '<' in '{text}'")
                if arg:
                    args.append(arg)
                closer, end = tokens[i]
                i += 1
                if closer == ">":
                    break
            out.append(_Node(_last(tok), text[at:end + 1], tuple(args)))
            continue
        out.append(_Node(_last(tok), tok, None))
        i += 1
    return tuple(out), i


def _last(name: str) -> str:
    return re.split(r"\s*::\s*", name)[-1]


def text_of(nodes: Sequence) -> str:
    return " ".join(n.text for n in nodes)


def _same(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(x.key == y.key and (x.args is None) == (y.args is None) and
                                    (x.args is None or _same_lists(x.args, y.args)) for x, y in zip(a, b))


def _same_lists(a: Sequence, b: Sequence) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _match(pattern: Sequence, given: Sequence, params: frozenset, bound: dict) -> Optional[dict]:
    if not pattern:
        return bound if not given else None
    p, rest = pattern[0], pattern[1:]
    if p.args is None and p.key in params:
        if p.key in bound:                      # a parameter seen before must stand for the same again
            n = len(bound[p.key])
            if _same(bound[p.key], given[:n]):
                return _match(rest, given[n:], params, bound)
            return None
        for n in range(1, len(given) + 1):      # `T*` against `unsigned int*`: T takes what the rest leaves
            got = _match(rest, given[n:], params, {**bound, p.key: tuple(given[:n])})
            if got is not None:
                return got
        return None
    if not given or given[0].key != p.key or (p.args is None) != (given[0].args is None):
        return None
    if p.args is not None:
        if len(p.args) != len(given[0].args):
            return None
        for pa, ga in zip(p.args, given[0].args):
            bound = _match(pa, ga, params, bound)
            if bound is None:
                return None
    return _match(rest, given[1:], params, bound)


def deduce(pattern: Sequence[str], params: Sequence[str], args: Sequence[str]) -> Optional[dict]:
    """{parameter: the text it stands for} where `args` fit the specialization `pattern` (its template arguments'
    texts, written in `params`), else None."""
    if len(pattern) != len(args):
        return None
    bound: Optional[dict] = {}
    names = frozenset(params)
    for p, a in zip(pattern, args):
        bound = _match(parse(p), parse(a), names, bound)
        if bound is None:
            return None
    if set(bound) != names:                     # a parameter the pattern does not deduce: not this one
        return None
    return {k: text_of(v) for k, v in bound.items()}


def most_specialized(candidates: Sequence[tuple]) -> tuple:
    """Of (pattern, params, ...) tuples that all fit, the one at least as specialized as every other (its pattern
    fits each other's, read with its own parameters as plain names); ValueError where none is."""
    best = [c for c in candidates
            if all(o is c or deduce(o[0], o[1], c[0]) is not None for o in candidates)]
    if len(best) != 1:
        raise ValueError("ambiguous: " + " and ".join("<" + ", ".join(c[0]) + ">" for c in candidates))
    return best[0]
