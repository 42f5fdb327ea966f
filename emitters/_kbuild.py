"""Assembly of a family's kernels into a KernelSource, shared by the matmul, moe, embed and argmax emitters.

Each kernel is written as (contract, body): the C signature is generated from the contract's parameter
list, so the emitted text and the contract can never disagree on names, types or order. Before the
source is returned every contract is evaluated at each of its instances for the shape set: geometry and
element counts must evaluate, and broken preconditions raise one ContractViolation naming, per line, the
kernel, the parameter and the rule (see KernelContract.check).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from reference.modes import Mode
from reference.shapes import ShapeSet

from .contract import ContractViolation, KernelContract, KernelSource, Param, Precondition, Role
from .cuda_snippets import PRELUDE
from .expr import ExprError

# Warp-per-row GEMVs launch 256 threads (8 warps, 8 output rows) per block, as the family's host code does.
WARP_ROWS_PER_BLOCK = 8
INT_MAX = 2**31 - 1


def cuda_signature(contract: KernelContract) -> str:
    params = ", ".join(f"{p.ctype} {p.name}" for p in contract.params)
    return f"__global__ void {contract.name}({params})"


def kernel_text(contract: KernelContract, body: str, note: str = "") -> str:
    head = "".join(f"// {line}\n" for line in note.splitlines()) if note else ""
    return f"{head}{cuda_signature(contract)} {{\n{body}}}\n"


def check_instances(contract: KernelContract, shape: ShapeSet) -> None:
    """Evaluate every instance of a contract at a shape set; raise ContractViolation on any broken rule."""
    if not contract.instances:
        raise ContractViolation(f"kernel {contract.name}: the contract lists no instances")
    for label, _ in contract.instances:
        try:
            dims = contract.dims_for(shape, label)
            contract.check(dims)
            contract.geometry(dims)
            contract.counts(dims)
            contract.scalars(dims)
        except ContractViolation as exc:
            raise ContractViolation(f"{exc} (instance {label!r} at shape set {shape.name!r})") from None
        except ExprError as exc:
            raise ContractViolation(f"kernel {contract.name}: instance {label!r} at shape set "
                                    f"{shape.name!r} cannot be evaluated: {exc}") from None


def assemble(family: str, mode: Optional[Mode], shape: ShapeSet,
             kernels: Sequence[tuple[KernelContract, str]], emitter_params: Mapping[str, object] = (),
             header: str = "") -> KernelSource:
    """PRELUDE + a header comment + every kernel, checked at every instance of the shape set.

    All broken rules of all kernels are reported together, one per line.
    """
    broken = []
    for contract, _ in kernels:
        try:
            check_instances(contract, shape)
        except ContractViolation as exc:
            broken.append(str(exc))
    if broken:
        raise ContractViolation("\n".join(broken))
    head = "".join(f"// {line}\n" for line in header.splitlines()) if header else ""
    code = PRELUDE + "\n" + head + "\n".join(text for _, text in kernels)
    return KernelSource(family=family, mode=mode, shape=shape.name, code=code,
                        contracts=tuple(c for c, _ in kernels), emitter_params=dict(emitter_params))


# ---- parameter shorthands (every Param still states its role and count) ----------------------------------
def inp(name: str, ctype: str, count: str, fill: Optional[str] = None, doc: str = "") -> Param:
    return Param(name, ctype, Role.INPUT, count=count, fill=fill, doc=doc)


def out(name: str, ctype: str, count: str, doc: str = "") -> Param:
    return Param(name, ctype, Role.OUTPUT, count=count, doc=doc)


def inout(name: str, ctype: str, count: str, fill: Optional[str] = None, doc: str = "") -> Param:
    return Param(name, ctype, Role.INOUT, count=count, fill=fill, doc=doc)


def scalar(name: str, value: Optional[str] = None, ctype: str = "int", doc: str = "") -> Param:
    return Param(name, ctype, Role.SCALAR, value=value if value is not None else name, doc=doc)


# ---- preconditions the families share ------------------------------------------------------------------
def k_blocks(k: str = "K") -> Precondition:
    return Precondition(f"{k} % 32 == 0 and {k} >= 32", k,
                        "Q8_0 rows are whole 32-element blocks; a partial block would read past the row")


def int4_rows(k: str = "K") -> Precondition:
    return Precondition(f"{k} % 16 == 0", k, "16-byte int4 loads need every row start 16-byte aligned")


def fits_int(expr: str, param: str, what: str) -> Precondition:
    return Precondition(f"{expr} <= {INT_MAX}", param, f"{what} is computed in 32-bit int and would overflow")


def cache_row(pos: str = "pos", length: str = "L", n: str = "N", kd: str = "KD") -> tuple[Precondition, ...]:
    return (Precondition(f"0 <= {pos} < {length}", "d_pos", "the kernel writes cache row *d_pos unchecked"),
            Precondition(f"{n} <= {kd}", kd, "a cache row holds KD values; more outputs would spill into the next row"))


def warp_rows_grid(rows: str) -> tuple[str, str, str]:
    return (f"({rows} + 7) // 8", "1", "1")


BLOCK_256 = ("256", "1", "1")
ONE = ("1", "1", "1")
