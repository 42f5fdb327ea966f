"""The contract of a kernel: what the harness needs to launch it and judge it, independent of who wrote it.

A contract names the kernel, its parameter list in order (C type, role, element count), its launch
geometry and its preconditions, all as small integer expressions over named dims (see
:mod:`emitters.expr`), so the same contract serves every shape and can be printed in reports and
manifests. qconform's emitters attach one contract per kernel to the source they write; kernel source
from elsewhere is matched to these contracts by name and parameter list.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping, Optional

from cudasrc.types import CTYPE_DTYPES, element_ctype, normalize_ctype
from reference.modes import Mode

from .expr import evaluate, names_in


class Role(str, Enum):
    INPUT = "input"      # read only
    OUTPUT = "output"    # written; poisoned before the launch, every element must be written
    INOUT = "inout"      # read and written (e.g. a residual updated in place, a KV cache row)
    SCRATCH = "scratch"  # written and read by the kernel family; not judged on its own
    SCALAR = "scalar"    # passed by value


class ContractViolation(ValueError):
    """A launch or an emit would break a kernel's stated limit."""


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str                    # as in the signature, e.g. "const float*", "int"
    role: Role
    count: Optional[str] = None   # pointers: element count expression over dims
    value: Optional[str] = None   # scalars: value expression over dims
    fill: Optional[str] = None    # special input content: "index(E)" distinct ints in [0, E);
                                  # "const(L-1)" every element equal to the expression
    doc: str = ""

    def __post_init__(self):
        object.__setattr__(self, "ctype", normalize_ctype(self.ctype))
        if self.is_pointer and self.count is None:
            raise ValueError(f"param {self.name}: a pointer parameter needs an element count")
        if not self.is_pointer and self.role is not Role.SCALAR:
            raise ValueError(f"param {self.name}: a by-value parameter must have role scalar")

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def dtype(self) -> str:
        base = element_ctype(self.ctype)
        try:
            return CTYPE_DTYPES[base]
        except KeyError:
            raise ValueError(f"param {self.name}: no numpy dtype for C type {self.ctype!r}") from None


@dataclass(frozen=True)
class Precondition:
    rule: str      # expression over dims that must hold, e.g. "K % 32 == 0"
    param: str     # the parameter or dim the rule is about
    why: str       # the consequence when broken, e.g. "int4 loads would straddle rows"


@dataclass(frozen=True)
class KernelContract:
    name: str                               # kernel name as emitted
    family: str                             # op family: matmul, norm, elementwise, rope, attention, moe, embed, argmax
    op: str                                 # what it computes, e.g. "act_quant", "q8_gemv", "moe_gate_up_silu"
    mode: Optional[Mode]
    params: tuple[Param, ...]
    grid: tuple[str, str, str]
    block: tuple[str, str, str]
    shared_bytes: str = "0"                 # dynamic shared memory bytes
    preconditions: tuple[Precondition, ...] = ()
    name_pattern: Optional[str] = None      # regex that external kernel names may match instead of `name`
    instances: tuple[tuple[str, Mapping[str, str]], ...] = ()  # (label, dims as expressions over ShapeSet fields)
    attrs: Mapping[str, object] = field(default_factory=dict)  # op details the judge needs (eps, tie rule, ...)
    doc: str = ""

    # -- signature ---------------------------------------------------------------------------------
    def signature(self) -> tuple[str, ...]:
        """The ordered C types of the parameter list: what external source must match."""
        return tuple(p.ctype for p in self.params)

    def matches_name(self, name: str) -> bool:
        if name == self.name:
            return True
        return bool(self.name_pattern and re.fullmatch(self.name_pattern, name))

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"kernel {self.name} has no parameter {name!r}")

    def dims_needed(self) -> set[str]:
        exprs = [*self.grid, *self.block, self.shared_bytes, *(p.count or p.value or "0" for p in self.params),
                 *(c.rule for c in self.preconditions)]
        out: set[str] = set()
        for e in exprs:
            out |= names_in(e)
        return out

    # -- evaluation --------------------------------------------------------------------------------
    def check(self, dims: Mapping[str, "int | float"]) -> None:
        """Raise ContractViolation naming the kernel, the parameter and the rule for each broken precondition."""
        broken = [c for c in self.preconditions if not evaluate(c.rule, dims)]
        if broken:
            lines = [f"kernel {self.name}: parameter {c.param} breaks '{c.rule}' ({c.why})" for c in broken]
            shown = ", ".join(f"{k}={v}" for k, v in sorted(dims.items()))
            raise ContractViolation("; ".join(lines) + f" [dims: {shown}]")

    def geometry(self, dims: Mapping[str, "int | float"]) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        grid = tuple(int(evaluate(g, dims)) for g in self.grid)
        block = tuple(int(evaluate(b, dims)) for b in self.block)
        return grid, block, int(evaluate(self.shared_bytes, dims))  # type: ignore[return-value]

    def counts(self, dims: Mapping[str, "int | float"]) -> dict[str, int]:
        return {p.name: int(evaluate(p.count, dims)) for p in self.params if p.is_pointer}

    def scalars(self, dims: Mapping[str, "int | float"]) -> dict[str, "int | float"]:
        return {p.name: evaluate(p.value, dims) for p in self.params if not p.is_pointer and p.value is not None}

    def dims_for(self, shape, label: Optional[str] = None) -> dict[str, "int | float"]:
        """Concrete dims of one named instance (default: the first) at a ShapeSet."""
        if not self.instances:
            raise ValueError(f"kernel {self.name}: the contract lists no dims instances")
        fields = shape.as_dict()
        for lab, exprs in self.instances:
            if label is None or lab == label:
                return {k: evaluate(v, fields) for k, v in exprs.items()}
        raise ValueError(f"kernel {self.name}: no dims instance {label!r}; have "
                         f"{', '.join(l for l, _ in self.instances)}")

    def describe(self) -> dict:
        """A JSON-ready description (for manifests and reports)."""
        return {
            "name": self.name, "family": self.family, "op": self.op,
            "mode": self.mode.value if self.mode else None,
            "params": [{"name": p.name, "ctype": p.ctype, "role": p.role.value, "count": p.count,
                        "value": p.value, "fill": p.fill} for p in self.params],
            "grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes,
            "preconditions": [{"rule": c.rule, "param": c.param, "why": c.why} for c in self.preconditions],
            "name_pattern": self.name_pattern,
            "instances": {lab: dict(d) for lab, d in self.instances},
            "attrs": {k: (v.value if isinstance(v, Enum) else v) for k, v in self.attrs.items()},
        }


@dataclass(frozen=True)
class KernelSource:
    """What an emitter returns: CUDA C text plus one contract per kernel in it."""
    family: str
    mode: Optional[Mode]
    shape: str                           # shape-set name the source was emitted for
    code: str
    contracts: tuple[KernelContract, ...]
    emitter_params: Mapping[str, object] = field(default_factory=dict)

    def contract(self, name: str) -> KernelContract:
        for c in self.contracts:
            if c.name == name:
                return c
        raise KeyError(f"{self.family}/{self.mode}/{self.shape} has no kernel {name!r}; "
                       f"it has {', '.join(c.name for c in self.contracts)}")

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.contracts)
