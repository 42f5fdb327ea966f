"""A small Qwen3-MoE model of seeded Gaussian weights, built in memory (no checkpoint file needed)."""
from __future__ import annotations

import numpy as np

from reference.model import LayerWeights, ModelConfig, ModelWeights
from reference.quant import quantize_q8_0

SMALL = dict(n_layer=2, d_model=64, n_head=4, n_kv_head=2, head_dim=32, n_expert=8, n_expert_used=2,
             d_expert=32, vocab=96, rope_theta=1.0e6, rms_eps=1.0e-6)


def small_weights(seed: int = 0, **overrides) -> ModelWeights:
    """Gaussian weights (std 1/sqrt(fan-in)), quantized to Q8_0; norm weights near 1; a float router kept
    beside its Q8_0 copy. Layers are built once and handed out by layer(i)."""
    cfg = ModelConfig(**{**SMALL, **overrides})
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int, scale: float = 1.0):
        return quantize_q8_0(rng.standard_normal((rows, cols)) * (scale / np.sqrt(cols)))

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    c = cfg
    layers = []
    for _ in range(c.n_layer):
        router_float = (rng.standard_normal((c.n_expert, c.d_model)) / np.sqrt(c.d_model)).astype(np.float32)
        layers.append(LayerWeights(
            attn_norm=norm(c.d_model), wq=mat(c.q_dim, c.d_model), wk=mat(c.kv_dim, c.d_model),
            wv=mat(c.kv_dim, c.d_model), wo=mat(c.d_model, c.q_dim), q_norm=norm(c.head_dim),
            k_norm=norm(c.head_dim), ffn_norm=norm(c.d_model), router=quantize_q8_0(router_float),
            gate_exps=mat(c.n_expert * c.d_expert, c.d_model), up_exps=mat(c.n_expert * c.d_expert, c.d_model),
            down_exps=mat(c.n_expert * c.d_model, c.d_expert), router_float=router_float))
    embd = quantize_q8_0(rng.standard_normal((c.vocab, c.d_model)))
    weights = ModelWeights(config=c, token_embd=embd, output_norm=norm(c.d_model),
                           output=mat(c.vocab, c.d_model, scale=4.0), layer_source=layers.__getitem__,
                           name=f"small-seed{seed}")
    weights.check()
    return weights
