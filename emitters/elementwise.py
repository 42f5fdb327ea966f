"""Elementwise kernels: binary ops, fused chains and regions, SiLU, transpose, and the in-place add of the
generation lane. One thread per element, blocks of 256, `ceil(N/256)` blocks; the element type is float.

Chains (`k{i}_fused`) carry one running value `t` through their steps: `t = i0 op0 i1`, then each binary
step `t = t op ext` reads the next operand (i2, i3, ... in order; the running value is always the LEFT
operand), a `silu` step reads none; `o = t` is stored once. Regions (`k{i}_region`) compute members `t{k}`
from operands `i{p}` and earlier members and store the members listed in `stores` (result first).

Products are rounded as their own kernel would round them: a chain product followed by an add or a sub,
and every region product, is written `__fmul_rn`, which nvcc never contracts into a fused multiply-add;
so a chain or region computes bit for bit what its ops compute as separate kernels.

MODES = (None,): nothing here depends on the numeric mode.
Kernels: k0_elem (+), k1_elem (*), k2_elem (-), k3_fused [mul, add], k4_fused [add, silu, mul],
k5_fused [mul, sub], k6_region [silu, mul, add], k7_silu, k8_transpose, gk_add.
"""
from __future__ import annotations

from typing import Optional, Sequence

from reference.modes import Mode
from reference.shapes import ShapeSet

from ._kernel_text import assemble, exact_threads, inout, inp, kernel, out, positive, scalar
from .contract import KernelContract, KernelSource, Precondition

FAMILY = "elementwise"
MODES = (None,)

C_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_GRID = ("ceil_div(N, threads)", "1", "1")
_BLOCK = ("threads", "1", "1")
_THREADS = exact_threads(256, "the launch lines use 256 threads per block and ceil(N/256) blocks")
_GUARD = "  const int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"


def _inst(label: str, n: str) -> tuple:
    return ((label, {"N": n, "threads": "256"}),)


def _silu(v: str) -> str:
    return f"{v} / (1.0f + expf(-{v}))"


def _check_ops(ops: Sequence[str], allowed: set) -> None:
    bad = [o for o in ops if o not in allowed]
    if bad:
        raise ValueError(f"ops: unknown elementwise ops {bad}; expected {sorted(allowed)}")


# -- binary ---------------------------------------------------------------------------------------------
def _elem(stage: int, op: str, label: str, n: str) -> tuple[KernelContract, str]:
    _check_ops([op], set(C_OPS))
    c = KernelContract(
        name=f"k{stage}_elem", family=FAMILY, op="elementwise", mode=None,
        params=(inp("a", "const float*", "N"), inp("b", "const float*", "N"), out("c", "float*", "N"),
                scalar("N", "int", "N")),
        grid=_GRID, block=_BLOCK, preconditions=(_THREADS, *positive("N")), name_pattern=r"k\d+_elem",
        instances=_inst(label, n), attrs={"ops": [op], "layout": "binary"}, doc=f"c = a {C_OPS[op]} b")
    body = _GUARD + f"  if (idx < N) c[idx] = a[idx] {C_OPS[op]} b[idx];\n"
    return c, kernel(c, body, c.doc)


# -- chains -----------------------------------------------------------------------------------------------
def _fused(stage: int, ops: Sequence[str], label: str, n: str) -> tuple[KernelContract, str]:
    """ops[0] is binary (i0, i1); later steps are binary (one new operand each) or 'silu'."""
    _check_ops(ops[:1], set(C_OPS))
    _check_ops(ops[1:], set(C_OPS) | {"silu"})
    n_in = 2 + sum(1 for o in ops[1:] if o != "silu")
    params = [inp(f"i{p}", "const float*", "N") for p in range(n_in)] + [out("o", "float*", "N"), scalar("N", "int", "N")]

    def apply(op: str, x: str, y: str, nxt: Optional[str]) -> str:
        # A product whose next step adds or subtracts is rounded on its own: no FMA contraction.
        if op == "mul" and nxt in ("add", "sub"):
            return f"__fmul_rn({x}, {y})"
        return f"{x} {C_OPS[op]} {y}"

    steps = list(ops) + [None]
    lines = [f"    float t = {apply(ops[0], 'i0[idx]', 'i1[idx]', steps[1])};"]
    p = 2
    for k, op in enumerate(ops[1:], start=1):
        if op == "silu":
            lines.append(f"    t = {_silu('t')};")
        else:
            lines.append(f"    t = {apply(op, 't', f'i{p}[idx]', steps[k + 1])};")
            p += 1
    body = _GUARD + "  if (idx < N) {\n" + "\n".join(lines) + "\n    o[idx] = t;\n  }\n"
    c = KernelContract(
        name=f"k{stage}_fused", family=FAMILY, op="elementwise", mode=None, params=tuple(params),
        grid=_GRID, block=_BLOCK, preconditions=(_THREADS, *positive("N")), name_pattern=r"k\d+_fused",
        instances=_inst(label, n), attrs={"ops": list(ops), "layout": "chain", "carry": "left"},
        doc="chain " + " -> ".join(ops))
    return c, kernel(c, body, c.doc)


# -- regions ---------------------------------------------------------------------------------------------
def _region(stage: int, members: Sequence[tuple], n_inputs: int, stores: Sequence[int], label: str,
            n: str) -> tuple[KernelContract, str]:
    """members: (op, operand...) with operands "i{p}" (region input p) or "t{k}" (earlier member k)."""
    _check_ops([m[0] for m in members], set(C_OPS) | {"silu"})
    for k, (op, *args) in enumerate(members):
        want = 1 if op == "silu" else 2
        if len(args) != want:
            raise ValueError(f"members: member {k} ({op}) needs {want} operands, got {args}")
        for a in args:
            kind, idx = a[0], int(a[1:])
            if not ((kind == "i" and idx < n_inputs) or (kind == "t" and idx < k)):
                raise ValueError(f"members: member {k} reads {a!r}, which is neither an input nor an earlier member")
    if not stores or any(not 0 <= s < len(members) for s in stores):
        raise ValueError(f"stores: expected member indices in [0, {len(members)}), got {list(stores)}")

    def ref(a: str) -> str:
        return f"i{a[1:]}[idx]" if a[0] == "i" else a

    lines = []
    for k, (op, *args) in enumerate(members):
        if op == "silu":
            lines.append(f"    float t{k};\n    {{ const float v = {ref(args[0])}; t{k} = {_silu('v')}; }}")
        elif op == "mul":
            lines.append(f"    const float t{k} = __fmul_rn({ref(args[0])}, {ref(args[1])});")
        else:
            lines.append(f"    const float t{k} = {ref(args[0])} {C_OPS[op]} {ref(args[1])};")
    lines += [f"    o{q}[idx] = t{s};" for q, s in enumerate(stores)]
    params = ([inp(f"i{p}", "const float*", "N") for p in range(n_inputs)]
              + [out(f"o{q}", "float*", "N") for q in range(len(stores))] + [scalar("N", "int", "N")])
    c = KernelContract(
        name=f"k{stage}_region", family=FAMILY, op="elementwise", mode=None, params=tuple(params),
        grid=_GRID, block=_BLOCK, preconditions=(_THREADS, *positive("N")), name_pattern=r"k\d+_region",
        instances=_inst(label, n),
        attrs={"ops": [m[0] for m in members], "layout": "region", "members": [list(m) for m in members],
               "stores": list(stores)},
        doc="region " + ", ".join(f"t{k}={m[0]}({','.join(m[1:])})" for k, m in enumerate(members)))
    body = _GUARD + "  if (idx < N) {\n" + "\n".join(lines) + "\n  }\n"
    return c, kernel(c, body, c.doc)


# -- unary / layout -------------------------------------------------------------------------------------
def _silu_kernel(stage: int) -> tuple[KernelContract, str]:
    c = KernelContract(
        name=f"k{stage}_silu", family=FAMILY, op="silu", mode=None,
        params=(inp("x", "const float*", "N"), out("y", "float*", "N"), scalar("N", "int", "N")),
        grid=_GRID, block=_BLOCK, preconditions=(_THREADS, *positive("N")), name_pattern=r"k\d+_silu",
        instances=_inst("expert_gate", "dff"), attrs={}, doc="y = x / (1 + exp(-x))")
    body = _GUARD + f"  if (idx < N) {{\n    const float v = (float)x[idx];\n    y[idx] = {_silu('v')};\n  }}\n"
    return c, kernel(c, body, c.doc)


def _transpose(stage: int) -> tuple[KernelContract, str]:
    c = KernelContract(
        name=f"k{stage}_transpose", family=FAMILY, op="transpose", mode=None,
        params=(inp("x", "const float*", "R*C"), out("y", "float*", "R*C"), scalar("R", "int", "R"),
                scalar("C", "int", "C")),
        grid=("ceil_div(R*C, threads)", "1", "1"), block=_BLOCK,
        preconditions=(_THREADS, *positive("R", "C"),
                       Precondition("R*C < 2**31", "R", "the flat index R*C is an int")),
        name_pattern=r"k\d+_transpose", instances=(("heads_by_dim", {"R": "n_head", "C": "head_dim",
                                                                     "threads": "256"}),),
        attrs={}, doc="y (C x R) = transpose of x (R x C), both row-major")
    body = ("  const int idx = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (idx >= R * C) return;\n"
            "  const int r = idx / C, col = idx % C;\n"
            "  y[col * R + r] = x[r * C + col];\n")
    return c, kernel(c, body, c.doc)


def _gk_add() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="gk_add", family=FAMILY, op="elementwise", mode=None,
        params=(inout("x", "float*", "n", doc="x += y"), inp("y", "const float*", "n"), scalar("n", "int", "n")),
        grid=("ceil_div(n, threads)", "1", "1"), block=_BLOCK, preconditions=(_THREADS, *positive("n")),
        instances=(("moe_residual", {"n": "d", "threads": "256"}),),
        attrs={"ops": ["add"], "layout": "inplace"}, doc="x += y (the generation lane's residual add)")
    body = "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] += y[i];\n"
    return c, kernel(c, body, c.doc)


# -- emit ---------------------------------------------------------------------------------------------
def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    if mode is not None:
        raise ValueError(f"mode: the elementwise family does not depend on the mode; pass None, not {mode}")
    kernels = [
        _elem(0, "add", "residual_add", "d"),
        _elem(1, "mul", "gate_times_up", "dff"),
        _elem(2, "sub", "residual_delta", "d"),
        _fused(3, ["mul", "add"], "scaled_residual", "d"),
        _fused(4, ["add", "silu", "mul"], "expert_swiglu", "dff"),
        _fused(5, ["mul", "sub"], "scaled_delta", "d"),
        _region(6, [("silu", "i0"), ("mul", "t0", "i1"), ("add", "t1", "i2")], 3, [2, 0], "swiglu_residual", "dff"),
        _silu_kernel(7),
        _transpose(8),
        _gk_add(),
    ]
    return assemble(FAMILY, None, shape, kernels, {"threads": 256})
