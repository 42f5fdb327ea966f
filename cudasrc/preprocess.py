"""The conditional part of the C preprocessor, for reading a source as its build reads it.

In: CUDA source (comments removed) and the macros its build defines (`-DNAME=VALUE`). Out: the same source
with the lines of every branch the preprocessor drops made empty (line numbers stay). `#if`, `#ifdef`,
`#ifndef`, `#elif`, `#else` and `#endif` are evaluated as the C preprocessor does: with the build's macros and
the source's own object-like `#define`s and `#undef`s above the line, `defined NAME`, integer arithmetic,
comparisons, logic and `?:` with C's precedence (division truncates toward zero), and 0 for an identifier that
names no macro. A condition it cannot evaluate (a
function-like macro, a character literal) is a ValueError naming its line. Macros are not expanded in the
text: a kernel signature reader needs only to know which parameters exist."""
from __future__ import annotations

import operator
import re
from typing import Mapping, Sequence

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$")
_DEFINED = re.compile(r"\s*([A-Za-z_]\w*)(\()?\s*(.*)$")      # what follows `#define`: name, `(` if function-like, text
CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(?:if|ifdef|ifndef)\b", re.M)     # a source that has any conditional
_TOKEN = re.compile(r"\s*(0[xX][0-9a-fA-F]+|\d+|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%<>&^|!~?:()])")
# C's binary operators, loosest first: each level binds tighter than the one before it
_LEVELS = (("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="), ("<<", ">>"),
           ("+", "-"), ("*", "/", "%"))


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)             # C truncates toward zero
    return q if (a < 0) == (b < 0) else -q


_APPLY = {"||": lambda a, b: int(bool(a or b)), "&&": lambda a, b: int(bool(a and b)), "|": operator.or_,
          "^": operator.xor, "&": operator.and_, "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
          "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b), ">": lambda a, b: int(a > b),
          ">=": lambda a, b: int(a >= b), "<<": operator.lshift, ">>": operator.rshift, "+": operator.add,
          "-": operator.sub, "*": operator.mul, "/": _c_div, "%": lambda a, b: a - _c_div(a, b) * b}


class _Expression:
    """An integer constant expression with C's precedence and associativity (what `#if` takes once macros and
    `defined` are replaced by numbers)."""

    def __init__(self, text: str):
        self.tokens, pos = [], 0
        while pos < len(text.rstrip()):
            m = _TOKEN.match(text, pos)
            if not m:
                raise ValueError(f"unexpected {text[pos:].strip()[:20]!r}")
            self.tokens.append(m.group(1))
            pos = m.end()
        self.i = 0

    def value(self) -> int:
        v = self._conditional()
        if self.i != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.i]!r}")
        return v

    def _next(self) -> "str | None":
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _take(self, token: str) -> None:
        if self._next() != token:
            raise ValueError(f"expected {token!r}")
        self.i += 1

    def _conditional(self) -> int:
        test = self._binary(0)
        if self._next() != "?":
            return test
        self.i += 1
        yes = self._conditional()
        self._take(":")
        no = self._conditional()
        return yes if test else no

    def _binary(self, level: int) -> int:
        if level == len(_LEVELS):
            return self._unary()
        left = self._binary(level + 1)
        while self._next() in _LEVELS[level]:
            op = self.tokens[self.i]
            self.i += 1
            right = self._binary(level + 1)
            if op in ("<<", ">>") and not 0 <= right < 64:
                raise ValueError(f"a shift by {right}")
            left = _APPLY[op](left, right)
        return left

    def _unary(self) -> int:
        token = self._next()
        if token in ("!", "~", "-", "+"):
            self.i += 1
            v = self._unary()
            return {"!": int(not v), "~": ~v, "-": -v, "+": v}[token]
        if token == "(":
            self.i += 1
            v = self._conditional()
            self._take(")")
            return v
        if token is not None and token[0].isdigit():
            self.i += 1
            return int(token, 16) if token[:2] in ("0x", "0X") else int(token, 8 if token[0] == "0" else 10)
        raise ValueError(f"unexpected {token!r}" if token else "unexpected end")


def integer_value(text: str) -> int:
    """The value of an integer constant expression of numbers alone (C's operators, precedence and division):
    ValueError for anything else, ZeroDivisionError for a division by zero."""
    return _Expression(re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", text)).value()


def defines_of(flags: Sequence[str]) -> dict[str, str]:
    """The macros that build flags define: `-DNAME` is 1, `-DNAME=VALUE` VALUE; a later `-UNAME` removes one."""
    out: dict[str, str] = {}
    for f in flags:
        if f.startswith("-D") and len(f) > 2:
            name, _, value = f[2:].partition("=")
            out[name] = value if "=" in f else "1"
        elif f.startswith("-U"):
            out.pop(f[2:], None)
    return out


def _value(text: str, macros: Mapping[str, "str | None"], line: int, depth: int = 0) -> int:
    """The integer a `#if` expression has (C: identifiers that name no macro are 0)."""
    if depth > 32:
        raise ValueError(f"line {line}: `#if` expands macros more than 32 deep")
    text = re.sub(r"\bdefined\s*(?:\(\s*(\w+)\s*\)|(\w+))",
                  lambda m: "1" if (m.group(1) or m.group(2)) in macros else "0", text)
    if "'" in text:
        raise ValueError(f"line {line}: `#if {text.strip()}`: character literals are not evaluated here")

    def identifier(m: re.Match) -> str:
        name = m.group(0)
        if name not in macros:
            return "0"
        if macros[name] is None:
            raise ValueError(f"line {line}: `#if` uses the function-like macro {name}, which is not evaluated here")
        return f"({_value(macros[name] or '0', macros, line, depth + 1)})"
    text = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", text)
    text = re.sub(r"\b[A-Za-z_]\w*\b", identifier, text)
    try:
        return integer_value(text)
    except (ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"line {line}: cannot evaluate `#if {text.strip()}` ({exc})") from None


def active_source(code: str, defines: Mapping[str, str] = {}) -> str:
    """`code` with the lines of the branches the preprocessor drops, and the conditional directives themselves,
    made empty (see the module's docstring)."""
    macros: dict[str, "str | None"] = dict(defines)      # None: a function-like macro
    lines = code.split("\n")
    out = []
    stack: list[list[bool]] = []         # per open conditional: [taking this branch, a branch was taken]
    i = 0
    while i < len(lines):
        first = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):      # a directive continued on the next line
            i += 1
            text = text[:-1] + " " + lines[i]
        i += 1
        active = all(taking for taking, _ in stack)
        m = _DIRECTIVE.match(text)
        kind, rest = (m.group(1), m.group(2)) if m else ("", "")
        line = first + 1
        if kind in ("if", "ifdef", "ifndef"):
            if active:
                name = rest.split()[0] if rest.split() else ""
                take = bool(_value(rest, macros, line)) if kind == "if" else (name in macros) == (kind == "ifdef")
            else:
                take = False
            stack.append([take, take or not active])
        elif kind in ("elif", "else"):
            if not stack:
                raise ValueError(f"line {line}: #{kind} without #if")
            outer = all(taking for taking, _ in stack[:-1])
            take = outer and not stack[-1][1] and (kind == "else" or bool(_value(rest, macros, line)))
            stack[-1] = [take, stack[-1][1] or take]
        elif kind == "endif":
            if not stack:
                raise ValueError(f"line {line}: #endif without #if")
            stack.pop()
        elif active and kind == "define":
            d = _DEFINED.match(rest)
            if d:
                macros[d.group(1)] = None if d.group(2) else d.group(3).strip()
        elif active and kind == "undef":
            macros.pop(rest.strip(), None)
        keep = active and kind not in ("if", "ifdef", "ifndef", "elif", "else", "endif")
        out += lines[first:i] if keep else [""] * (i - first)
    if stack:
        raise ValueError(f"#if without #endif ({len(stack)} open at the end)")
    return "\n".join(out)


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def object_macro_definitions(clean: str) -> dict[str, list[str]]:
    """name -> the replacement texts of every object-like `#define` of `clean` of that name, in order, in whichever
    branch it stands (`#ifdef __CUDACC__ #define HD __host__ __device__ #else #define HD #endif`: both)."""
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^[ \t]*#[ \t]*define\b(.*)$", clean, re.M):
        d = _DEFINED.match(m.group(1))
        if d and not d.group(2):
            out.setdefault(d.group(1), []).append(d.group(3).strip())
    return out


def macros_naming(clean: str, words: "set[str] | frozenset[str]") -> set[str]:
    """`words` and the object-like macros of `clean` that expand to one of them, through each other, in any of their
    definitions (arrayfire's `__DH__` is `__device__ __host__` where `__CUDACC__` is defined and empty in the `#else`
    for its host compilers, and the CUDA build is the one whose device code is asked for)."""
    macros = object_macro_definitions(clean)
    named = set(words)
    grew = True
    while grew:
        grew = False
        for name, bodies in macros.items():
            if name not in named and any(named & set(_IDENTIFIER.findall(body)) for body in bodies):
                named.add(name)
                grew = True
    return named


def object_macros(clean: str) -> dict[str, str]:
    """name -> replacement text of every object-like `#define` of `clean` (the last one of a name; branches are not
    evaluated here: active_source does that)."""
    return {name: texts[-1] for name, texts in object_macro_definitions(clean).items()}


def as_built(clean: str, defines: Mapping[str, str] = {}) -> str:
    """`clean` (comments removed) as the build's preprocessor keeps it (active_source), for readers that look for
    declarations and bodies in it: where it has no conditional, or one this module cannot evaluate (the build then
    says what it finds), the text as it is."""
    if not CONDITIONAL.search(clean):
        return clean
    try:
        return active_source(clean, defines)
    except ValueError:
        return clean


# The declaration words a portable source's marker macros stand for (OpenMM's common kernels: `#define LOCAL
# __shared__`, `#define KERNEL extern "C" __global__`); a marker's body has nothing else.
_MARKER_WORDS = frozenset({"__global__", "__device__", "__host__", "__shared__", "__constant__", "__managed__",
                           "__forceinline__", "__noinline__", "inline", "static", "extern", '"C"', "volatile",
                           "__restrict__"})
_MEMORY_SPACES = frozenset({"__shared__", "__constant__", "__managed__"})


def memory_space_markers(clean: str) -> dict[str, str]:
    """name -> replacement of the object-like macros of `clean` that mark a variable's memory space (a body of
    declaration words with `__shared__`, `__constant__` or `__managed__` among them), defined once or alike in every
    branch: the build puts the variable there, and readers of the source text must see it so."""
    out = {}
    for name, bodies in object_macro_definitions(clean).items():
        words = bodies[0].split()
        if (len(set(bodies)) == 1 and words and set(words) <= _MARKER_WORDS and _MEMORY_SPACES & set(words)):
            out[name] = " ".join(words)
    return out


def with_memory_spaces_spelled(clean: str, markers: "Mapping[str, str] | None" = None) -> str:
    """`clean` (comments stripped) with each use of a memory-space marker outside preprocessor directives replaced by
    what it stands for; lines keep their numbers. `markers`: a program's (a header may define what the source uses,
    cudasrc.host_code.Program.memory_spaces); by default `clean`'s own (memory_space_markers)."""
    if markers is None:
        markers = memory_space_markers(clean) if "define" in clean else {}
    if not markers:
        return clean
    word = re.compile(r"\b(" + "|".join(map(re.escape, sorted(markers))) + r")\b")
    out, directive = [], False
    for line in clean.split("\n"):
        directive = directive or line.lstrip().startswith("#")
        out.append(line if directive else word.sub(lambda m: markers[m.group(1)], line))
        directive = directive and line.endswith("\\")       # a directive goes on past a backslash
    return "\n".join(out)
