"""GKLEE's test suite's adapter for ci/score_race_suite.py.

GKLEE (Li, Li, Gopalakrishnan, Ghosh, Rajan, ... "GKLEE: concolic verification and test generation for GPUs",
PPoPP 2012) is a symbolic executor of CUDA programs; github.com/Geof23/GkleeTests is its test suite. SUITE is a
checkout: each top-level folder NAME that holds an `expected.txt` is a test, and every `*.cu` directly in it is
scored (NAME/NAME.cu, or med/med2.cu; subfolders such as both_ww_and_rw_race/remote/ are other copies and are
left out). Each .cu is a whole program: a host main() that allocates with cudaMalloc and launches its kernels.

Labels come from `expected.txt`: one finding per line that GKLEE is expected to report, from the suite's README
list `read write`, `write write`, `benign read write`, `benign write write`, `barrier` (barrier mismatch),
`bounds` (out-of-bounds access), `volatile` (missed volatile declaration); blank lines say nothing.
  racy       = a `read write` or `write write` line (not `benign ...`): GKLEE reports an actual race;
  race-free  = no such line and no `barrier` or `bounds` line: nothing expected, or only `benign ...` races
               (the record's `benign_races_expected` is then true) or a `volatile` warning. The README's verify.py
               matches `benign` lines to GKLEE's "Write-Write race with the same value (Benign)" and "Write-Read
               race with the same value (Benign)": races GKLEE excuses because the values agree, which are races
               all the same by the CUDA memory model. Such a file is race-free under GKLEE's reading and racy by
               the memory model; the summary shows both (ci/score_race_suite.py);
  not scored = a `barrier` or `bounds` line and no actual race line (deadlock_0, deadlock_2): GKLEE halts the
               path at a barrier mismatch ("execution halts on a barrier mismatch") or a memory error (KLEE's
               "out of bound pointer"), so the rest of the kernel went unchecked and the file's expectation makes
               no claim about its races (deadlock_0 does race across blocks after its divergent barrier);
               also any line outside the README's list.

GKLEE's notion of a race (harness.racescan.reading.GKLEE): every scope, same-value and kept-value races benign.
GKLEE runs the lanes of a warp in lock step (its README's lockstep_vs_cuda_description test and the comment in
it: "under lockstep this should not race, but under cuda description this is a candidate"), which orders the
accesses of different instructions of one warp, but not all of a warp's conflicts: its messages (the suite's
verify.py) include "Within a warp, threads .. incur a Write-Write race" and "Within a warp, because of branch
divergence, threads .. incur a Read-Write race", and the suite labels warp-only races racy (warp_nbd_race and
interwarp_0: 16 threads storing different values to one word; write_write_race_1: one warp of 32;
warp_bd_race: divergent branches of one warp; symmetric_and_data_flow's pairs of neighbouring lanes), so the
warp scope counts. What lock step does excuse, a read and a store of one warp in different instructions outside
divergent branches, the detector's (scope, values) kinds cannot tell apart from what it does not: the reading
counts them (a reading never hides what it cannot place), and a file whose only race is one of those is a
disagreement to read (missing_volatile). Across warps and across blocks GKLEE checks every conflict
(inter_block_race, lockstep_vs_cuda_description).

Launch: each __global__ kernel that the host program launches (`k<<<grid, block>>>(args)`, `<<<g, b, shared>>>`
too), at its grid and block, evaluated (evaluate(): integer literals, + - * / % << >>, comparisons, ?:, &&, ||,
parentheses, sizeof of a scalar type, function-like `#define`s such as `imin(a,b)` expanded) from `#define`s,
file-scope `const int`s, integer variables that main() declares with an initializer and never assigns again
(`int block_size = 64; int grid_size = (num_elements + block_size - 1) / block_size;`), `dim3 g(a, b)`
variables, and the first value of a `for (int i = a; ...)` loop around the launch (seive0 launches in a loop:
the adapter runs its first launch). A kernel launched at several geometries, a grid or block that is not such
an expression, or a program without a launch: the record's verdict is `unsupported` with the reason, nothing
guessed. A kernel that main() never launches is not run (`not_launched`).
Device code: the file with host functions dropped (the Indigo adapter's device_code, line numbers kept) and
GKLEE's own intrinsics removed: `#include <klee/klee.h>` and `klee_assume(...)` statements (which only restrict
the paths GKLEE explores); `#include <iostream>` (host streams, whose static initializer emu refuses to load)
too; all recorded in `dropped`. Another `klee_` name left in device code is `unsupported`.
Inputs: a pointer parameter gets the buffer the host allocates for the argument it passes there, its size read
from `cudaMalloc(&d, size)` with `size` evaluated as above (`num_bytes`, `N*sizeof(int)`, `4*DIM*DIM*sizeof(char)`);
where it cannot be read, GKLEE_FALLBACK_ELEMENTS elements (listed in `buffers_not_read`). Contents: seeded
(GPUVerify's make_args, from the recorded seed and the file's name; floats in [0, 1)), an integer buffer of
n >= 2 elements holding integers in [1, min(64, n)): valid indices of itself, for kernels that index a buffer
with its own contents (random_race), and never zero, for kernels that divide by them (seive2). The host programs fill their buffers from constants (or rand());
those contents are not read. A scalar parameter gets the value of the launch's argument where it evaluates
(`num_elements`, `2`, `i*block_size` at the loop's first `i`), else a seeded draw (GPUVerify's scalar_values,
listed in `scalars_drawn`). An access past a buffer's end stands as the kernel's fault.
"""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np

from cudasrc.preprocess import integer_value
from cudasrc.signatures import closing_bracket, kernel_signatures, split_top_level, strip_comments
from cudasrc.types import SCALAR_DTYPES
from harness.racescan import has_detector
from harness.racescan.reading import GKLEE

from . import gpuverify, indigo, scor
from .run import Launch, build_failed, run_kernels

EXPECTED = "expected.txt"
RACE_LINES = ("read write", "write write")                 # an actual race GKLEE reports
BENIGN_LINES = ("benign read write", "benign write write")  # a race GKLEE excuses: the values agree
HALTING_LINES = ("barrier", "bounds")                       # GKLEE stops the path there
WARNING_LINES = ("volatile",)
KNOWN_LINES = RACE_LINES + BENIGN_LINES + HALTING_LINES + WARNING_LINES
GKLEE_FALLBACK_ELEMENTS = 1024               # a buffer whose cudaMalloc size the adapter cannot read
GKLEE_ONLY = (("klee_assume", "restricts the paths GKLEE explores"),)
# host streams: no device code uses them, and their static initializer is host code that emu refuses to load
HOST_HEADERS = ("iostream", "fstream", "sstream")


class Unreadable(ValueError):
    """A launch, a size or a value the adapter does not evaluate: the reason."""


# ---- the suite and its labels -------------------------------------------------------------------------------
def suite_files(root: Path) -> "list[Path] | None":
    """The .cu files at the top of every folder of `root` that has an expected.txt, or None."""
    if not root.is_dir():
        return None
    files = [f for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")
             and (d / EXPECTED).is_file() for f in sorted(d.glob("*.cu")) if f.is_file()]
    return files or None


def record_name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def expected_of(path: Path) -> list[str]:
    """The non-blank lines of the expected.txt beside `path`, whitespace normalised."""
    text = (path.parent / EXPECTED).read_text(errors="replace")
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def classify_expected(lines: list[str]) -> tuple["str | None", str, bool]:
    """(label, why, benign races expected) of an expected.txt's lines (see the module's docstring)."""
    unknown = sorted({line for line in lines if line not in KNOWN_LINES})
    benign = any(line in BENIGN_LINES for line in lines)
    if unknown:
        return None, f"expected.txt: {', '.join(map(repr, unknown))} not among the README's findings", benign
    if any(line in RACE_LINES for line in lines):
        return "racy", "an actual race expected", benign
    halting = sorted({line for line in lines if line in HALTING_LINES})
    if halting:
        return None, (f"expected.txt: {' and '.join(halting)} and no race: GKLEE halts the path there, so the "
                      "expectation makes no claim about the kernel's races"), benign
    if benign:
        return "race-free", "only benign (same-value) races expected", True
    return "race-free", "no race expected", False


def label_of(path: Path) -> "str | None":
    return classify_expected(expected_of(path))[0]


# ---- the host program's integer expressions ------------------------------------------------------------------
_NOT_ARITHMETIC = re.compile(r"[^\w\s+\-*/%<>=!&|^~?:()]")


class Host:
    """What the host program fixes: `#define`s (object-like: their text; function-like: parameters and body)
    and the integer values and dim3s it declares (file-scope `const int`s, main()'s variables that are never
    assigned again)."""

    def __init__(self, code: str):
        self.code = code                     # comments stripped
        self.macros: dict[str, str] = {}
        self.functions: dict[str, tuple[list[str], str]] = {}
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\(([^)]*)\))?[ \t]*(.*?)[ \t]*$", code, re.M):
            if m.group(2):
                self.functions[m.group(1)] = ([p.strip() for p in m.group(3).split(",")], m.group(4))
            else:
                self.macros[m.group(1)] = m.group(4)
        self.values: dict[str, int] = {}
        self.dim3s: dict[str, tuple] = {}
        self.unread: dict[str, str] = {}      # a declared name without a value: why
        self.main = _main_body(code)
        self._declarations(_file_scope(code), constant_only=True)
        if self.main is not None:
            self._declarations(code[self.main[0]:self.main[1]], constant_only=False)

    def _declarations(self, text: str, constant_only: bool) -> None:
        decl = re.compile(r"(?:^|(?<=[;{}\n]))\s*(?:static\s+)?(const\s+)?((?:unsigned|signed)\s+)?(?:(?:long\s+)?long|int|short|size_t|"
                          r"unsigned)(?:\s+int)?\s+(?:const\s+)?([A-Za-z_]\w*)\s*=\s*([^;{}]+);")
        dims = re.compile(r"(?:^|(?<=[;{}\n]))\s*(?:const\s+)?dim3\s+([A-Za-z_]\w*)\s*(?:\(([^;]*)\)|=\s*dim3\s*\(([^;]*)\)|"
                          r"=\s*([^;{}]+))?\s*;")
        found = [(m.start(), "int", m.group(3), m.group(4), m.span(), bool(m.group(1))) for m in decl.finditer(text)]
        found += [(m.start(), "dim3", m.group(1), m.group(4) if m.group(4) else
                   f"dim3({m.group(2) if m.group(2) is not None else m.group(3) or ''})", m.span(), False)
                  for m in dims.finditer(text) if m.group(2) or m.group(3) or m.group(4)]
        names = [f[2] for f in found]
        for _, kind, name, init, span, const in sorted(found):
            if constant_only and not const:       # a file-scope variable main() may change
                continue
            self.values.pop(name, None)
            self.dim3s.pop(name, None)
            if names.count(name) > 1:
                self.unread[name] = "declared more than once"
                continue
            if not constant_only and not const and _assigned(text, name, span):
                self.unread[name] = "main() assigns it after its declaration"
                continue
            try:
                if kind == "int":
                    self.values[name] = self.evaluate(init)
                else:
                    self.dim3s[name] = self.dim3(init)
                self.unread.pop(name, None)
            except Unreadable as exc:
                self.unread[name] = f"its initializer {exc}"

    def evaluate(self, text: str, env: "dict[str, int] | None" = None) -> int:
        """The integer value of a C expression of the host program (cudasrc.preprocess.integer_value once its
        names are replaced by their values); Unreadable if it is anything else."""
        text = self._expanded(text)
        bad = _NOT_ARITHMETIC.search(text)
        if bad:
            raise Unreadable(f"`{text.strip()}`: `{text[bad.start():].strip()[:20]}` is not integer arithmetic")
        if text.count("(") != text.count(")"):
            raise Unreadable(f"`{text.strip()}`: unbalanced parentheses")
        numbers = self._numbers(text, {**self.values, **(env or {})}, frozenset())
        try:
            return integer_value(numbers)
        except ZeroDivisionError:
            raise Unreadable(f"`{text.strip()}`: division by zero") from None
        except ValueError as exc:
            raise Unreadable(f"`{text.strip()}`: not an integer expression the adapter evaluates ({exc})") from None

    def _numbers(self, text: str, env: dict[str, int], seen: frozenset) -> str:
        """`text` with each name replaced by its value: the launch's loop variables and main()'s integers, or an
        object-like macro's text (itself so replaced)."""
        def value(m: re.Match) -> str:
            name = m.group(0)
            if name in env:
                return f"({env[name]})"
            if name in self.macros and name not in seen:
                return f"({self._numbers(self._expanded(self.macros[name]), env, seen | {name})})"
            raise Unreadable(f"`{name}`: " + self.unread.get(name, "not a constant the host program fixes"))
        return re.sub(r"\b[A-Za-z_]\w*\b", value, re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", text))

    def dim3(self, text: str, env: "dict[str, int] | None" = None) -> tuple:
        """A launch's grid or block: a dim3 variable, `dim3(x, y)` or an integer expression."""
        text = text.strip()
        if text in self.dim3s and text not in (env or {}):
            return self.dim3s[text]
        m = re.fullmatch(r"dim3\s*\((.*)\)", text, re.S)
        parts = split_top_level(m.group(1), ",") if m else [text]
        if len(parts) > 3 or (m and not m.group(1).strip()):
            raise Unreadable(f"`{text}`: not a grid or block the adapter evaluates")
        dims = tuple(self.evaluate(p, env) for p in parts) + (1,) * (3 - len(parts))
        if any(d < 1 for d in dims):
            raise Unreadable(f"`{text}` = {dims}: not a positive size")
        return dims

    def _expanded(self, text: str, depth: int = 0) -> str:
        """`text` with function-like macros expanded and sizeof of scalar types replaced by their sizes."""
        if depth > 16:
            raise Unreadable(f"`{text.strip()}`: macros nest too deep")
        out, changed = text, False
        for name, (params, body) in self.functions.items():
            m = re.search(r"\b" + re.escape(name) + r"\s*\(", out)
            while m:
                close = closing_bracket(out, m.end() - 1)
                args = [a.strip() for a in split_top_level(out[m.end():close], ",")]
                if len(args) != len(params):
                    raise Unreadable(f"macro {name}: {len(args)} arguments, expected {len(params)}")
                by = dict(zip(params, args))
                expansion = re.sub(r"\b[A-Za-z_]\w*\b", lambda t: f"({by[t.group(0)]})" if t.group(0) in by
                                   else t.group(0), body)
                out = f"{out[:m.start()]}({expansion}){out[close + 1:]}"
                changed = True
                m = re.search(r"\b" + re.escape(name) + r"\s*\(", out)
        if changed:
            return self._expanded(out, depth + 1)

        def size(m):
            ctype = re.sub(r"\s+", " ", m.group(1)).strip()
            if ctype.endswith("*"):
                return "8"
            dtype = SCALAR_DTYPES.get(ctype)
            if dtype is None:
                raise Unreadable(f"sizeof({ctype}): not a scalar type")
            return str(dtype.itemsize)
        return scor.SIZEOF.sub(size, out)


def _main_body(code: str) -> "tuple[int, int] | None":
    m = re.search(r"\bint\s+main\s*\([^)]*\)\s*\{", code)
    return (m.end(), closing_bracket(code, m.end() - 1)) if m else None


def _file_scope(code: str) -> str:
    """The code outside every top-level brace block (function bodies, struct bodies, initializer lists)."""
    out, pos = [], 0
    while True:
        k = code.find("{", pos)
        if k < 0:
            return "".join(out) + code[pos:]
        end = closing_bracket(code, k)
        out.append(code[pos:k] + ";")
        pos = end + 1


def _assigned(text: str, name: str, declared: tuple[int, int]) -> bool:
    """Whether `text` (main's body) assigns `name` anywhere but its declaration, or takes its address."""
    n = re.escape(name)
    pattern = re.compile(rf"(?<![\w.])(?:{n}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|{n}\s*(?:\+\+|--)|(?:\+\+|--)\s*{n}\b|(?<=[(,=])\s*&\s*{n}\b"
                         rf"|{n}\s*\.\s*[xyz]\s*=(?!=))")
    return any(not (declared[0] <= m.start() < declared[1]) for m in pattern.finditer(text))


# ---- the launches ---------------------------------------------------------------------------------------------
_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*<<<(.*?)>>>\s*\(", re.S)


def loop_values(host: Host, at: int) -> dict[str, int]:
    """The first value of each `for (int v = a; ...)` loop of main() around the position `at`: the host
    program's first launch there."""
    if host.main is None:
        return {}
    values = {}
    code = host.code
    for m in re.finditer(r"\bfor\s*\(", code[:at]):
        if m.start() < host.main[0]:
            continue
        close = closing_bracket(code, m.end() - 1)
        header = code[m.end():close]
        rest = close + 1
        while rest < len(code) and code[rest].isspace():
            rest += 1
        end = closing_bracket(code, rest) if code[rest:rest + 1] == "{" else code.find(";", rest)
        if not rest <= at <= end:
            continue
        init = re.fullmatch(r"\s*(?:unsigned\s+)?(?:int|long|size_t|unsigned)\s+([A-Za-z_]\w*)\s*=\s*([^;]+)",
                            header.split(";")[0])
        if init:
            try:
                values[init.group(1)] = host.evaluate(init.group(2), values)
            except Unreadable:        # a launch that uses it cannot be evaluated, and says so
                continue
    return values


def launches_of(host: Host, kernels: list[str]) -> tuple[dict, list[str]]:
    """(kernel -> (grid, block, shared bytes, host arguments' texts, the first values of the loops around the
    launch), kernels never launched) of the host program's launches (each kernel's first). Unreadable: a launch of a kernel of
    the file that the adapter cannot evaluate, or one kernel at two geometries."""
    found: dict[str, list] = {}
    code = host.code
    for m in _LAUNCH.finditer(code):
        name = m.group(1)
        if name not in kernels:
            continue
        close = closing_bracket(code, m.end() - 1)
        args = [a.strip() for a in split_top_level(code[m.end():close], ",")] if code[m.end():close].strip() else []
        config = [c.strip() for c in split_top_level(m.group(2), ",")]
        if not 2 <= len(config) <= 4:
            raise Unreadable(f"launch of {name}: <<<{m.group(2).strip()}>>>, expected <<<grid, block[, shared[, stream]]>>>")
        try:
            loops = loop_values(host, m.start())
            used = m.group(2) + code[m.end():close]
            loops = {v: n for v, n in loops.items() if re.search(r"\b" + v + r"\b", used)}    # those it uses
            grid, block = host.dim3(config[0], loops), host.dim3(config[1], loops)
            shared = host.evaluate(config[2], loops) if len(config) > 2 else 0
        except Unreadable as exc:
            raise Unreadable(f"launch of {name} <<<{m.group(2).strip()}>>>: {exc}") from None
        found.setdefault(name, []).append((grid, block, shared, args, loops))
    for name, seen in found.items():
        geometries = {(g, b, s) for g, b, s, _, _ in seen}
        if len(geometries) > 1:
            raise Unreadable(f"{name} launched at {len(geometries)} geometries: "
                             f"{', '.join(f'<<<{g}, {b}>>>' for g, b, _ in sorted(geometries))}")
    if not found:
        raise Unreadable("no launch of a __global__ kernel of the file (`k<<<grid, block>>>(...)`) in the host program")
    return {name: seen[0] for name, seen in found.items()}, [k for k in kernels if k not in found]


def allocations(host: Host) -> dict[str, int]:
    """Host name -> bytes of each `cudaMalloc(&d, size)` whose size evaluates (a name allocated twice at two
    sizes: the smaller)."""
    out: dict[str, int] = {}
    for m in scor.CUDA_MALLOC.finditer(host.code):
        close = closing_bracket(host.code, host.code.index("(", m.start()))
        try:
            size = host.evaluate(host.code[m.end():close])
        except Unreadable:
            continue
        if size > 0:
            out[m.group(1)] = min(size, out.get(m.group(1), size))
    return out


def _plain_name(arg: str) -> str:
    """The name an argument passes, after casts (`(int*) d_x`), else ''."""
    m = re.fullmatch(r"(?:\([^()]*\)\s*)*([A-Za-z_]\w*)", arg.strip())
    return m.group(1) if m else ""


def inputs_of(sig, host: Host, args: list[str], loops: dict, allocated: dict[str, int], grid: tuple,
              block: tuple, rng: np.random.Generator) -> tuple[dict, dict, list[str], list[str]]:
    """(scalar values, pointer parameter -> elements, pointer parameters given the fallback, scalars drawn)."""
    drawn_values, _, _ = gpuverify.scalar_values(sig, "", block, rng, grid)
    values, sizes, fallback, drawn = {}, {}, [], []
    for (ctype, name), arg in zip(sig.params, args + [""] * len(sig.params)):
        base = re.sub(r"\b(?:const|volatile|__restrict__|__restrict)\b", "", ctype).replace("*", "").strip()
        base = re.sub(r"\s+", " ", base)
        if ctype.endswith("*"):
            dtype = SCALAR_DTYPES.get(base)
            host_name = _plain_name(arg)
            if dtype is not None and allocated.get(host_name, 0) >= dtype.itemsize:
                sizes[name] = allocated[host_name] // dtype.itemsize
            else:
                sizes[name] = GKLEE_FALLBACK_ELEMENTS
                fallback.append(name)
            continue
        try:
            values[name] = host.evaluate(arg, loops)
        except Unreadable:
            float_literal = re.fullmatch(r"\s*(\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?\s*", arg)
            if float_literal and SCALAR_DTYPES.get(base, np.dtype("i4")).kind == "f":
                values[name] = float(arg.strip().rstrip("fF"))
            elif name in drawn_values:
                values[name] = drawn_values[name]
                drawn.append(name)
    return values, sizes, fallback, drawn


def own_indices(sig, args: list, rng: np.random.Generator) -> list:
    """make_args' arguments with each integer buffer of n >= 2 elements drawn anew in [1, min(64, n)): valid
    indices of itself, and never zero, which programs divide by (seive2: `% input_array[i]`, its host filling
    i + 2)."""
    out = []
    for (ctype, _), arg in zip(sig.params, args):
        if ctype.endswith("*") and isinstance(arg, np.ndarray) and arg.dtype.kind in "iu" and arg.size >= 2:
            arg = rng.integers(1, min(64, arg.size), arg.size).astype(arg.dtype)
        out.append(arg)
    return out


# ---- device code and scoring ----------------------------------------------------------------------------------
def device_code(text: str) -> tuple[str, list[str]]:
    """The file's device code (host functions dropped, line numbers kept) without GKLEE's intrinsics, and what
    was dropped. Unreadable: another `klee_` name in device code."""
    code = indigo.device_code(text)
    dropped = []
    code, n = re.subn(r"^[ \t]*#[ \t]*include[ \t]*[<\"]klee/[^>\"]*[>\"][ \t]*$", "", code, flags=re.M)
    if n:
        dropped.append("#include <klee/...>")
    for name, _ in GKLEE_ONLY:
        count = 0
        m = re.search(r"\b" + name + r"\s*\(", code)
        while m:
            close = closing_bracket(code, m.end() - 1)
            end = close + 1 + (len(code[close + 1:]) - len(code[close + 1:].lstrip(" \t")))
            end += 1 if code[end:end + 1] == ";" else 0
            code = code[:m.start()] + "\n" * code.count("\n", m.start(), end) + code[end:]
            count += 1
            m = re.search(r"\b" + name + r"\s*\(", code)
        if count:
            dropped.append(f"{name} x{count}")
    code, n = re.subn(r"^[ \t]*#[ \t]*include[ \t]*<(?:" + "|".join(HOST_HEADERS) + r")>[ \t]*$", "", code, flags=re.M)
    if n:
        dropped.append(f"host-only #include x{n}")
    left = sorted(set(re.findall(r"\bklee_\w+", code)))
    if left:
        raise Unreadable(f"GKLEE intrinsic {', '.join(left)} in device code: no CUDA meaning")
    return code, dropped


def unsupported(rec: dict, reason: str) -> dict:
    rec.update(verdict="unsupported", fault=None, detail=reason[:500], races=0, data_race=False)
    return rec


def score_file(backend, path: Path, seed: int) -> dict:
    """The verdict of one GKLEE test program: each kernel its host program launches, once, at that launch."""
    from harness.backends.base import BuildError, KernelFault
    expected = expected_of(path)
    label, why, benign = classify_expected(expected)
    rec = {"file": record_name(path), "algorithm": path.parent.name, "label": label, "expected": expected,
           "benign_races_expected": benign and label == "race-free", "kernels": {}, "reading": GKLEE.name}
    if label is None:
        rec.update(verdict="not scored", fault=None, races=0, data_race=False, detail=why)
        return rec
    text = path.read_text(errors="replace")
    host = Host(strip_comments(text))
    try:
        code, rec["dropped"] = device_code(text)
        sigs = kernel_signatures(code)
        if not sigs:
            raise Unreadable("no __global__ kernel")
        launched, rec["not_launched"] = launches_of(host, [s.name for s in sigs])
    except Unreadable as exc:
        return unsupported(rec, str(exc))
    allocated = allocations(host)
    rng = np.random.default_rng([seed, zlib.crc32(record_name(path).encode())])    # per file: order-independent
    chosen = []
    rec.update(buffers={}, buffers_not_read=[], scalars={}, scalars_drawn=[], host_loops={})
    for sig in sigs:
        if sig.name not in launched:
            continue
        grid, block, shared, args, loops = launched[sig.name]
        values, sizes, fallback, drawn = inputs_of(sig, host, args, loops, allocated, grid, block, rng)
        rec["buffers"][sig.name] = sizes
        rec["buffers_not_read"] += [f"{sig.name}.{n}" for n in fallback]
        rec["scalars"][sig.name] = values
        rec["scalars_drawn"] += [f"{sig.name}.{n}" for n in drawn]
        if loops:
            rec["host_loops"][sig.name] = loops
        chosen.append((sig, grid, block, shared, values, sizes))
    first = chosen[0]
    rec.update(grid=list(first[1]), block=list(first[2]))
    try:
        module = backend.load(code, name=path.name)
    except (KernelFault, BuildError) as exc:
        return build_failed(rec, exc, has_detector(backend))
    rec["device_pointers"] = gpuverify.device_pointers(module, code, GKLEE_FALLBACK_ELEMENTS, rng)
    launches = [Launch(sig.name, grid, block,
                       lambda point, sig=sig, grid=grid, block=block, values=values, sizes=sizes:
                       own_indices(sig, gpuverify.make_args(sig, {"block": block, "grid": grid, "defines": {}},
                                                            {**values, **point}, rng, sizes=sizes), rng),
                       shared_bytes=shared)
                for sig, grid, block, shared, values, sizes in chosen]
    return run_kernels(rec, module, launches)
