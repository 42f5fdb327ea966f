"""Small in-memory models for the program/chain tests: seeded Gaussian weights quantized to Q8_0."""
from __future__ import annotations

import numpy as np

from reference.model import LayerWeights, ModelConfig, ModelWeights
from reference.quant import quantize_q8_0


def tiny_config(n_layer: int = 1, **over) -> ModelConfig:
    base = dict(n_layer=n_layer, d_model=512, n_head=4, n_kv_head=2, head_dim=64, n_expert=32, n_expert_used=4,
                d_expert=128, vocab=1024, rope_theta=1.0e6, rms_eps=1.0e-6)
    base.update(over)
    return ModelConfig(**base)


def gaussian_weights(config: ModelConfig, seed: int) -> ModelWeights:
    """Weights N(0, 1/sqrt(fan_in)) quantized to Q8_0, norms around 1; every array from numpy seed `seed`."""
    rng = np.random.default_rng(seed)
    c = config

    def q8(rows, cols):
        return quantize_q8_0((rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32))

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    layers = []
    for _ in range(c.n_layer):
        layers.append(LayerWeights(
            attn_norm=norm(c.d_model), wq=q8(c.q_dim, c.d_model), wk=q8(c.kv_dim, c.d_model),
            wv=q8(c.kv_dim, c.d_model), wo=q8(c.d_model, c.q_dim), q_norm=norm(c.head_dim), k_norm=norm(c.head_dim),
            ffn_norm=norm(c.d_model), router=q8(c.n_expert, c.d_model),
            gate_exps=q8(c.n_expert * c.d_expert, c.d_model), up_exps=q8(c.n_expert * c.d_expert, c.d_model),
            down_exps=q8(c.n_expert * c.d_model, c.d_expert)))
    emb = quantize_q8_0(rng.standard_normal((c.vocab, c.d_model)).astype(np.float32))
    out = q8(c.vocab, c.d_model)
    return ModelWeights(config=c, token_embd=emb, output_norm=norm(c.d_model), output=out,
                        layer_source=lambda i: layers[i], name=f"gauss-seed{seed}")
