"""The conditional part of the C preprocessor, for reading a source as its build reads it.

In: CUDA source (comments removed) and the macros its build defines (`-DNAME=VALUE`). Out: the same source
with the lines of every branch the preprocessor drops made empty (line numbers stay). `#if`, `#ifdef`,
`#ifndef`, `#elif`, `#else` and `#endif` are evaluated as the C preprocessor does: with the build's macros and
the source's own object-like `#define`s and `#undef`s above the line, `defined NAME`, integer arithmetic,
comparisons and logic, and 0 for an identifier that names no macro. A condition it cannot evaluate (a
function-like macro, a character literal) is a ValueError naming its line. Macros are not expanded in the
text: a kernel signature reader needs only to know which parameters exist."""
from __future__ import annotations

import ast
import operator
import re
from typing import Mapping, Sequence

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(\w+)(.*)$")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
           ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge}


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
    py = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    py = re.sub(r"!(?!=)", " not ", py)
    try:
        return int(_evaluate(ast.parse(py.strip() or "0", mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        raise ValueError(f"line {line}: cannot evaluate `#if {text.strip()}` ({exc})") from None


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp):
        v = _evaluate(node.operand)
        return {ast.USub: -v, ast.UAdd: v, ast.Invert: ~v, ast.Not: int(not v)}[type(node.op)]
    if isinstance(node, ast.BoolOp):
        values = [_evaluate(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        return int(_COMPARE[type(node.ops[0])](_evaluate(node.left), _evaluate(node.comparators[0])))
    if isinstance(node, ast.IfExp):
        return _evaluate(node.body) if _evaluate(node.test) else _evaluate(node.orelse)
    raise ValueError(f"{ast.dump(node)[:60]} is not an integer expression")


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
            d = re.match(r"\s*([A-Za-z_]\w*)(\()?\s*(.*)$", rest)
            if d:
                macros[d.group(1)] = None if d.group(2) else d.group(3).strip()
        elif active and kind == "undef":
            macros.pop(rest.strip(), None)
        keep = active and kind not in ("if", "ifdef", "ifndef", "elif", "else", "endif")
        out += lines[first:i] if keep else [""] * (i - first)
    if stack:
        raise ValueError(f"#if without #endif ({len(stack)} open at the end)")
    return "\n".join(out)
