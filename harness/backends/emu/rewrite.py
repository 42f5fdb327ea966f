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

from harness.backends.base import UnsupportedConstruct
from cudasrc.preprocess import as_built
from cudasrc.signatures import (TEXTURE_FETCH, KernelSignature, closing_bracket, kernel_signatures, macro_kernel_lines,
                                namespace_blocks, scope_at, skip_string, split_top_level, strip_comments,
                                template_kernels)


_RUNTIME_CALL = r"\bcuda[A-Z]\w*\s*\("
# A function or kernel of the source itself whose name looks like the runtime's (`__global__ void cudaProcess(`).
_OWN_CUDA_NAMED = re.compile(r"\b(?:__global__|__device__|__host__)\b[^;{}()]*?\b(cuda[A-Z]\w*)\s*\(")
_DEFINE_LINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?:\\\n|[^\n])*", re.M)

# (pattern, construct named in the error). Checked on comment-stripped source.
_UNSUPPORTED = [
    (r"<<<", "host-side kernel launch `<<<...>>>`"),
    (r"\btexture\s*<", "texture references (`texture<...>`, removed in CUDA 12: nvcc refuses them too)"),
    (r"\bsurface\s*<", "surface references (`surface<...>`, removed in CUDA 12: nvcc refuses them too)"),
    (TEXTURE_FETCH + r"\s*(?:<[^<>;(){}]*>\s*)?\(", "texture fetches"),
    (r"\bsurf(?:[123]D|[12]DLayered|Cubemap(?:Layered)?)(?:read|write)\s*(?:<[^<>;(){}]*>\s*)?\(",
     "surface loads/stores"),
    (r"\bthis_grid\s*\(|\bgrid_group\b|\bthis_multi_grid\s*\(|\bcoalesced_threads\s*\(",
     "cooperative groups beyond thread_block and thread_block_tile (grid sync, coalesced groups)"),
    (r"\bwmma::|\bnvcuda::", "WMMA fragments"),
    (_RUNTIME_CALL, "CUDA runtime API calls in device source"),
    (r"\b__managed__\b", "__managed__ variables"),
    (r"\b__pipeline_arrive_on\b|\bcuda::memcpy_async\b|\bcuda::pipeline\b",
     "asynchronous copies through cuda::pipeline or mbarriers (the __pipeline_* primitives run)"),
    (r"\b__shfl(?:_up|_down|_xor)?\s*\(", "legacy warp shuffles without _sync"),
    (r"\b__(?:ballot|any|all)\s*\(", "legacy warp votes without _sync"),
]


@dataclass
class Rewritten:
    source: str                            # full translation unit (rewritten kernels + trampoline table)
    kernels: list[KernelSignature]
    shared_vars: list[tuple[str, int]]     # (name, line) of every rewritten __shared__ declarator
    symbols: list[str]                     # file-scope __device__ / __constant__ variables, in order


_LINE_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*line[ \t]+(\d+)", re.M)


def _line_of(text: str, pos: int) -> int:
    """The line of text[pos] as the compiler numbers it: a `#line N` directive numbers the line after it N (a
    source with headers inlined keeps its own line numbers that way)."""
    last = None
    for last in _LINE_DIRECTIVE.finditer(text, 0, pos):
        pass
    if last is None:
        return text.count("\n", 0, pos) + 1
    return int(last.group(1)) + text.count("\n", text.find("\n", last.end()) + 1, pos)


def _matching(text: str, i: int) -> int:
    """Index of the bracket closing the one at text[i]."""
    try:
        return closing_bracket(text, i)
    except ValueError:
        raise UnsupportedConstruct(None, f"unbalanced '{text[i]}' at line {_line_of(text, i)}") from None


class _BraceDepth:
    """Brace depth at increasing positions of one text, scanning each character once (strings skipped). A
    namespace's braces do not count: what a namespace holds is at file scope, as C++ sees it."""

    def __init__(self, text: str):
        self.text, self.depth, self.j = text, 0, 0
        self.blocks = namespace_blocks(text) if "namespace" in text else []
        self.skip = {i for open_, close, _ in self.blocks for i in (open_, close)}

    def scope(self, pos: int) -> str:
        return scope_at(self.blocks, pos)

    def at(self, pos: int) -> int:
        """Depth just before `pos`; positions must not decrease from call to call."""
        text, depth, j, skip = self.text, self.depth, self.j, self.skip
        while j < pos:
            c = text[j]
            if c in "\"'":
                j = skip_string(text, j)
                continue
            if j not in skip:
                depth += (c == "{") - (c == "}")
            j += 1
        self.depth, self.j = depth, j
        return depth


def _runtime_call(clean: str) -> "re.Match | None":
    """The first call of a CUDA runtime function in `clean`, not counting the source's own functions named like
    one, nor the text of a `#define` that nothing expands (a sample's `SET_FLOAT_BASE cudaBindTexture(...)`,
    left from its host code, never reaches the build)."""
    calls = list(re.finditer(_RUNTIME_CALL, clean))
    if not calls:
        return None
    own = set(_OWN_CUDA_NAMED.findall(clean))
    outside = _DEFINE_LINE.sub("", clean)        # where a macro can be expanded (one defined in two branches too)
    unexpanded = [d.span() for d in _DEFINE_LINE.finditer(clean) if not re.search(rf"\b{d.group(1)}\b", outside)]
    for m in calls:
        if re.match(r"\w+", m.group()).group() in own or any(lo <= m.start() < hi for lo, hi in unexpanded):
            continue
        return m
    return None


def check_unsupported(clean: str) -> None:
    for pattern, what in _UNSUPPORTED:
        m = _runtime_call(clean) if pattern is _RUNTIME_CALL else re.search(pattern, clean)
        if m:
            raise UnsupportedConstruct(None, f"{what} (line {_line_of(clean, m.start())}) is not supported by emu")


# ---- inline PTX ------------------------------------------------------------------------------------------
_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:volatile\s*|__volatile__\s*)?\(")


def _asm_template(text: str) -> str:
    return "".join(m.group(1) for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', text)).replace("\\n", "\n").replace("\\t", " ")


def _operands(text: str) -> list[str]:
    text = text.strip()
    if not text:
        return []
    out = []
    for op in split_top_level(text, ","):
        m = re.match(r'\s*(?:\[\w+\]\s*)?"([^"]*)"\s*\((.*)\)\s*$', op, re.S)
        if not m:
            raise UnsupportedConstruct(None, f"inline asm operand {op.strip()!r} is not supported by emu")
        out.append(m.group(2).strip())
    return out


# `mov.u32 %0, %%laneid;`: a read of a PTX special register, as the CUDA expression it equals.
_LINEAR_TID = "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"
_LANE = f"({_LINEAR_TID} & 31u)"
SPECIAL_REGISTERS = {
    "laneid": _LANE, "warpsize": "32u",
    "lanemask_eq": f"(1u << {_LANE})", "lanemask_lt": f"((1u << {_LANE}) - 1u)",
    "lanemask_le": f"((2u << {_LANE}) - 1u)", "lanemask_gt": f"(~((2u << {_LANE}) - 1u))",
    "lanemask_ge": f"(~((1u << {_LANE}) - 1u))",
    **{f"{reg}.{a}": f"{var}.{a}" for reg, var in (("tid", "threadIdx"), ("ntid", "blockDim"), ("ctaid", "blockIdx"),
                                                   ("nctaid", "gridDim")) for a in "xyz"},
}
_SPECIAL_MOVE = re.compile(r"mov\.(?:u32|b32|s32)\s+%(\d+)\s*,\s*%%([\w.]+)\s*;?")


# cp.async (sm_80): `cp.async.{ca,cg}.shared.global[.L2::...] [dst], [src], size[, src-size][, policy];` and its
# group commit and waits, as the __pipeline_* primitives (emu_device.hpp). Operands are %N or immediates.
_CP_ASYNC_COPY = re.compile(r"cp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global((?:\.L2::\w+)*)\s+"
                            r"\[\s*(%\d+)\s*\]\s*,\s*\[\s*(%\d+)\s*\]\s*,\s*([^;]+?)\s*;?")
_CP_ASYNC_WAIT = re.compile(r"cp\.async\.wait_group\s+(%\d+|\d+)\s*;?")


def _ptx_operand(text: str, ops: list[str], template: str, line: int) -> str:
    """An operand of an inline PTX template (%N or an integer immediate) as the C++ expression it stands for."""
    text = text.strip()
    if re.fullmatch(r"%\d+", text):
        k = int(text[1:])
        if k >= len(ops):
            raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}) names operand {text}, which "
                                             "it does not have")
        return f"({ops[k]})"
    if re.fullmatch(r"-?(?:\d+|0[xX][0-9a-fA-F]+)", text):
        return text
    raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}): operand {text!r} is neither %N nor "
                                     "an immediate")


def _cp_async(template: str, ops: list[str], line: int) -> "str | None":
    """The call an inline cp.async instruction becomes, or None where the template is none."""
    def operand(text: str) -> str:
        return _ptx_operand(text, ops, template, line)
    if re.fullmatch(r"cp\.async\.commit_group\s*;?", template):
        return "__pipeline_commit()"
    if re.fullmatch(r"cp\.async\.wait_all\s*;?", template):
        return "(__pipeline_commit(), __pipeline_wait_prior(0))"
    m = _CP_ASYNC_WAIT.fullmatch(template)
    if m:
        return f"__pipeline_wait_prior({operand(m.group(1))})"
    m = _CP_ASYNC_COPY.fullmatch(template)
    if not m:
        return None
    rest = [t for t in m.group(4).split(",") if t.strip()]
    if "cache_hint" in m.group(1):
        rest = rest[:-1]                       # the last operand is the cache policy: a hint, no value
    if not 1 <= len(rest) <= 2:
        raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}): expected a copy size and an "
                                         "optional source size")
    src_size = operand(rest[1]) if len(rest) == 2 else "-1"
    return (f"::emu::cp_async((unsigned long long)({operand(m.group(2))}), (unsigned long long)({operand(m.group(3))}), "
            f"{operand(rest[0])}, (long long)({src_size}), {line})")


# Tensor-core instructions: mma.sync (m16n8k8/k16/k32 .row.col) and ldmatrix/stmatrix m8n8 .b16, each a warp
# collective of the runtime (emu_device.hpp, matrix_collective).
_MMA = re.compile(r"mma\.sync\.aligned\.m16n8k(8|16|32)\.row\.col(\.satfinite)?\.(\w+)\.(\w+)\.(\w+)\.(\w+)\s+"
                  r"\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*;?")
_MATRIX_MOVE = re.compile(r"(ldmatrix|stmatrix)\.sync\.aligned\.m8n8\.x([124])(\.trans)?(\.shared(?:::cta)?)?\.b16\s+"
                          r"(?:\{([^{}]*)\}\s*,\s*\[([^\]]*)\]|\[([^\]]*)\]\s*,\s*\{([^{}]*)\})\s*;?")
_MMA_TYPES = {"s8": "MT_S8", "u8": "MT_U8", "f16": "MT_F16", "bf16": "MT_BF16", "e4m3": "MT_E4M3", "e5m2": "MT_E5M2",
              "s32": "MT_S32", "f32": "MT_F32"}
# (K, A/B type family) -> the accumulator types (C, D) PTX allows; A and B may mix within the int8 and fp8 families.
_MMA_FORMS = {(8, "f16"): {"f16", "f32"}, (16, "f16"): {"f16", "f32"}, (8, "bf16"): {"f32"}, (16, "bf16"): {"f32"},
              (16, "int8"): {"s32"}, (32, "int8"): {"s32"}, (32, "fp8"): {"f32"}}
_FAMILY = {"f16": "f16", "bf16": "bf16", "s8": "int8", "u8": "int8", "e4m3": "fp8", "e5m2": "fp8"}
MATRIX_FORMS = ("mma.sync.aligned.m16n8k{8,16}.row.col with f16 (f16 or f32 accumulators) or bf16; m16n8k{16,32} with "
                "s8/u8 (.satfinite too); m16n8k32 with e4m3/e5m2; ldmatrix and stmatrix .m8n8.x{1,2,4}{.trans}.b16")


def _register_list(text: str, count: int, template: str, line: int, ops: list[str]) -> list[str]:
    regs = [r for r in (x.strip() for x in text.split(",")) if r]
    if len(regs) != count:
        raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}): a register list of {len(regs)} where "
                                         f"the instruction takes {count}")
    return [_ptx_operand(r, ops, template, line) for r in regs]


def _address(text: str, ops: list[str], template: str, line: int) -> str:
    parts = re.fullmatch(r"\s*(%\d+)\s*(?:([+-])\s*(\d+|0[xX][0-9a-fA-F]+))?\s*", text)
    if not parts:
        raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}): address [{text}] is not [%N] or "
                                         "[%N+offset]")
    base = f"(unsigned long long){_ptx_operand(parts.group(1), ops, template, line)}"
    return f"({base} {parts.group(2)} {parts.group(3)})" if parts.group(2) else base


# One-operand float math and the 16-bit packing conversions (emu_device.hpp, ptx_math / ptx_pack16).
_PTX_MATH = re.compile(r"(ex2|lg2|sin|cos|tanh|rsqrt|rcp|sqrt)\.(approx|rn)(\.ftz)?\.f32\s+([^,;\s]+)\s*,\s*([^,;\s]+)\s*;?")
_PTX_MATH_MODES = {"ex2": {"approx"}, "lg2": {"approx"}, "sin": {"approx"}, "cos": {"approx"}, "tanh": {"approx"},
                   "rsqrt": {"approx"}, "rcp": {"approx", "rn"}, "sqrt": {"approx", "rn"}}
_PTX_PACK = re.compile(r"cvt\.rn(\.relu)?\.(f16x2|bf16x2)\.f32\s+([^,;\s]+)\s*,\s*([^,;\s]+)\s*,\s*([^,;\s]+)\s*;?")
MATH_FORMS = ("ex2/lg2/sin/cos/rsqrt.approx{.ftz}.f32, tanh.approx.f32, rcp/sqrt.{approx,rn}{.ftz}.f32, "
              "cvt.rn{.relu}.{f16x2,bf16x2}.f32")


def _math_call(template: str, ops: list[str], line: int) -> "str | None":
    """The statement an inline one-operand f32 math instruction or 16-bit pack becomes, or None."""
    m = _PTX_MATH.fullmatch(template)
    if m:
        op, mode, ftz = m.group(1), m.group(2), bool(m.group(3))
        if mode not in _PTX_MATH_MODES[op] or (op == "tanh" and ftz):
            raise UnsupportedConstruct(None, f"inline PTX {template.split()[0]!r} (line {line}) is not a form PTX "
                                             f"defines; emu runs {MATH_FORMS}")
        d, a = (_ptx_operand(x, ops, template, line) for x in m.group(4, 5))
        return (f"::emu::set_reg({d}, ::emu::ptx_math(::emu::PM_{op.upper()}, ::emu::reg_bits({a}), "
                f"{str(ftz).lower()}))")
    m = _PTX_PACK.fullmatch(template)
    if m:
        d, a, b = (_ptx_operand(x, ops, template, line) for x in m.group(3, 4, 5))
        fmt = "HalfBits" if m.group(2) == "f16x2" else "Bf16Bits"
        return (f"::emu::set_reg({d}, ::emu::ptx_pack16<::emu::{fmt}>(::emu::reg_bits({a}), ::emu::reg_bits({b}), "
                f"{str(bool(m.group(1))).lower()}))")
    return None


def _matrix_call(template: str, ops: list[str], line: int) -> "str | None":
    """The statement an inline mma.sync, ldmatrix or stmatrix becomes, or None where the template is none."""
    m = _MMA.fullmatch(template)
    if m:
        k, sat, td, ta, tb, tc = int(m.group(1)), bool(m.group(2)), *m.group(3, 4, 5, 6)
        family = _FAMILY.get(ta)
        accumulators = _MMA_FORMS.get((k, family), set())
        if (family is None or _FAMILY.get(tb) != family or (family in ("f16", "bf16") and ta != tb)
                or td not in accumulators or tc not in accumulators or (sat and family != "int8")):
            raise UnsupportedConstruct(None, f"inline PTX {template.split()[0]!r} (line {line}) is not a form emu "
                                             f"runs; it runs {MATRIX_FORMS}")
        per = 4 if family in ("int8", "fp8") else 2
        nd = 2 if td == "f16" else 4
        nc = 2 if tc == "f16" else 4
        d = _register_list(m.group(7), nd, template, line, ops)
        regs = (_register_list(m.group(8), k // (2 * per), template, line, ops)
                + _register_list(m.group(9), k // (4 * per), template, line, ops)
                + _register_list(m.group(10), nc, template, line, ops))
        code = (f"::emu::matrix_code(::emu::{_MMA_TYPES[ta]}, ::emu::{_MMA_TYPES[tb]}, ::emu::{_MMA_TYPES[tc]}, "
                f"::emu::{_MMA_TYPES[td]}, {k}, {str(sat).lower()})")
        ins = ", ".join(f"::emu::reg_bits({r})" for r in regs)
        sets = " ".join(f"::emu::set_reg({r}, __emu_out[{i}]);" for i, r in enumerate(d))
        return (f"do {{ const uint32_t __emu_in[] = {{{ins}}}; uint32_t __emu_out[4]; ::emu::matrix_collective("
                f"::emu::W_MMA, {code}, __emu_in, {len(regs)}, __emu_out, {nd}, {line}); {sets} }} while (0)")
    m = _MATRIX_MOVE.fullmatch(template)
    if not m:
        return None
    op, num, trans, shared = m.group(1), int(m.group(2)), bool(m.group(3)), bool(m.group(4))
    flags = f"{num}, {str(trans).lower()}, {str(shared).lower()}"
    if op == "ldmatrix":
        d = _register_list(m.group(5), num, template, line, ops)
        sets = " ".join(f"::emu::set_reg({r}, __emu_out[{i}]);" for i, r in enumerate(d))
        return (f"do {{ uint32_t __emu_out[4]; ::emu::ldmatrix({flags}, {_address(m.group(6), ops, template, line)}, "
                f"__emu_out, {line}); {sets} }} while (0)")
    regs = _register_list(m.group(8), num, template, line, ops)
    ins = ", ".join(f"::emu::reg_bits({r})" for r in regs)
    return (f"do {{ const uint32_t __emu_in[] = {{{ins}}}; ::emu::stmatrix({flags}, "
            f"{_address(m.group(7), ops, template, line)}, __emu_in, {line}); }} while (0)")


def _rewrite_asm(clean: str) -> str:
    out, pos = [], 0
    for m in _ASM.finditer(clean):
        if m.start() < pos:
            continue
        open_paren = m.end() - 1
        close = _matching(clean, open_paren)
        body = clean[open_paren + 1:close]
        line = _line_of(clean, m.start())
        sections = split_top_level(body, ":")
        template = _asm_template(sections[0]).strip()
        instr = template.split()[0] if template.split() else "(empty asm)"
        special = _SPECIAL_MOVE.fullmatch(template)
        if special and special.group(2) in SPECIAL_REGISTERS:
            ops = _operands(sections[1] if len(sections) > 1 else "")
            if int(special.group(1)) >= len(ops):
                raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}) names operand "
                                                 f"%{special.group(1)}, which it does not have")
            value = SPECIAL_REGISTERS[special.group(2)]
            out.append(clean[pos:m.start()])
            out.append(f"(({ops[int(special.group(1))]}) = (unsigned)({value}))"
                       + "\n" * clean.count("\n", m.start(), close + 1))
            pos = close + 1
            continue
        if instr.startswith("cp.async"):
            call = _cp_async(template, _operands(sections[1] if len(sections) > 1 else "")
                             + _operands(sections[2] if len(sections) > 2 else ""), line)
            if call is None:
                raise UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}) is not supported by emu; "
                                                 "one cp.async copy, cp.async.commit_group, cp.async.wait_group or "
                                                 "cp.async.wait_all per asm statement is")
            out.append(clean[pos:m.start()])
            out.append(call + "\n" * clean.count("\n", m.start(), close + 1))
            pos = close + 1
            continue
        ops = _operands(sections[1] if len(sections) > 1 else "") + _operands(sections[2] if len(sections) > 2 else "")
        call = _matrix_call(template, ops, line) or _math_call(template, ops, line)
        if call is None:
            raise UnsupportedConstruct(None, f"inline PTX instruction {instr!r} (line {line}) is not supported by emu; "
                                             f"emulated are {MATRIX_FORMS}; {MATH_FORMS}; cp.async; and moves from the "
                                             f"special registers {', '.join('%' + r for r in SPECIAL_REGISTERS)}")
        out.append(clean[pos:m.start()])
        out.append(call + "\n" * clean.count("\n", m.start(), close + 1))
        pos = close + 1
    out.append(clean[pos:])
    return "".join(out)


# ---- __shared__ declarations -------------------------------------------------------------------------------
_SHARED = re.compile(r"(\bextern\s+)?\b__shared__\b")
_ALIGN = re.compile(r"__align__\s*\(\s*\d+\s*\)|__attribute__\s*\(\(\s*aligned\s*\(\s*\d+\s*\)\s*\)\)")
_DECLARATOR = re.compile(r"^\s*(\**)\s*([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", re.S)


def _rewrite_shared(clean: str) -> tuple[str, list[tuple[str, int]]]:
    out, pos, slot, names, file_scope = [], 0, 0, [], []
    depth = _BraceDepth(clean)
    for m in _SHARED.finditer(clean):
        if m.start() < pos:
            continue
        line = _line_of(clean, m.start())
        semi = clean.find(";", m.end())
        if semi < 0:
            raise UnsupportedConstruct(None, f"__shared__ declaration without ';' (line {line})")
        at_file_scope = depth.at(m.start()) == 0
        decl = _ALIGN.sub(" ", clean[m.end():semi])
        # An initializer (`= ...`, or `(...)` outside the array bounds, which may hold parentheses): CUDA forbids
        # one on a __shared__ variable, and nvcc refuses it.
        if "=" in decl or "(" in re.sub(r"\[[^\]]*\]", "[]", decl):
            raise UnsupportedConstruct(None, f"__shared__ declaration with an initializer (line {line}): CUDA "
                                             "allows none on a __shared__ variable")
        # The type may come before the keyword: `extern float __shared__ s[];`, `volatile int __shared__ x;`.
        start = max(clean.rfind(c, 0, m.start()) for c in ";{}\n") + 1
        prefix = _ALIGN.sub(" ", clean[start:m.start()])
        extern = bool(m.group(1)) or re.search(r"\bextern\b", prefix) is not None
        prefix_type = re.sub(r"\b(?:extern|static)\b", " ", prefix).strip()
        if not re.search(r"\b(?!volatile\b|const\b)[A-Za-z_]\w*", prefix_type):
            start, prefix_type = m.start(), ""      # qualifiers only (`volatile __shared__ float v;`): they stay
        pieces = split_top_level(decl, ",")
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
            stars, name, dims = dm.group(1), dm.group(2), re.sub(r"\s+", "", dm.group(3))
            if extern:       # the dynamic shared area sized at launch
                if not re.fullmatch(r"\[\]", dims) or stars:
                    raise UnsupportedConstruct(None, f"extern __shared__ {name}{dims} (line {line}); emu expects "
                                                     "`extern __shared__ T name[];`")
                stmts.append((name, f"{base_type}* const {name} = reinterpret_cast<{base_type}*>("
                                    f"::emu::dyn_shared(\"{name}\", int(sizeof({base_type}))));"))
            else:
                if "[]" in dims:
                    raise UnsupportedConstruct(None, f"__shared__ {name}[] without a size (line {line})")
                bounds = "".join(f"[{d}]" if re.fullmatch(r"\w+", d) else f"[({d})]"      # `[N >> 1]`: inside a
                                 for d in re.findall(r"\[([^\]]*)\]", dims))               # template argument
                stmts.append((name, f"auto& {name} = ::emu::shared_var<{base_type}{stars}{bounds}>({slot}, \"{name}\", {line});"))
                names.append((name, line))
                slot += 1
        start = max(start, pos)
        out.append(clean[pos:start])
        if at_file_scope:     # declared in each function that names it (below); the same slot: one per block
            file_scope += stmts
            out.append("\n" * clean.count("\n", start, semi + 1))
        else:
            out.append(" ".join(s for _, s in stmts) + "\n" * clean.count("\n", start, semi + 1))
        pos = semi + 1
    out.append(clean[pos:])
    if slot > 512:
        raise UnsupportedConstruct(None, f"{slot} __shared__ declarations; emu supports at most 512 per source")
    text = "".join(out)
    for name, _ in file_scope:     # each function declares the slot under its plain name; `ns::name` finds nothing
        qualified = re.search(rf"::\s*{re.escape(name)}\b", text)
        if qualified:
            raise UnsupportedConstruct(None, f"__shared__ '{name}' of a namespace, named with its namespace (line "
                                             f"{_line_of(text, qualified.start())}): emu reaches a namespace-scope "
                                             "__shared__ variable by its plain name only")
    text = "".join(out)
    return (_declare_in_functions(text, file_scope) if file_scope else text), names


def _declare_in_functions(text: str, variables: list[tuple[str, str]]) -> str:
    """`text` with each file-scope __shared__ variable (name, its declaration as a local reference) declared at
    the top of every function body at file scope that names it: every kernel and device function of a block
    then reaches the block's one slot. A body is a top-level `{` right after a `)` (a parameter list); a
    parameter of the same name hides the variable, as in C++."""
    out, pos, i = [], 0, 0
    depth = _BraceDepth(text)
    while (i := text.find("(", i)) >= 0:
        if depth.at(i) != 0:           # inside a body already handled or a struct: its parentheses are not lists
            i += 1
            continue
        close = _matching(text, i)
        brace = len(text) - len(text[close + 1:].lstrip())
        if not text.startswith("{", brace):      # a call, an attribute (`__launch_bounds__(256)`), a prototype
            i = close + 1
            continue
        end = _matching(text, brace)
        params, body = text[i:close], text[brace:end + 1]
        used = [decl for name, decl in variables
                if re.search(r"(?<![.\w>])" + re.escape(name) + r"\b", body) and not re.search(rf"\b{name}\b", params)]
        if used:
            out += [text[pos:brace + 1], " ", " ".join(used), " "]
            pos = brace + 1
        i = end + 1
    out.append(text[pos:])
    return "".join(out)


# ---- module symbols: file-scope __device__ / __constant__ variables --------------------------------------
_SYMBOL_DECL = re.compile(r"(?:^|(?<=[;}]))\s*((?:(?:static|extern|const|volatile|__device__|__constant__|__managed__)\s+)*"
                          r"(?:__device__|__constant__)\b[^;{]*)", re.M)


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
    depth = _BraceDepth(clean)
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
                stop = _matching(clean, stop) + 1 if clean[stop] == "{" else stop + 1
            decl = clean[m.start(1):stop]
        parts = split_top_level(decl, ",")
        first = _declarator_name(re.sub(r"\b(?:static|extern|const|volatile|__device__|__constant__)\b", " ",
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


# ---- trampolines ------------------------------------------------------------------------------------------
def _table(kernels: list[KernelSignature], symbols: list[str]) -> str:
    # Kernel names are qualified: inside namespace emu an unqualified name could find a runtime function.
    rows = ",\n".join(f'  {{"{k.name}", &::emu::thunk<::emu::kernel_fn(&::{k.scope}{k.name})>, '
                      f"::emu::arity(&::{k.scope}{k.name}), ::emu::param_sizes(&::{k.scope}{k.name})}}" for k in kernels)
    n = len(kernels)
    # A const symbol may sit in read-only memory: listed as not writable, so the host never sets it.
    syms = ",\n".join(f'  {{"{v}", (void*)(&::{v}), sizeof(::{v}), '
                       f"!std::is_const<std::remove_all_extents<decltype(::{v})>::type>::value}}" for v in symbols)
    return f"""
#line 1 "<emu-trampolines>"
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


def rewrite(code: str, filename: str = "kernel.cu", defines: "dict[str, str] | None" = None) -> Rewritten:
    """The emu translation unit for CUDA source `code` (raises UnsupportedConstruct); `defines`: the macros the
    build's flags define, with which a kernel's parameter list is read where it has conditionals."""
    clean = strip_comments(code)
    check_unsupported(clean)
    try:
        kernels = kernel_signatures(code, defines=defines)
    except ValueError as exc:
        raise UnsupportedConstruct(None, f"kernel signature: {exc}") from None
    if not kernels:
        templates = template_kernels(code)
        if templates:
            raise UnsupportedConstruct(None, f"template kernel(s) {', '.join(templates)} with no explicit "
                                             f"instantiation (`template __global__ void {templates[0]}<...>(...);`): "
                                             "emu launches the instantiations a source makes")
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
            raise UnsupportedConstruct(None, f"overloaded kernel name {k.name!r} (lines {seen[k.name]} and {k.line})")
        seen[k.name] = k.line
    body = _rewrite_asm(clean)
    body, shared = _rewrite_shared(body)
    symbols = device_symbols(as_built(body, defines or {}))   # a variable in a dropped branch does not exist
    safe = re.sub(r'[^A-Za-z0-9_.-]', "_", filename)
    tu = f'#line 1 "{safe}"\n{body}\n{_table(kernels, symbols)}'
    return Rewritten(tu, kernels, shared, symbols)
