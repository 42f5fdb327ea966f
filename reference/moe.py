"""Sparse top-K mixture-of-experts FFN (Qwen3-MoE style) in the three numeric modes, float64.

Structure of the fused kernels (moe_router_fast / moe_topk_idx / moe_qact / moe_gate_up_silu /
moe_down_combine and the *_deq pair):
1. router logits = router @ x in DEQUANT math in every mode (the kernels feed the router the float activation);
2. softmax over all E, keep the k largest by index order on ties, renormalize over the k (route_top_k);
3. int8 modes: x quantized ONCE (shared by every expert's gate and up); gate_e @ x and up_e @ x per chosen expert;
4. h = silu(gate) * up, stored as float32 (k * dff values, expert-major);
5. int8 modes: h quantized ONCE over the concatenated k * dff vector (blocks never straddle experts: dff % 32 == 0);
6. out = sum_r w_r * (down_e_r @ h_r).
Values stored in float32 buffers by the kernels (x, h) are rounded to float32 before the next product reads
them; all other arithmetic is float64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference._parallel import map_chunks
from reference._validate import QK, float_array, positive_int
from reference.elementwise import silu
from reference.matmul import blocked_product, q8_matmul
from reference.modes import Mode
from reference.quant import Q8Tensor, QuantizedActivation, quantize_activation


def route_top_k(logits, k) -> tuple[np.ndarray, np.ndarray]:
    """(indices int64 (k,), weights float64 (k,)): softmax over all E logits, keep the k largest (ties: the
    lower index first, as the kernels' strictly-greater scans), renormalize over the k. Ranked best first.

    The ranking is by the logits themselves (softmax is monotonic, so this is the exact order); the kernels rank
    their float32 exp values, which can tie where the logits differ by less than an ulp of the exp -- such a
    near-tie is for the caller to classify. Logits must be finite (ValueError otherwise)."""
    v = float_array("logits", logits, ndim=1, finite=True)
    kk = positive_int("k", k)
    if kk > v.size:
        raise ValueError(f"k: top-{kk} needs k <= E = {v.size} experts")
    p = np.exp(v - v.max())
    p /= p.sum()
    idx = np.argsort(-v, kind="stable")[:kk].astype(np.int64)
    w = p[idx]
    return idx, w / w.sum()


@dataclass(frozen=True)
class MoeWeights:
    """router (E, d), gate and up (E*dff, d) with expert e's rows at [e*dff, (e+1)*dff), down (E*d, dff) with
    expert e's rows at [e*d, (e+1)*d), all Q8Tensor; top_k experts per token."""

    router: Q8Tensor
    gate: Q8Tensor
    up: Q8Tensor
    down: Q8Tensor
    top_k: int

    def __post_init__(self) -> None:
        for name in ("router", "gate", "up", "down"):
            if not isinstance(getattr(self, name), Q8Tensor):
                raise ValueError(f"{name}: expected a Q8Tensor, got {type(getattr(self, name)).__name__}")
        e, d = self.router.shape
        dff = self.down.cols
        if self.gate.shape != (e * dff, d) or self.up.shape != (e * dff, d):
            raise ValueError(f"gate/up: expected shape ({e * dff}, {d}) = (E*dff, d) for E={e}, dff={dff}, d={d}; "
                             f"got gate {self.gate.shape}, up {self.up.shape}")
        if self.down.shape != (e * d, dff):
            raise ValueError(f"down: expected shape ({e * d}, {dff}) = (E*d, dff), got {self.down.shape}")
        k = positive_int("top_k", self.top_k)
        if k > e:
            raise ValueError(f"top_k: {k} must be <= E = {e} experts")

    @property
    def n_expert(self) -> int:
        return self.router.rows

    @property
    def d(self) -> int:
        return self.router.cols

    @property
    def dff(self) -> int:
        return self.down.cols


@dataclass(frozen=True)
class MoeTrace:
    """Every intermediate of one moe_ffn call, for judging a kernel's intermediate outputs.

    logits (E,); indices (k,) and weights (k,) as route_top_k; x_act: the quantized x (None in DEQUANT);
    gate, up, h: (k, dff) with h = silu(gate) * up rounded to float32 (as stored); h_act: the quantized h over
    the concatenated k*dff vector (None in DEQUANT); expert_out (k, d): down_e @ h_r; out (d,): the combine."""

    logits: np.ndarray
    indices: np.ndarray
    weights: np.ndarray
    x_act: "QuantizedActivation | None"
    gate: np.ndarray
    up: np.ndarray
    h: np.ndarray
    h_act: "QuantizedActivation | None"
    expert_out: np.ndarray
    out: np.ndarray


def _expert(t: Q8Tensor, e: int, per_expert: int) -> Q8Tensor:
    """Expert e's rows of an expert-major stacked matrix, as a view."""
    return Q8Tensor(t.quants[e * per_expert:(e + 1) * per_expert], t.scales[e * per_expert:(e + 1) * per_expert])


def _slice_act(act: QuantizedActivation, r: int, n: int) -> QuantizedActivation:
    lo = None if act.lo is None else act.lo[r * n:(r + 1) * n]
    return QuantizedActivation(act.hi[r * n:(r + 1) * n], act.scales[r * n // QK:(r + 1) * n // QK], lo)


def _check_x(x, weights: MoeWeights, exact: bool) -> np.ndarray:
    if not isinstance(weights, MoeWeights):
        raise ValueError(f"weights: expected MoeWeights, got {type(weights).__name__}")
    xv = float_array("x", x, ndim=1, dtype=np.float64 if exact else np.float32)
    if xv.shape != (weights.d,):
        raise ValueError(f"x: expected shape ({weights.d},) = (d,), got {xv.shape}")
    return xv


def _route(x, weights: MoeWeights, exact: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check x and weights; (x (d,) as float32, or float64 when exact; router logits (E,) in DEQUANT, top-k
    indices, their weights)."""
    xv = _check_x(x, weights, exact)
    logits = blocked_product(weights.router, xv[None])[0] if exact else q8_matmul(xv, weights.router, Mode.DEQUANT)
    idx, w = route_top_k(logits, weights.top_k)
    return xv, logits, idx, w


def _given_routing(routing, weights: MoeWeights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check a caller's (logits (E,), indices (k,), weights (k,)) routing: a router the caller evaluated itself
    (a float router, the kernels' float32 logits and weights)."""
    try:
        logits, idx, w = routing
    except (TypeError, ValueError):
        raise ValueError("routing: expected (logits, indices, weights)") from None
    lv = float_array("routing logits", logits, ndim=1)
    iv = np.asarray(idx)
    wv = float_array("routing weights", w, ndim=1)
    k = weights.top_k
    if lv.shape != (weights.n_expert,):
        raise ValueError(f"routing logits: expected shape ({weights.n_expert},) = (E,), got {lv.shape}")
    if iv.dtype.kind not in "iu" or iv.shape != (k,):
        raise ValueError(f"routing indices: expected {k} integers (top_k), got dtype {iv.dtype} shape {iv.shape}")
    if iv.min() < 0 or iv.max() >= weights.n_expert or np.unique(iv).size != k:
        raise ValueError(f"routing indices: expected {k} distinct experts in [0, {weights.n_expert}), got "
                         f"{iv.tolist()}")
    if wv.shape != (k,):
        raise ValueError(f"routing weights: expected shape ({k},) = (top_k,), got {wv.shape}")
    return lv, iv.astype(np.int64), wv


def moe_trace(x, weights: MoeWeights, mode, *, zero_rule: str = "floor", fma: bool = True, routing=None,
              exact: bool = False) -> MoeTrace:
    """moe_ffn with every intermediate (see MoeTrace).

    routing: (logits, indices, weights) evaluated by the caller (a float router, or the kernels' float32 router
    outputs), used instead of routing x through ``weights.router``.
    exact: DEQUANT in float64 throughout -- x is not rounded to float32 and neither is h (the truth a decoder's
    exact lane computes); only with mode DEQUANT.
    """
    mode = Mode.parse(mode)
    if exact and mode is not Mode.DEQUANT:
        raise ValueError(f"exact: float64 storage is the DEQUANT math only, got mode {mode.value}")
    if routing is None:
        xv, logits, idx, w = _route(x, weights, exact)
    else:
        xv = _check_x(x, weights, exact)
        logits, idx, w = _given_routing(routing, weights)
    k, dff, d = weights.top_k, weights.dff, weights.d
    x_act = quantize_activation(xv, mode, zero_rule=zero_rule, fma=fma)
    g, u = np.empty(k * dff), np.empty(k * dff)

    def product(t: Q8Tensor, v, act) -> np.ndarray:
        if exact:
            return blocked_product(t, v[None])[0]
        return q8_matmul(v, t, mode) if act is None else q8_matmul(None, t, mode, act=act)

    # One job per routed expert, on views of its contiguous rows (no copy of the expert matrices); the jobs
    # share the cores (each expert's product alone is too small to be split).
    def gate_up(r: int) -> None:
        sl = slice(r * dff, (r + 1) * dff)
        g[sl] = product(_expert(weights.gate, idx[r], dff), xv if x_act is None else None, x_act)
        u[sl] = product(_expert(weights.up, idx[r], dff), xv if x_act is None else None, x_act)

    map_chunks(k, gate_up)
    h = silu(g) * u
    if not exact:
        h = h.astype(np.float32)                             # the kernels store h as float32
    h_act = quantize_activation(h, mode, zero_rule=zero_rule, fma=fma)
    expert_out = np.empty((k, d))

    def down(r: int) -> None:
        act = None if h_act is None else _slice_act(h_act, r, dff)
        expert_out[r] = product(_expert(weights.down, idx[r], d), h[r * dff:(r + 1) * dff] if act is None else None,
                                act)

    map_chunks(k, down)
    out = w @ expert_out
    return MoeTrace(logits, idx, w, x_act, g.reshape(k, dff), u.reshape(k, dff), h.reshape(k, dff).astype(np.float64),
                    h_act, expert_out, out)


def moe_ffn(x, weights: MoeWeights, mode, *, zero_rule: str = "floor", fma: bool = True) -> np.ndarray:
    """The MoE FFN output (d,) float64 for activation x (d,) in `mode` (see the module docstring)."""
    return moe_trace(x, weights, mode, zero_rule=zero_rule, fma=fma).out


def moe_ffn_dense(x, weights: MoeWeights) -> np.ndarray:
    """DEQUANT MoE computed densely: every expert's FFN, combined with a weight vector that is zero outside
    the top-k (the dense moe_topk + moe_combine path). Equals moe_ffn(x, weights, DEQUANT) up to float64
    rounding."""
    xv, _, idx, w = _route(x, weights)
    e, d, dff = weights.n_expert, weights.d, weights.dff
    dense_w = np.zeros(e)
    dense_w[idx] = w
    g = q8_matmul(xv, weights.gate, Mode.DEQUANT)
    u = q8_matmul(xv, weights.up, Mode.DEQUANT)
    h = (silu(g) * u).astype(np.float32).reshape(e, dff)
    outs = np.stack([q8_matmul(h[i], weights.down.take_rows(np.arange(i * d, (i + 1) * d)), Mode.DEQUANT)
                     for i in range(e)])
    return dense_w @ outs
