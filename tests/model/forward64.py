"""A plain float64 forward of a ModelWeights (dequantized weights, exact softmax routing), used by the model
tests to look at what a synthetic model's logits are like. Independent of the lanes of reference.decoder."""
from __future__ import annotations

import numpy as np

from reference.attention import decode_attention
from reference.elementwise import silu
from reference.model import ModelWeights
from reference.moe import route_top_k
from reference.norm import rms_norm
from reference.rope import qk_norm_rope


class Forward64:
    def __init__(self, w: ModelWeights):
        self.w, self.c = w, w.config
        self.layers = [w.layer(i) for i in range(self.c.n_layer)]
        self.deq = [{k: v.dequantize() for k, v in vars(L).items() if hasattr(v, "dequantize")} for L in self.layers]
        self.emb = w.token_embd.dequantize()
        self.out = w.output.dequantize()
        self.k = [np.zeros((0, self.c.kv_dim)) for _ in self.layers]
        self.v = [np.zeros((0, self.c.kv_dim)) for _ in self.layers]
        self.pos = 0
        self.last_xn = None
        self.experts: list[np.ndarray] = []

    def step(self, token: int) -> np.ndarray:
        c, eps = self.c, self.c.rms_eps
        x = self.emb[token].copy()
        chosen = []
        for i, (L, D) in enumerate(zip(self.layers, self.deq)):
            xn = rms_norm(x, L.attn_norm, eps)
            q = qk_norm_rope(D["wq"] @ xn, L.q_norm, self.pos, c.rope_theta, c.head_dim, eps)
            k = qk_norm_rope(D["wk"] @ xn, L.k_norm, self.pos, c.rope_theta, c.head_dim, eps)
            self.k[i] = np.vstack([self.k[i], k])
            self.v[i] = np.vstack([self.v[i], D["wv"] @ xn])
            a = decode_attention(q, self.k[i], self.v[i], c.n_head, c.n_kv_head, c.head_dim)
            x = x + D["wo"] @ a
            x2n = rms_norm(x, L.ffn_norm, eps)
            idx, wts = route_top_k(D["router"] @ x2n, c.n_expert_used)
            chosen.append(idx)
            moe = np.zeros(c.d_model)
            f, d = c.d_expert, c.d_model
            for e, we in zip(idx, wts):
                g = D["gate_exps"][e * f:(e + 1) * f] @ x2n
                u = D["up_exps"][e * f:(e + 1) * f] @ x2n
                moe += we * (D["down_exps"][e * d:(e + 1) * d] @ (silu(g) * u))
            x = x + moe
        self.experts.append(np.array(chosen))
        self.pos += 1
        self.last_xn = rms_norm(x, self.w.output_norm, eps)
        return self.out @ self.last_xn


def lm_head_int8_bound(w: ModelWeights, xn: np.ndarray) -> np.ndarray:
    """Per-token bound on the logit change when the LM head's input is quantized to int8 per 32-block
    (scale amax/127, rounding error at most scale/2 per element): sum_b scale_b/2 * sum_{j in b} |W_vj|."""
    blocks = np.abs(xn).reshape(-1, 32)
    half_step = blocks.max(axis=1) / 127 / 2
    absw = np.abs(w.output.dequantize()).reshape(w.config.vocab, -1, 32).sum(axis=2)
    return absw @ half_step
