"""Single-query (decode) attention with grouped KV heads, and its split-K flash-decode decomposition, float64.

Query head h reads KV head ``h // (n_head / n_kv)``. Scores ``s_j = scale * q_h . k_j`` over the first
`length` cached positions, softmax, weighted sum of V. The split-K form (gk_attn_part + gk_attn_comb) gives
key j to split ``j % n_split`` (interleaved, as the kernel's ``j = p + idx * P``), keeps per split the local max
m, the denominator d = sum exp(s - m) and the un-normalized weighted V, and merges them with the global max.
An empty split has m = -inf, d = 0 and contributes nothing (the kernel uses -1e30 for -inf).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference._validate import float_array, positive_int


@dataclass(frozen=True)
class AttentionPartials:
    """Per head and split: m (n_head, P) local max, d (n_head, P) denominators, acc (n_head, P, head_dim)."""

    m: np.ndarray
    d: np.ndarray
    acc: np.ndarray


def _scores(q, k_cache, v_cache, n_head, n_kv, head_dim, length, scale):
    nh = positive_int("n_head", n_head)
    nk = positive_int("n_kv", n_kv)
    hd = positive_int("head_dim", head_dim)
    if nh % nk:
        raise ValueError(f"n_head: {nh} query heads must be divisible by n_kv = {nk} (GQA groups)")
    qv = float_array("q", q, ndim=1)
    if qv.shape != (nh * hd,):
        raise ValueError(f"q: expected shape ({nh * hd},) = n_head * head_dim, got {qv.shape}")
    kc = float_array("k_cache", k_cache, ndim=2)
    vc = float_array("v_cache", v_cache, ndim=2)
    if kc.shape[1] != nk * hd:
        raise ValueError(f"k_cache: expected (positions, {nk * hd}) = n_kv * head_dim columns, got {kc.shape}")
    if vc.shape != kc.shape:
        raise ValueError(f"v_cache: shape {vc.shape} must equal k_cache's {kc.shape}")
    n = kc.shape[0] if length is None else positive_int("length", length)
    if n > kc.shape[0] or n == 0:
        raise ValueError(f"length: {n} must lie in [1, {kc.shape[0]}] (the cached positions)")
    sc = 1.0 / np.sqrt(hd) if scale is None else float(scale)
    if not np.isfinite(sc) or sc <= 0:
        raise ValueError(f"scale: must be a positive finite number, got {scale!r}")
    group = nh // nk
    kvh = np.arange(nh) // group
    keys = kc[:n].reshape(n, nk, hd)[:, kvh, :]             # (n, n_head, hd)
    vals = vc[:n].reshape(n, nk, hd)[:, kvh, :]
    s = np.einsum("hd,nhd->hn", qv.reshape(nh, hd), keys) * sc
    return s, vals, nh, hd


def decode_attention(q, k_cache, v_cache, n_head, n_kv, head_dim, length=None, scale=None) -> np.ndarray:
    """softmax(scale * q_h . K) V per head: (n_head * head_dim,) float64. scale defaults to 1/sqrt(head_dim),
    length to all cached positions. NaN/Inf in the inputs propagate (NaN outputs)."""
    s, vals, nh, hd = _scores(q, k_cache, v_cache, n_head, n_kv, head_dim, length, scale)
    with np.errstate(invalid="ignore", over="ignore"):
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out = np.einsum("hn,nhd->hd", p, vals) / p.sum(axis=1)[:, None]
    return out.reshape(nh * hd)


def attention_partials(q, k_cache, v_cache, n_head, n_kv, head_dim, n_split, length=None,
                       scale=None) -> AttentionPartials:
    """The split-K partials of decode_attention: key j goes to split j % n_split."""
    s, vals, nh, hd = _scores(q, k_cache, v_cache, n_head, n_kv, head_dim, length, scale)
    p_count = positive_int("n_split", n_split)
    n = s.shape[1]
    rows = -(-n // p_count)
    pad = rows * p_count - n
    sp = np.concatenate([s, np.full((nh, pad), -np.inf)], axis=1).reshape(nh, rows, p_count)
    vp = np.concatenate([vals, np.zeros((pad, nh, hd))], axis=0).reshape(rows, p_count, nh, hd)
    m = sp.max(axis=1)                                       # (nh, P); -inf for an empty split
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(sp - np.where(np.isneginf(m), 0.0, m)[:, None, :])
        d = e.sum(axis=1)
        acc = np.einsum("hrp,rphd->hpd", e, vp)
    return AttentionPartials(m=m, d=d, acc=acc)


def combine_partials(partials: AttentionPartials) -> np.ndarray:
    """Merge split-K partials: ``sum_p acc_p exp(m_p - M) / sum_p d_p exp(m_p - M)``, M = max_p m_p."""
    if not isinstance(partials, AttentionPartials):
        raise ValueError(f"partials: expected AttentionPartials, got {type(partials).__name__}")
    m = float_array("partials.m", partials.m, ndim=2)
    d = float_array("partials.d", partials.d, ndim=2)
    acc = float_array("partials.acc", partials.acc, ndim=3)
    if d.shape != m.shape or acc.shape[:2] != m.shape:
        raise ValueError(f"partials: m {m.shape}, d {d.shape} and acc {acc.shape} disagree on (n_head, n_split)")
    big = m.max(axis=1, keepdims=True)
    if np.any(np.isneginf(big)):
        raise ValueError("partials: a head has every split empty (no keys); nothing to combine")
    with np.errstate(invalid="ignore", over="ignore"):
        f = np.exp(m - big)                                  # exp(-inf) = 0 for empty splits
        out = np.einsum("hp,hpd->hd", f, acc) / (f * d).sum(axis=1)[:, None]
    return out.reshape(-1)
