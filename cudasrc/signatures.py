"""Read kernel signatures out of CUDA C source (ours or anyone's) without a compiler."""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, replace
from typing import Mapping

from .preprocess import CONDITIONAL, active_source, as_built, macros_naming, object_macros
from .types import normalize_ctype


@dataclass(frozen=True)
class KernelSignature:
    name: str
    params: tuple[tuple[str, str], ...]   # (normalized C type, parameter name)
    line: int                              # 1-based line of the `__global__`
    scope: str = ""                        # the named namespaces around it, `a::b::` (C++ qualifies the name)
    spelling: str = ""                     # an instantiation's name as C++ reads it (`k<8, unsigned int>`; `name`
                                           # is `k<8,unsigned int>`, as launches name it: launch_name); empty: `name`
    header: str = ""                       # the header that defines it, where it is one of the source's own
                                           # headers' (`line` is then that header's); empty: the source's
    overloaded: bool = False               # one of several kernels of this name (C++ overloads): `name` is then
                                           # `k(int,double*)`, its parameter types added, and `spelling` is `k`

    @property
    def place(self) -> str:
        """Where it is defined, for messages: `line 12`, or `gguf.cuh:12` for a header's kernel."""
        return f"{self.header}:{self.line}" if self.header else f"line {self.line}"

    @property
    def expression(self) -> str:
        """The kernel's name in code (without its namespaces)."""
        return self.spelling or self.name

    @property
    def ctypes(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.params)

    @property
    def address(self) -> str:
        """The kernel's address in code (without its namespaces): an overload's is cast to its own function type."""
        if self.overloaded:
            return f"static_cast<void (*)({', '.join(self.ctypes)})>(&{self.spelling})"
        return f"&{self.expression}"


def overload_name(name: str, ctypes: "tuple[str, ...]") -> str:
    """The name an overloaded kernel is launched by: `k(int,double*)` (launch_name's spacing)."""
    return launch_name(f"{name}({', '.join(ctypes)})")


def _named_overloads(sigs: "list[KernelSignature]") -> "list[KernelSignature]":
    """`sigs` with each kernel whose name (in its namespace) another kernel has too named by its parameter types: C++
    overloads them (GPUMD's two `gpu_find_thermo`, with and without a fixed group), and a launch tells them apart by
    its arguments (resolve_overload)."""
    count: dict = {}
    for k in sigs:
        count[(k.scope, k.name)] = count.get((k.scope, k.name), 0) + 1
    return [replace(k, name=overload_name(k.name, k.ctypes), spelling=k.name, overloaded=True)
            if count[(k.scope, k.name)] > 1 and "<" not in k.name else k for k in sigs]


def resolve_overload(signatures: "Mapping[str, KernelSignature]", name: str, nargs: int) -> "KernelSignature | None":
    """The kernel `name` names among `signatures` (by launch name): itself, or, where `name` is an overloaded kernel's
    plain name, the one overload that takes `nargs` arguments; None if there is no kernel of that name. A ValueError
    lists the overloads where the count of arguments does not choose one."""
    if name in signatures:
        return signatures[name]
    overloads = [k for k in signatures.values() if k.overloaded and k.spelling == name]
    if not overloads:
        return None
    fitting = [k for k in overloads if len(k.params) == nargs]
    if len(fitting) == 1:
        return fitting[0]
    raise ValueError(f"kernel {name!r} is overloaded ({', '.join(k.name for k in overloads)}), and "
                     + (f"{len(fitting)} of them take" if fitting else "none takes") + f" {nargs} argument(s): "
                     f"name the one to launch with its parameter types, as `{overloads[0].name}`")


@functools.lru_cache(maxsize=256)
def strip_comments(code: str) -> str:
    """Remove // and /* */ comments, keeping newlines so line numbers stay true. String and character literals are
    kept (a `'"'` opens no string; a digit separator opens no character literal). Cached: a program's headers are
    the context of each of its files."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if c in "\"'" and opens_literal(code, i):
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(code[i:j + 1])
            i = j + 1
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            chunk = code[i:(n if j < 0 else j + 2)]
            out.append("\n" * chunk.count("\n"))
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


# The kernel attributes CUDA places around `__global__ void` (`__launch_bounds__(256)`, CUDA 13's
# `__block_size__((128, 1, 1))`, `__cluster_dims__(2, 1, 1)`, `__maxnreg__(64)`): up to three levels of nested
# parentheses (llama.cpp's `__launch_bounds__(calc_nwarps(type, get_device_table_id())*warp_size, 1)` has two).
_NESTED = r"\((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\)"
_KERNEL_ATTRIBUTE = rf"(?:__launch_bounds__|__block_size__|__cluster_dims__|__maxnreg__)\s*{_NESTED}\s*"


def _kernel_head(marker: str) -> str:
    """`__global__ void name(` (group 1 the name, group 2 an instantiation's template arguments), `marker` the
    pattern of `__global__`. `static` may stand after `__global__` too (Kaldi's `template<typename Real> __global__
    static void _softmax_reduce`), and `void` before it (GPUMD's `static void __global__ gpu_scale_velocity`)."""
    return (rf"(?:{marker}\s+(?:static\s+|{_KERNEL_ATTRIBUTE})*void|\bvoid\s+(?:{_KERNEL_ATTRIBUTE})*{marker})"
            rf"\s+(?:{_KERNEL_ATTRIBUTE})*([A-Za-z_]\w*)\s*(<[^;{{}}()]*>)?\s*\(")


_GLOBAL = re.compile(_kernel_head("__global__"))


@functools.lru_cache(maxsize=64)
def _global_pattern(words: frozenset) -> "re.Pattern":
    """`__global__ void name(` also spelled through the object-like macros `words` that expand to `__global__`."""
    if not words:
        return _GLOBAL
    return re.compile(_kernel_head(r"(?:__global__|\b(?:" + "|".join(sorted(map(re.escape, words))) + r")\b)"))


def kernel_words(clean: str) -> frozenset:
    """The object-like macros of `clean` that expand, through each other, to a text with `__global__` in it (the
    kernel marker of portable sources: OpenMM's common kernels write `KERNEL void f(...)` with
    `#define KERNEL extern "C" __global__`): a kernel so written is one the build compiles."""
    if "define" not in clean:
        return frozenset()
    return frozenset(macros_naming(clean, {"__global__"}) - {"__global__"})


# What precedes a template kernel's definition or declaration (`template <typename T, int N>`), and an explicit
# instantiation (`template __global__ void k<float, 4>(float*, int);`), which makes `k<float,4>` launchable.
# A preprocessor line may stand between them too: ggml's `#if !defined(GGML_USE_HIPBLAS)` around a `__launch_bounds__`.
_TEMPLATE_HEAD = re.compile(rf"\btemplate\s*(<[^;{{}}]*>)?\s*(?:static\s+|inline\s+|extern\s+|{_KERNEL_ATTRIBUTE}"
                            rf"|#[^\n]*\n\s*)*$")
TEMPLATE_HEAD = _TEMPLATE_HEAD     # what may stand between `template <...>` and `__global__` (gpu.prepare_source)
# How far before `__global__` a template head is looked for (ggml's mmq.cuh has 12 lines of nested #ifs between them)
HEAD_WINDOW = 2000
# A function-pointer parameter: `ret (*name)(args)`.
_FUNC_PTR = re.compile(r"^(.*?)\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*(\(.*\))$", re.S)


_CLOSING = {"(": ")", "[": "]", "{": "}", "<": ">"}
# a source with conditionals (preprocess.CONDITIONAL), and a parameter list with a directive in it: read as the
# build reads it
_DIRECTIVE = re.compile(r"^[ \t]*#", re.M)
# CUDA's texture fetch functions, by name (a user's `tex2DBilinear` is not one).
# Cooperative groups' grid group: its sync is a grid-wide barrier (emu parks blocks for it; the GPU backend, which
# makes no cooperative launch, refuses it).
GRID_GROUP = re.compile(r"\bthis_grid\s*\(|\bgrid_group\b")
TEXTURE_FETCH = (r"\b(?:tex1Dfetch|tex[123]D(?:Lod|Grad)?|tex[12]DLayered(?:Lod|Grad)?|texCubemap(?:Layered)?(?:Lod|Grad)?"
                 r"|tex2Dgather)\b")


def closing_bracket(text: str, i: int) -> int:
    """Index of the bracket closing the `(`, `[`, `{` or `<` at text[i], string and character literals skipped
    (comments already stripped); ValueError naming the offset if there is none. A `<` is a template argument
    list's only where the caller knows it is one (`a < b` compares)."""
    open_c = text[i]
    close_c = _CLOSING[open_c]
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c in "\"'":
            j = skip_string(text, j)
            continue
        if c == open_c:
            depth += 1
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ValueError(f"unbalanced '{open_c}' at offset {i}")


_NUMBER_TAIL = re.compile(r"(?:\d|\.\d)[\w.']*$")     # the pp-number a `'` would continue (`1'000`, `0x7f'ff`)


def opens_literal(text: str, i: int) -> bool:
    """Whether the quote at text[i] opens a string or character literal: not a `'` inside a number, C++14's digit
    separator (`1'000`, llm.c's `elapsed_time * 1'000`), which a scanner would take for a character literal running
    on to the next quote."""
    if text[i] != "'" or i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"):
        return True
    start = i
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.'"):
        start -= 1
    return not (_NUMBER_TAIL.match(text, start, i) and i + 1 < len(text) and text[i + 1].isalnum())


def skip_string(text: str, i: int) -> int:
    """Index just past the string or character literal starting at text[i] (opens_literal), or past a digit
    separator."""
    if not opens_literal(text, i):
        return i + 1
    q = text[i]
    j = i + 1
    while j < len(text) and text[j] != q:
        j += 2 if text[j] == "\\" else 1
    return j + 1


def split_top_level(text: str, sep: str) -> list[str]:
    """Split at `sep` outside (), [], {} and string literals."""
    parts, depth, start, j = [], 0, 0, 0
    while j < len(text):
        c = text[j]
        if c in "\"'":
            j = skip_string(text, j)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:j])
            start = j + 1
        j += 1
    parts.append(text[start:])
    return parts


def split_declaration(text: str, sep: str) -> list[str]:
    """Split a declaration's text at `sep` outside (), [], {} and template <>."""
    parts, depth, start = [], 0, 0
    for j, c in enumerate(text):
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:j])
            start = j + 1
    parts.append(text[start:])
    return parts


def _split_params(body: str) -> list[str]:
    return split_declaration(body, ",")


def without_default(text: str) -> str:
    """A parameter without its default argument (`int* p = NULL` -> `int* p`): what comes before its first `=`
    outside brackets (a declarator has none; the default may hold comparisons)."""
    return split_declaration(text, "=")[0]


# Words that end a parameter's type, never its name: `uint32_t /*max_len*/` is unnamed, `unsigned int` too
_TYPE_LAST = {"int", "char", "short", "long", "float", "double", "bool", "void", "signed", "unsigned", "wchar_t",
              "char8_t", "char16_t", "char32_t", "const", "volatile", "__restrict__", "restrict"}
_QUALIFIERS = {"const", "volatile", "struct", "class", "enum", "typename"}


def _unnamed(text: str) -> bool:
    """A parameter written without a name (its type alone), as a definition may leave one it does not use."""
    if re.search(r"[*&>]$", text):
        return True
    m = re.match(r"^(.*?)([A-Za-z_]\w*)$", text)
    if not m:
        return False
    before = m.group(1).replace("::", " ").split()
    return m.group(2) in _TYPE_LAST or all(w in _QUALIFIERS for w in before)


def _split_param(text: str, position: "int | None" = None) -> tuple[str, str]:
    """(type, name) of one parameter; one without a name is `arg<position>` (as an explicit instantiation's are)
    where its position is given, else a ValueError."""
    text = re.sub(r"\s+", " ", without_default(text).strip())
    fp = _FUNC_PTR.match(text)
    if fp:      # by value: the pointer to a device function
        return normalize_ctype(f"{fp.group(1)}(*){fp.group(3)}"), fp.group(2)
    if _unnamed(text):
        if position is None:
            raise ValueError(f"cannot read kernel parameter {text!r}")
        return normalize_ctype(text), f"arg{position}"
    # `T name[]` and `T name[N]` are pointers in a parameter list (array parameters decay). `T name[][M]` decays
    # to a pointer to rows of M: the launch passes one flat buffer of T, so it is read as a pointer to its
    # elements (the kernel's own type, `T (*)[M]`, indexes that buffer row by row).
    m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", text)
    if not m or not m.group(1).strip():
        raise ValueError(f"cannot read kernel parameter {text!r}")
    dims = re.findall(r"\[[^\]]*\]", m.group(3))
    if any(not d[1:-1].strip() for d in dims[1:]):
        raise ValueError(f"kernel parameter {text!r}: only the first bound of an array parameter may be left out "
                         "(C requires the others)")
    ctype = m.group(1) + ("*" if dims else "")
    return normalize_ctype(ctype), m.group(2)


def template_param_name(template_param: str) -> str:
    """A template parameter's name (`typename T = float` -> T; `float (*op)(float)` -> op)."""
    pointer = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", without_default(template_param))
    if pointer:                              # a function pointer `float (*op)(float)`: its name is inside
        return pointer.group(1)
    found = re.findall(r"[A-Za-z_]\w*", without_default(template_param))
    return found[-1] if found else ""


def _deduced_instance(name: str, texts: list, code: str, context: str, defines) -> "str | None":
    """`name<args>` for an explicit instantiation of template kernel `name` with parameters `texts` and no template
    arguments written: each one deduced from the template's parameter types, as C++ deduces them; None where the
    template is not in sight or a template parameter is not deduced from the parameters."""
    from .type_patterns import deduce
    for text in (code, context):
        for t in template_definitions(text, defines) if text else ():
            if t.name != name:
                continue
            names = [template_param_name(p) for p in t.template_params]
            try:
                values = deduce(param_types(t.params), names, param_types(texts))
            except ValueError:
                return None
            return launch_name(f"{name}<{', '.join(values[n] for n in names)}>") if values else None
    return None


def param_types(texts) -> tuple:
    """The types alone of parameter texts, as a signature compares (names, defaults and spacing dropped)."""
    return tuple(_split_param(t, i)[0] for i, t in enumerate(texts))


def _named_param(text: str, i: int, names: list) -> tuple[str, str]:
    """A parameter of an explicit instantiation, whose name may be left out: the template's own name for it
    (`arg<i>` when the template is not in sight). A parameter pack's are the pack's name numbered (`xs0`, `xs1`: the
    instantiation cudasrc.instantiations writes), past the end of the template's list."""
    name = names[i] if i < len(names) else f"arg{i}"
    text = re.sub(r"\s+", " ", text.strip())
    if names and i >= len(names) - 1 and re.search(r"\b" + re.escape(names[-1]) + r"\d+\s*$", text):
        return _split_param(text)
    if re.search(r"\b" + re.escape(name) + r"\s*(?:\[[^\]]*\]\s*)*$", text):
        return _split_param(text)
    return _split_param(f"{text} {name}")


def is_function_pointer(ctype: str) -> bool:
    """A by-value pointer to a device function, as `_split_param` spells it: 'int(*)(int,int)'."""
    return "(*)" in ctype


_TYPEDEF = re.compile(r"\btypedef\s+([^;{}()]+?)\s+([A-Za-z_]\w*)\s*;")
# Enumerations passed by value are integers: `enum Mode { ... }`, `enum class Mode : uint8_t { ... }` (the
# underlying type given, else int, which holds every enumerator of an unscoped enum that fits one) and
# `typedef enum { ... } Mode;`.
_ENUM = re.compile(r"\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)\s*(?::\s*([^{;]+?))?\s*\{")
_TYPEDEF_ENUM = re.compile(r"\btypedef\s+enum\b[^{;]*\{[^}]*\}\s*([A-Za-z_]\w*)\s*;")
# C++11's alias declaration, `using Torus = int32_t;` (cuFHE's); not an alias template (`template <...> using`),
# whose name needs its arguments, nor a using-directive (`using namespace`).
_ALIAS = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}()]+?)\s*;")


def type_names(clean: str) -> dict[str, str]:
    """name -> the type it stands for: the source's simple typedefs, alias declarations and enumerations."""
    names = {m.group(2): re.sub(r"\s+", " ", m.group(1)) for m in _TYPEDEF.finditer(clean)}
    names.update({m.group(1): re.sub(r"\s+", " ", m.group(2)) for m in _ALIAS.finditer(clean)
                  if not clean[:m.start()].rstrip().endswith(">")})
    names.update({m.group(1): "int" for m in _TYPEDEF_ENUM.finditer(clean)})
    names.update({m.group(1): re.sub(r"\s+", " ", (m.group(2) or "int").strip()) for m in _ENUM.finditer(clean)})
    return names


# A macro's text that may name a type (`-D dfloat=double`, `#define real float`, `unsigned long long`): words,
# `::`, pointers and template arguments; never a number or an expression.
# Each word is taken whole (the lookahead), so a text that does not fit fails at once: `(?:word\s*)*` tried every
# split of every word, exponential in a long macro (mshadow's 40 s on one header).
_TYPE_TEXT = re.compile(r"(?=[A-Za-z_])(?:[A-Za-z_][\w:]*(?![\w:])|[*&<>,]|\s)+")


def type_macros(macros: "Mapping[str, str]") -> dict[str, str]:
    """The object-like macros of `macros` whose text may name a type: what the preprocessor puts in a parameter's
    type before the compiler reads it (HeCBench's `-Ddfloat=double`), and the empty ones, which it drops there
    (OpenMM's `GLOBAL const real4* RESTRICT posq` with `#define GLOBAL`)."""
    return {name: value.strip() for name, value in macros.items()
            if value is not None and (not value.strip() or _TYPE_TEXT.fullmatch(value.strip()))}


@functools.lru_cache(maxsize=16)
def _names_as_built(text: str, defines: tuple) -> "tuple[dict[str, str], dict[str, str]]":
    """(type_names, object_macros) of source `text` as the build keeps it, with the macros `defines` (sorted items).
    Cached: program_kernel_signatures reads the same headers as the context of the source and of each header.
    Callers only read the dicts."""
    if not text:
        return {}, {}
    built = as_built(strip_comments(text), dict(defines))
    return type_names(built), object_macros(built)


def _resolve_typedefs(params: tuple[tuple[str, str], ...], typedefs: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """Parameter types with the source's simple typedefs (`typedef int data_type;`) and enumerations spelled out."""
    return tuple((resolved_type(ctype, typedefs), name) for ctype, name in params)


def resolved_type(ctype: str, typedefs: dict[str, str]) -> str:
    """`ctype` with the source's simple typedefs and enumerations (type_names) spelled out, canonically spelled."""
    ctype = re.sub(r"^(const\s+)?enum\s+(?:class\s+|struct\s+)?", r"\1", ctype)    # C's `enum Mode m`
    return normalize_ctype(substituted(ctype, typedefs))


def substituted(text: str, names: Mapping[str, str]) -> str:
    """`text` with each identifier that `names` has replaced by its text, again in what replaced it (a typedef of
    a typedef, a macro of a macro), at most 8 deep: never a cycle."""
    for _ in range(8):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: names.get(m.group(0), m.group(0)), text)
        if new == text:
            break
        text = new
    return text


def enumerations(code: str) -> dict[str, tuple[int, ...]]:
    """name -> the values of each enumeration of the source whose enumerators are implicit or integer literals
    (`enum Mode { A, B = 4, C }` -> (0, 4, 5); `typedef enum { ... } Mode;` too); others are left out."""
    clean = strip_comments(code)
    out = {}
    for m in list(_ENUM.finditer(clean)) + list(_TYPEDEF_ENUM.finditer(clean)):
        open_at = clean.index("{", m.start())
        body = clean[open_at + 1:closing_bracket(clean, open_at)]
        values, nxt = [], 0
        for item in filter(None, (p.strip() for p in body.split(","))):
            name, eq, init = (x.strip() for x in item.partition("="))
            if eq:
                try:
                    nxt = int(init, 0)
                except ValueError:
                    values = None
                    break
            values.append(nxt)
            nxt += 1
        if values:
            out[m.group(1)] = tuple(values)
    return out


def launch_name(name: str) -> str:
    """A kernel's name as launches give it: whitespace only where it separates two words (`k<8, unsigned int>` and
    `k< 8,unsigned  int >` are both `k<8,unsigned int>`; `const float *` is `const float*`)."""
    return re.sub(r"(?<!\w) | (?!\w)", "", re.sub(r"\s+", " ", name.strip()))


def program_kernel_signatures(code: str, headers: "Mapping[str, str]", defines: "Mapping[str, str] | None" = None
                              ) -> list[KernelSignature]:
    """The kernels a build of `code` can launch: kernel_signatures of `code` (its own `headers`, name -> text, as
    context), then those of each header that `code` has none of the same name of, marked with the header's name. A
    header's kernel is compiled into every file that includes it (candle's `quantize_q8_1` in `gguf.cuh`), so it is
    launched through that file, as its host code would. A header that cannot be read as kernels adds none (the
    compilers say what is wrong with it, where the build reads it)."""
    context = "\n".join(headers.values())
    sigs = kernel_signatures(code, defines=defines, context=context)
    names = {k.name for k in sigs}
    for header, text in headers.items():
        try:
            theirs = kernel_signatures(text, defines=defines, context=context)
        except ValueError:
            continue
        for k in theirs:
            if k.name not in names:
                names.add(k.name)
                sigs.append(replace(k, header=header))
    return sigs


def kernel_signatures(code: str, resolve: bool = True, defines: "Mapping[str, str] | None" = None,
                      context: str = "") -> list[KernelSignature]:
    """Every launchable `__global__ void name(params)` in the source, in order: the kernels that are not
    templates, and each explicit instantiation of a template kernel (`template __global__ void k<float, 4>(...);`,
    named `k<float,4>`, its parameters as the instantiation spells them). A template kernel's own definition is
    not launchable (template_kernels names those), nor is a declaration (`__global__ void k(float*);`, a prototype
    that its definition follows or another file defines). With `resolve`, simple typedefs and enumerations of the source
    resolved (an enumeration by value is its underlying integer type), else the parameter types as declared.
    A parameter list with preprocessor conditionals in it (`#ifdef WITH_SCALE`) is read as the build reads it,
    with the macros `defines` gives (the build's -D flags: preprocess.defines_of) and the source's own. `context`:
    the text of the source's own headers, whose typedefs and enumerations are resolved too (the source's win). A
    parameter's type is resolved as the build reads it: object-like macros that name a type (`-D dfloat=double`, a
    `#define real float` of the source or its headers) are replaced, and a typedef in a preprocessor branch counts
    only where the build keeps that branch (llm.c's floatX under `-D ENABLE_FP32`)."""
    clean = strip_comments(code)
    words = kernel_words(clean + "\n" + strip_comments(context))      # a header's `#define KERNEL ...` marks them too
    if CONDITIONAL.search(clean) and any(_DIRECTIVE.search(clean[m.end():closing_bracket(clean, m.end() - 1)])
                                          for m, _, _ in _globals(clean, words)):
        clean = active_source(clean, defines or {})
    typedefs = {}
    if resolve:      # as the build reads them: its -D macros, and each typedef in the branch the build keeps
        built = as_built(clean, defines or {})
        context_types, context_macros = _names_as_built(context, tuple(sorted((defines or {}).items())))
        typedefs = {**context_types, **type_names(built),
                    **type_macros({**context_macros, **object_macros(built), **(defines or {})})}
    namespaces = namespace_blocks(clean) if "namespace" in clean else []
    sigs, template_params = [], {}
    if context and "template" in clean:       # a template kernel of a header: its parameters' names
        for t in template_definitions(context, defines):
            template_params[t.name] = [_split_param(p, i)[1] for i, p in enumerate(t.params)]
    for m, template, instantiation in _globals(clean, words):
        close = closing_bracket(clean, m.end() - 1)
        body = clean[m.end():close].strip()
        texts = _split_params(body) if body and body != "void" else []
        if not template and not instantiation and clean[close + 1:].lstrip().startswith(";"):
            continue          # a prototype: the kernel is its definition's (here or in another file)
        if template:      # a template's definition or declaration: its parameter names (the source's first)
            head = _TEMPLATE_HEAD.search(clean, max(0, m.start() - HEAD_WINDOW), m.start())
            if head.group(1) is None and clean[close + 1:].lstrip().startswith(";"):
                # `template __global__ void k(float* a, int n);`: an explicit instantiation whose template
                # arguments are deduced from its parameters (bitsandbytes' kernels), launched as k<float>
                found = _deduced_instance(m.group(1), texts, code, context, defines)
                if found:
                    sigs.append(KernelSignature(found, tuple(_split_param(p, i) for i, p in enumerate(texts)),
                                                clean.count("\n", 0, m.start()) + 1,
                                                scope_at(namespaces, m.start()), found))
                continue
            template_params[m.group(1)] = [_split_param(p, i)[1] for i, p in enumerate(texts)]
            continue
        if instantiation:     # `template __global__ void k<float>(const float*, float*);`: names may be left out
            params = tuple(_named_param(p, i, template_params.get(m.group(1), [])) for i, p in enumerate(texts))
        else:
            params = tuple(_split_param(p, i) for i, p in enumerate(texts))
        params = _resolve_typedefs(params, typedefs) if typedefs else params
        name = m.group(1) + (launch_name(m.group(2)) if instantiation else "")
        spelling = m.group(1) + re.sub(r"\s+", " ", m.group(2)) if instantiation else ""
        sigs.append(KernelSignature(name, params, clean.count("\n", 0, m.start()) + 1, scope_at(namespaces, m.start()),
                                    spelling))
    return _named_overloads(sigs)


# `namespace a {`, `namespace a::b {`, `inline namespace v1 {`, `namespace {` (anonymous: it qualifies nothing).
_NAMESPACE = re.compile(r"\b(?:inline\s+)?namespace\s*((?:[A-Za-z_]\w*\s*::\s*(?:inline\s+)?)*[A-Za-z_]\w*)?\s*\{")


def namespace_blocks(clean: str) -> list[tuple[int, int, str]]:
    """The namespace blocks of comment-stripped source: (index of its `{`, of its `}`, the qualifier it adds, `a::`
    or `a::b::`, or "" for an anonymous namespace), in source order."""
    blocks = []
    for m in _NAMESPACE.finditer(clean):
        if _in_directive(clean, m.start()):
            continue
        name = re.sub(r"\s+|\binline\b", "", m.group(1) or "")
        try:
            blocks.append((m.end() - 1, closing_bracket(clean, m.end() - 1), name + "::" if name else ""))
        except ValueError:
            raise ValueError(f"namespace {name or '(anonymous)'} at line {clean.count(chr(10), 0, m.start()) + 1} "
                             "has no closing brace") from None
    return blocks


def scope_at(blocks: list[tuple[int, int, str]], pos: int) -> str:
    """The namespace qualifier in force at `pos` (namespace_blocks of the same text)."""
    return "".join(name for open_, close, name in blocks if open_ < pos < close)


def template_kernels(code: str) -> list[str]:
    """Names of the template kernels the source defines (`template <...> __global__ void k(...) {...}`), each
    once; only their explicit instantiations can be launched (kernel_signatures)."""
    names = []
    for m, template, _ in _globals(strip_comments(code)):
        if template and m.group(1) not in names:
            names.append(m.group(1))
    return names


@dataclass(frozen=True)
class TemplateKernel:
    """A template kernel as the source defines it: what an explicit instantiation of it needs."""
    name: str
    template_params: tuple[str, ...]      # `typename T`, `int N = 4`, as written
    params: tuple[str, ...]               # the kernel's parameters, as written (default arguments dropped)
    line: int
    namespaces: tuple[str, ...] = ()      # the enclosing namespaces, outermost first ("" for an anonymous one)


def template_definitions(code: str, defines: "Mapping[str, str] | None" = None) -> list[TemplateKernel]:
    """The template kernels of the source (`template <typename T, int N> __global__ void k(...)`), each once, in
    source order; read as the build reads it where it has preprocessor conditionals, and as written where a condition
    is one this reader cannot evaluate (`__has_builtin(...)`, often in a header of another vendor that the build
    never includes): a template is then found in every branch, and the build says which one it keeps."""
    return list(_template_definitions(code, tuple(sorted((defines or {}).items()))))


@functools.lru_cache(maxsize=32)
def _template_definitions(code: str, defines: tuple) -> "tuple[TemplateKernel, ...]":
    """template_definitions, once per text and defines: a program's headers are the context of each of its files."""
    defines = dict(defines)
    clean = as_built(strip_comments(code), defines or {})
    namespaces = namespace_blocks(clean) if "namespace" in clean else []
    out: dict[str, TemplateKernel] = {}
    for m, template, _ in _globals(clean):
        if not template or m.group(1) in out:
            continue
        head = _TEMPLATE_HEAD.search(clean, max(0, m.start() - HEAD_WINDOW), m.start())
        close = closing_bracket(clean, m.end() - 1)
        body = clean[m.end():close].strip()
        params = tuple(re.sub(r"\s+", " ", without_default(p)).strip()
                       for p in (_split_params(body) if body and body != "void" else []))
        template_params = tuple(re.sub(r"\s+", " ", t).strip() for t in _split_params(head.group(1)[1:-1])
                                if t.strip())
        enclosing = tuple(name[:-2] for open_, close_, name in namespaces if open_ < m.start() < close_)
        out[m.group(1)] = TemplateKernel(m.group(1), template_params, params,
                                         clean.count("\n", 0, m.start()) + 1, enclosing)
    return tuple(out.values())


def _in_directive(clean: str, pos: int) -> bool:
    """Whether `pos` lies in a preprocessor directive (its logical line, backslash continuations included)."""
    start = pos
    while True:
        start = clean.rfind("\n", 0, start)
        if start <= 0 or clean[start - 1] != "\\":
            break
    return clean[start + 1 if start >= 0 else 0:pos].lstrip().startswith("#")


in_directive = _in_directive       # (the emu's inline-PTX rewrite asks it of an asm statement)


def macro_kernel_lines(code: str) -> list[int]:
    """Lines of the `__global__` kernels the source writes inside a `#define` (a kernel made by expanding a macro:
    the source text alone does not name it, so kernel_signatures leaves it out)."""
    clean = strip_comments(code)
    return [clean.count("\n", 0, m.start()) + 1 for m in _GLOBAL.finditer(clean) if _in_directive(clean, m.start())]


def _globals(clean: str, words: "frozenset | None" = None):
    """Each `__global__ void name` of the source outside preprocessor directives: (its match, whether it is a
    template's definition or declaration, whether it is an explicit instantiation `template __global__ void
    k<...>(...)`); a kernel marked by a macro that expands to `__global__` too (`words`: kernel_words, by default
    of `clean` alone)."""
    for m in _global_pattern(kernel_words(clean) if words is None else words).finditer(clean):
        if _in_directive(clean, m.start()):
            continue
        head = _TEMPLATE_HEAD.search(clean, max(0, m.start() - HEAD_WINDOW), m.start())
        instantiation = head is not None and head.group(1) is None and m.group(2) is not None
        yield m, head is not None and not instantiation, instantiation


def source_sha256(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()
