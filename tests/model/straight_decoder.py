"""An independent, straightforward float64 Qwen3-MoE greedy decoder for checking the reference's exact lane.

Plain NumPy on dequantized weights: nothing from reference/ is used except Q8Tensor.dequantize. Written
from the model's definition (Qwen3-MoE: RMSNorm, Q/K/V, per-head q/k RMSNorm, NeoX RoPE, GQA softmax
attention, output projection, residual, RMSNorm, softmax router with top-K renormalized, SwiGLU experts,
residual; final RMSNorm and LM head), not from the reference's code.
"""
from __future__ import annotations

import numpy as np


def _rmsnorm(v, w, eps):
    return v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def _rope(h, pos, theta):
    half = h.shape[-1] // 2
    inv = theta ** (-np.arange(half) * 2.0 / h.shape[-1])
    ang = pos * inv
    cos, sin = np.cos(ang), np.sin(ang)
    a, b = h[..., :half], h[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def straight_generate(weights, prompt, n_tokens, router="q8"):
    """(generated tokens, logits of every step) in float64."""
    c = weights.config
    emb = weights.token_embd.dequantize()
    head = weights.output.dequantize()
    dense = [None] * c.n_layer
    keys = [[] for _ in range(c.n_layer)]
    vals = [[] for _ in range(c.n_layer)]
    group = c.n_head // c.n_kv_head
    feed, logits_all, out = list(prompt), [], []
    pos = 0
    while feed:
        x = emb[feed.pop(0)].copy()
        for li in range(c.n_layer):
            if dense[li] is None:
                L = weights.layer(li)
                r = L.router_float.astype(np.float64) if router == "float" else L.router.dequantize()
                dense[li] = dict(L=L, wq=L.wq.dequantize(), wk=L.wk.dequantize(), wv=L.wv.dequantize(),
                                 wo=L.wo.dequantize(), r=r, g=L.gate_exps.dequantize(), u=L.up_exps.dequantize(),
                                 d=L.down_exps.dequantize())
            D = dense[li]
            L = D["L"]
            h = _rmsnorm(x, L.attn_norm, c.rms_eps)
            q = (D["wq"] @ h).reshape(c.n_head, c.head_dim)
            k = (D["wk"] @ h).reshape(c.n_kv_head, c.head_dim)
            v = (D["wv"] @ h).reshape(c.n_kv_head, c.head_dim)
            q = _rope(_rmsnorm(q, L.q_norm, c.rms_eps), pos, c.rope_theta)
            k = _rope(_rmsnorm(k, L.k_norm, c.rms_eps), pos, c.rope_theta)
            keys[li].append(k)
            vals[li].append(v)
            K = np.stack(keys[li])          # (T, n_kv, hd)
            V = np.stack(vals[li])
            att = np.empty((c.n_head, c.head_dim))
            for hh in range(c.n_head):
                s = K[:, hh // group, :] @ q[hh] / np.sqrt(c.head_dim)
                p = np.exp(s - s.max())
                att[hh] = (p / p.sum()) @ V[:, hh // group, :]
            x = x + D["wo"] @ att.reshape(-1)
            h = _rmsnorm(x, L.ffn_norm, c.rms_eps)
            rl = D["r"] @ h
            prob = np.exp(rl - rl.max())
            prob /= prob.sum()
            top = np.argsort(-prob, kind="stable")[:c.n_expert_used]
            wt = prob[top] / prob[top].sum()
            y = np.zeros(c.d_model)
            for e, we in zip(top, wt):
                g = D["g"][e * c.d_expert:(e + 1) * c.d_expert] @ h
                u = D["u"][e * c.d_expert:(e + 1) * c.d_expert] @ h
                act = g / (1.0 + np.exp(-g)) * u
                y += we * (D["d"][e * c.d_model:(e + 1) * c.d_model] @ act)
            x = x + y
        logits = head @ _rmsnorm(x, weights.output_norm, c.rms_eps)
        logits_all.append(logits)
        pos += 1
        if not feed and pos >= len(prompt) - 1 and len(out) < n_tokens:
            out.append(int(np.argmax(logits)))
            if len(out) < n_tokens:
                feed.append(out[-1])
    return out, logits_all
