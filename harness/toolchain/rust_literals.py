"""Decode the CUDA string literals of a Rust emitter source (such as the seed's qwen_emit.rs).

Rust source is read as tokens: comments, char literals and lifetimes are skipped; every string
literal (plain, raw `r#"..."#`, with byte prefixes) is decoded with Rust's escape rules, including the
`\\` line continuation that swallows the newline and the next line's leading whitespace. A literal
that holds a `__global__` kernel is reported with a name: the `const` it initialises, or the function
it sits in. Literals passed to `format!` are templates: `{{`/`}}` are unescaped and `{name}`
placeholders are filled from caller-given values; a template with a placeholder left unfilled is
reported as such, never guessed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from cudasrc.signatures import kernel_signatures
from harness.cache import atomic_write


@dataclass(frozen=True)
class RustLiteral:
    text: str          # decoded value (format-escapes not yet applied)
    start: int         # offset of the opening quote/prefix in the source
    end: int
    line: int
    raw: bool


@dataclass
class KernelSet:
    name: str                  # const name, or "<fn>" / "<fn>#<n>" for literals inside a function
    line: int
    code: str                  # CUDA text (templates: after filling)
    is_template: bool
    placeholders: tuple[str, ...] = ()
    unfilled: tuple[str, ...] = ()
    kernels: tuple[str, ...] = field(default_factory=tuple)

    @property
    def complete(self) -> bool:
        return not self.unfilled


_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}


def _decode_escapes(body: str, line: int) -> str:
    out, i, n = [], 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError(f"line {line}: string literal ends in a lone backslash")
        e = body[i + 1]
        if e == "\n" or (e == "\r" and body[i + 2:i + 3] == "\n"):
            i += 2
            while i < n and body[i] in " \t\r\n":   # continuation: skip the newline and the indent
                i += 1
        elif e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
        elif e == "x":
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif e == "u":
            close = body.index("}", i)
            out.append(chr(int(body[i + 3:close].replace("_", ""), 16)))
            i = close + 1
        else:
            raise ValueError(f"line {line}: unknown escape \\{e} in a string literal")
    return "".join(out)


def string_literals(src: str) -> list[RustLiteral]:
    """All string literals of a Rust source, decoded, in order."""
    lits: list[RustLiteral] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            continue
        m = re.match(r'(b?r)(#*)"', src[i:i + 300]) if c in "br" and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")) else None
        if m:
            hashes = m.group(2)
            body_start = i + m.end()
            close = src.find('"' + hashes, body_start)
            if close < 0:
                raise ValueError(f"line {src.count(chr(10), 0, i) + 1}: unterminated raw string")
            lits.append(RustLiteral(src[body_start:close], i, close + 1 + len(hashes),
                                    src.count("\n", 0, i) + 1, True))
            i = close + 1 + len(hashes)
            continue
        if c == '"' or (c == "b" and src[i + 1:i + 2] == '"' and (i == 0 or not src[i - 1].isalnum())):
            q = i if c == '"' else i + 1
            j = q + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            line = src.count("\n", 0, i) + 1
            lits.append(RustLiteral(_decode_escapes(src[q + 1:j], line), i, j + 1, line, False))
            i = j + 1
            continue
        if c == "'":
            # char literal ('a', '\n', '\u{..}') or a lifetime ('a): a lifetime has no closing quote.
            if src[i + 1:i + 2] == "\\":
                j = src.index("'", i + 2)
                i = j + 1
            elif src[i + 2:i + 3] == "'":
                i += 3
            else:
                i += 1
            continue
        i += 1
    return lits


_FMT_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)?(?::[^{}]*)?\}")
# Only for templates with unfilled placeholders (a name may still hold `{i}`); complete sets are read with
# cudasrc.signatures.kernel_signatures, which also knows `__launch_bounds__(..)` and skips comments.
_GLOBAL_NAME = re.compile(r"__global__\s+void\s+([A-Za-z_{}\w]+)\s*\(")


def _kernel_names(code: str, complete: bool) -> tuple[str, ...]:
    if complete:
        try:
            return tuple(s.name for s in kernel_signatures(code))
        except ValueError:   # a parameter kernel_signatures cannot read: fall back to the name scan
            pass
    return tuple(m.group(1) for m in _GLOBAL_NAME.finditer(code))


def fill_format(template: str, values: Mapping[str, object]) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Apply Rust format! rules: '{{' -> '{', '}}' -> '}', '{name}' / '{name:spec}' from values.

    Returns (text, placeholders seen, placeholders left unfilled). Unfilled ones stay in the text.
    """
    out, seen, unfilled, i, n = [], [], [], 0, len(template)
    while i < n:
        if template.startswith("{{", i):
            out.append("{")
            i += 2
        elif template.startswith("}}", i):
            out.append("}")
            i += 2
        elif template[i] == "{":
            m = _FMT_PLACEHOLDER.match(template, i)
            if not m:
                out.append("{")
                i += 1
                continue
            name = m.group(1) or "<positional>"
            seen.append(name)
            if name in values:
                out.append(str(values[name]))
            else:
                unfilled.append(name)
                out.append(m.group(0))
            i = m.end()
        else:
            out.append(template[i])
            i += 1
    return "".join(out), tuple(dict.fromkeys(seen)), tuple(dict.fromkeys(unfilled))


def _context(src: str, lit: RustLiteral) -> tuple[Optional[str], bool, Optional[str]]:
    """(const name, is format! argument, enclosing fn name) for a literal."""
    before = src[max(0, lit.start - 400):lit.start]
    const = re.search(r"const\s+([A-Z_][A-Z0-9_]*)\s*:\s*&(?:'static\s+)?str\s*=\s*$", before)
    is_fmt = bool(re.search(r"format!\s*\(\s*$", before))
    fns = list(re.finditer(r"\bfn\s+([a-z_][a-z0-9_]*)", src[:lit.start]))
    return (const.group(1) if const else None), is_fmt, (fns[-1].group(1) if fns else None)


def kernel_sets(src: str, values: Optional[Mapping[str, object]] = None) -> list[KernelSet]:
    """Every literal holding a `__global__` kernel, named and decoded (templates filled from `values`)."""
    values = dict(values or {})
    sets: list[KernelSet] = []
    per_fn: dict[str, int] = {}
    for lit in string_literals(src):
        if "__global__" not in lit.text:
            continue
        const, is_fmt, fn = _context(src, lit)
        if const:
            name = const
        else:
            base = fn or "top"
            per_fn[base] = per_fn.get(base, 0) + 1
            name = base if per_fn[base] == 1 else f"{base}#{per_fn[base]}"
        if is_fmt:
            code, seen, unfilled = fill_format(lit.text, values)
        else:
            code, seen, unfilled = lit.text, (), ()
        kernels = _kernel_names(code, not unfilled)
        sets.append(KernelSet(name, lit.line, code, is_fmt, seen, unfilled, kernels))
    # Names from later same-fn literals were numbered on the fly; give the first one its #1 too when it has siblings.
    counts = {}
    for s in sets:
        counts[s.name.split("#")[0]] = counts.get(s.name.split("#")[0], 0) + 1
    for s in sets:
        if "#" not in s.name and counts[s.name] > 1 and not s.name.isupper():
            s.name = f"{s.name}#1"
    return sets


CUDA_PRELUDE = "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cstdio>\n#include <cmath>\n\n"


def extract_to_dir(rs_path: "str | Path", out_dir: "str | Path", values: Optional[Mapping[str, object]] = None,
                   prelude: bool = True) -> tuple[list[Path], list[KernelSet]]:
    """Write each complete kernel set as <name>.cu; return (written files, skipped incomplete templates)."""
    src = Path(rs_path).read_text()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written, skipped = [], []
    for ks in kernel_sets(src, values):
        if not ks.complete:
            skipped.append(ks)
            continue
        fname = re.sub(r"[^A-Za-z0-9_.-]", "_", ks.name.replace("#", "-")) + ".cu"
        path = out / fname
        header = f"// extracted from {Path(rs_path).name}, literal '{ks.name}' at line {ks.line}\n"
        atomic_write(path, header + (CUDA_PRELUDE if prelude else "") + ks.code)
        written.append(path)
    return written, skipped
