"""Rewrite CUDA C device source into a C++ translation unit for the emu runtime.

Three source-level changes are needed, everything else is done by macros in emu_device.hpp:
  * every `__shared__` declaration inside a kernel becomes a reference into a per-block arena slot (a
    `static` would persist across blocks and launches and could not be poisoned per block);
  * the inline-PTX instructions emu runs (tensor-core mma.sync, ldmatrix/stmatrix, cp.async, reads of special
    registers) become calls to the runtime (g++ cannot assemble PTX);
  * a table of launch trampolines, one per `__global__` kernel, is appended, and a table of the file-scope
    `__device__` / `__constant__` variables (the module's symbols: set from the host, reset before every run).
Line numbers are kept (replacements carry the newlines they remove), so compiler messages and fault
reports name lines of the source as given. Constructs the runtime cannot run raise UnsupportedConstruct.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from harness.backends.base import UnsupportedConstruct
from harness.backends.emu.ptx import rewrite_asm
from harness.backends.emu.source_text import BraceDepth, line_of, matching
from harness.backends.emu.template_keyword import program_member_templates, with_template_keywords
from cudasrc.host_code import DEFINE_LINE, Program
from cudasrc.preprocess import as_built, with_memory_spaces_spelled
from cudasrc.types import SCALAR_DTYPES, VECTOR_BYTES
from cudasrc.signatures import (GRID_GROUP, TEXTURE_FETCH, KernelSignature, closing_bracket, in_directive,
                                macro_kernel_lines, program_kernel_signatures, split_top_level, strip_comments,
                                template_kernels)


# The macros emu_device.hpp defines before the source's text (tests/backends/emu/test_rewrite.py holds them equal):
# the source's `#if`s are read with them, as the build reads them.
EMU_PREDEFINED = {"__CUDA_ARCH__": "900", "CUDART_VERSION": "12080", "__CUDACC__": "1", "__NVCC__": "1",
                  "__CUDACC_VER_MAJOR__": "12", "__CUDACC_VER_MINOR__": "8", "__CUDACC_VER_BUILD__": "0"}

_RUNTIME_CALL = r"\bcuda[A-Z]\w*\s*\("
# A function or kernel of the source itself whose name looks like the runtime's (`__global__ void cudaProcess(`).
_OWN_CUDA_NAMED = re.compile(r"\b(?:__global__|__device__|__host__)\b[^;{}()]*?\b(cuda[A-Z]\w*)\s*\(")

# (pattern, construct named in the error). Checked on comment-stripped source.
_UNSUPPORTED = [
    (r"<<<", "host-side kernel launch `<<<...>>>`"),
    (r"\btexture\s*<", "texture references (`texture<...>`, removed in CUDA 12: nvcc refuses them too)"),
    (r"\bsurface\s*<", "surface references (`surface<...>`, removed in CUDA 12: nvcc refuses them too)"),
    (TEXTURE_FETCH + r"\s*(?:<[^<>;(){}]*>\s*)?\(", "texture fetches"),
    (r"\bsurf(?:[123]D|[12]DLayered|Cubemap(?:Layered)?)(?:read|write)\s*(?:<[^<>;(){}]*>\s*)?\(",
     "surface loads/stores"),
    (r"\bthis_multi_grid\s*\(|\bmulti_grid_group\b",
     "cooperative groups' multi-grid group (thread_block, thread_block_tile, coalesced_group, thread_group and "
     "grid_group run)"),
    (_RUNTIME_CALL, "CUDA runtime API calls in device source"),
    (r"\b__pipeline_arrive_on\b|\bpipeline\s*<\s*(?:cuda::)?thread_scope_(?:device|system)\s*>",
     "device- or system-scope pipelines and __pipeline_arrive_on (thread- and block-scope cuda::pipeline, "
     "cuda::barrier and the __pipeline_* primitives run)"),
    (r"\b__shfl(?:_up|_down|_xor)?\s*\(", "legacy warp shuffles without _sync"),
    (r"\b__(?:ballot|any|all)\s*\(", "legacy warp votes without _sync"),
]


@dataclass
class Rewritten:
    source: str                            # full translation unit (rewritten kernels + trampoline table)
    kernels: list[KernelSignature]
    shared_vars: list[tuple[str, int]]     # (name, line) of every rewritten __shared__ declarator
    symbols: list[str]                     # file-scope __device__ / __constant__ variables, in order
    grid_sync: bool = False                # the source names cooperative groups' grid group: no block sampling
    device_code: str = ""                  # the source with its host functions dropped (what nvcc's gate checks)
    member_templates: frozenset = frozenset()   # the program's member templates (template_keyword), for its headers




def _unexpanded_macros(clean: str) -> list[tuple[int, int]]:
    """The spans of the `#define`s of `clean` that nothing expands: text that never reaches the build (a sample's
    `SET_FLOAT_BASE cudaBindTexture(...)`, an engine's `LAUNCH_MOE(...)` macro whose `<<<` only the dropped host
    code used)."""
    outside = DEFINE_LINE.sub("", clean)        # where a macro can be expanded (one defined in two branches too)
    return [d.span() for d in DEFINE_LINE.finditer(clean) if not re.search(rf"\b{d.group(1)}\b", outside)]


def _first_outside(pattern: str, clean: str, spans: list[tuple[int, int]], own: "set[str]" = frozenset()
                   ) -> "re.Match | None":
    """The first match of `pattern` in `clean` that lies outside `spans` and whose leading word is not in `own`."""
    for m in re.finditer(pattern, clean):
        if re.match(r"\w*", m.group()).group() not in own and not any(lo <= m.start() < hi for lo, hi in spans):
            return m
    return None


def _class_bodies(clean: str) -> list[tuple[int, int]]:
    """The spans of the bodies of the classes and structs defined in `clean` (their braces included)."""
    out = []
    for m in re.finditer(r"\b(?:struct|class)\s+(?:__align__\s*\(\d+\)\s*|alignas\s*\(\d+\)\s*)?[A-Za-z_]\w*"
                         r"(?:\s*<[^;{}()]*>)?(?:\s*final)?\s*(?::[^;{}()]*)?\{", clean):
        if out and m.start() < out[-1][1]:
            continue                                # a nested class: inside the outer body already
        try:
            out.append((m.end() - 1, closing_bracket(clean, m.end() - 1) + 1))
        except ValueError:
            break
    return out


def check_unsupported(clean: str, own_functions: "Iterable[str]" = ()) -> None:
    """Raise UnsupportedConstruct for the first construct of _UNSUPPORTED in `clean`; `own_functions`: the source's
    host functions, dropped, whose declarations may stay (Kaldi's `void cudaF_copy_upp_low(dim3 Gr, ...);`), which
    are not the runtime's calls whatever their names."""
    unexpanded = _unexpanded_macros(clean)
    for pattern, what in _UNSUPPORTED:
        if pattern is _RUNTIME_CALL:
            # not the source's own functions named like the runtime's, nor a class's body: a class keeps its host
            # members (a context that creates its stream), which run only on the host; a device member's call is
            # found in the module's object instead (gate.check_object)
            own = set(_OWN_CUDA_NAMED.findall(clean)) | set(own_functions)
            m = _first_outside(pattern, clean, unexpanded + _class_bodies(clean), own)
        else:
            m = _first_outside(pattern, clean, unexpanded)
        if m:
            raise UnsupportedConstruct(None, f"{what} (line {line_of(clean, m.start())}) is not supported by emu")


# ---- __shared__ declarations -------------------------------------------------------------------------------
_SHARED = re.compile(r"(\bextern\s+)?\b__shared__\b")
_ALIGN = re.compile(r"__align__\s*\(((?:[^()]|\([^()]*\))+)\)|__attribute__\s*\(\(\s*aligned\s*\(\s*(\d+)\s*\)\s*\)\)"
                    r"|\balignas\s*\(((?:[^()]|\([^()]*\))+)\)")
_DECLARATOR = re.compile(r"^\s*(\**)\s*([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", re.S)
# A type defined in the declaration: `__shared__ union { ... } u;` (CUB's temporary storages share one union so),
# `__shared__ struct Tile { ... } a, b;`.
_DEFINED_TYPE = re.compile(r"\s*((?:(?:volatile|const)\s+)*)(struct|union|class)\b\s*([A-Za-z_]\w*)?\s*"
                           r"((?:__align__\s*\(\s*\d+\s*\)|alignas\s*\([^()]*\)|\s)*)\{")


def _split_declarators(decl: str) -> list[str]:
    """The comma-separated declarators of a declaration: commas inside brackets and template arguments
    (`pipeline_shared_state<thread_scope_block, 4> state`) do not split. Outside array bounds a `<` here can only
    open template arguments."""
    pieces, depth, angles, start = [], 0, 0, 0
    for i, c in enumerate(decl):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c in "<>" and depth == 0:
            angles += 1 if c == "<" else -1
        elif c == "," and depth == 0 and angles == 0:
            pieces.append(decl[start:i])
            start = i + 1
    return pieces + [decl[start:]]


def _switch_around(clean: str, pos: int) -> "int | None":
    """Where the `switch` keyword is whose body is the innermost block around `pos`, or None where that block is
    no switch's body. A reference declared among a switch's cases is one that a later case label jumps past, which
    C++ forbids (a `__shared__` variable has no initialization to skip: GPUMD declares one per case)."""
    depth, i = 0, pos - 1
    while i >= 0:
        c = clean[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                break
            depth -= 1
        i -= 1
    if i < 0:
        return None
    head = clean[:i].rstrip()
    if not head.endswith(")"):
        return None
    depth, j = 0, len(head) - 1
    while j >= 0:
        depth += (head[j] == ")") - (head[j] == "(")
        if depth == 0:
            break
        j -= 1
    keyword = re.search(r"\bswitch\s*$", head[:max(j, 0)])
    return keyword.start() if keyword else None


def _rewrite_shared(clean: str, first_slot: int = 0, file: "str | None" = None) -> tuple[str, list[tuple[str, int]]]:
    """`clean` with each `__shared__` declaration a reference into its block's slot (numbered from `first_slot`), and
    the (name, line) of each slot; `file`: the header the text is (its name goes into reports), None for the source.
    A declaration among a switch's cases is made just before the `switch`, on its line (in scope for the same
    cases; no case label jumps past it)."""
    out, pos, slot, names, file_scope = [], 0, first_slot, [], []
    copied: list[tuple[int, int]] = []        # (position in clean, position in the output) where a copy starts
    length = 0                                # of the output so far
    hoisted: list[tuple[int, str]] = []       # (position in clean of a `switch`, the declarations it gets before it)
    has_switch = re.search(r"\bswitch\b", clean) is not None
    depth = BraceDepth(clean)
    for m in _SHARED.finditer(clean):
        if m.start() < pos or in_directive(clean, m.start()):     # `#define LOCAL __shared__`: no declaration
            continue
        line = line_of(clean, m.start())
        defined = _DEFINED_TYPE.match(clean, m.end())
        body_end = matching(clean, defined.end() - 1) + 1 if defined else m.end()
        semi = clean.find(";", body_end)
        if semi < 0:
            raise UnsupportedConstruct(None, f"__shared__ declaration without ';' (line {line})")
        at_file_scope = depth.at(m.start()) == 0
        decl = _ALIGN.sub(" ", clean[body_end:semi])
        # `__align__(1024)`: kept (swizzled layouts and ldmatrix rely on it), the largest one the declaration asks
        # (C++'s `alignas(alignof(float4))` too, kept as the constant expression it is); not those of a defined
        # type's members
        outside = clean[max(clean.rfind("\n", 0, m.start()), pos):m.end()] + (defined.group(4) if defined else "") + \
            clean[body_end:semi]
        aligns = [(a or b or c).strip() for a, b, c in _ALIGN.findall(outside)]
        type_definition = ""
        if defined:          # the type is defined first, named (`__emu_shared_type_N` if it had no name)
            type_name = defined.group(3) or f"__emu_shared_type_{slot}"
            type_definition = f"{defined.group(2)} {type_name} {clean[defined.end() - 1:body_end]};"
            decl = f"{defined.group(1)}{type_name} {decl}"
        # An initializer (`= ...`, or `(...)` outside the array bounds, which may hold parentheses): CUDA forbids
        # one on a __shared__ variable, and nvcc refuses it.
        if "=" in decl or "(" in re.sub(r"\[[^\]]*\]", "[]", decl):
            raise UnsupportedConstruct(None, f"__shared__ declaration with an initializer (line {line}): CUDA "
                                             "allows none on a __shared__ variable")
        # The type may come before the keyword: `extern float __shared__ s[];`, `volatile int __shared__ x;`.
        start = max(clean.rfind(c, 0, m.start()) for c in ";{}\n") + 1
        prefix = _ALIGN.sub(" ", clean[start:m.start()])
        extern = bool(m.group(1)) or re.search(r"\bextern\b", prefix) is not None
        after = re.match(r"\s*extern\b", decl)       # `__shared__ extern float s[];` (HeCBench's hungarian)
        if after:
            extern, decl = True, decl[after.end():]
        # `static` and `extern` go: a slot is per block already, and a `static` reference would bind to the first
        # block's slot (and need a guarded initialization)
        prefix_type = re.sub(r"\s+", " ", re.sub(r"\b(?:extern|static)\b", " ", prefix)).strip()
        qualifiers = ""
        if not re.search(r"\b(?!volatile\b|const\b)[A-Za-z_]\w*", prefix_type):
            qualifiers, prefix_type = prefix_type + " " if prefix_type else "", ""   # `volatile __shared__ float v;`
        pieces = _split_declarators(decl)
        first = re.match(r"^(.*?)(\**\s*[A-Za-z_]\w*\s*(?:\[[^\]]*\]\s*)*)$", pieces[0].strip(), re.S)
        if not first or not (first.group(1).strip() or prefix_type):
            raise UnsupportedConstruct(None, f"__shared__ declaration {decl.strip()!r} (line {line}) is not understood")
        base_type = re.sub(r"\s+", " ", f"{prefix_type} {first.group(1)}").strip()
        declarators = [first.group(2)] + pieces[1:]
        stmts = []
        for text in declarators:
            dm = _DECLARATOR.match(text)
            if not dm:
                raise UnsupportedConstruct(None, f"__shared__ declarator {text.strip()!r} (line {line}) is not understood")
            # each bound's spaces kept as one (`N + + M` is not `N ++M`), none around the brackets
            stars, name, dims = dm.group(1), dm.group(2), "".join(
                "[" + re.sub(r"\s+", " ", b).strip() + "]" for b in re.findall(r"\[([^\]]*)\]", dm.group(3)))
            if extern:       # the dynamic shared area sized at launch: `T name[]`, or rows `T name[][C]...`
                inner = re.findall(r"\[([^\]]*)\]", dims)[1:]
                if not dims.startswith("[]") or "" in inner or stars:
                    raise UnsupportedConstruct(None, f"extern __shared__ {name}{dims} (line {line}); emu expects "
                                                     "`extern __shared__ T name[];` or `T name[][C];`")
                row = "".join(f"[({d})]" for d in inner)
                size = f"::emu::dyn_shared(\"{name}\", int(sizeof({base_type}{row})))"
                if row:          # rows: a pointer to the first row
                    stmts.append((name, f"{qualifiers}{base_type} (* const {name}){row} = "
                                        f"reinterpret_cast<{base_type} (*){row}>({size});"))
                else:            # an array of unknown bound, as the source declares it: `reinterpret_cast<S&>(name)`
                    stmts.append((name, f"{qualifiers}{base_type} (&{name})[] = "      # and `&name` mean the area
                                        f"*reinterpret_cast<{qualifiers}{base_type} (*)[]>({size});"))
            else:
                if "[]" in dims:
                    raise UnsupportedConstruct(None, f"__shared__ {name}[] without a size (line {line})")
                bounds = "".join(f"[{d}]" if re.fullmatch(r"\w+", d) else f"[({d})]"      # `[N >> 1]`: inside a
                                 for d in re.findall(r"\[([^\]]*)\]", dims))               # template argument
                align = ""
                for a in aligns:       # the largest
                    align = f", size_t({a})" if not align else f", ::emu::larger(size_t({a}){align})"
                if file is not None:
                    align = f"{align or ', size_t(16)'}, \"{file}\""
                if at_file_scope:    # one variable of the block, whichever function names it
                    site, ref = "", f"::emu::shared_var<{base_type}{stars}{bounds}>({slot}, "
                else:                # one per instantiation of the declaring function, as a static local
                    site = f"static char __emu_site_{slot}; "
                    ref = f"::emu::shared_local<{base_type}{stars}{bounds}>(&__emu_site_{slot}, {slot}, "
                stmts.append((name, f"{site}{qualifiers}auto& {name} = {ref}\"{name}\", {line}{align});"))
                names.append((name, line))
                slot += 1
        start = max(start, pos)
        copied.append((pos, length))
        newlines = "\n" * (clean.count("\n", start, semi + 1) - type_definition.count("\n"))
        switch = _switch_around(clean, m.start()) if has_switch and not at_file_scope else None
        if at_file_scope:     # declared in each function that names it (below); the same slot: one per block
            file_scope += stmts
            made = type_definition + newlines
        elif switch is not None:
            hoisted.append((switch, type_definition + " ".join(s for _, s in stmts) + " "))
            made = newlines
        else:
            made = type_definition + " ".join(s for _, s in stmts) + newlines
        out += [clean[pos:start], made]
        length += start - pos + len(made)
        pos = semi + 1
    copied.append((pos, length))
    out.append(clean[pos:])
    if hoisted:
        text = "".join(out)
        for at, decls in sorted(hoisted, reverse=True):      # a switch's text was copied unchanged: find it there
            src, dst = max(c for c in copied if c[0] <= at)
            where = dst + at - src
            text = text[:where] + decls + text[where:]
        out = [text]
    if slot > 512:
        raise UnsupportedConstruct(None, f"{slot} __shared__ declarations; emu supports at most 512 per source and "
                                         "its headers")
    text = "".join(out)
    for name, _ in file_scope:     # each function declares the slot under its plain name; `ns::name` finds nothing
        qualified = re.search(rf"::\s*{re.escape(name)}\b", text)
        if qualified:
            raise UnsupportedConstruct(None, f"__shared__ '{name}' of a namespace, named with its namespace (line "
                                             f"{line_of(text, qualified.start())}): emu reaches a namespace-scope "
                                             "__shared__ variable by its plain name only")
    text = "".join(out)
    return (_declare_in_functions(text, file_scope) if file_scope else text), names


def rewrite_header(text: str, first_slot: int, file: str, memory_spaces: "Mapping[str, str]" = {},
                   member_templates: frozenset = frozenset()) -> tuple[str, int]:
    """A header's device code (host functions already dropped) rewritten as the source's is: its inline PTX
    translated, its memory-space macros spelled (`memory_spaces`: the program's, Program.memory_spaces), the
    `template` keyword written where its calls of the program's member templates leave it out (`member_templates`:
    Rewritten.member_templates), its `__shared__` declarations in the block's slots from `first_slot` on (reports
    name them `file:line`); and the next free slot."""
    text = rewrite_asm(text) if "asm" in text else text
    text = with_memory_spaces_spelled(text, memory_spaces)
    text = with_template_keywords(text, member_templates)
    text = _class_symbols_in_storage(text)
    if not _SHARED.search(text):
        return text, first_slot
    rewritten, names = _rewrite_shared(text, first_slot, file)
    return rewritten, first_slot + len(names)


def _declares_shared(body: str, name: str) -> bool:
    """Whether a (rewritten) function body declares a `__shared__` variable `name` of its own, which hides the
    file-scope one of that name (HeCBench's hungarian: a file-scope `extern __shared__ sdata[]` and a kernel's own
    `__shared__ data sdata[256]`)."""
    return re.search(rf"&\s*{re.escape(name)}\s*=\s*::emu::shared_|\*\s*const\s+{re.escape(name)}\b", body) is not None


def _declare_in_functions(text: str, variables: list[tuple[str, str]]) -> str:
    """`text` with each file-scope __shared__ variable (name, its declaration as a local reference) declared at
    the top of every function body at file scope that names it: every kernel and device function of a block
    then reaches the block's one slot. A body is a top-level `{` right after a `)` (a parameter list); a
    parameter of the same name hides the variable, as in C++, and so does a `__shared__` variable the body declares."""
    out, pos, i = [], 0, 0
    depth = BraceDepth(text)
    while (i := text.find("(", i)) >= 0:
        if depth.at(i) != 0:           # inside a body already handled or a struct: its parentheses are not lists
            i += 1
            continue
        close = matching(text, i)
        brace = len(text) - len(text[close + 1:].lstrip())
        if not text.startswith("{", brace):      # a call, an attribute (`__launch_bounds__(256)`), a prototype
            i = close + 1
            continue
        end = matching(text, brace)
        params, body = text[i:close], text[brace:end + 1]
        used = [decl for name, decl in variables
                if re.search(r"(?<![.\w>])" + re.escape(name) + r"\b", body) and not re.search(rf"\b{name}\b", params)
                and not _declares_shared(body, name)]
        if used:
            out += [text[pos:brace + 1], " ", " ".join(used), " "]
            pos = brace + 1
        i = end + 1
    out.append(text[pos:])
    return "".join(out)


# ---- module symbols: file-scope __device__ / __constant__ variables --------------------------------------
_SYMBOL_DECL = re.compile(r"(?:^|(?<=[;}]))\s*((?:(?:static|extern|const|volatile|__device__|__constant__|__managed__)\s+)*"
                          r"(?:__device__|__constant__|__managed__)\b[^;{]*)", re.M)


def _declarator_name(text: str) -> "str | None":
    """The variable a declarator declares: `name`, `name[N]`, `(*name)(args)` (function pointer); None for a
    function."""
    text = text.split("=", 1)[0].strip()
    fp = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(", text)
    if fp:
        return fp.group(1)
    if "(" in text:
        return None
    m = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$", text)
    return m.group(1) if m else None


def device_symbols(clean: str) -> list[str]:
    """Names of the variables declared `__device__` or `__constant__` at file scope (not functions)."""
    names: list[str] = []
    depth = BraceDepth(clean)
    for m in _SYMBOL_DECL.finditer(clean):
        decl = m.group(1)
        if depth.at(m.start(1)) != 0 or "__global__" in decl:
            continue
        end = m.end(1)
        if end < len(clean) and clean[end] == "{" and "=" not in decl:       # a function definition
            continue
        if "=" in decl:       # the initializer may hold braces: the declaration runs to the next top-level ';'
            stop = end
            while stop < len(clean) and clean[stop] != ";":
                stop = matching(clean, stop) + 1 if clean[stop] == "{" else stop + 1
            decl = clean[m.start(1):stop]
        parts = split_top_level(decl, ",")
        first = _declarator_name(re.sub(r"\b(?:static|extern|const|volatile|__device__|__constant__|__managed__)\b", " ",
                                        parts[0]))
        if first is None:
            continue
        scope = depth.scope(m.start(1))
        names.append(scope + first)
        for extra in parts[1:]:
            n = _declarator_name(extra)
            if n:
                names.append(scope + n)
    return names


# A device variable of a class type with a user-provided (empty) constructor or destructor, which CUDA allows
# (`__constant__ FFP con_twd[1024];`, cuFHE's: "shared memory requires empty constructor"): compiled as a host
# variable, g++ would construct and register its destructor when the library loads, host code the gate refuses. A
# GPU runs neither; emu gives the name storage of the type's size and alignment, never constructed or destroyed.
_CLASS_SYMBOL = re.compile(r"^(?P<static>static\s+)?(?P<type>[A-Za-z_][\w:]*(?:\s*<[^;{}]*>)?)\s+(?P<name>[A-Za-z_]\w*)"
                           r"\s*(?P<dims>(?:\[[^\]]+\]\s*)*)$", re.S)
# Type names that are no class: the scalars and CUDA's vector types (cudasrc.types), and a few more words.
_NOT_CLASSES = frozenset(SCALAR_DTYPES) | frozenset(VECTOR_BYTES) | {"signed", "void", "auto", "intptr_t",
                                                                      "uintptr_t", "ptrdiff_t"}


def _class_symbols_in_storage(text: str) -> str:
    """`text` with each file-scope device variable of a user-defined type, declared without an initializer, one per
    declaration (`static __device__ T name[N];`), made a reference to raw storage of T's size and alignment, on the
    same line. A variable of a builtin, vector or pointer type, one with an initializer (constant data), `extern`
    and `const` ones stay as written."""
    out, pos = [], 0
    depth = BraceDepth(text)
    for m in _SYMBOL_DECL.finditer(text):
        decl = m.group(1)
        end = m.end(1)
        if depth.at(m.start(1)) != 0 or end >= len(text) or text[end] != ";" or \
                re.search(r"\b(?:extern|const|__global__)\b|[=*,&(]", decl):
            continue
        plain = re.sub(r"\b(?:volatile|__device__|__constant__|__managed__)\b", " ", decl).strip()
        c = _CLASS_SYMBOL.match(re.sub(r"\s+", " ", plain))
        if not c or c.group("type").split("::")[-1].split("<")[0].strip() in _NOT_CLASSES:
            continue
        static, t, name, dims = c.group("static") or "", c.group("type"), c.group("name"), c.group("dims").strip()
        qualifiers = " ".join(q for q in re.findall(r"__device__|__constant__|__managed__|volatile", decl))
        ref = f"(&{name}){dims}" if dims else f"&{name}"
        cast = f"{t} (&){dims}" if dims else f"{t} &"
        out += [text[pos:m.start(1)],
                f"alignas({t}) {static}unsigned char __emu_storage_{name}[sizeof({t}{dims})]; "
                f"{static}{qualifiers} {t} {ref} = reinterpret_cast<{cast}>(__emu_storage_{name})"]
        pos = end
    return "".join(out) + text[pos:]


# ---- trampolines ------------------------------------------------------------------------------------------
def _kernel_refs(kernels: list[KernelSignature]) -> str:
    """A constant per kernel, its function, defined in the kernel's own namespace: template arguments written as the
    source writes them inside it (`FilteredTopKMode::Plain` in flashinfer::sampling) are read there."""
    refs = []
    for i, k in enumerate(kernels):
        ref = f"constexpr auto __emu_kernel_ref_{i} = ::emu::kernel_fn({k.address});"
        for namespace in reversed([n for n in k.scope.split("::") if n]):
            ref = f"namespace {namespace} {{ {ref} }}"
        refs.append(ref)
    return "\n".join(refs)


def _table(kernels: list[KernelSignature], symbols: list[str]) -> str:
    # Kernel constants are qualified: inside namespace emu an unqualified name could find a runtime function.
    rows = ",\n".join(f'  {{"{k.name}", &::emu::thunk<::{k.scope}__emu_kernel_ref_{i}>, '
                      f"::emu::arity(::{k.scope}__emu_kernel_ref_{i}), "
                      f"::emu::param_sizes(::{k.scope}__emu_kernel_ref_{i})}}"
                      for i, k in enumerate(kernels))
    n = len(kernels)
    # A const symbol may sit in read-only memory: listed as not writable, so the host never sets it.
    syms = ",\n".join(f'  {{"{v}", (void*)(&::{v}), sizeof(::{v}), '
                       f"!std::is_const<std::remove_all_extents<std::remove_reference<decltype(::{v})>::type>::type>::value}}"
                       for v in symbols)
    return f"""
#line 1 "<emu-trampolines>"
{_kernel_refs(kernels)}
namespace emu {{ namespace {{
constexpr KernelEntry g_kernel_table[] = {{
{rows}
}};
}} }}
EMU_EXPORT int emu_kernel_count() {{ return {n}; }}
EMU_EXPORT const void* emu_kernel(int i) {{ return &::emu::g_kernel_table[i]; }}
EMU_EXPORT const char* emu_kernel_name(int i) {{ return ::emu::g_kernel_table[i].name; }}
EMU_EXPORT int emu_kernel_nparams(int i) {{ return ::emu::g_kernel_table[i].nparams; }}
EMU_EXPORT int emu_kernel_param_size(int i, int j) {{ return ::emu::g_kernel_table[i].sizes[j]; }}
namespace emu {{ namespace {{
struct SymbolEntry {{ const char* name; void* addr; unsigned long long bytes; bool writable; }};
const SymbolEntry g_symbol_table[] = {{
{syms or '  {nullptr, nullptr, 0, false}'}
}};
}} }}
EMU_EXPORT int emu_symbol_count() {{ return {len(symbols)}; }}
EMU_EXPORT const char* emu_symbol_name(int i) {{ return ::emu::g_symbol_table[i].name; }}
EMU_EXPORT void* emu_symbol_addr(int i) {{ return ::emu::g_symbol_table[i].addr; }}
EMU_EXPORT unsigned long long emu_symbol_size(int i) {{ return ::emu::g_symbol_table[i].bytes; }}
EMU_EXPORT int emu_symbol_writable(int i) {{ return ::emu::g_symbol_table[i].writable; }}
"""


def rewrite(code: str, filename: str = "kernel.cu", defines: "dict[str, str] | None" = None,
            program: Program = Program(), headers: "Mapping[str, str] | None" = None) -> Rewritten:
    """The emu translation unit for CUDA source `code` (raises UnsupportedConstruct); `defines`: the macros the
    build's flags define, with which a kernel's parameter list is read where it has conditionals; `program`: what
    the source's own headers tell about its host code (cudasrc.host_code.program_of: the macros that mark device
    code, the names kept code uses, the templates they drop); `headers`: those headers' texts by name, whose
    typedefs name parameter types and whose kernels launch too (program_kernel_signatures)."""
    clean, dropped = program.split(code)     # host code never runs here (a GPU runs it on the host)
    # `LOCAL float t[256];` is a __shared__ array where LOCAL is one, in whichever of the program's files it is defined
    clean = with_memory_spaces_spelled(clean, dict(program.memory_spaces))
    built = {**EMU_PREDEFINED, **(defines or {})}
    # what the preprocessor drops never reaches the build: another vendor's branch (ggml's HIP macros that map the
    # _sync shuffles to the legacy ones) is no construct of this build
    check_unsupported(as_built(clean, built), {f.name for f in dropped})
    try:
        kernels = program_kernel_signatures(code, headers or {}, defines)
    except ValueError as exc:
        raise UnsupportedConstruct(None, f"kernel signature: {exc}") from None
    if not kernels:
        templates = template_kernels(code)
        if templates:
            raise UnsupportedConstruct(None, f"template kernel(s) {', '.join(templates)} with no explicit "
                                             f"instantiation (`template __global__ void {templates[0]}<...>(...);`): "
                                             "emu launches the instantiations a source makes (host code's "
                                             "launches are not built; cudasrc.instantiations.instantiated() adds "
                                             "one, as `racescan --kernel 'k<...>'` does)")
        in_macros = macro_kernel_lines(code)
        if in_macros:
            raise UnsupportedConstruct(None, f"the source's kernels are written inside #define macros (line(s) "
                                             f"{', '.join(map(str, in_macros))}): emu finds kernels in the source text "
                                             "and does not expand macros to name them; write each kernel out, or as "
                                             "a template with explicit instantiations")
        raise UnsupportedConstruct(None, "no __global__ kernel in the source")
    seen: dict[str, int] = {}
    for k in kernels:
        if k.name in seen:
            raise UnsupportedConstruct(None, f"kernel {k.name!r} is defined twice ({seen[k.name]} and {k.place})")
        seen[k.name] = k.place
    members = program_member_templates([clean, *map(strip_comments, (headers or {}).values())])
    body = with_template_keywords(rewrite_asm(clean), members)
    body, shared = _rewrite_shared(body)
    symbols = device_symbols(as_built(body, built))   # a variable in a dropped branch does not exist
    body = _class_symbols_in_storage(body)
    safe = re.sub(r'[^A-Za-z0-9_.-]', "_", filename)
    tu = f'#line 1 "{safe}"\n{body}\n{_table(kernels, symbols)}'
    return Rewritten(tu, kernels, shared, symbols, bool(GRID_GROUP.search(clean)), clean, members)
