"""Element-wise ops of the kernel family in float64: SiLU, add/sub/mul chains (the fused k*_fused kernels),
and a 2-D transpose. Inputs of any real float dtype; NaN/Inf propagate as IEEE arithmetic says."""
from __future__ import annotations

from typing import Iterable, Union

import numpy as np

from reference._validate import choice, float_array

BINARY_OPS = ("add", "sub", "mul")
Step = Union[str, tuple]


def silu(x) -> np.ndarray:
    """x * sigmoid(x) = x / (1 + exp(-x)), float64. exp overflow for x < -709 gives -0.0 (the limit), quietly."""
    v = float_array("x", x)
    with np.errstate(over="ignore"):
        return v / (1.0 + np.exp(-v))


def _binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    return a * b


def add(a, b) -> np.ndarray:
    return chain("add", a, b)


def sub(a, b) -> np.ndarray:
    return chain("sub", a, b)


def mul(a, b) -> np.ndarray:
    return chain("mul", a, b)


def chain(first_op: str, a, b, steps: Iterable[Step] = ()) -> np.ndarray:
    """Left-to-right chain ``t = a <first_op> b`` then each step: ``("add"|"sub"|"mul", operand)`` applies
    ``t = t <op> operand``; ``"silu"`` applies ``t = silu(t)``. All operands must have a's shape (no
    broadcasting: the kernels index every operand by the same element index). float64 throughout."""
    choice("first_op", first_op, BINARY_OPS)
    a = float_array("a", a)
    b = float_array("b", b)
    if b.shape != a.shape:
        raise ValueError(f"b: shape {b.shape} must equal a's shape {a.shape}")
    with np.errstate(over="ignore", invalid="ignore"):
        t = _binary(first_op, a, b)
    for i, step in enumerate(steps):
        if step == "silu":
            t = silu(t)
            continue
        if not (isinstance(step, tuple) and len(step) == 2):
            raise ValueError(f"steps[{i}]: expected 'silu' or (op, operand), got {step!r}")
        op, operand = step
        choice(f"steps[{i}] op", op, BINARY_OPS)
        v = float_array(f"steps[{i}] operand", operand)
        if v.shape != a.shape:
            raise ValueError(f"steps[{i}] operand: shape {v.shape} must equal a's shape {a.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            t = _binary(op, t, v)
    return t


def transpose(x) -> np.ndarray:
    """The (R, C) -> (C, R) transpose (k*_transpose: y[c*R + r] = x[r*C + c]), float64, contiguous."""
    v = float_array("x", x, ndim=2)
    return np.ascontiguousarray(v.T)
