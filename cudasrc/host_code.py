"""Host code in a CUDA source, found as text: the function definitions that are neither `__global__` nor
`__device__` (a program's `main`, the helpers that allocate and launch). A GPU build never runs them on the device;
a backend that runs device code on the CPU drops them, so a whole program loads as its device code alone."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from .preprocess import macros_naming, memory_space_markers
from .signatures import closing_bracket, strip_comments


@dataclass(frozen=True)
class HostFunction:
    name: str
    line: int          # 1-based line where its definition starts


# A brace that opens a scope whose members are looked at in turn (not a function body, not an initializer).
# Classes are not entered so: a member without __device__ may still be device code (libcu++ calls a barrier's
# completion function through a template that disables nvcc's execution-space check). Only a member that launches
# a kernel, or calls the runtime API outside what its device runtime has, is emptied there (_scan_members): neither
# can be device code.
_SCOPE_HEAD = re.compile(r'(?:\bnamespace\b[\w\s:]*|\bextern\s*"C(?:\+\+)?"\s*)$')
# A class's body, where only members that launch kernels or call the host's runtime API are emptied (_scan_members).
# The CUDA runtime API that device code may call (the device runtime of dynamic parallelism, CUDA C++ Programming
# Guide, "Device-Side Runtime API"); any other `cudaXxx(` call is host code (cuFHE's cudaMemcpyToSymbol in a member
# of a class its header instantiates whole).
DEVICE_RUNTIME_API = frozenset({
    "cudaDeviceGetAttribute", "cudaDeviceGetLimit", "cudaDeviceGetCacheConfig", "cudaDeviceGetSharedMemConfig",
    "cudaDeviceSynchronize", "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName",
    "cudaGetDeviceCount", "cudaGetDevice", "cudaStreamCreateWithFlags", "cudaStreamDestroy", "cudaStreamWaitEvent",
    "cudaEventCreateWithFlags", "cudaEventRecord", "cudaEventRecordWithFlags", "cudaEventDestroy",
    "cudaFuncGetAttributes", "cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync", "cudaMemsetAsync",
    "cudaMemset2DAsync", "cudaMemset3DAsync", "cudaRuntimeGetVersion", "cudaMalloc", "cudaFree",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cudaGetParameterBuffer", "cudaGetParameterBufferV2", "cudaLaunchDevice", "cudaLaunchDeviceV2",
    "cudaGraphLaunch"})
_RUNTIME_CALL = re.compile(r"\b(cuda[A-Z]\w*)\s*\(")


def host_runtime_calls(text: str) -> list[str]:
    """The CUDA runtime functions `text` calls that device code cannot (DEVICE_RUNTIME_API), in order."""
    return [m.group(1) for m in _RUNTIME_CALL.finditer(text) if m.group(1) not in DEVICE_RUNTIME_API]


_ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")
# `struct S : Base {`, and a specialization's `template <> struct S<gpu> {` (mshadow's stream, BLAS engines)
_CLASS_HEAD = re.compile(r"\b(?:class|struct)\s+[A-Za-z_]\w*(?:\s*<[^;{}()]*>)?(?:\s+final)?\s*(?::[^;{}()]*)?$")
# A function definition's head ends at its parameter list, or at what may follow it.
_FUNCTION_HEAD = re.compile(r"\)\s*(?:const\b\s*|volatile\b\s*|noexcept\b\s*(?:\([^()]*\)\s*)?|override\b\s*|final\b\s*|"
                            r"&&?\s*|->\s*[\w:<>,\s*&]+)*$")
_NOT_A_NAME = {"__attribute__", "__launch_bounds__", "alignas", "decltype", "__declspec", "__align__"}
_IDENT = re.compile(r"[A-Za-z_]\w*")
_DIRECTIVE = re.compile(r"^[ \t]*#(?:[^\n\\]|\\.|\\\n)*", re.M)
# A constexpr function may be called from device code (nvcc --expt-relaxed-constexpr): it stays.
_CONSTEXPR = re.compile(r"\bconst(?:expr|eval)\b")
# A return type deduced from the body: without the body the declaration could not be used.
_DEDUCED = re.compile(r"\bauto\b|\bdecltype\s*\(\s*auto\b")


@dataclass(frozen=True)
class Instantiations:
    """What a program's files drop that another file may instantiate: host function templates, and the
    function-like macros whose body is an explicit instantiation of one."""
    templates: frozenset = frozenset()
    macros: frozenset = frozenset()


def without_host_functions(code: str, words: Iterable[str] = (), names: Iterable[str] = (),
                           instantiations: Instantiations = Instantiations()) -> tuple[str, tuple[HostFunction, ...]]:
    """`code` with its comments stripped and each host function definition blanked (its newlines kept, so every
    line keeps its number), looking inside namespaces and `extern "C"` blocks; and what was dropped. Where the code
    that stays names a dropped function (a class's host member calls it, an error macro does, an `extern template`
    instantiates it), its declaration stays in its place, so the code still compiles without its body; a definition
    that cannot stand as a declaration goes whole (a qualified name `S::f`, a return type deduced from the body).
    Only such declarations stay: one whose parameters name a framework's types (torch's, in a binding) would need
    that framework's headers. A
    head counts as device code where `__global__` or `__device__` is in it, also through an object-like macro
    (`#define HD __host__ __device__`) of `code`, or one of `words` (device_words of the program's other files: a
    library defines its `HOST_DEVICE` in one header and uses it in the others); a constexpr function stays too
    (device code may call it). `names`: what the program's other files name in the code they keep (program_names:
    a class in one header calls a host function of another). `instantiations`: the host templates other files drop
    and the macros that instantiate them (program_instantiations): llama.cpp's `DECL_MMQ_CASE(GGML_TYPE_Q8_0);` in
    a file of its own instantiates a host template of `mmq.cuh`, and goes with it."""
    text, spans, kept_names = _scanned(code, frozenset(words))
    named = set(kept_names) | set(names)
    declared: set[int] = set()
    grew = True
    while grew:         # a declaration kept may name another dropped function in a default argument
        grew = False
        for i, d in enumerate(spans):
            if i not in declared and d.declarable and d.function.name in named:
                declared.add(i)
                named |= set(_IDENT.findall(text[d.start:d.body]))
                grew = True
    out = _without_instantiations(_blanked(text, spans, declared),
                                  _dropped_templates(spans, text) | instantiations.templates, instantiations.macros)
    return out, tuple(d.function for d in spans)


def _dropped_templates(spans: "Iterable[_Dropped]", text: str) -> set[str]:
    return {d.function.name for d in spans if d.declarable and re.match(r"\s*template\b", text[d.start:d.body])}


def _instantiation_pattern(templates: Iterable[str]) -> "re.Pattern | None":
    """An explicit instantiation definition (`template void f<4>(int);`) of one of `templates`."""
    alternatives = "|".join(map(re.escape, sorted(templates)))
    return re.compile(rf"\btemplate\s+(?!<)[^;{{}}<>()]*?\b(?:{alternatives})\s*<[^;{{}}]*?>\s*\([^;{{}}]*\)[^;{{}}]*;") \
        if alternatives else None


def _without_instantiations(out: str, dropped: "set[str] | frozenset[str]", macros: "frozenset[str]" = frozenset()) -> str:
    """`out` without the explicit instantiation definitions (`template void f<4>(int);`, host code too) of the
    dropped function templates, which cannot be instantiated without their bodies, nor the statements that invoke
    one of `macros`, which make such an instantiation (`DECL_CASE(8);`); `extern template` and `extern MACRO(...)`
    stay."""
    pattern = _instantiation_pattern(dropped)
    if pattern is None:
        return out
    plain = _without_directives(out)             # one in a macro's body is the macro's (`extern MACRO(...)` uses it)
    found = [*pattern.finditer(plain)]
    if macros:
        calls = re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(macros)))})\s*\([^;{{}}]*\)\s*;")
        found = sorted(found + [*calls.finditer(plain)], key=lambda m: m.start())
    pieces, pos = [], 0
    for m in found:
        if m.start() >= pos and not re.search(r"\bextern\s*$", plain[max(0, m.start() - 40):m.start()]):
            pieces += [out[pos:m.start()], "\n" * m.group(0).count("\n")]
            pos = m.end()
    return "".join(pieces) + out[pos:]


def program_instantiations(texts: Iterable[str], words: Iterable[str] = ()) -> Instantiations:
    """The host function templates that the program's files drop, and the function-like macros of any file whose
    body is an explicit instantiation of one (`#define DECL_CASE(T) template void launch<T>(...)`): where another
    file instantiates one, that goes too (without_host_functions' `instantiations`)."""
    words = frozenset(words)
    scanned = [_scanned(t, words) for t in texts]          # each text without comments, and what it drops
    dropped: set[str] = set()
    for text, spans, _ in scanned:
        dropped |= _dropped_templates(spans, text)
    pattern = _instantiation_pattern(dropped)
    if pattern is None:
        return Instantiations()
    macros = {m.group(1) for text, _, _ in scanned for m in DEFINE_LINE.finditer(text)
              if m.group(2).startswith("(") and pattern.search(m.group(2).replace("\\\n", " ") + ";")}
    return Instantiations(frozenset(dropped), frozenset(macros))


@dataclass(frozen=True)
class _Dropped:
    function: HostFunction
    start: int              # where its definition begins
    body: int               # where its body's `{` is
    end: int                # just after the body's `}`
    declarable: bool        # its head, with `;`, declares it
    member: bool = False    # a class's member that launches kernels: its body emptied, its head and braces kept


def _blanked(text: str, spans: list[_Dropped], declared: set[int]) -> str:
    """`text` with each span blanked but its newlines, the heads of `declared` (indices) kept as declarations."""
    out, pos = [], 0
    for i, d in enumerate(spans):
        if d.member:
            out.append(text[pos:d.body + 1] + "\n" * text.count("\n", d.body, d.end) + "}")
            pos = d.end
            continue
        kept = text[pos:d.body].rstrip() if i in declared else text[pos:d.start]
        out.append(kept + (";" if i in declared else ""))
        out.append("\n" * text.count("\n", pos + len(kept), d.end))
        pos = d.end
    out.append(text[pos:])
    return "".join(out)


def _without_directives(text: str) -> str:
    """`text` with its preprocessor lines (continuations included) turned to spaces, lengths and newlines kept:
    a brace in a macro body opens nothing, and a conditional inside a parameter list does not cut its head. Where
    every branch of a conditional opens (or closes) the same number of braces, as `#if A  if (i < n) {  #else  {
    #endif` does (ik_llama.cpp's tile loaders), the braces of the branches after the first are blanked too: the
    build keeps one branch, and counting all of them would leave every function after it inside that one."""
    return _DIRECTIVE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), _one_branchs_braces(text))


_CONDITIONAL_LINE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b[^\n]*", re.M)


def _one_branchs_braces(text: str) -> str:
    """`text` with the braces of a conditional's later branches blanked where every branch opens or closes the same
    nonzero number of them (inner conditionals first); anything else as it is."""
    if "#" not in text or "{" not in text:
        return text
    chars = list(text)
    groups: list[list[list[int]]] = []          # open conditionals: their branches' [start, end) spans
    for m in _CONDITIONAL_LINE.finditer(text):
        word = m.group(1)
        if word.startswith("if"):
            groups.append([[m.end(), -1]])
        elif not groups:
            continue                             # an #else or #endif without its #if: the compiler says so
        elif word == "endif":
            branches = groups.pop()
            branches[-1][1] = m.start()
            nets = {sum((c == "{") - (c == "}") for c in chars[a:b]) for a, b in branches}
            if len(branches) > 1 and len(nets) == 1 and nets != {0}:
                for a, b in branches[1:]:
                    for k in range(a, b):
                        if chars[k] in "{}":
                            chars[k] = " "
        else:                                    # #elif, #else: the next branch
            groups[-1][-1][1] = m.start()
            groups[-1].append([m.end(), -1])
    return "".join(chars)


@dataclass(frozen=True)
class Program:
    """What the files of one program (a source and its own headers) tell about each other's host code: the macros
    that mark device code (program_device_words), the names the kept code uses (program_names), the dropped
    templates another file instantiates (program_instantiations) and the macros that mark a memory space
    (`#define LOCAL __shared__` in a header, used in the source). `device_code(text)` is a file of it with its
    host functions dropped: the one way both backends and every header copy see a program's device code."""
    words: frozenset = frozenset()
    names: frozenset = frozenset()
    instantiations: Instantiations = Instantiations()
    memory_spaces: tuple = ()       # (macro, what it stands for): preprocess.memory_space_markers, all files together

    def device_code(self, text: str) -> str:
        return self.split(text)[0]

    def split(self, text: str) -> "tuple[str, tuple[HostFunction, ...]]":
        """(device_code(text), the host functions it drops; a declaration of one may stay), in one pass."""
        return without_host_functions(text, self.words, self.names, self.instantiations)


def program_of(texts: Iterable[str]) -> Program:
    """The Program of these files (the source first, then its own headers)."""
    texts = list(texts)
    words = frozenset(program_device_words(texts))
    markers = memory_space_markers("\n".join(strip_comments(t) for t in texts))
    return Program(words, frozenset(program_names(texts, words)), program_instantiations(texts, words),
                   tuple(sorted(markers.items())))


def program_device_words(texts: Iterable[str]) -> set[str]:
    """device_words_of every file of a program together (comments stripped): a macro one file defines marks
    functions as device code in the others."""
    return device_words_of("\n".join(strip_comments(t) for t in texts))


def program_names(texts: Iterable[str], words: Iterable[str] = ()) -> set[str]:
    """The identifiers that the code each file of a program keeps (its host functions blanked) names, all files
    together (`words`: program_device_words)."""
    words = frozenset(words)
    out: set[str] = set()
    bodies: dict[str, str] = {}
    for t in texts:
        text, _, kept = _scanned(t, words)
        out |= kept
        bodies.update(_macro_bodies(text))
    # a macro one file defines and another's kept code uses (cuFHE's ntt.cuh calls error_gpu.cuh's CuSafeCall)
    return _expanded(out, bodies)


@functools.lru_cache(maxsize=64)
def _scanned(code: str, words: frozenset) -> tuple[str, tuple["_Dropped", ...], frozenset]:
    """`code` without comments, its host function definitions, and what the code that stays names: found once per
    text, for a build asks program_names and then without_host_functions about the same files."""
    text = strip_comments(code)
    spans: list[_Dropped] = []
    _scan(_without_directives(text), 0, len(text), device_words_of(text) | words, spans)
    return text, tuple(spans), frozenset(_kept_names(_blanked(text, spans, set())))


# A `#define` line, its continuations included: the macro's name, then its parameters and body.
DEFINE_LINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)((?:[^\n\\]|\\.|\\\n)*)", re.M)


def _kept_names(kept: str) -> set[str]:
    """The identifiers of `kept` outside its directives, and of the macros they expand (transitively): a macro
    that only dropped code used (a binding's dispatch macro) names nothing."""
    return _expanded(set(_IDENT.findall(_without_directives(kept))), _macro_bodies(kept))


def _macro_bodies(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in DEFINE_LINE.finditer(text)}


def _expanded(named: set[str], bodies: "dict[str, str]") -> set[str]:
    """`named` with the identifiers of the macros' `bodies` it names, transitively."""
    named = set(named)
    bodies = dict(bodies)
    todo = [n for n in named if n in bodies]
    while todo:
        for n in set(_IDENT.findall(bodies.pop(todo.pop(), ""))) - named:
            named.add(n)
            if n in bodies:
                todo.append(n)
    return named


def device_words_of(text: str) -> set[str]:
    """`__global__`, `__device__` and the object-like macros of `text` that expand to either, in any of their
    definitions: arrayfire's `__DH__` is `__device__ __host__` where `__CUDACC__` is defined and empty in the
    `#else` for its host compilers, and the CUDA build is the one whose device code is asked for."""
    return macros_naming(text, {"__global__", "__device__"})


def _scopes(text: str, lo: int, hi: int) -> Iterator[tuple[str, int, int]]:
    """Each brace-delimited declaration at the top of [lo, hi): its head (None where the brace is inside
    parentheses: an initializer in an argument list), its `{` and its `}`; stops at an unbalanced brace (the
    compiler will say so)."""
    j = lo
    while True:
        k = text.find("{", j, hi)
        if k < 0:
            return
        head_start = _head_start(text, lo, k)
        try:
            end = closing_bracket(text, k)
        except ValueError:
            return
        yield (text[head_start:k] if head_start is not None else None), k, end
        j = end + 1


def _scan(text: str, lo: int, hi: int, device_words: set[str], spans: list) -> None:
    for head, k, end in _scopes(text, lo, hi):
        if head is None:
            continue
        if _is_function_head(head):
            if not device_words & set(_IDENT.findall(head)) and not _CONSTEXPR.search(head):
                start = k - len(head.lstrip())
                name = _name_of(head)
                declarable = bool(_IDENT.fullmatch(name)) and not (_DEDUCED.search(head) and "->" not in head)
                spans.append(_Dropped(HostFunction(name, text.count("\n", 0, start) + 1), start, k, end + 1,
                                      declarable))
        elif _SCOPE_HEAD.search(head):
            _scan(text, k + 1, end, device_words, spans)
        elif _CLASS_HEAD.search(head):
            _scan_members(text, k + 1, end, device_words, spans)


def _scan_members(text: str, lo: int, hi: int, device_words: set[str], spans: list) -> None:
    """A class's members: one that is no device code and launches a kernel (`<<<`, which only nvcc's host pass
    reads) or calls the host's runtime API (host_runtime_calls) keeps its head and braces and loses its body; the
    others stay whole (see _SCOPE_HEAD). Nested classes are looked at in turn."""
    for head, k, end in _scopes(text, lo, hi):
        if head is None:
            continue
        head = _ACCESS.sub("", head)
        if _is_function_head(_without_member_initializers(head)):
            if not device_words & set(_IDENT.findall(head)) and \
                    ("<<<" in text[k:end] or host_runtime_calls(text[k:end])):
                start = k - len(head.lstrip())
                spans.append(_Dropped(HostFunction(_name_of(head), text.count("\n", 0, start) + 1), start, k,
                                      end + 1, False, member=True))
        elif _CLASS_HEAD.search(head):
            _scan_members(text, k + 1, end, device_words, spans)


def _without_member_initializers(head: str) -> str:
    """A constructor's head without its member initializer list (`S(int n) : n_(f(n))` ends at `S(int n)`)."""
    depth = 0
    for i, c in enumerate(head):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == ":" and depth == 0 and head[i - 1:i] != ":" and head[i + 1:i + 2] != ":":
            return head[:i]
    return head


def _head_start(text: str, lo: int, k: int) -> "int | None":
    """Where the declaration that the brace at `k` ends begins: after the last `;` or `}` outside parentheses (a
    default argument's `= {}` is inside its parameter list); None where the brace itself is inside parentheses (an
    initializer in an argument list opens no scope)."""
    depth = 0
    i = k - 1
    while i >= lo:
        c = text[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth < 0:
                return None
        elif c in ";}" and depth == 0:
            return i + 1
        i -= 1
    return lo


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
    before = _without_template_heads(head[:max(i, 0)]).rstrip()
    word = _IDENT.findall(before)[-1:] or [""]
    return word[0] not in _NOT_A_NAME and not re.search(r"\b(?:struct|class|union|enum|typedef)\b", before)


def _without_template_heads(head: str) -> str:
    """`head` without its `template <...>` parameter lists: `template <class T>` declares no class, and the
    parentheses of `template <float (*op)(float)>` are not the function's."""
    out, pos = [], 0
    for m in re.finditer(r"\btemplate\s*<", head):
        if m.start() < pos:
            continue
        angle, paren, i = 1, 0, m.end()
        while i < len(head) and angle:
            c = head[i]
            paren += {"(": 1, ")": -1}.get(c, 0)
            if paren == 0:
                angle += {"<": 1, ">": -1}.get(c, 0)
            i += 1
        out.append(head[pos:m.start()])
        pos = i
    return "".join(out) + head[pos:]


def _name_of(head: str) -> str:
    head = _without_template_heads(head)
    for m in re.finditer(r"(~?[A-Za-z_][\w:~]*(?:\s*operator\s*[^\s(]+)?)\s*\(", head):
        if m.group(1) not in _NOT_A_NAME:
            return _qualifier_before(head, m.start()) + m.group(1)
    return head.strip().split("(")[0][-40:] or "?"


def _qualifier_before(head: str, at: int) -> str:
    """The qualifier that ends at `at` where a template's arguments hid it from the name's pattern
    (`Outer<T>::` of `Outer<T>::f`), else "": a qualified name declares nothing outside its class."""
    i = at
    if not head[:i].rstrip().endswith("::"):
        return ""
    depth = 0
    while i > 0:
        c = head[i - 1]
        depth += {">": 1, "<": -1}.get(c, 0)
        if depth == 0 and not (c.isalnum() or c in "_:<>~"):
            break
        i -= 1
    return re.sub(r"\s+", "", head[i:at])
