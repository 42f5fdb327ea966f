"""Token embedding lookup from a Q8_0 table (gk_embed: x[t] = quants[tok, t] * scales[tok, t // 32])."""
from __future__ import annotations

import numpy as np

from reference._validate import QK
from reference.quant import Q8Tensor


def embed_q8(table: Q8Tensor, token) -> np.ndarray:
    """The dequantized row `token` of a (vocab, d) Q8_0 table, float64 (exact)."""
    if not isinstance(table, Q8Tensor):
        raise ValueError(f"table: expected a reference.quant.Q8Tensor, got {type(table).__name__}")
    if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)):
        raise ValueError(f"token: expected an integer token id, got {token!r}")
    if not 0 <= int(token) < table.rows:
        raise ValueError(f"token: id {token} must lie in [0, {table.rows}) (the table's vocabulary)")
    row = table.quants[int(token)].reshape(-1, QK).astype(np.float64)
    return (row * table.scales[int(token)].astype(np.float64)[:, None]).reshape(-1)
