"""A Qwen3-MoE model as the reference decoder sees it: its configuration and its weights.

This module holds data only. Weights come from a GGUF checkpoint (``harness.model.checkpoint``), from the
synthetic generator (``harness.model.synthetic``) or from a test; the decoder (``reference.decoder``) reads
them through this interface and never knows which. Layers are reached through ``ModelWeights.layer(i)``
so a checkpoint can hand out one memory-mapped layer at a time: a 32 GB file never has to fit in memory.

Layouts are the kernels' (and GGUF's numpy views'): every matrix is (out_features, in_features), row-major;
the expert matrices are expert-major, so expert e of ``gate_exps`` / ``up_exps`` is rows
[e*d_expert, (e+1)*d_expert) and expert e of ``down_exps`` is rows [e*d_model, (e+1)*d_model)
(the layout of ``reference.moe.MoeWeights``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from reference.moe import MoeWeights
from reference.quant import Q8Blocks, Q8Tensor
from reference.shapes import ShapeSet


@dataclass(frozen=True)
class ModelConfig:
    """The numbers a decoder needs, as a checkpoint states them (nothing here has a default)."""

    n_layer: int
    d_model: int          # embedding_length
    n_head: int           # attention.head_count
    n_kv_head: int        # attention.head_count_kv
    head_dim: int         # attention.key_length
    n_expert: int         # expert_count
    n_expert_used: int    # expert_used_count (top-K)
    d_expert: int         # expert_feed_forward_length
    vocab: int            # rows of token_embd
    rope_theta: float     # rope.freq_base
    rms_eps: float        # attention.layer_norm_rms_epsilon

    def __post_init__(self) -> None:
        for name in ("n_layer", "d_model", "n_head", "n_kv_head", "head_dim", "n_expert", "n_expert_used",
                     "d_expert", "vocab"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_head: {self.n_head} query heads must be a multiple of n_kv_head "
                             f"({self.n_kv_head}) for grouped-query attention")
        if self.n_expert_used > self.n_expert:
            raise ValueError(f"n_expert_used: {self.n_expert_used} exceeds n_expert ({self.n_expert})")
        for name in ("d_model", "d_expert", "head_dim"):
            if getattr(self, name) % 32:
                raise ValueError(f"{name}: {getattr(self, name)} must be a multiple of 32 (one Q8_0 block)")
        if self.head_dim % 2:
            raise ValueError(f"head_dim: {self.head_dim} must be even for NEOX RoPE")
        for name in ("rope_theta", "rms_eps"):
            value = getattr(self, name)
            if not np.isfinite(value) or value <= 0:
                raise ValueError(f"{name}: expected a positive finite number, got {value!r}")

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_head * self.head_dim

    def as_shape(self, name: str = "model", kv_len: int = 1, attn_split: int = 8) -> ShapeSet:
        """The kernel family's shape set at this model's dimensions (what the emitters are given)."""
        return ShapeSet(name=name, d=self.d_model, dff=self.d_expert, n_expert=self.n_expert,
                        top_k=self.n_expert_used, n_head=self.n_head, n_kv=self.n_kv_head,
                        head_dim=self.head_dim, vocab=self.vocab, n_layer=self.n_layer, kv_len=kv_len,
                        rope_theta=float(self.rope_theta), rms_eps=float(self.rms_eps), attn_split=attn_split)


@dataclass(frozen=True)
class LayerWeights:
    """One transformer block. Norm weights are float32 vectors; matrices are Q8_0. The stacked expert matrices
    may stay in GGUF block layout (reference.quant.Q8Blocks, e.g. memory-mapped): a decoder converts only the
    rows of the experts it routes to.

    ``router`` is the Q8_0 router the kernels read. ``router_float`` is the router as the checkpoint stored
    it when that was a float type (real Q8_0 checkpoints keep ``ffn_gate_inp`` in F32), else None: the
    report states what quantizing it changes.
    """

    attn_norm: np.ndarray      # (d_model,)
    wq: Q8Tensor               # (q_dim, d_model)
    wk: Q8Tensor               # (kv_dim, d_model)
    wv: Q8Tensor               # (kv_dim, d_model)
    wo: Q8Tensor               # (d_model, q_dim)
    q_norm: np.ndarray         # (head_dim,)
    k_norm: np.ndarray         # (head_dim,)
    ffn_norm: np.ndarray       # (d_model,)
    router: Q8Tensor           # (n_expert, d_model)
    gate_exps: "Q8Tensor | Q8Blocks"   # (n_expert * d_expert, d_model)
    up_exps: "Q8Tensor | Q8Blocks"     # (n_expert * d_expert, d_model)
    down_exps: "Q8Tensor | Q8Blocks"   # (n_expert * d_model, d_expert)
    router_float: Optional[np.ndarray] = None   # (n_expert, d_model) float32, or None

    def moe(self, top_k: int) -> MoeWeights:
        return MoeWeights(router=self.router, gate=self.gate_exps, up=self.up_exps, down=self.down_exps,
                          top_k=top_k)

    def check(self, config: ModelConfig, index: int) -> None:
        """Raise ValueError naming the GGUF tensor whose shape disagrees with the config."""
        c = config
        want = {
            "attn_norm": (c.d_model,), "attn_q": (c.q_dim, c.d_model), "attn_k": (c.kv_dim, c.d_model),
            "attn_v": (c.kv_dim, c.d_model), "attn_output": (c.d_model, c.q_dim),
            "attn_q_norm": (c.head_dim,), "attn_k_norm": (c.head_dim,), "ffn_norm": (c.d_model,),
            "ffn_gate_inp": (c.n_expert, c.d_model), "ffn_gate_exps": (c.n_expert * c.d_expert, c.d_model),
            "ffn_up_exps": (c.n_expert * c.d_expert, c.d_model),
            "ffn_down_exps": (c.n_expert * c.d_model, c.d_expert),
        }
        have = {
            "attn_norm": self.attn_norm.shape, "attn_q": self.wq.shape, "attn_k": self.wk.shape,
            "attn_v": self.wv.shape, "attn_output": self.wo.shape, "attn_q_norm": self.q_norm.shape,
            "attn_k_norm": self.k_norm.shape, "ffn_norm": self.ffn_norm.shape, "ffn_gate_inp": self.router.shape,
            "ffn_gate_exps": self.gate_exps.shape, "ffn_up_exps": self.up_exps.shape,
            "ffn_down_exps": self.down_exps.shape,
        }
        for key, shape in want.items():
            if tuple(have[key]) != shape:
                raise ValueError(f"blk.{index}.{key}.weight: expected shape {shape} (out, in) from the model "
                                 f"config, got {tuple(have[key])}")
        for key, vec in (("attn_norm", self.attn_norm), ("attn_q_norm", self.q_norm),
                         ("attn_k_norm", self.k_norm), ("ffn_norm", self.ffn_norm)):
            if vec.dtype != np.float32:
                raise ValueError(f"blk.{index}.{key}.weight: expected float32 norm weights, got {vec.dtype}")
        if self.router_float is not None and self.router_float.shape != (c.n_expert, c.d_model):
            raise ValueError(f"blk.{index}.ffn_gate_inp.weight: float router has shape "
                             f"{self.router_float.shape}, expected {(c.n_expert, c.d_model)}")


@dataclass(frozen=True)
class ModelWeights:
    """The whole model. ``layer(i)`` may build the layer on demand (memory-mapped views, cheap);
    ``output`` is ``token_embd`` itself when the checkpoint ties the LM head to the embedding."""

    config: ModelConfig
    token_embd: Q8Tensor        # (vocab, d_model)
    output_norm: np.ndarray     # (d_model,) float32
    output: Q8Tensor            # (vocab, d_model)
    layer_source: Callable[[int], LayerWeights]
    name: str = "model"
    tied_output: bool = False

    def layer(self, index: int) -> LayerWeights:
        if not 0 <= index < self.config.n_layer:
            raise ValueError(f"layer: index {index} outside [0, {self.config.n_layer})")
        return self.layer_source(index)

    def check(self) -> None:
        """Check every shape against the config (layers are visited one at a time)."""
        c = self.config
        if self.token_embd.shape != (c.vocab, c.d_model):
            raise ValueError(f"token_embd.weight: expected shape {(c.vocab, c.d_model)}, got "
                             f"{self.token_embd.shape}")
        if self.output.shape != (c.vocab, c.d_model):
            raise ValueError(f"output.weight: expected shape {(c.vocab, c.d_model)}, got {self.output.shape}")
        if self.output_norm.shape != (c.d_model,) or self.output_norm.dtype != np.float32:
            raise ValueError(f"output_norm.weight: expected float32 of shape {(c.d_model,)}, got "
                             f"{self.output_norm.dtype} {self.output_norm.shape}")
        for i in range(c.n_layer):
            self.layer(i).check(c, i)
