"""Building blocks every family emitter shares: parameter shorthands, kernel text, contract checks, assembly.

A kernel's signature is rendered from its contract's parameter list, so the text and the contract
cannot drift apart. `assemble` checks every contract at every instance of the shape set before any
text is returned: a shape that breaks a kernel's limit raises ContractViolation naming the kernel,
the parameter and the rule.

Launch block sizes are a dim named `threads` in these contracts, so a block-size limit (a tree
reduction over a fixed shared array, a fixed warp count) is a precondition like any other.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

from reference.modes import Mode
from reference.shapes import ShapeSet

from .contract import ContractViolation, KernelContract, KernelSource, Param, Precondition, Role
from .cuda_snippets import PRELUDE, block_quant_body
from .expr import ExprError
from .registry import mode_label

# Static shared memory a kernel may declare without an opt-in attribute, and the default ceiling on
# dynamic shared memory at launch: 48 KiB on every architecture the family targets.
SHARED_LIMIT_BYTES = 48 * 1024


# -- parameters ------------------------------------------------------------------------------------
def inp(name: str, ctype: str, count: str, fill: Optional[str] = None, doc: str = "") -> Param:
    return Param(name, ctype, Role.INPUT, count=count, fill=fill, doc=doc)


def out(name: str, ctype: str, count: str, doc: str = "") -> Param:
    return Param(name, ctype, Role.OUTPUT, count=count, doc=doc)


def inout(name: str, ctype: str, count: str, fill: Optional[str] = None, doc: str = "") -> Param:
    return Param(name, ctype, Role.INOUT, count=count, fill=fill, doc=doc)


def scalar(name: str, ctype: str = "int", value: Optional[str] = None, doc: str = "") -> Param:
    """A by-value parameter; its value is the dim of the same name unless given."""
    return Param(name, ctype, Role.SCALAR, value=value if value is not None else name, doc=doc)


# -- preconditions ---------------------------------------------------------------------------------
def tree_threads(limit: int, array: str) -> Precondition:
    """A block-wide tree reduction `for (k = blockDim.x/2; ...)` over a shared array of `limit` slots."""
    return Precondition(f"is_pow2(threads) and threads <= {limit}", "threads",
                        f"the tree reduction over {array}[{limit}] indexes it by thread and halves blockDim.x; "
                        f"a larger block overflows it, a block that is not a power of two drops partial sums")


def exact_threads(n: int, why: str) -> Precondition:
    return Precondition(f"threads == {n}", "threads", why)


def whole_warps(limit: int, why: str) -> Precondition:
    return Precondition(f"threads % 32 == 0 and 32 <= threads <= {limit}", "threads", why)


def baked(dim: str, value: int, kernel: str) -> Precondition:
    return Precondition(f"{dim} == {value}", dim,
                        f"{kernel} has {dim}={value} compiled into its text; other sizes need a re-emit")


def positive(*dims: str) -> list[Precondition]:
    return [Precondition(f"{d} >= 1", d, f"{d} must be at least 1") for d in dims]


# -- text ------------------------------------------------------------------------------------------
def signature(name: str, params: Sequence[Param]) -> str:
    return f"__global__ void {name}(" + ", ".join(f"{p.ctype} {p.name}" for p in params) + ")"


def kernel(contract: KernelContract, body: str, doc: str = "") -> str:
    """`__global__ void name(params) { body }`, the signature taken from the contract."""
    head = "".join(f"// {line}\n" for line in doc.splitlines()) if doc else ""
    return f"{head}{signature(contract.name, contract.params)} {{\n{body}}}\n"


def c_double(x: float) -> str:
    """A C double literal that parses back to exactly `x` (shortest round-trip form)."""
    text = repr(float(x))
    if text in ("inf", "-inf", "nan"):
        raise ValueError(f"constant: cannot bake the non-finite value {text} into kernel text")
    return text


def tree_reduce(array: str, combine: str = "sum", start: str = "blockDim.x / 2", indent: str = "  ") -> str:
    """Halving tree over a shared array, slot 0 ends with the result (the family's block reduction order)."""
    if combine == "sum":
        step = f"{array}[tid] += {array}[tid + k]"
    elif combine == "fmax":
        step = f"{array}[tid] = fmax({array}[tid], {array}[tid + k])"
    else:
        raise ValueError(f"combine: expected 'sum' or 'fmax', got {combine!r}")
    return (f"{indent}for (int k = {start}; k > 0; k >>= 1) {{\n"
            f"{indent}  if (tid < k) {step};\n"
            f"{indent}  __syncthreads();\n"
            f"{indent}}}\n")


def warp_blocks_quant(src: str, q_dst: str, s_dst: str, nblocks: str, zero_rule: str,
                      warp_stride: str = "blockDim.x >> 5", indent: str = "  ") -> str:
    """Quantize `nblocks` 32-element blocks, one warp per block, warps striding by `warp_stride`.

    src/q_dst: expressions of `qb` (block index) and `ql` (lane) for the element read and the int8
    written; s_dst: expression of `qb` for the block scale.
    """
    body = block_quant_body(src, "ql", q_dst, s_dst, zero_rule=zero_rule, indent=indent + "    ")
    return (f"{indent}{{\n"
            f"{indent}  const int ql = threadIdx.x & 31;\n"
            f"{indent}  for (int qb = threadIdx.x >> 5; qb < {nblocks}; qb += {warp_stride}) {{\n"
            f"{body}"
            f"{indent}  }}\n"
            f"{indent}}}\n")


def rope_rotate(h: str, indent: str = "  ") -> str:
    """Rotate the (k, k + hd/2) pairs of the head at `h` by pos * rbase^(-2k/hd), in f32 (needs tid, hd, pos,
    rbase in scope). The expressions are fixed so FMA contraction matches the family's kernels."""
    i = indent
    return (f"{i}const int half = hd / 2;\n"
            f"{i}for (int k = tid; k < half; k += blockDim.x) {{\n"
            f"{i}  const float freq = powf(rbase, -2.0f * k / hd);\n"
            f"{i}  const float ang = pos * freq, c = cosf(ang), s = sinf(ang);\n"
            f"{i}  const float a = {h}[k], b = {h}[k + half];\n"
            f"{i}  {h}[k] = a*c - b*s;\n"
            f"{i}  {h}[k + half] = a*s + b*c;\n"
            f"{i}}}\n")


# -- assembly --------------------------------------------------------------------------------------
def instance_dims(contract: KernelContract, shape: ShapeSet) -> list[tuple[str, dict]]:
    return [(label, contract.dims_for(shape, label)) for label, _ in contract.instances]


def baked_value(contract: KernelContract, shape: ShapeSet, dim: str) -> int:
    """The one value a shape-baked dim takes over all of the contract's instances at this shape set."""
    values = {d[dim] for _, d in instance_dims(contract, shape)}
    if len(values) != 1:
        raise ValueError(f"kernel {contract.name}: instances disagree on the baked dim {dim} ({sorted(values)})")
    v = values.pop()
    if int(v) != v:
        raise ValueError(f"kernel {contract.name}: baked dim {dim} is not an integer ({v})")
    return int(v)


def check_instances(contract: KernelContract, shape: ShapeSet) -> None:
    """Every precondition holds and every size, geometry and scalar evaluates at every instance; otherwise
    ContractViolation naming the kernel, the parameter, the rule, the instance and the shape set."""
    if not contract.instances:
        raise ContractViolation(f"kernel {contract.name}: the contract lists no instances")
    needed = contract.dims_needed()
    for label, _ in contract.instances:
        where = f"(instance {label!r} at shape set {shape.name!r})"
        try:
            dims = contract.dims_for(shape, label)
            missing = needed - set(dims)
            if missing:
                raise ContractViolation(f"kernel {contract.name}: instance {label!r} lacks dims {sorted(missing)}")
            contract.check(dims)
            contract.geometry(dims)
            contract.counts(dims)
            contract.scalars(dims)
        except ContractViolation as exc:
            raise ContractViolation(f"{exc} {where}") from None
        except ExprError as exc:
            raise ContractViolation(f"kernel {contract.name}: cannot be evaluated {where}: {exc}") from None


def assemble(family: str, mode: Optional[Mode], shape: ShapeSet, kernels: Iterable[tuple[KernelContract, str]],
             emitter_params: Optional[Mapping[str, object]] = None) -> KernelSource:
    """PRELUDE, a header naming family, mode and shape set, then every kernel; every contract is checked at
    every instance first, and all broken rules are reported together, one per line."""
    kernels = list(kernels)
    names = [c.name for c, _ in kernels]
    if len(set(names)) != len(names):
        raise ValueError(f"{family}: duplicate kernel names {names}")
    broken = []
    for contract, _ in kernels:
        try:
            check_instances(contract, shape)
        except ContractViolation as exc:
            broken.append(str(exc))
    if broken:
        raise ContractViolation("\n".join(broken))
    header = (f"// qconform {family} kernels, mode {mode_label(mode)}, shape set {shape.name}.\n"
              f"// Written by emitters.{family}; the contracts travel with this text in the KernelSource.\n")
    code = PRELUDE + "\n" + header + "\n".join(text for _, text in kernels)
    return KernelSource(family=family, mode=mode, shape=shape.name, code=code,
                        contracts=tuple(c for c, _ in kernels), emitter_params=dict(emitter_params or {}))


__all__ = ["SHARED_LIMIT_BYTES", "inp", "out", "inout", "scalar", "tree_threads", "exact_threads", "whole_warps",
           "baked", "positive", "signature", "rope_rotate", "kernel", "c_double", "tree_reduce", "warp_blocks_quant",
           "instance_dims", "baked_value", "check_instances", "assemble"]
