"""Which kernel families exist, which modes each is emitted in, and how to emit them.

Every family is a module `emitters.<family>` exposing:
  MODES: tuple of reference.modes.Mode, or (None,) for a family whose kernels do not depend on the mode;
  emit(mode, shape) -> KernelSource   (shape: a reference.shapes.ShapeSet).
"""
from __future__ import annotations

import importlib
from typing import Iterable, Optional

from reference.modes import Mode
from reference.shapes import SHAPE_SETS, ShapeSet, get_shape

from .contract import KernelContract, KernelSource

FAMILIES = ("matmul", "norm", "elementwise", "rope", "attention", "moe", "embed", "argmax")
GOLDEN_SHAPES = ("tiny", "tails", "qwen3-30b-a3b")
MODELESS = "any"   # directory / label used for a family whose kernels do not depend on the mode


def family_module(family: str):
    if family not in FAMILIES:
        raise ValueError(f"family: unknown kernel family {family!r}; expected one of {', '.join(FAMILIES)}")
    return importlib.import_module(f"emitters.{family}")


def available_families() -> tuple[str, ...]:
    """Families whose emitter module exists (all of them once the emitters are complete)."""
    out = []
    for fam in FAMILIES:
        try:
            family_module(fam)
        except ModuleNotFoundError as exc:
            if exc.name == f"emitters.{fam}":
                continue
            raise
        out.append(fam)
    return tuple(out)


def modes_of(family: str) -> tuple[Optional[Mode], ...]:
    return tuple(family_module(family).MODES)


def mode_label(mode: Optional[Mode]) -> str:
    return mode.value if mode is not None else MODELESS


def parse_mode_label(label: str) -> Optional[Mode]:
    return None if label == MODELESS else Mode.parse(label)


def emit(family: str, mode: Optional[Mode], shape: "str | ShapeSet") -> KernelSource:
    mod = family_module(family)
    if mode not in mod.MODES:
        labels = ", ".join(mode_label(m) for m in mod.MODES)
        raise ValueError(f"mode: family {family} is emitted in {labels}, not {mode_label(mode)}")
    return mod.emit(mode, get_shape(shape))


def golden_matrix(shapes: Iterable[str] = GOLDEN_SHAPES) -> list[tuple[str, Optional[Mode], str]]:
    """Every (family, mode, shape-set name) the golden locks cover."""
    shapes = list(shapes)
    for s in shapes:
        get_shape(s)
    return [(fam, mode, s) for fam in available_families() for mode in modes_of(fam) for s in shapes]


def all_contracts(shape: str = "tiny") -> list[KernelContract]:
    """Every distinct kernel contract (name + signature) across families and modes."""
    seen: dict[tuple, KernelContract] = {}
    for fam in available_families():
        for mode in modes_of(fam):
            for c in emit(fam, mode, shape).contracts:
                seen.setdefault((c.name, c.signature(), c.mode), c)
    return list(seen.values())


__all__ = ["FAMILIES", "GOLDEN_SHAPES", "SHAPE_SETS", "emit", "golden_matrix", "all_contracts", "modes_of",
           "available_families", "mode_label", "parse_mode_label"]
