"""Row-wise normalizations over the last axis, in float64 (the exact values the kernels approximate).

The kernels differ in precision (docs/NUMERICS.md, "RMSNorm"): k*_row accumulates the sum of squares in
float64; gk_rmsnorm* accumulate in float32 and use rsqrtf. The reference is float64 for all of them.
NaN/Inf in a row propagate to that row's outputs (NaN), as IEEE arithmetic does.
"""
from __future__ import annotations

import numpy as np

from reference._validate import float_array


def _eps(name: str, eps) -> float:
    e = float(eps)
    if not np.isfinite(e) or e <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {eps!r}")
    return e


def _row_param(name: str, value, n: int) -> "np.ndarray | None":
    if value is None:
        return None
    v = float_array(name, value, ndim=1)
    if v.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},) (the row length), got {v.shape}")
    return v


def rms_norm(x, weight=None, eps: float = 1e-6, residual=None) -> np.ndarray:
    """``v / sqrt(mean(v^2) + eps) * weight`` per row, where ``v = x + residual`` when a residual is given
    (the fused add+norm kernels; the sum itself is ``x + residual``, which the caller keeps)."""
    v = float_array("x", x, ndim=(1, 2, 3))
    n = v.shape[-1]
    if n == 0:
        raise ValueError("x: rows must not be empty")
    if residual is not None:
        r = float_array("residual", residual)
        if r.shape != v.shape:
            raise ValueError(f"residual: shape {r.shape} must equal x's shape {v.shape}")
        v = v + r
    w = _row_param("weight", weight, n)
    e = _eps("eps", eps)
    with np.errstate(invalid="ignore", over="ignore"):
        y = v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + e)
    return y if w is None else y * w


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> np.ndarray:
    """``(v - mean) / sqrt(var + eps) * weight + bias`` per row, population variance (k*_row LayerNorm)."""
    v = float_array("x", x, ndim=(1, 2, 3))
    n = v.shape[-1]
    if n == 0:
        raise ValueError("x: rows must not be empty")
    w = _row_param("weight", weight, n)
    b = _row_param("bias", bias, n)
    e = _eps("eps", eps)
    with np.errstate(invalid="ignore", over="ignore"):
        c = v - v.mean(axis=-1, keepdims=True)
        y = c / np.sqrt(np.mean(c * c, axis=-1, keepdims=True) + e)
    if w is not None:
        y = y * w
    return y if b is None else y + b


def softmax(x) -> np.ndarray:
    """``exp(v - max) / sum exp(v - max)`` per row. -inf entries get probability 0; a row of all -inf, or one
    holding NaN or +inf, gives NaN (IEEE), never a silent value."""
    v = float_array("x", x, ndim=(1, 2, 3))
    if v.shape[-1] == 0:
        raise ValueError("x: rows must not be empty")
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
