"""Model-driven cases (`--inputs-from FILE.gguf`): each kernel is also judged on the values a real forward
pass feeds it.

A reference decode of the checkpoint (reference.decoder, "precise" lane: float32 buffers between kernels,
DEQUANT arithmetic) runs a few positions with every intermediate buffer captured. A case with the input
variant ``model`` then takes its inputs from those buffers instead of the seeded generators: the
activation a GEMV reads (the attention norm's output for q/k/v, the attention output for o, the final norm
for the LM head, the FFN norm for the router and the experts, the SiLU product for the down projection),
the layer's real Q8_0 weights where the contract's matrix has the checkpoint's shape, the router logits,
the residual stream an RMSNorm reads, the roped query and the KV cache attention reads, the logits argmax
reads. Which layer and position a case uses follows from its seed, so a case replays from its name given
the same file. An input the capture does not hold at the contract's size (another shape set than the
checkpoint's, an op without a model input) makes the case unchecked with the reason, never a pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

LANE = "precise"
DEFAULT_POSITIONS = 6
MODEL_VARIANT = "model"


class NoModelInput(ValueError):
    """The capture holds no input of the size a case needs: the judge reports the case unchecked with this
    reason (harness.judging.core.prepare)."""


@dataclass
class Captured:
    path: str
    sha256: str
    config: object
    weights: object
    buffers: list[dict]                  # one dict per position: {(layer, name): array}
    tokens: list[int]
    notes: list[str] = field(default_factory=list)

    @property
    def positions(self) -> int:
        return len(self.buffers)


_ACTIVE: Optional[Captured] = None


def use(captured: Optional[Captured]) -> None:
    """Make `captured` the source of every `model` case from now on (None: no model cases)."""
    global _ACTIVE
    _ACTIVE = captured


def active() -> Optional[Captured]:
    return _ACTIVE


def capture(w, path: "str | Path", sha256: str, *, positions: int = DEFAULT_POSITIONS, seed: int = 0) -> Captured:
    """Decode `positions` tokens of the checkpoint's weights `w` (reference.model.ModelWeights, opened by the
    caller from `path`, whose digest is `sha256`): a seeded prompt of two tokens, then greedy, with every
    buffer captured."""
    from reference.decoder import Decoder
    if positions < 2:
        raise ValueError(f"--model-positions: expected at least 2 positions, got {positions}")
    dec = Decoder(w, LANE, max_positions=positions, capture=True)
    rng = np.random.default_rng(seed)
    tok = int(rng.integers(0, w.config.vocab))
    prompt = [tok, int(rng.integers(0, w.config.vocab))]
    bufs, toks = [], []
    for p in range(positions):
        t = prompt[p] if p < len(prompt) else toks[-1]
        rec = dec.step(t)
        bufs.append(rec.buffers)
        toks.append(int(rec.token))
    return Captured(str(path), sha256, w.config, w, bufs, prompt + toks[len(prompt) - 1:-1])


# ops whose builders take their inputs from the capture; a model case of any other op is unchecked with the
# reason (its builder would draw seeded inputs under the `model` label)
MODEL_OPS = frozenset({"act_quant", "q8_gemv", "q8_gemv_qkv", "q8_gemm_mma", "moe_topk_idx", "moe_topk_mask",
                       "moe_gate_up_silu", "moe_down_combine", "rms_norm", "attention", "attention_partials",
                       "argmax_advance"})


def require_supported(op: str) -> None:
    if op not in MODEL_OPS:
        raise NoModelInput(f"op {op} takes no inputs from the checkpoint's decode (model inputs exist for "
                           f"{', '.join(sorted(MODEL_OPS))})")


# -- what each contract reads ------------------------------------------------------------------------------
# the captured buffer an activation comes from, by the contract's size-instance label
_ACT_BY_INSTANCE = {
    "attn_q": "xn", "attn_k": "xn", "attn_v": "xn", "qkv": "xn", "attn_q_prefill": "xn", "prefill_q": "xn",
    "x_norm": "xn", "x_norm_prefill": "xn", "attn_out": "attnb", "prefill_out": "attnb", "attn_ctx": "attnb",
    "router": "x2n", "expert_gate": "x2n", "expert_up": "x2n", "experts": "x2n", "x": "x2n",
    "expert_down": "moe_he", "h": "moe_he", "lm_head": "xn@final", "attn_norm": "x", "decode": "x",
    "prefill_3": "x",
}
# the layer's matrix a GEMV instance multiplies
_WEIGHT_BY_INSTANCE = {"attn_q": "wq", "attn_k": "wk", "attn_v": "wv", "attn_out": "wo", "lm_head": "output",
                       "router": "router", "attn_q_prefill": "wq", "prefill_q": "wq", "prefill_out": "wo"}


def _require() -> Captured:
    if _ACTIVE is None:
        raise NoModelInput("no checkpoint was given (--inputs-from)")
    return _ACTIVE


def where(case) -> tuple[int, int]:
    """(layer, position) a model case reads, from its seed: stable, different across cases."""
    c = _require()
    rng = np.random.default_rng(case.seed)
    return int(rng.integers(0, c.config.n_layer)), int(rng.integers(1, c.positions))


def _buffer(c: Captured, layer: int, pos: int, name: str) -> np.ndarray:
    if name.endswith("@final"):
        layer, name = -1, name[:-len("@final")]
    key = (layer, name)
    if key not in c.buffers[pos]:
        raise NoModelInput(f"the {LANE} decode captured no buffer {name!r} at layer {layer}")
    return np.asarray(c.buffers[pos][key])


def activation(ctx, count: int, default: Optional[str] = None, name: Optional[str] = None) -> np.ndarray:
    """`count` float32 values of the activation the contract's instance reads: one position's buffer, or
    count / size positions stacked (a prefill of several rows)."""
    c = _require()
    layer, pos = where(ctx.case)
    name = name or _ACT_BY_INSTANCE.get(ctx.case.instance, default)
    if name is None:
        raise NoModelInput(f"no captured activation for instance {ctx.case.instance!r} of op {ctx.contract.op}")
    one = _buffer(c, layer, pos, name).astype(np.float32).reshape(-1)
    if count == one.size:
        return one
    if count % one.size == 0 and count // one.size <= c.positions:
        rows = count // one.size
        return np.concatenate([_buffer(c, layer, p, name).astype(np.float32).reshape(-1)
                               for p in range(rows)])
    raise NoModelInput(f"the checkpoint's {name!r} holds {one.size} values, the kernel's input {count} (another "
                       f"shape set than the checkpoint's: d={c.config.d_model})")


def weight(ctx, N: int, K: int):
    """The layer's Q8_0 matrix of this GEMV instance when its shape is (N, K); else None (the case keeps
    seeded Gaussian weights and says so in its notes)."""
    c = _require()
    name = _WEIGHT_BY_INSTANCE.get(ctx.case.instance)
    if name is None:
        return None
    layer, _ = where(ctx.case)
    w = getattr(c.weights, "output") if name == "output" else getattr(c.weights.layer(layer), name)
    if tuple(w.quants.shape) != (N, K):
        raise NoModelInput(f"the checkpoint's {name} is {tuple(w.quants.shape)}, the kernel's matrix ({N}, {K})")
    return w


def buffer(ctx, name: str, count: int) -> np.ndarray:
    """A named captured buffer (router logits, final logits, ...) of exactly `count` elements."""
    c = _require()
    layer, pos = where(ctx.case)
    b = _buffer(c, layer, pos, name).reshape(-1)
    if b.size != count:
        raise NoModelInput(f"the checkpoint's {name!r} holds {b.size} values, the kernel's input {count}")
    return b


def attention(ctx, nh: int, nkv: int, hd: int, rows: int, L: int, raw_query: bool = False
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, k cache (rows, nkv*hd), v cache) of one layer at position L - 1: the roped query and the cached
    keys and values of positions 0..L-1 (a model case's L is the number of positions decoded)."""
    c = _require()
    layer, _ = where(ctx.case)
    pos = L - 1
    if not 0 <= pos < c.positions:
        raise NoModelInput(f"the decode captured {c.positions} positions, the case needs {L}")
    q = _buffer(c, layer, pos, "qbuf" if raw_query else "q_rope").astype(np.float32).reshape(-1)
    if q.size != nh * hd:
        raise NoModelInput(f"the checkpoint's query has {q.size} values, the kernel's {nh * hd}")
    if rows < L:
        raise NoModelInput(f"the kernel's cache holds {rows} rows, the decode reached {L} positions")
    kc = np.zeros((rows, nkv * hd), dtype=np.float32)
    vc = np.zeros_like(kc)
    for p in range(L):
        kc[p] = _buffer(c, layer, p, "kc_row").reshape(-1)
        vc[p] = _buffer(c, layer, p, "vc_row").reshape(-1)
    return q, kc, vc


def experts(ctx, which: str, E: int, rows: int, K: int):
    """(quants (E, rows, K), scales (E, rows, K/32)) of the layer's gate, up or down experts."""
    c = _require()
    layer, _ = where(ctx.case)
    w = getattr(c.weights.layer(layer), {"gate": "gate_exps", "up": "up_exps", "down": "down_exps"}[which])
    if w.quants.size != E * rows * K:
        raise NoModelInput(f"the checkpoint's {which} experts are {tuple(w.quants.shape)}, the kernel's "
                           f"{E} x ({rows}, {K})")
    return w.quants.reshape(E, rows, K), w.scales.reshape(E, rows, K // 32)


def q_norm(ctx) -> np.ndarray:
    """The layer's per-head query norm weight (a fused QK-norm + RoPE attention reads it)."""
    c = _require()
    layer, _ = where(ctx.case)
    return np.asarray(c.weights.layer(layer).q_norm, dtype=np.float32)
