"""Mutation operators on CUDA C kernel text.

Each operator reads the tokens of one kernel's body (comments and string literals are never touched) and
proposes edits a kernel author could plausibly get wrong: a relational or arithmetic operator, a constant
(+-1, 127 <-> 128, a rounding function), an index term, a loop bound, a deleted statement (a barrier, an
accumulation, a store), a shuffle offset or mask. A mutant is one edit; its id is stable across runs and
line moves (a hash of the kernel, the operator and the line before and after), so a ledger of equivalent
mutants keeps matching while the file around them changes.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import numpy as np

from cudasrc.signatures import kernel_signatures

OPERATORS = ("relational", "arithmetic", "constant", "rounding", "index", "loop-bound", "delete-barrier",
             "delete-accumulation", "delete-store", "shuffle")

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFuUlL]*)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct>>>=|<<=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|&=|\|=|\^=|[-+*/%<>=!&|^~?:;,.(){}\[\]\#])
""", re.X | re.S)

# words that start a declaration or a cast: a '*' after them is a pointer, a '[' after their name a size
TYPE_WORDS = frozenset("""int float char signed unsigned long short double void bool const volatile half __half
    __half2 half2 char4 int4 float4 float2 int2 uint4 uchar4 short2 size_t int8_t uint8_t int16_t uint16_t
    int32_t uint32_t int64_t uint64_t auto __nv_bfloat16 __restrict__ struct __shared__ static register
    extern""".split())
KEYWORDS = frozenset("return if else for while do case switch break continue goto sizeof".split())
ROUNDING_SWAPS = {
    "rintf": ("roundf", "truncf"), "roundf": ("rintf", "truncf"), "truncf": ("rintf",),
    "nearbyintf": ("roundf",), "floorf": ("ceilf", "truncf"), "ceilf": ("floorf",),
    "lrintf": ("lroundf",), "lroundf": ("lrintf",),
    "__float2int_rn": ("__float2int_rz",), "__float2int_rz": ("__float2int_rn",),
    "__float2int_rd": ("__float2int_rz",), "__float2int_ru": ("__float2int_rz",),
}
RELATIONAL = {"<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<="),
              "==": ("!=",), "!=": ("==",)}
ARITHMETIC = {"+": ("-",), "-": ("+",), "*": ("/",), "/": ("*",),
              "+=": ("-=",), "-=": ("+=",), "*=": ("/=",), "/=": ("*=",)}
SHUFFLES = ("__shfl_down_sync", "__shfl_up_sync", "__shfl_xor_sync", "__shfl_sync")
BARRIERS = ("__syncthreads", "__syncwarp")
ASSIGN = frozenset("= += -= *= /= %= &= |= ^= <<= >>=".split())


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Mutant:
    id: str
    kernel: str
    operator: str
    line: int              # 1-based line of the edit in the file
    description: str       # "`<` -> `<=`", "delete `__syncthreads();`", ...
    start: int             # offsets of the replaced text in the file
    end: int
    replacement: str

    def apply(self, code: str) -> str:
        return code[:self.start] + self.replacement + code[self.end:]


def tokenize(code: str, start: int = 0, end: Optional[int] = None) -> list[Tok]:
    """Significant tokens of code[start:end] (no whitespace, no comments), with absolute offsets."""
    end = len(code) if end is None else end
    out, pos = [], start
    while pos < end:
        m = _TOKEN.match(code, pos, end)
        if not m or m.end() == pos:
            raise ValueError(f"source: cannot read the C token at offset {pos}: {code[pos:pos + 20]!r}")
        if m.lastgroup not in ("ws", "comment"):
            out.append(Tok(m.lastgroup, m.group(), pos, m.end()))
        pos = m.end()
    return out


def kernel_extent(code: str, name: str) -> tuple[int, int, int]:
    """(start of the `__global__` declaration, offset of the body's `{`, offset after the body's `}`) of a
    kernel; braces are matched on tokens, so braces in comments or strings do not count."""
    m = re.search(r"__global__[^{;]*?\b" + re.escape(name) + r"\s*\(", code)
    if not m:
        raise ValueError(f"kernel {name}: no `__global__` definition of it in the source")
    toks = tokenize(code, m.end())
    depth = 0
    opened = None
    for t in toks:
        if t.text == "{":
            opened = t.start if opened is None else opened
            depth += 1
        elif t.text == "}":
            depth -= 1
            if depth == 0:
                return m.start(), opened, t.end
        elif t.text == ";" and opened is None:
            raise ValueError(f"kernel {name}: declared without a body")
    raise ValueError(f"kernel {name}: unbalanced braces")


def isolate_kernel(code: str, name: str) -> str:
    """The source with every other `__global__` kernel's definition blanked to spaces (every offset and line
    number stays true, so a mutant's edit applies to it unchanged): a mutant of one kernel compiles faster,
    and the other kernels' verdicts cannot change."""
    spans = []
    for sig in kernel_signatures(code):
        if sig.name != name:
            try:
                spans.append(kernel_extent(code, sig.name)[::2])
            except ValueError:
                continue     # a declaration without a body: nothing to blank
    out, last = [], 0
    for s, e in sorted(spans):
        out.append(code[last:s])
        out.append(re.sub(r"[^\n]", " ", code[s:e]))
        last = e
    out.append(code[last:])
    return "".join(out)


# -- helpers over a token list ---------------------------------------------------------------------------------
def _is_operand_end(t: Optional[Tok]) -> bool:
    """Whether a token can end an operand, which makes the next `*`, `-`, `<`, `[` binary."""
    if t is None:
        return False
    if t.kind == "number":
        return True
    if t.kind == "ident":
        return t.text not in TYPE_WORDS and t.text not in KEYWORDS
    return t.text in (")", "]")


def _match(toks: Sequence[Tok], i: int) -> int:
    """Index of the bracket closing toks[i] ('(' or '[' or '{')."""
    pair = {"(": ")", "[": "]", "{": "}"}[toks[i].text]
    depth = 0
    for j in range(i, len(toks)):
        if toks[j].text == toks[i].text:
            depth += 1
        elif toks[j].text == pair:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError(f"unbalanced {toks[i].text!r} at offset {toks[i].start}")


def _split_top(toks: Sequence[Tok], lo: int, hi: int, seps: Iterable[str]) -> list[tuple[int, int]]:
    """Token ranges [a, b) of toks[lo:hi] separated by depth-0 tokens in seps."""
    seps, parts, depth, a = set(seps), [], 0, lo
    for j in range(lo, hi):
        t = toks[j].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif depth == 0 and t in seps:
            parts.append((a, j))
            a = j + 1
    parts.append((a, hi))
    return parts


def _text(code: str, toks: Sequence[Tok], a: int, b: int) -> str:
    return code[toks[a].start:toks[b - 1].end] if b > a else ""


def _c_float(v: float, like: str) -> Optional[str]:
    """v as a C float literal in the style of `like` (f suffix kept); None if not finite."""
    if not np.isfinite(v):
        return None
    suffix = "f" if like[-1:] in "fF" else ""
    r = repr(float(np.float32(v)) if suffix else float(v))
    if "e" not in r and "." not in r:
        r += ".0"
    return r + suffix


# -- the operators -------------------------------------------------------------------------------------------------
class _Maker:
    def __init__(self, code: str, kernel: str):
        self.code, self.kernel = code, kernel
        _, self.open, self.close = kernel_extent(code, kernel)
        self.toks = tokenize(code, self.open, self.close)
        self.out: list[tuple[str, str, int, int, str]] = []
        self.paren = self._paren_depths()

    def _paren_depths(self) -> list[int]:
        depth, out = 0, []
        for t in self.toks:
            if t.text == ")":
                depth -= 1
            out.append(depth)
            if t.text == "(":
                depth += 1
        return out

    def add(self, op: str, desc: str, start: int, end: int, repl: str) -> None:
        if self.code[start:end] != repl:
            self.out.append((op, desc, start, end, repl))

    def prev(self, i: int) -> Optional[Tok]:
        return self.toks[i - 1] if i > 0 else None

    def relational_and_arithmetic(self) -> None:
        T = self.toks
        for i, t in enumerate(T):
            if t.kind != "punct":
                continue
            if t.text in RELATIONAL and _is_operand_end(self.prev(i)):
                if t.text == "<" and i + 1 < len(T) and T[i + 1].text in TYPE_WORDS:
                    continue   # a template argument list, not a comparison
                for r in RELATIONAL[t.text]:
                    self.add("relational", f"`{t.text}` -> `{r}`", t.start, t.end, r)
            elif t.text in ARITHMETIC:
                compound = t.text.endswith("=")
                if compound or _is_operand_end(self.prev(i)):
                    for r in ARITHMETIC[t.text]:
                        self.add("arithmetic", f"`{t.text}` -> `{r}`", t.start, t.end, r)

    def constants(self) -> None:
        T = self.toks
        for i, t in enumerate(T):
            if t.kind == "ident" and t.text in ROUNDING_SWAPS:
                for r in ROUNDING_SWAPS[t.text]:
                    self.add("rounding", f"`{t.text}` -> `{r}`", t.start, t.end, r)
            if t.kind != "number" or t.text.lower().startswith("0x"):
                continue
            if i >= 2 and T[i - 1].text == "[" and (T[i - 2].kind == "ident") and i >= 3 and \
                    T[i - 3].text in TYPE_WORDS:
                continue   # an array's declared size
            body = t.text.rstrip("uUlLfF")
            is_float = any(c in body for c in ".eE") or t.text[-1:] in "fF"
            if is_float:
                v = float(body)
                cands = {v + 1.0, v - 1.0}
                if v in (127.0, 128.0):
                    cands.add(255.0 - v)
                if v in (1 / 128, 1 / 127):
                    cands.add(1 / 127 if v == 1 / 128 else 1 / 128)
                for c in sorted(cands):
                    lit = _c_float(c, t.text)
                    if lit and np.float32(c) != np.float32(v):
                        self.add("constant", f"`{t.text}` -> `{lit}`", t.start, t.end, lit)
            else:
                v = int(body)
                suffix = t.text[len(body):]
                cands = {v + 1, v - 1} | ({255 - v} if v in (127, 128) else set())
                for c in sorted(cands):
                    lit = f"{c}{suffix}" if c >= 0 else f"({c})"
                    self.add("constant", f"`{t.text}` -> `{lit}`", t.start, t.end, lit)

    def indices(self) -> None:
        T, code = self.toks, self.code
        for i, t in enumerate(T):
            if t.text != "[" or not _is_operand_end(self.prev(i)):
                continue
            if i >= 2 and T[i - 2].text in TYPE_WORDS:
                continue   # a declaration `float part[64]`
            j = _match(T, i)
            terms = [(a, b) for a, b in _split_top(T, i + 1, j, ("+", "-")) if b > a]
            inside = _text(code, T, i + 1, j)
            if len(terms) >= 2:
                for k, (a, b) in enumerate(terms):
                    dropped = f"drop `{_text(code, T, a, b)}` from `[{inside}]`"
                    if k == 0:     # the first term becomes 0 (keeps a following `-` binary)
                        self.add("index", dropped, T[a].start, T[b - 1].end, "0")
                    else:          # a later term goes with the sign before it
                        self.add("index", dropped, T[a - 1].start, T[b - 1].end, "")
            self.add("index", f"`[{inside}]` -> `[({inside}) + 1]`", T[i + 1].start, T[j - 1].end, f"({inside}) + 1")

    def loop_bounds(self) -> None:
        T, code = self.toks, self.code
        for i, t in enumerate(T):
            if t.text != "for" or i + 1 >= len(T) or T[i + 1].text != "(":
                continue
            j = _match(T, i + 1)
            parts = _split_top(T, i + 2, j, (";",))
            if len(parts) != 3:
                continue
            (ia, ib), (ca, cb), (sa, sb) = parts
            rel = [k for k in range(ca, cb) if T[k].text in ("<", "<=", ">", ">=") and self.paren[k] == self.paren[ca]]
            if len(rel) != 1 or cb - ca < 3:
                continue
            r = rel[0]
            bound = _text(code, T, r + 1, cb)
            step_toks = [x.text for x in T[sa:sb]]
            step, mult = None, None
            if "++" in step_toks:
                step = "1"
            elif "--" in step_toks:
                step = "-1"
            elif len(step_toks) >= 3 and step_toks[1] in ("+=", "-="):
                s = _text(code, T, sa + 2, sb)
                step = s if step_toks[1] == "+=" else f"-({s})"
            elif len(step_toks) >= 3 and step_toks[1] in (">>=", "<<=", "/=", "*="):
                mult = (step_toks[1], _text(code, T, sa + 2, sb))
            if step is not None:
                # the step is signed, so bound - step is one iteration short in either direction
                short, long_ = f"({bound}) - ({step})", f"({bound}) + ({step})"
                s, e = T[r + 1].start, T[cb - 1].end
                self.add("loop-bound", f"one iteration short: `{bound}` -> `{short}`", s, e, short)
                self.add("loop-bound", f"one iteration long: `{bound}` -> `{long_}`", s, e, long_)
            elif mult is not None:
                # geometric loop (off >>= 1): one fewer / one more iteration through the start value
                eq = [k for k in range(ia, ib) if T[k].text == "="]
                if not eq:
                    continue
                init = _text(code, T, eq[0] + 1, ib)
                op, amount = mult
                fewer = {">>=": ">>", "/=": "/", "<<=": "<<", "*=": "*"}[op]
                more = {">>": "<<", "<<": ">>", "/": "*", "*": "/"}[fewer]
                s, e = T[eq[0] + 1].start, T[ib - 1].end
                self.add("loop-bound", f"one iteration short: start `{init}` -> `({init}) {fewer} {amount}`", s, e,
                         f"({init}) {fewer} {amount}")
                self.add("loop-bound", f"one iteration long: start `{init}` -> `({init}) {more} {amount}`", s, e,
                         f"({init}) {more} {amount}")

    def statements(self) -> None:
        T = self.toks
        n = len(T)
        heads = set()      # indices of ')' closing an if/for/while header
        for i, t in enumerate(T):
            if t.text in ("if", "for", "while") and i + 1 < n and T[i + 1].text == "(":
                heads.add(_match(T, i + 1))
        for i in range(1, n):
            p = T[i - 1]
            if self.paren[i] != 0 or not (p.text in (";", "{", "}", "else") or (i - 1) in heads):
                continue
            if T[i].text in ("{", "}", ";") or T[i].text in KEYWORDS or T[i].text in TYPE_WORDS:
                continue
            # the statement runs to the next ';' at paren depth 0
            j = i
            while j < n and not (T[j].text == ";" and self.paren[j] == 0):
                if T[j].text in ("{", "}"):
                    break
                j += 1
            if j >= n or T[j].text != ";":
                continue
            text = self.code[T[i].start:T[j].end]
            words = [x.text for x in T[i:j]]
            kind = None
            if words[0] in BARRIERS:
                kind = "delete-barrier"
            else:
                assign = next((k for k in range(i, j) if T[k].text in ASSIGN and self.paren[k] == 0), None)
                if assign is None:
                    continue
                target = [x.text for x in T[i:assign]]
                op = T[assign].text
                if op != "=" or (len(target) == 1 and target[0] in words[assign - i + 1:]):
                    kind = "delete-accumulation"     # x += ..., x = f(..., x)
                elif "[" in target or target[0] == "*" or "->" in target:
                    kind = "delete-store"
            if kind:
                self.add(kind, f"delete `{text}`", T[i].start, T[j].end, ";")

    def shuffles(self) -> None:
        T, code = self.toks, self.code
        for i, t in enumerate(T):
            if t.text not in SHUFFLES or i + 1 >= len(T) or T[i + 1].text != "(":
                continue
            j = _match(T, i + 1)
            args = _split_top(T, i + 2, j, (",",))
            if len(args) < 3:
                continue
            (ma, mb), _, (oa, ob) = args[0], args[1], args[2]
            mask = _text(code, T, ma, mb)
            for m in ("0x7fffffffu", "0x0000ffffu"):
                self.add("shuffle", f"{t.text} mask `{mask}` -> `{m}`", T[ma].start, T[mb - 1].end, m)
            off = _text(code, T, oa, ob)
            for d in ("+ 1", "- 1"):
                self.add("shuffle", f"{t.text} lane/offset `{off}` -> `({off}) {d}`", T[oa].start, T[ob - 1].end,
                         f"({off}) {d}")


def mutants_of(code: str, kernel: str, operators: "Sequence[str] | None" = None) -> list[Mutant]:
    """Every mutant of one kernel of `code`, deduplicated by the mutated text, in source order."""
    ops = set(OPERATORS if operators is None else operators)
    bad = ops - set(OPERATORS)
    if bad:
        raise ValueError(f"operators: unknown {sorted(bad)}; have {', '.join(OPERATORS)}")
    mk = _Maker(code, kernel)
    mk.relational_and_arithmetic()
    mk.constants()
    mk.indices()
    mk.loop_bounds()
    mk.statements()
    mk.shuffles()
    seen, counts, out = set(), {}, []
    for op, desc, s, e, repl in sorted(mk.out, key=lambda m: (m[2], m[3], m[0], m[4])):
        if op not in ops:
            continue
        key = (s, e, repl)
        if key in seen:
            continue
        seen.add(key)
        line_no = code.count("\n", 0, s) + 1
        ls = code.rfind("\n", 0, s) + 1
        le = code.find("\n", e)
        le = len(code) if le < 0 else le
        before = code[ls:le].strip()
        after = (code[ls:s] + repl + code[e:le]).strip()
        ident = f"{kernel}|{op}|{before}|{after}"
        counts[ident] = counts.get(ident, 0) + 1
        mid = hashlib.sha256(f"{ident}|{counts[ident]}".encode()).hexdigest()[:10]
        out.append(Mutant(mid, kernel, op, line_no, desc, s, e, repl))
    return out


def mutant_diff(code: str, m: Mutant, context: int = 1) -> str:
    """A unified diff of the mutant against the file (the changed lines and `context` lines around them)."""
    import difflib
    a = code.splitlines(keepends=True)
    b = m.apply(code).splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, "original", f"mutant {m.id}", n=context))
