"""Host code in a CUDA source, found as text: the function definitions that are neither `__global__` nor
`__device__` (a program's `main`, the helpers that allocate and launch). A GPU build never runs them on the device;
a backend that runs device code on the CPU drops them, so a whole program loads as its device code alone."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from .preprocess import object_macros
from .signatures import closing_bracket, strip_comments


@dataclass(frozen=True)
class HostFunction:
    name: str
    line: int          # 1-based line where its definition starts


# A brace that opens a scope whose members are looked at in turn (not a function body, not an initializer).
# Classes are not entered: a member without __device__ may still be device code (libcu++ calls a barrier's
# completion function through a template that disables nvcc's execution-space check).
_SCOPE_HEAD = re.compile(r'(?:\bnamespace\b[\w\s:]*|\bextern\s*"C(?:\+\+)?"\s*)$')
# A function definition's head ends at its parameter list, or at what may follow it.
_FUNCTION_HEAD = re.compile(r"\)\s*(?:const\b\s*|volatile\b\s*|noexcept\b\s*(?:\([^()]*\)\s*)?|override\b\s*|final\b\s*|"
                            r"&&?\s*|->\s*[\w:<>,\s*&]+)*$")
_NOT_A_NAME = {"__attribute__", "__launch_bounds__", "alignas", "decltype", "__declspec", "__align__"}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n\\]|\\.|\\\n)*", re.M)
# A constexpr function may be called from device code (nvcc --expt-relaxed-constexpr): it stays.
_CONSTEXPR = re.compile(r"\bconst(?:expr|eval)\b")


def without_host_functions(code: str, words: Iterable[str] = ()) -> tuple[str, tuple[HostFunction, ...]]:
    """`code` with its comments stripped and each host function definition blanked (its newlines kept, so every
    line keeps its number), looking inside namespaces and `extern "C"` blocks; and what was dropped. A
    head counts as device code where `__global__` or `__device__` is in it, also through an object-like macro
    (`#define HD __host__ __device__`) of `code`, or one of `words` (device_words of the program's other files: a
    library defines its `HOST_DEVICE` in one header and uses it in the others); a constexpr function stays too
    (device code may call it)."""
    text = strip_comments(code)
    device_words = device_words_of(text) | set(words)
    spans: list[tuple[int, int]] = []
    dropped: list[HostFunction] = []
    _scan(_without_directives(text), 0, len(text), device_words, spans, dropped)
    out, pos = [], 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append("\n" * text.count("\n", start, end))
        pos = end
    out.append(text[pos:])
    return "".join(out), tuple(dropped)


def _without_directives(text: str) -> str:
    """`text` with its preprocessor lines (continuations included) turned to spaces, lengths and newlines kept:
    a brace in a macro body opens nothing, and a conditional inside a parameter list does not cut its head."""
    return _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def program_device_words(texts: Iterable[str]) -> set[str]:
    """device_words_of every file of a program together (comments stripped): a macro one file defines marks
    functions as device code in the others."""
    return device_words_of("\n".join(strip_comments(t) for t in texts))


def device_words_of(text: str) -> set[str]:
    """`__global__`, `__device__` and the object-like macros of `text` that expand to either."""
    macros = object_macros(text)
    words = {"__global__", "__device__"}
    grew = True
    while grew:
        grew = False
        for name, body in macros.items():
            if name not in words and words & set(_IDENT.findall(body)):
                words.add(name)
                grew = True
    return words


def _scan(text: str, lo: int, hi: int, device_words: set[str], spans: list, dropped: list) -> None:
    j = lo
    while True:
        k = text.find("{", j, hi)
        if k < 0:
            return
        head_start = max(lo, max(text.rfind(";", lo, k), text.rfind("}", lo, k)) + 1)
        head = text[head_start:k]
        try:
            end = closing_bracket(text, k)
        except ValueError:
            return                                                 # unbalanced: the compiler will say so
        if _is_function_head(head):
            if not device_words & set(_IDENT.findall(head)) and not _CONSTEXPR.search(head):
                spans.append((head_start + len(head) - len(head.lstrip()), end + 1))
                dropped.append(HostFunction(_name_of(head), text.count("\n", 0, head_start) + 1 +
                                            head[:len(head) - len(head.lstrip())].count("\n")))
        elif _SCOPE_HEAD.search(head):
            _scan(text, k + 1, end, device_words, spans, dropped)
        j = end + 1


def _is_function_head(head: str) -> bool:
    """A function definition's head: it ends with a parameter list (and what may follow one), and that list is not
    an attribute's (`typedef struct __align__(16) {` opens a struct) nor an initializer's (`= {`)."""
    if not _FUNCTION_HEAD.search(head) or re.search(r"=\s*$", head):
        return False
    close = head.rstrip().rfind(")")
    depth, i = 0, close
    while i >= 0:                           # the `(` that opens the last parenthesized group
        depth += {")": 1, "(": -1}.get(head[i], 0)
        if depth == 0:
            break
        i -= 1
    before = head[:max(i, 0)].rstrip()
    word = _IDENT.findall(before)[-1:] or [""]
    return word[0] not in _NOT_A_NAME and not re.search(r"\b(?:struct|class|union|enum|typedef)\b", before)


def _name_of(head: str) -> str:
    for m in re.finditer(r"(~?[A-Za-z_][\w:~]*(?:\s*operator\s*[^\s(]+)?)\s*\(", head):
        if m.group(1) not in _NOT_A_NAME:
            return m.group(1)
    return head.strip().split("(")[0][-40:] or "?"
