"""The vocabulary every judge shares, and the registry the per-family judges add themselves to.

In: nothing but a case, its contract and its dims (for `Ctx`). Out: the verdict names, `Comparison` (one
output against one reference), `Ctx` (what an op's builder and checker see), `JudgeError`, and `OPS`, filled by
the `op` decorator in harness/judging/ops.py, rows.py and attention.py. It imports none of them, so the family
modules and the core that looks judges up both build on it without an import circle."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from emitters.contract import KernelContract
from harness.cases import inputs
from harness.cases.names import Case

PASS, FAIL, TIE, UNCHECKED = "pass", "fail", "tie", "unchecked"


@dataclass
class Comparison:
    """One output compared with one reference."""
    output: str                  # parameter name, or a derived quantity ("idx (set)", "token")
    against: str                 # "mode" | "dequant" | "exact"
    verdict: str                 # pass | fail | tie
    metrics: dict = field(default_factory=dict)
    budget: Optional[str] = None       # the budget's formula
    budget_at_worst: Optional[float] = None
    observed_at_worst: Optional[float] = None
    usage: Optional[float] = None      # max err/budget (<= 1 passes)
    reason: str = ""
    histogram: Optional[dict] = None   # error distribution (log10 |err| bins)

    @property
    def margin(self) -> Optional[float]:
        return None if self.usage is None else 1.0 - self.usage


class JudgeError(ValueError):
    """The judge cannot build or read this kernel's arguments (a contract the judge does not understand)."""


# -- context ------------------------------------------------------------------------------------------------
class Ctx:
    """What an op's builder and checker see: the contract, the dims, the seeded RNG, the arguments."""

    def __init__(self, case: Case, contract: KernelContract, dims: dict):
        self.case, self.contract, self.dims = case, contract, dims
        self.rng = inputs.rng_for(case.seed)
        self.args: dict[str, object] = {}
        self.before: dict[str, np.ndarray] = {}     # copies of INOUT buffers before the launch
        self.extra: dict[str, object] = {}          # what check needs beyond the arguments (Judge.extras)
        self.counts = contract.counts(dims)
        self.attrs = dict(contract.attrs)

    def has(self, *names: str) -> Optional[str]:
        for n in names:
            if any(p.name == n for p in self.contract.params):
                return n
        return None

    def pname(self, *names: str) -> str:
        n = self.has(*names)
        if n is None:
            raise JudgeError(f"kernel {self.contract.name} (op {self.contract.op}): none of the parameters "
                             f"{', '.join(names)} in its contract")
        return n

    def dim(self, *names: str, default=None):
        for n in names:
            if n in self.dims:
                return self.dims[n]
        if default is not None:
            return default
        raise JudgeError(f"kernel {self.contract.name}: none of the dims {', '.join(names)} given "
                         f"(have {', '.join(sorted(self.dims))})")

    def put(self, name: str, value: np.ndarray) -> None:
        p = self.contract.param(name)
        want = self.counts[name]
        arr = np.ascontiguousarray(np.asarray(value).reshape(-1).astype(p.dtype, copy=False))
        if arr.size != want:
            raise JudgeError(f"kernel {self.contract.name}: parameter {name} needs {want} elements, "
                             f"the op builder made {arr.size}")
        self.args[name] = arr

    def out(self, name: str) -> np.ndarray:
        return self.args[name]  # type: ignore[return-value]


# -- op registry ----------------------------------------------------------------------------------------------
class Judge:
    """An op's judge, registered with `op`. build: the case's seeded arguments (and notes in ctx.extra that only
    the builder knows, such as the activation before quantization); extras: what check needs beyond the
    launch's arguments, derived from those arguments, for a launch no builder made (a launch of a decode chain,
    harness.model.blame); check: the outputs against the references. Callers run extras and check through
    harness.judging.core.judge_outputs."""

    @staticmethod
    def build(ctx: Ctx) -> None:
        raise NotImplementedError

    @staticmethod
    def extras(ctx: Ctx) -> dict:
        return {}

    @staticmethod
    def check(ctx: Ctx) -> list:
        raise NotImplementedError


@dataclass(frozen=True)
class OpJudge:
    build: Callable[[Ctx], None]
    check: Callable[[Ctx], list]
    extras: Callable[[Ctx], dict]


OPS: dict[str, OpJudge] = {}


def op(name: str):
    def deco(cls: type[Judge]):
        if not issubclass(cls, Judge):
            raise TypeError(f"op {name}: {cls.__name__} must subclass harness.judging.registry.Judge")
        OPS[name] = OpJudge(cls.build, cls.check, cls.extras)
        return cls
    return deco
