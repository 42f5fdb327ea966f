"""NeoX-style rotary position embedding and the per-head QK-RMSNorm + RoPE, float64.

Pairs are (i, i + head_dim/2) of each head, rotated by ``pos * theta^(-2i/head_dim)`` for i < head_dim/2:
``y_i = x_i cos - x_{i+half} sin``, ``y_{i+half} = x_i sin + x_{i+half} cos`` (k*_rope, gk_qk_norm_rope*).
"""
from __future__ import annotations

import numpy as np

from reference._validate import float_array, positive_int
from reference.norm import rms_norm


def _check(x, pos, theta, head_dim) -> tuple[np.ndarray, np.ndarray, float, int]:
    v = float_array("x", x, ndim=(1, 2))
    hd = positive_int("head_dim", head_dim)
    if hd % 2:
        raise ValueError(f"head_dim: must be even (rotated in pairs), got {hd}")
    if v.shape[-1] % hd:
        raise ValueError(f"x: last axis {v.shape[-1]} must be a multiple of head_dim {hd}")
    t = float(theta)
    if not np.isfinite(t) or t <= 0:
        raise ValueError(f"theta: must be a positive finite number, got {theta!r}")
    p = np.asarray(pos)
    if p.dtype.kind not in "iu" or (p.size and p.min() < 0):
        raise ValueError(f"pos: expected non-negative integer position(s), got {pos!r}")
    if p.ndim > 1 or (p.ndim == 1 and (v.ndim != 2 or p.shape[0] != v.shape[0])):
        raise ValueError(f"pos: expected a scalar or one position per row of x ({v.shape[:-1]}), got shape {p.shape}")
    return v, p.astype(np.float64), t, hd


def rope_neox(x, pos, theta, head_dim) -> np.ndarray:
    """Rotate every head of x (..., n_heads * head_dim) at position(s) pos (scalar, or one per row)."""
    v, p, t, hd = _check(x, pos, theta, head_dim)
    half = hd // 2
    freq = t ** (-2.0 * np.arange(half) / hd)
    angle = (p[..., None] if p.ndim else p) * freq          # (..., half)
    if p.ndim:
        angle = angle[:, None, :]                           # per row, shared by the row's heads
    c, s = np.cos(angle), np.sin(angle)
    h = v.reshape(*v.shape[:-1], -1, hd)
    a, b = h[..., :half], h[..., half:]
    out = np.concatenate([a * c - b * s, a * s + b * c], axis=-1)
    return out.reshape(v.shape)


def qk_norm_rope(x, weight, pos, theta, head_dim, eps) -> np.ndarray:
    """Per-head RMSNorm (over head_dim, with weight (head_dim,)) then rope_neox: Qwen3's q/k norm + RoPE."""
    v, _, _, hd = _check(x, pos, theta, head_dim)
    heads = v.reshape(*v.shape[:-1], -1, hd)
    normed = rms_norm(heads, weight=weight, eps=eps).reshape(v.shape)
    return rope_neox(normed, pos, theta, head_dim)
