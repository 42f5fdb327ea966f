"""Inline PTX of CUDA C device source as C++ for the emu runtime (g++ cannot assemble PTX).

An `asm(...)` statement's template is read instruction by instruction: `{ }` scopes, `.reg` declarations (local
variables), `@p` / `@!p` guards, and each instruction translated to a statement over the asm's operands (%N) and
the locals. Instructions emu runs (docs/KERNELS.md, "Inline PTX"):
  * the warp collectives: tensor-core mma.sync, ldmatrix, stmatrix, movmatrix, shfl.sync, vote.sync, bar.warp.sync;
  * cp.async and its group commit and waits, as the __pipeline_* primitives;
  * scalar PTX: mov (special registers, packing), cvt, cvta, integer and float arithmetic, logic, shifts,
    bit-field and byte-permute instructions, lop3, setp/selp, ld/st (every state space, cache hints ignored,
    .volatile, .relaxed/.acquire/.release as atomics of their scope), atom/red, fence/membar;
  * barriers: bar/barrier .sync, .arrive and .red with an id and a thread count (named barriers), the mbarrier
    instructions and cp.async.mbarrier.arrive (emu_barrier.hpp);
  * labels and bra within one asm statement (a try_wait loop).
  * the f32 math approximations and the 16-bit packs (emu_device.hpp, ptx_math / ptx_pack16).
Anything else is UnsupportedConstruct naming the instruction, raised when a launch runs it (code a build never
runs, such as another architecture's path, costs nothing). Line numbers are kept (a replacement carries the newlines it removes).
"""
from __future__ import annotations

import re

from harness.backends.base import UnsupportedConstruct
from harness.backends.emu.source_text import line_of, matching
from cudasrc.signatures import in_directive, split_top_level

ASM = re.compile(r"\b(?:asm|__asm__|__asm)\s*(?:volatile\s*|__volatile__\s*)?\(")


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


# Reads of PTX special registers, as the CUDA expressions they equal.
_LINEAR_TID = "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"
_LANE = f"({_LINEAR_TID} & 31u)"
SPECIAL_REGISTERS = {
    "laneid": _LANE, "warpsize": "32u", "warpid": f"({_LINEAR_TID} / 32u)",
    "lanemask_eq": f"(1u << {_LANE})", "lanemask_lt": f"((1u << {_LANE}) - 1u)",
    "lanemask_le": f"((2u << {_LANE}) - 1u)", "lanemask_gt": f"(~((2u << {_LANE}) - 1u))",
    "lanemask_ge": f"(~((1u << {_LANE}) - 1u))",
    "clock": "((unsigned)::emu::clock_tick())", "clock64": "((unsigned long long)::emu::clock_tick())",
    "globaltimer": "((unsigned long long)::emu::clock_tick())",
    **{f"{reg}.{a}": f"{var}.{a}" for reg, var in (("tid", "threadIdx"), ("ntid", "blockDim"), ("ctaid", "blockIdx"),
                                                   ("nctaid", "gridDim")) for a in "xyz"},
}


def _fail(template: str, line: int, why: str) -> UnsupportedConstruct:
    return UnsupportedConstruct(None, f"inline PTX {template!r} (line {line}){'' if why.startswith(':') else ' '}{why}")


# ---- operands ---------------------------------------------------------------------------------------------
def _ptx_operand(text: str, ops: list[str], template: str, line: int) -> str:
    """An operand (%N or an integer immediate) as the C++ expression it stands for."""
    text = text.strip()
    if re.fullmatch(r"%\d+", text):
        k = int(text[1:])
        if k >= len(ops):
            raise _fail(template, line, f"names operand {text}, which it does not have")
        return f"({ops[k]})"
    if re.fullmatch(r"-?(?:\d+|0[xX][0-9a-fA-F]+)", text):
        return text
    raise _fail(template, line, f": operand {text!r} is neither %N nor an immediate")


def _register_list(text: str, count: int, template: str, line: int, ops: list[str]) -> list[str]:
    regs = [r for r in (x.strip() for x in text.split(",")) if r]
    if len(regs) != count:
        raise _fail(template, line, f": a register list of {len(regs)} where the instruction takes {count}")
    return [_ptx_operand(r, ops, template, line) for r in regs]


def _address(text: str, ops: list[str], template: str, line: int) -> str:
    parts = re.fullmatch(r"\s*(%\d+)\s*(?:([+-])\s*(\d+|0[xX][0-9a-fA-F]+))?\s*", text)
    if not parts:
        raise _fail(template, line, f": address [{text}] is not [%N] or [%N+offset]")
    base = f"(unsigned long long){_ptx_operand(parts.group(1), ops, template, line)}"
    return f"({base} {parts.group(2)} {parts.group(3)})" if parts.group(2) else base


# ---- cp.async ---------------------------------------------------------------------------------------------
# `cp.async.{ca,cg}.shared.global[.L2::...] [dst], [src], size[, src-size][, policy];` and its group commit and
# waits, as the __pipeline_* primitives (emu_device.hpp).
_CP_ASYNC_COPY = re.compile(r"cp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global((?:\.L2::\w+)*)\s+"
                            r"\[([^\]]+)\]\s*,\s*\[([^\]]+)\]\s*,\s*([^;]+?)\s*;?")
_CP_ASYNC_WAIT = re.compile(r"cp\.async\.wait_group\s+(%\d+|\d+)\s*;?")


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
        raise _fail(template, line, ": expected a copy size and an optional source size")
    src_size = operand(rest[1]) if len(rest) == 2 else "-1"
    return (f"::emu::cp_async({_address(m.group(2), ops, template, line)}, {_address(m.group(3), ops, template, line)}, "
            f"{operand(rest[0])}, (long long)({src_size}), {line})")


# ---- tensor-core instructions -----------------------------------------------------------------------------
_MMA = re.compile(r"mma\.sync\.aligned\.m16n8k(8|16|32)\.row\.col(\.satfinite)?\.(\w+)\.(\w+)\.(\w+)\.(\w+)\s+"
                  r"\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*,\s*\{([^{}]*)\}\s*;?")
# The qualifiers in any order: real code writes `.x4.m8n8` as well as the ISA's `.m8n8.x4`, and ptxas takes both.
_MATRIX_MOVE = re.compile(r"(ldmatrix|stmatrix)\.sync\.aligned((?:\.[\w:]+)+)\s+"
                          r"(?:\{([^{}]*)\}\s*,\s*\[([^\]]*)\]|\[([^\]]*)\]\s*,\s*\{([^{}]*)\})\s*;?")
# movmatrix: an 8x8 matrix of 16-bit elements, one row-pair word per lane as ldmatrix leaves it, transposed in place
_MOVMATRIX = re.compile(r"movmatrix\.sync\.aligned((?:\.[\w:]+)+)\s+([^,;\s]+)\s*,\s*([^,;\s]+)\s*;?")
_MMA_TYPES = {"s8": "MT_S8", "u8": "MT_U8", "f16": "MT_F16", "bf16": "MT_BF16", "e4m3": "MT_E4M3", "e5m2": "MT_E5M2",
              "s32": "MT_S32", "f32": "MT_F32"}
# (K, A/B type family) -> the accumulator types (C, D) PTX allows; A and B may mix within the int8 and fp8 families.
_MMA_FORMS = {(8, "f16"): {"f16", "f32"}, (16, "f16"): {"f16", "f32"}, (8, "bf16"): {"f32"}, (16, "bf16"): {"f32"},
              (16, "int8"): {"s32"}, (32, "int8"): {"s32"}, (32, "fp8"): {"f32"}}
_FAMILY = {"f16": "f16", "bf16": "bf16", "s8": "int8", "u8": "int8", "e4m3": "fp8", "e5m2": "fp8"}
MATRIX_FORMS = ("mma.sync.aligned.m16n8k{8,16}.row.col with f16 (f16 or f32 accumulators) or bf16; m16n8k{16,32} with "
                "s8/u8 (.satfinite too); m16n8k32 with e4m3/e5m2; ldmatrix and stmatrix .m8n8.x{1,2,4}{.trans}.b16; "
                "movmatrix.sync.aligned.m8n8.trans.b16")


def _matrix_call(template: str, ops: list[str], line: int) -> "str | None":
    """The statement an inline mma.sync, ldmatrix or stmatrix becomes, or None where the template is none."""
    m = _MMA.fullmatch(template)
    if m:
        k, sat, td, ta, tb, tc = int(m.group(1)), bool(m.group(2)), *m.group(3, 4, 5, 6)
        family = _FAMILY.get(ta)
        accumulators = _MMA_FORMS.get((k, family), set())
        if (family is None or _FAMILY.get(tb) != family or (family in ("f16", "bf16") and ta != tb)
                or td not in accumulators or tc not in accumulators or (sat and family != "int8")):
            raise _fail(template.split()[0], line, f"is not a form emu runs; it runs {MATRIX_FORMS}")
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
    m = _MOVMATRIX.fullmatch(template)
    if m:
        if sorted(m.group(1).split(".")[1:]) != ["b16", "m8n8", "trans"]:
            raise _fail(template.split()[0], line, f"is not a form emu runs; it runs {MATRIX_FORMS}")
        (d,) = _register_list(m.group(2), 1, template, line, ops)
        (a,) = _register_list(m.group(3), 1, template, line, ops)
        # lane j receives row j/4, columns 2(j%4) and 2(j%4)+1 of the transpose: elements (2(j%4), j/4) and
        # (2(j%4)+1, j/4) of the matrix, which lanes 8(j%4) + j/8 and 8(j%4) + 4 + j/8 hold, in the half (j/4)%2
        # of their word; two full-warp shuffles, so every lane must take part (.aligned)
        return (f"do {{ const uint32_t __emu_a = ::emu::reg_bits({a}); const int __emu_j = ::emu::g_cur->lane; "
                f"const uint32_t __emu_lo = ::emu::shfl(::emu::W_SHFL_IDX, 0xffffffffu, __emu_a, "
                f"8 * (__emu_j % 4) + __emu_j / 8, 32, {line}); "
                f"const uint32_t __emu_hi = ::emu::shfl(::emu::W_SHFL_IDX, 0xffffffffu, __emu_a, "
                f"8 * (__emu_j % 4) + 4 + __emu_j / 8, 32, {line}); const int __emu_s = 16 * (__emu_j / 4 % 2); "
                f"::emu::set_reg({d}, uint32_t((__emu_lo >> __emu_s) & 0xffffu) | uint32_t(((__emu_hi >> __emu_s) "
                f"& 0xffffu) << 16)); }} while (0)")
    m = _MATRIX_MOVE.fullmatch(template)
    if not m:
        return None
    op, quals = m.group(1), m.group(2).split(".")[1:]
    counts = [q for q in quals if q in ("x1", "x2", "x4")]
    known = {"m8n8", "b16", "trans", "shared", "shared::cta", "x1", "x2", "x4"}
    if len(counts) != 1 or "m8n8" not in quals or "b16" not in quals or not set(quals) <= known \
            or len(quals) != len(set(quals)):
        raise _fail(template.split()[0], line, f"is not a form emu runs; it runs {MATRIX_FORMS}")
    num, trans = int(counts[0][1]), "trans" in quals
    shared = "shared" in quals or "shared::cta" in quals
    flags = f"{num}, {str(trans).lower()}, {str(shared).lower()}"
    if op == "ldmatrix":
        if m.group(3) is None:
            raise _fail(template, line, ": ldmatrix takes {registers}, [address]")
        d = _register_list(m.group(3), num, template, line, ops)
        sets = " ".join(f"::emu::set_reg({r}, __emu_out[{i}]);" for i, r in enumerate(d))
        return (f"do {{ uint32_t __emu_out[4]; ::emu::ldmatrix({flags}, {_address(m.group(4), ops, template, line)}, "
                f"__emu_out, {line}); {sets} }} while (0)")
    if m.group(5) is None:
        raise _fail(template, line, ": stmatrix takes [address], {registers}")
    regs = _register_list(m.group(6), num, template, line, ops)
    ins = ", ".join(f"::emu::reg_bits({r})" for r in regs)
    return (f"do {{ const uint32_t __emu_in[] = {{{ins}}}; ::emu::stmatrix({flags}, "
            f"{_address(m.group(5), ops, template, line)}, __emu_in, {line}); }} while (0)")


# ---- f32 math approximations and 16-bit packs ------------------------------------------------------------
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
            raise _fail(template.split()[0], line, f"is not a form PTX defines; emu runs {MATH_FORMS}")
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


# ---- scalar PTX -------------------------------------------------------------------------------------------
_CTYPE = {"b8": "uint8_t", "u8": "uint8_t", "s8": "int8_t", "b16": "uint16_t", "u16": "uint16_t", "s16": "int16_t",
          "b32": "uint32_t", "u32": "uint32_t", "s32": "int32_t", "b64": "uint64_t", "u64": "uint64_t",
          "s64": "int64_t", "f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t",
          "f16x2": "uint32_t", "bf16x2": "uint32_t", "pred": "bool"}
_UNSIGNED = {"int8_t": "uint8_t", "int16_t": "uint16_t", "int32_t": "uint32_t", "int64_t": "uint64_t"}
_WIDER = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64", "b32": "b64", "b16": "b32"}
# cvt's type codes (emu::ptx::cvt) and rounding modifiers
_CVT_KIND = {"u8": 1, "u16": 2, "u32": 3, "u64": 4, "s8": 5, "s16": 6, "s32": 7, "s64": 8, "f16": 9, "bf16": 10,
             "f32": 11, "f64": 12, "b8": 1, "b16": 2, "b32": 3, "b64": 4}
_ROUND = {"rn": "kRoundNearest", "rz": "kRoundZero", "rm": "kRoundDown", "rp": "kRoundUp",
          "rni": "kRoundNearest", "rzi": "kRoundZero", "rmi": "kRoundDown", "rpi": "kRoundUp"}
_SCOPE = {"cta": "kScopeBlock", "gpu": "kScopeDevice", "sys": "kScopeDevice", "cluster": "kScopeDevice"}
_ORDER = {"relaxed": "kRelaxed", "acquire": "kAcquire", "release": "kRelease", "acq_rel": "kAcqRel"}
_SPACES = {"global", "shared", "shared::cta", "shared::cluster", "local", "const", "param", "generic"}
# what ld/st/atom may carry that changes nothing emu models (cache and eviction hints)
_HINT = re.compile(r"^(?:ca|cg|cs|lu|cv|wb|wt|nc|L1::\w+|L2::\w+|level::\w+|unified|mmio)$")
_NO_EFFECT = {"prefetch", "prefetchu", "griddepcontrol", "nanosleep", "pmevent", "applypriority", "discard"}
SCALAR_FORMS = ("mov, cvt, cvta, add/sub/mul/mad/div/rem/min/max/neg/abs, add/sub/mad with carry (.cc, addc, subc, "
                "madc), and/or/xor/not, shl/shr, popc/clz/brev/fns, "
                "bfe/bfi/prmt/lop3, set/setp/selp, ld/st/atom/red, fence/membar, bar/barrier.sync/arrive/red (named barriers), "
                "mbarrier, bra within the asm, bar.warp.sync, shfl.sync, "
                "vote.sync, activemask, createpolicy and the hints that change nothing here (prefetch, griddepcontrol)")
_MAX_INSTRUCTIONS = 400


class _Block:
    """One asm statement being translated: its operands (%N), its locals (.reg), the statements made."""

    def __init__(self, template: str, ops: list[str], line: int):
        self.template, self.ops, self.line = template, ops, line
        self.locals: dict[str, tuple[str, str]] = {}     # PTX name -> (C++ name, PTX type)
        self.decls: list[str] = []

    def fail(self, instr: str, why: str) -> UnsupportedConstruct:
        return UnsupportedConstruct(None, f"inline PTX {instr!r} (line {self.line}) {why}")

    def declare(self, text: str) -> None:
        m = re.fullmatch(r"\.reg\s+(?:\.v\d\s+)?\.(\w+)\s+(.+)", text, re.S)
        if not m or m.group(1) not in _CTYPE:
            raise self.fail(text, "declares registers emu does not model (a .reg of a PTX type it knows is needed)")
        ptype = m.group(1)
        for name in split_top_level(m.group(2), ","):
            name = name.strip()
            rng = re.fullmatch(r"(%?[A-Za-z_$][\w$]*)<(\d+)>", name)
            names = [f"{rng.group(1)}{k}" for k in range(int(rng.group(2)))] if rng else [name]
            for n in names:
                if not re.fullmatch(r"%?[A-Za-z_$][\w$]*", n):
                    raise self.fail(text, f"declares a register {n!r} emu cannot name")
                cpp = "__ptx_" + re.sub(r"[^\w]", "_", n.lstrip("%"))
                self.locals[n] = (cpp, ptype)
                self.decls.append(f"{_CTYPE[ptype]} {cpp} = 0;")

    def carry_flag(self) -> str:
        """The C++ name of the asm statement's condition code CC.CF (extended-precision add/sub/mad), declared once:
        PTX keeps it for straight-line code within one statement, so it starts at 0 in each."""
        if "unsigned __ptx_cc_cf = 0;" not in self.decls:
            self.decls.append("unsigned __ptx_cc_cf = 0;")
        return "__ptx_cc_cf"

    # -- operand expressions
    def _expr(self, op: str, instr: str) -> str:
        """The C++ lvalue or expression an operand names (%N, a local register, a special register)."""
        op = op.strip()
        if re.fullmatch(r"%\d+", op):
            k = int(op[1:])
            if k >= len(self.ops):
                raise self.fail(instr, f"names operand {op}, which the asm does not have")
            return f"({self.ops[k]})"
        name = op[1:] if op.startswith("%%") else op
        if name in self.locals:
            return self.locals[name][0]
        if "%" + name.lstrip("%") in self.locals:
            return self.locals["%" + name.lstrip("%")][0]
        special = name.lstrip("%")
        if op.startswith("%") and special in SPECIAL_REGISTERS:
            return SPECIAL_REGISTERS[special]
        raise self.fail(instr, f"names {op!r}, which is neither an operand (%N) nor a register it declares")

    def read(self, op: str, ctype: str, instr: str) -> str:
        op = op.strip()
        if op.startswith("!"):
            return f"(!{self.read(op[1:], 'bool', instr)})"
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", op):
            return f"::emu::ptx::rd<{ctype}>(__builtin_bit_cast(float, 0x{op[2:]}u))"
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", op):
            return f"::emu::ptx::rd<{ctype}>(__builtin_bit_cast(double, 0x{op[2:]}ull))"
        if re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?", op):
            return f"{ctype}({op.rstrip('uU')}ll)" if ctype != "bool" else f"bool({op.rstrip('uU')})"
        if re.fullmatch(r"-?\d+\.\d*(?:[eE][-+]?\d+)?", op):
            return f"{ctype}({op})"
        return f"::emu::ptx::rd<{ctype}>({self._expr(op, instr)})"

    def write(self, op: str, value: str, instr: str) -> str:
        op = op.strip()
        if op == "_":
            return f"(void)({value});"
        return f"::emu::ptx::wr({self._expr(op, instr)}, {value});"

    def address(self, op: str, space: str, instr: str) -> str:
        """A `char*` for `[x]`, `[x+imm]` or `[imm]`: a shared-space address for .shared, else a generic one."""
        m = re.fullmatch(r"\[\s*([^\]+-]+?)\s*(?:([+-])\s*(0[xX][0-9a-fA-F]+|\d+))?\s*\]", op.strip())
        if not m:
            raise self.fail(instr, f"has an address {op!r} emu does not read ([reg], [reg+imm] or [imm])")
        base = self.read(m.group(1), "uint64_t", instr)
        if space.startswith("shared"):
            base = f"reinterpret_cast<unsigned long long>(::emu::shared_generic({base}, {self.line}))"
        off = f" {m.group(2)} {m.group(3)}" if m.group(2) else ""
        return f"reinterpret_cast<char*>(({base}){off})"


def _split_instruction(text: str) -> tuple[str, list[str], list[str]]:
    """(opcode, modifiers, operands) of one instruction."""
    m = re.match(r"([A-Za-z_]\w*)((?:\.[\w:]+)*)\s*(.*)$", text, re.S)
    if not m:
        return text, [], []
    mods = [x for x in m.group(2).split(".") if x]
    rest = m.group(3).strip()
    return m.group(1), mods, [o.strip() for o in split_top_level(rest, ",")] if rest else []


def _cmp(op: str, a: str, b: str, floating: bool) -> str:
    base = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
            "lo": "<", "ls": "<=", "hi": ">", "hs": ">="}
    if op in base:
        if floating and op == "ne":           # ordered: false where either is NaN
            return f"(({a}) == ({a}) && ({b}) == ({b}) && ({a}) != ({b}))"
        return f"(({a}) {base[op]} ({b}))"
    if floating and op.endswith("u") and op[:-1] in base:    # unordered: also true where either is NaN
        return f"(!(({a}) == ({a}) && ({b}) == ({b})) || (({a}) {base[op[:-1]]} ({b})))"
    if floating and op == "num":
        return f"(({a}) == ({a}) && ({b}) == ({b}))"
    if floating and op == "nan":
        return f"(!(({a}) == ({a}) && ({b}) == ({b})))"
    raise ValueError(op)


def _extended(b: _Block, text: str, op: str, mods: list, args: list, ptype: str) -> str:
    """add.cc/addc, sub.cc/subc and mad{.lo,.hi}.cc/madc on 32- and 64-bit integers: extended-precision arithmetic
    through the carry flag CC.CF, which addc and madc add in and subc subtracts (PTX's borrow), `.cc` writing it."""
    if ptype not in ("u32", "s32", "u64", "s64", "b32", "b64"):
        raise b.fail(text, "is extended-precision arithmetic on a type PTX does not define it for (32- and 64-bit "
                           "integers)")
    bits = 64 if ptype.endswith("64") else 32
    ut, wide = ("uint64_t", "unsigned __int128") if bits == 64 else ("uint32_t", "uint64_t")
    cf = b.carry_flag()
    rd = lambda x: f"({wide})({ut}){b.read(x, _CTYPE[ptype], text)}"    # noqa: E731
    carry_in = f" {'-' if op == 'subc' else '+'} ({wide}){cf}" if op.endswith("c") else ""
    if op.startswith("mad"):
        if len(args) != 4 or not ({"lo", "hi"} & set(mods)):
            raise b.fail(text, "is a mad with carry emu does not read (.lo or .hi, 4 operands)")
        if "hi" in mods and ptype.startswith("s"):
            raise b.fail(text, "is a signed mad.hi with carry, which emu does not run")
        product = f"({rd(args[1])} * {rd(args[2])})"
        part = f"({wide})({ut})({product} >> {bits})" if "hi" in mods else f"({wide})({ut}){product}"
        total = f"({part} + {rd(args[3])}{carry_in})"
    else:
        if len(args) != 3:
            raise b.fail(text, "takes 3 operands here")
        sym = "-" if op.startswith("sub") else "+"
        total = f"({rd(args[1])} {sym} {rd(args[2])}{carry_in})"
    out = f"{{ {wide} __ptx_wide = {total}; "
    if "cc" in mods:        # the carry out of an add, the borrow out of a sub: bit `bits` of the wide result
        out += f"{cf} = (unsigned)((__ptx_wide >> {bits}) & 1u); "
    return out + b.write(args[0], f"({_CTYPE[ptype]})({ut})__ptx_wide", text) + " }"


_BOOL_OPS = {"and": "&&", "or": "||", "xor": "!="}


def _bool_op(mods: list) -> "str | None":
    """The BoolOp of a set or setp (`setp.lt.and.s32 p, a, b, q`), or None: after the comparison's modifier."""
    return next((m for m in mods[1:] if m in _BOOL_OPS), None)


def _combined(b: _Block, text: str, value: str, mods: list, args: list) -> str:
    """A comparison's `value` combined with the predicate operand c (`{!}c`, the last) by the BoolOp, if any."""
    op = _bool_op(mods)
    return f"({value} {_BOOL_OPS[op]} {b.read(args[-1], 'bool', text)})" if op else value


def _compared(b: _Block, text: str, cmp: "str | None", a: str, c: str, ptype: str) -> str:
    """The comparison `cmp` of the operands' expressions `a` and `c` of PTX type `ptype` (unsigned where the type
    or the comparison is: lo, ls, hi, hs)."""
    if ptype[0] in "ub" or cmp in ("lo", "ls", "hi", "hs"):
        ut = _UNSIGNED.get(_CTYPE[ptype], _CTYPE[ptype])
        a, c = f"({ut}){a}", f"({ut}){c}"
    try:
        return _cmp(cmp, a, c, ptype in ("f32", "f64"))
    except ValueError:
        raise b.fail(text, f"compares with {cmp!r}, which emu does not read") from None


def _set(b: _Block, text: str, mods: list, args: list) -> str:
    """set.CmpOp.dtype.stype: all ones (an integer dtype) or 1.0f (f32) where the comparison holds, else 0."""
    dtype, stype = mods[-2], mods[-1]
    cmp = next((m for m in mods[:-2] if m != "ftz"), None)
    if len(args) != (4 if _bool_op(mods) else 3) or cmp is None:
        raise b.fail(text, "is a set emu does not read (set.CmpOp{.BoolOp}.dtype.stype d, a, b{, c})")
    flush = "ftz" in mods and stype == "f32"
    a, c = (f"::emu::flush_subnormal({b.read(x, 'float', text)})" if flush else b.read(x, _CTYPE[stype], text)
            for x in args[1:3])
    value = _combined(b, text, _compared(b, text, cmp, a, c, stype), mods, args)
    dct = _CTYPE[dtype]
    result = f"({value} ? 1.0f : 0.0f)" if dtype == "f32" else f"({value} ? ({dct})~({dct})0 : ({dct})0)"
    return b.write(args[0], result, text)


def _scalar(b: _Block, text: str) -> str:
    """The C++ statement(s) of one scalar PTX instruction."""
    op, mods, args = _split_instruction(text)
    ptype = mods[-1] if mods and mods[-1] in _CTYPE else None
    ct = _CTYPE.get(ptype, "")
    floating = ptype in ("f32", "f64")
    f32 = ptype == "f32"
    rd = lambda x, t=None: b.read(x, t or ct, text)          # noqa: E731
    wr = lambda x, v: b.write(x, v, text)                     # noqa: E731
    mode = next((_ROUND[m] for m in mods if m in _ROUND), "kRoundNearest")

    def need(n: int) -> None:
        if len(args) != n:
            raise b.fail(text, f"takes {n} operands here, not {len(args)}")

    def flt(value: str) -> str:          # .ftz and .sat of a float result
        if "ftz" in mods and f32:
            value = f"::emu::flush_subnormal({value})"
        if "sat" in mods:
            value = f"::emu::ptx::saturate01({value})"
        return value

    def farg(x: str) -> str:
        v = rd(x)
        return f"::emu::flush_subnormal({v})" if "ftz" in mods and f32 else v

    if op in _NO_EFFECT:
        return ";"
    if op == "mov":
        need(2)
        d, a = args
        if a.startswith("{"):                                   # pack halves (low first)
            parts = [p.strip() for p in a.strip("{}").split(",")]
            half = {"b32": "uint16_t", "b64": "uint32_t", "b16": "uint8_t"}[ptype]
            width = {"b32": 16, "b64": 32, "b16": 8}[ptype]
            value = " | ".join(f"({ct})(({ct}){rd(p, half)} << {width * i})" for i, p in enumerate(parts))
            return wr(d, f"({ct})({value})")
        if d.startswith("{"):                                   # unpack
            parts = [p.strip() for p in d.strip("{}").split(",")]
            half = {"b32": "uint16_t", "b64": "uint32_t", "b16": "uint8_t"}[ptype]
            width = {"b32": 16, "b64": 32, "b16": 8}[ptype]
            src = rd(a)
            return " ".join(wr(p, f"({half})({src} >> {width * i})") for i, p in enumerate(parts) if p != "_")
        return wr(d, rd(a))
    if op == "cvt":
        need(2)
        types = [m for m in mods if m in _CVT_KIND]
        if len(types) != 2:
            raise b.fail(text, "is a cvt emu does not read (two of the integer, f16, bf16, f32, f64 types)")
        dt, at = types
        flags = ((1 if "ftz" in mods else 0) | (2 if "sat" in mods else 0) | (4 if "relu" in mods else 0)
                 | (8 if {"rni", "rzi", "rmi", "rpi"} & set(mods) else 0))
        src = f"::emu::ptx::bits_of({rd(args[1], _CTYPE[at])})"
        value = f"::emu::ptx::cvt({_CVT_KIND[dt]}, {_CVT_KIND[at]}, ::emu::{mode}, {flags}, {src})"
        return wr(args[0], f"({_CTYPE[dt]})::emu::ptx::from_bits<{_CTYPE[dt]}>({value})")
    if op == "cvta":
        need(2)
        src = rd(args[1], "uint64_t")
        if "to" in mods and "shared" in mods:
            return wr(args[0], f"(uint64_t)::emu::shared_window(reinterpret_cast<void*>({src}), {b.line})")
        if "shared" in mods:
            return wr(args[0], f"(uint64_t)reinterpret_cast<uintptr_t>(::emu::shared_generic({src}, {b.line}))")
        if "global" in mods:
            return wr(args[0], src)
        raise b.fail(text, "converts to or from a state space emu does not model (shared and global it does)")
    if (op in ("addc", "subc", "madc") or "cc" in mods and op in ("add", "sub", "mad")) and ptype:
        return _extended(b, text, op, mods, args, ptype)
    if op == "set" and len(mods) >= 3 and mods[-1] in _CTYPE and mods[-2] in _CTYPE:
        return _set(b, text, mods, args)
    if op in ("add", "sub", "mul", "mad", "fma", "div", "rem", "min", "max") and ptype:
        if floating:
            fn = {"add": "add", "sub": "add", "mul": "mul", "mad": "fma", "fma": "fma", "div": "div"}.get(op)
            p = "f" if f32 else "d"
            if op in ("min", "max"):
                need(3)
                return wr(args[0], flt(f"std::f{op}({farg(args[1])}, {farg(args[2])})"))
            if fn is None:
                raise b.fail(text, "is not a float instruction PTX defines")
            if op == "div" and "approx" in mods or op == "div" and "full" in mods:
                need(3)
                return wr(args[0], flt(f"({farg(args[1])} / {farg(args[2])})"))
            if fn == "fma":
                need(4)
                return wr(args[0], flt(f"::emu::{p}fma({farg(args[1])}, {farg(args[2])}, {farg(args[3])}, ::emu::{mode})"))
            need(3)
            second = f"-{farg(args[2])}" if op == "sub" else farg(args[2])
            return wr(args[0], flt(f"::emu::{p}{fn}({farg(args[1])}, {second}, ::emu::{mode})"))
        if ptype in ("f16", "bf16", "f16x2", "bf16x2"):
            raise b.fail(text, "is 16-bit float arithmetic in PTX, which emu does not run (cuda_fp16.h's functions it does)")
        ut = _UNSIGNED.get(ct, ct)
        wide = "wide" in mods
        if wide and ptype in _WIDER:
            wt = _CTYPE[_WIDER[ptype]]
            wut = _UNSIGNED.get(wt, wt)
            if op == "mul":
                need(3)
                return wr(args[0], f"({wt})(({wut})({wt}){rd(args[1])} * ({wut})({wt}){rd(args[2])})")
            if op == "mad":
                need(4)
                return wr(args[0], f"({wt})(({wut})({wt}){rd(args[1])} * ({wut})({wt}){rd(args[2])} + "
                                   f"({wut}){rd(args[3], wt)})")
        if op in ("mul", "mad") and "hi" in mods:
            prod = f"::emu::ptx::mul_hi<{ct}>({rd(args[1])}, {rd(args[2])})"
            if op == "mul":
                need(3)
                return wr(args[0], prod)
            need(4)
            return wr(args[0], f"({ct})(({ut}){prod} + ({ut}){rd(args[3])})")
        if op in ("add", "sub") and "sat" in mods and ptype == "s32":
            need(3)
            sign = "+" if op == "add" else "-"
            return wr(args[0], f"(int32_t)std::min<int64_t>(INT32_MAX, std::max<int64_t>(INT32_MIN, "
                               f"(int64_t){rd(args[1])} {sign} (int64_t){rd(args[2])}))")
        if op in ("add", "sub", "mul"):
            need(3)
            sym = {"add": "+", "sub": "-", "mul": "*"}[op]
            return wr(args[0], f"({ct})(({ut}){rd(args[1])} {sym} ({ut}){rd(args[2])})")
        if op == "mad":
            need(4)
            return wr(args[0], f"({ct})(({ut}){rd(args[1])} * ({ut}){rd(args[2])} + ({ut}){rd(args[3])})")
        if op in ("div", "rem"):
            need(3)
            return wr(args[0], f"::emu::ptx::{op}<{ct}>({rd(args[1])}, {rd(args[2])})")
        need(3)
        return wr(args[0], f"std::{op}<{ct}>({rd(args[1])}, {rd(args[2])})")
    if op in ("neg", "abs") and ptype:
        need(2)
        if floating:
            return wr(args[0], flt(f"{'-' if op == 'neg' else 'std::fabs'}({farg(args[1])})"))
        ut = _UNSIGNED.get(ct, ct)
        if op == "neg":
            return wr(args[0], f"({ct})(({ut})0 - ({ut}){rd(args[1])})")
        return wr(args[0], f"({ct})({rd(args[1])} < 0 ? ({ut})0 - ({ut}){rd(args[1])} : ({ut}){rd(args[1])})")
    if op in ("and", "or", "xor", "not") and ptype:
        # predicates with C++'s logical operators, integers with its bitwise ones
        sym = ({"and": "&&", "or": "||", "xor": "!=", "not": "!"} if ptype == "pred" else
               {"and": "&", "or": "|", "xor": "^", "not": "~"})[op]
        if op == "not":
            need(2)
            return wr(args[0], f"({ct}){sym}{rd(args[1])}")
        need(3)
        return wr(args[0], f"({ct})({rd(args[1])} {sym} {rd(args[2])})")
    if op in ("shl", "shr") and ptype:
        need(3)
        return wr(args[0], f"::emu::ptx::{op}<{ct}>({rd(args[1])}, {rd(args[2], 'uint32_t')})")
    if op in ("popc", "clz") and ptype:
        need(2)
        return wr(args[0], f"(uint32_t)::emu::ptx::{op}<{ct}>({rd(args[1])})")
    if op == "fns":
        need(4)
        return wr(args[0], f"::__fns({rd(args[1], 'uint32_t')}, {rd(args[2], 'uint32_t')}, {rd(args[3], 'int32_t')})")
    if op == "brev" and ptype:
        need(2)
        return wr(args[0], f"::emu::ptx::brev<{ct}>({rd(args[1])})")
    if op == "bfe" and ptype:
        need(4)
        return wr(args[0], f"::emu::ptx::bfe<{ct}>({rd(args[1])}, {rd(args[2], 'uint32_t')}, {rd(args[3], 'uint32_t')})")
    if op == "bfi" and ptype:
        need(5)
        return wr(args[0], f"::emu::ptx::bfi<{ct}>({rd(args[1])}, {rd(args[2])}, {rd(args[3], 'uint32_t')}, "
                           f"{rd(args[4], 'uint32_t')})")
    if op == "prmt":
        if len(mods) != 1:
            raise b.fail(text, "is a prmt mode emu does not run (the default byte selection it does)")
        need(4)
        return wr(args[0], f"::emu::ptx::prmt({rd(args[1], 'uint32_t')}, {rd(args[2], 'uint32_t')}, "
                           f"{rd(args[3], 'uint32_t')})")
    if op == "lop3":
        need(5)
        return wr(args[0], f"::emu::ptx::lop3({rd(args[1], 'uint32_t')}, {rd(args[2], 'uint32_t')}, "
                           f"{rd(args[3], 'uint32_t')}, {rd(args[4], 'uint32_t')})")
    if op == "setp" and ptype:
        need(4 if _bool_op(mods) else 3)
        cmp = next((m for m in mods if m not in (ptype, "ftz")), None)
        a, c = (farg(x) if floating else rd(x) for x in args[1:3])
        value = _compared(b, text, cmp, a, c, ptype)
        dests = args[0].split("|")      # p = BoolOp(cmp, c) and q = BoolOp(!cmp, c)
        out = wr(dests[0], _combined(b, text, value, mods, args))
        if len(dests) == 2:
            out += " " + wr(dests[1], _combined(b, text, f"(!{value})", mods, args))
        return out
    if op == "selp" and ptype:
        need(4)
        return wr(args[0], f"({rd(args[3], 'bool')} ? {rd(args[1])} : {rd(args[2])})")
    if op in ("ld", "ldu", "st"):
        return _memory(b, text, op, mods, args, ct, ptype)
    if op in ("atom", "red"):
        return _atomic(b, text, op, mods, args, ct, ptype)
    if op in ("fence", "membar"):
        if "proxy" in mods or "op_restrict" in mods or "sync_restrict" in mods or "mbarrier_init" in mods:
            raise b.fail(text, "is a proxy fence, which only asynchronous proxies (TMA, wgmma) need; emu has none")
        scope = "kScopeBlock" if "cta" in mods else "kScopeDevice"
        return f"::emu::fence(::emu::{scope});"
    if op in ("bar", "barrier"):
        if "warp" in mods:
            need(1)
            return f"::emu::syncwarp({rd(args[0], 'uint32_t')}, {b.line});"
        kinds = [m for m in mods if m not in ("cta", "aligned")]
        if kinds in (["red", "popc", "u32"], ["red", "and", "pred"], ["red", "or", "pred"]):
            if not 3 <= len(args) <= 4:
                raise b.fail(text, "needs a destination, a barrier id, an optional thread count and a predicate")
            count = rd(args[2], "uint32_t") if len(args) == 4 else "0u"
            op = {"popc": "kBarPopc", "and": "kBarAnd", "or": "kBarOr"}[kinds[1]]
            value = (f"::emu::barrier_reduce({rd(args[1], 'uint32_t')}, {count}, ::emu::{op}, "
                     f"{rd(args[-1], 'bool')}, {b.line})")
            return wr(args[0], value if kinds[1] == "popc" else f"({value} != 0)")
        if kinds not in ([], ["sync"], ["arrive"]) or not 1 <= len(args) <= 2:
            raise b.fail(text, "is a barrier form emu does not run (bar/barrier .sync, .arrive and .red (popc.u32, "
                               "and.pred, or.pred), with a barrier id and an optional thread count, it does)")
        if kinds != ["arrive"] and len(args) == 1 and args[0].strip() == "0":
            return f"::emu::syncthreads({b.line});"
        count = rd(args[1], "uint32_t") if len(args) == 2 else "0u"
        return (f"::emu::named_barrier({rd(args[0], 'uint32_t')}, {count}, {'false' if kinds == ['arrive'] else 'true'}, "
                f"{b.line});")
    if op == "mbarrier":
        return _mbarrier(b, text, mods, args)
    if op == "shfl" and "sync" in mods:
        need(5)
        kinds = {"idx": "W_SHFL_IDX", "up": "W_SHFL_UP", "down": "W_SHFL_DOWN", "bfly": "W_SHFL_XOR"}
        kind = next((kinds[m] for m in mods if m in kinds), None)
        if kind is None:
            raise b.fail(text, "is a shfl.sync form emu does not run (idx/up/down/bfly.b32, with or without a "
                               "predicate output, it does)")
        dest, _, pred = args[0].partition("|")
        # bit 16 of c asks the runtime for the predicate too (bit 32 of the result); PTX's c uses bits 12:0
        call = (f"::emu::warp_collective(::emu::{kind}, {rd(args[4], 'uint32_t')}, {b.line}, "
                f"{rd(args[1], 'uint32_t')}, (int){rd(args[2], 'uint32_t')}, "
                f"(int)({rd(args[3], 'uint32_t')}{' | 0x10000u' if pred else ''}))")
        if not pred:
            return wr(dest, f"(uint32_t){call}")
        return (f"{{ uint64_t __ptx_shfl = {call}; {wr(dest, '(uint32_t)__ptx_shfl')} "
                f"{wr(pred, 'bool(__ptx_shfl >> 32)')} }}")
    if op == "vote" and "sync" in mods:
        need(3)
        kinds = {"ballot": "W_BALLOT", "any": "W_ANY", "all": "W_ALL"}
        kind = next((kinds[m] for m in mods if m in kinds), None)
        if kind is None:
            raise b.fail(text, "is a vote.sync form emu does not run (ballot, any, all it does)")
        value = f"::emu::vote(::emu::{kind}, {rd(args[2], 'uint32_t')}, {rd(args[1], 'bool')}, {b.line})"
        return wr(args[0], value if kind == "W_BALLOT" else f"({value} != 0)")
    if op == "activemask":
        need(1)
        return wr(args[0], f"::emu::converged({b.line})")
    if op == "createpolicy":
        return wr(args[0], "(uint64_t)0")       # a cache policy: a hint, no value emu uses
    raise b.fail(text, f"is not supported by emu; emulated are {MATRIX_FORMS}; {MATH_FORMS}; cp.async; and scalar "
                       f"{SCALAR_FORMS}")


def _mbarrier(b: _Block, text: str, mods: list[str], args: list[str]) -> str:
    """mbarrier.init/inval/arrive/arrive_drop/test_wait/try_wait(.parity)/pending_count on emu's arrive-wait
    barriers (emu_barrier.hpp). try_wait does not suspend: it tests once, and the kernel's loop around it spins."""
    form, rest = mods[0] if mods else "", mods[1:]
    scope = next((_SCOPE[m] for m in rest if m in _SCOPE), "kScopeBlock")
    for m in rest:
        if m in ("expect_tx", "complete_tx", "noComplete") or m.startswith("shared::cluster"):
            raise b.fail(text, "counts TMA transactions or reaches another block of the cluster (expect_tx, "
                               "complete_tx, noComplete, shared::cluster); emu has no tensor memory accelerator")
        if m not in ("shared", "shared::cta", "b64", "parity", "release", "acquire", "relaxed", "cta", "cluster"):
            raise b.fail(text, f"carries .{m}, which emu does not model")
    space = "shared" if any(m.startswith("shared") for m in rest) else "generic"
    bar = lambda op: f"reinterpret_cast<uint64_t*>({b.address(op, space, text)})"     # noqa: E731
    rd = lambda x, t: b.read(x, t, text)                                               # noqa: E731
    line = b.line
    if form == "init" and len(args) == 2:
        return f"::emu::mbarrier_init({bar(args[0])}, {rd(args[1], 'uint32_t')}, {line});"
    if form == "inval" and len(args) == 1:
        return f"::emu::mbarrier_inval({bar(args[0])});"
    if form in ("arrive", "arrive_drop") and len(args) in (2, 3):
        count = rd(args[2], "uint32_t") if len(args) == 3 else "1u"
        call = (f"::emu::mbarrier_arrive({bar(args[1])}, {count}, {'true' if form == 'arrive_drop' else 'false'}, "
                f"::emu::{scope}, {line})")
        return b.write(args[0], call, text)
    if form in ("test_wait", "try_wait") and len(args) in (3, 4):
        if "parity" in rest:
            call = f"::emu::mbarrier_test_wait_parity({bar(args[1])}, {rd(args[2], 'uint32_t')}, ::emu::{scope}, {line})"
        else:
            call = f"::emu::mbarrier_test_wait({bar(args[1])}, {rd(args[2], 'uint64_t')}, ::emu::{scope}, {line})"
        return b.write(args[0], call, text)
    if form == "pending_count" and len(args) == 2:
        return b.write(args[0], f"::emu::mbarrier_pending_count({rd(args[1], 'uint64_t')})", text)
    raise b.fail(text, "is an mbarrier form emu does not run (init, inval, arrive, arrive_drop, test_wait, try_wait "
                       "with a state or .parity, pending_count it does)")


def _space_and_order(b: _Block, text: str, mods: list[str]) -> tuple[str, "str | None", str, bool]:
    """(state space, memory order or None for a plain access, scope, volatile) of ld/st/atom/red."""
    space = next((m for m in mods if m in _SPACES), "generic")
    order = next((_ORDER[m] for m in mods if m in _ORDER), None)
    scope = next((_SCOPE[m] for m in mods if m in _SCOPE), "kScopeDevice")
    for m in mods:
        if m in _SPACES or m in _ORDER or m in _SCOPE or m in _CTYPE or _HINT.match(m) or m in (
                "volatile", "weak", "v2", "v4", "v8", "sync", "aligned", "add", "min", "max", "inc", "dec", "and",
                "or", "xor", "exch", "cas", "noftz", "sc"):
            continue
        raise b.fail(text, f"carries .{m}, which emu does not model")
    return space, order, scope, "volatile" in mods


def _memory(b: _Block, text: str, op: str, mods: list[str], args: list[str], ct: str, ptype: "str | None") -> str:
    if ptype is None or ptype == "pred" or len(args) != 2:
        raise b.fail(text, "is an ld/st emu does not read (a type and two operands)")
    space, order, scope, volatile = _space_and_order(b, text, mods)
    n = next((int(m[1:]) for m in mods if m in ("v2", "v4", "v8")), 1)
    data, addr = (args[0], args[1]) if op != "st" else (args[1], args[0])
    regs = [r.strip() for r in data.strip("{}").split(",")] if data.strip().startswith("{") else [data]
    if len(regs) != n:
        raise b.fail(text, f"moves {n} value(s) but names {len(regs)} register(s)")
    base = b.address(addr, space, text)
    cq = "volatile " if volatile else ""
    out = [f"{ct}* __ptx_at = reinterpret_cast<{ct}*>({base});"]
    for i, r in enumerate(regs):
        if op == "st":
            value = b.read(r, ct, text)
            if order:
                out.append(f"::emu::atomic_store(__ptx_at + {i}, ({ct}){value}, {b.line}, ::emu::{scope}, ::emu::{order});")
            else:
                out.append(f"*reinterpret_cast<{cq}{ct}*>(__ptx_at + {i}) = {value};")
        elif r != "_":
            value = (f"::emu::atomic_load(__ptx_at + {i}, {b.line}, ::emu::{scope}, ::emu::{order})" if order
                     else f"*reinterpret_cast<const {cq}{ct}*>(__ptx_at + {i})")
            out.append(b.write(r, value, text))
    return "{ " + " ".join(out) + " }"


def _atomic(b: _Block, text: str, op: str, mods: list[str], args: list[str], ct: str, ptype: "str | None") -> str:
    if ptype is None or ptype == "pred":
        raise b.fail(text, "is an atom/red emu does not read (a type is needed)")
    space, order, scope, _ = _space_and_order(b, text, mods)
    kind = next((m for m in mods if m in ("add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas")), None)
    if kind is None:
        raise b.fail(text, "is an atomic operation emu does not run")
    dest = args[0] if op == "atom" else None
    rest = args[1:] if op == "atom" else args
    if len(rest) != (3 if kind == "cas" else 2):
        raise b.fail(text, "has the wrong number of operands")
    v = b.read(rest[1], ct, text)
    update = {"add": f"({ct})(o + {v})", "min": f"(o < {v} ? o : {v})", "max": f"(o > {v} ? o : {v})",
              "inc": f"(o >= {v} ? ({ct})0 : ({ct})(o + 1))", "dec": f"((o == 0 || o > {v}) ? {v} : ({ct})(o - 1))",
              "and": f"({ct})(o & {v})", "or": f"({ct})(o | {v})", "xor": f"({ct})(o ^ {v})", "exch": v,
              "cas": f"(o == {v} ? {b.read(rest[2], ct, text) if kind == 'cas' else v} : o)"}[kind]
    call = (f"::emu::atomic_rmw(reinterpret_cast<{ct}*>({b.address(rest[0], space, text)}), "
            f"[&]({ct} o) -> {ct} {{ return {update}; }}, {b.line}, ::emu::{scope}, ::emu::{order or 'kRelaxed'})")
    return b.write(dest, call, text) if dest else f"(void){call};"


# ---- one asm statement ------------------------------------------------------------------------------------
def _instructions(template: str) -> list[str]:
    """The instructions and declarations of a template, scope braces and comments dropped."""
    text = re.sub(r"//[^\n]*", "", template)
    out = []
    for piece in text.split(";"):
        piece = piece.strip()
        while piece.startswith("{") or piece.startswith("}"):
            piece = piece[1:].strip()
        while piece.endswith("}") and piece.count("{") < piece.count("}"):
            piece = piece[:-1].strip()
        if piece:
            out.append(piece)
    return out


def translate(template: str, ops: list[str], line: int) -> str:
    """The C++ statement one asm statement becomes (raises UnsupportedConstruct)."""
    block = _Block(template.strip(), ops, line)
    stmts: list[str] = []
    labels: dict[str, str] = {}          # PTX label -> C++ local label (GNU __label__: an asm may be expanded twice)

    def label(name: str) -> str:
        return labels.setdefault(name, "__ptx_L_" + re.sub(r"[^\w]", "_", name))
    for instr in _instructions(block.template):
        if instr.startswith(".reg"):
            block.declare(instr)
            continue
        while (lm := re.match(r"([A-Za-z_$%][\w$]*)\s*:(?!:)\s*", instr)):
            stmts.append(f"{label(lm.group(1))}:;")
            instr = instr[lm.end():]
        if not instr:
            continue
        guard = ""
        g = re.match(r"@(!?)(\S+)\s+", instr)
        if g:
            guard = f"if ({'!' if g.group(1) else ''}{block.read(g.group(2), 'bool', instr)}) "
            instr = instr[g.end():]
        bm = re.fullmatch(r"bra(?:\.uni)?\s+([A-Za-z_$%][\w$]*)", instr)
        stmts.append(guard + "{ " + (f"goto {label(bm.group(1))};" if bm else _one(block, instr)) + " }")
        if len(stmts) > _MAX_INSTRUCTIONS:
            raise block.fail(block.template[:60], f"has more than {_MAX_INSTRUCTIONS} instructions")
    defined = {s.split(":", 1)[0] for s in stmts if s.startswith("__ptx_L_") and s.endswith(":;")}
    missing = sorted(name for name, cpp in labels.items() if cpp not in defined)
    if missing:
        raise block.fail(block.template[:60], f"branches to {', '.join(missing)}, a label it does not define "
                                              "(emu runs branches within one asm statement)")
    head = [f"__label__ {', '.join(labels.values())};"] if labels else []
    return "do { " + " ".join(head + block.decls + stmts) + " } while (0)"


def _one(block: _Block, instr: str) -> str:
    """One instruction of a block: the whole-statement forms over the block's operands and locals, else scalar."""
    names = sorted(block.locals, key=len, reverse=True)
    ops = list(block.ops)
    if names and (instr.startswith(("mma.", "ldmatrix.", "stmatrix.", "movmatrix.", "cp.async")) or _PTX_MATH.match(instr)
                  or _PTX_PACK.match(instr)):
        # the locals become extra %N operands, so that those translators see what they always see
        def local(m: re.Match) -> str:
            ops.append(block.locals[m.group(0)][0])
            return f"%{len(ops) - 1}"
        instr = re.sub("|".join(rf"(?<![\w%$]){re.escape(n)}(?![\w$])" for n in names), local, instr)
    m = re.fullmatch(r"cp\.async\.mbarrier\.arrive((?:\.noinc)?)((?:\.shared(?:::cta)?)?)\.b64\s+(\[[^\]]+\])", instr)
    if m:
        where = block.address(m.group(3), "shared" if m.group(2) else "generic", instr)
        return (f"::emu::mbarrier_async_arrive(reinterpret_cast<uint64_t*>({where}), {'true' if m.group(1) else 'false'}, "
                f"::emu::kScopeBlock, {block.line});")
    if instr.startswith("cp.async"):
        call = _cp_async(instr, ops, block.line)
        if call is None:
            raise block.fail(instr, "is a cp.async form emu does not run")
        return call + ";"
    call = _matrix_call(instr, ops, block.line) or _math_call(instr, ops, block.line)
    if call is not None:
        return call + ";"
    return _scalar(block, instr)


def rewrite_asm(clean: str) -> str:
    """`clean` (comment-stripped source) with every asm statement replaced by its translation, on the same lines
    (inside a `#define`, with the line breaks escaped). An asm emu does not run becomes a call that raises its
    UnsupportedConstruct when a launch runs it: a macro nothing expands, a function nothing calls, an `if constexpr`
    branch or an architecture's path that the build does not take cost nothing."""
    out, pos = [], 0
    for m in ASM.finditer(clean):
        if m.start() < pos:
            continue
        open_paren = m.end() - 1
        close = matching(clean, open_paren)
        body = clean[open_paren + 1:close]
        line = line_of(clean, m.start())
        in_macro = in_directive(clean, m.start())
        if in_macro:
            body = body.replace("\\\n", " ")
        sections = split_top_level(body, ":")
        template = _asm_template(sections[0])
        try:
            ops = _operands(sections[1] if len(sections) > 1 else "") + _operands(sections[2] if len(sections) > 2 else "")
            call = translate(template, ops, line)
        except UnsupportedConstruct as exc:
            message = str(exc).split(": ", 1)[-1].replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
            call = f'::emu::unsupported_asm("{message}")'
        newlines = clean.count("\n", m.start(), close + 1)
        out.append(clean[pos:m.start()])
        out.append(call + ("\\\n" * newlines if in_macro else "\n" * newlines))
        pos = close + 1
    out.append(clean[pos:])
    return "".join(out)
