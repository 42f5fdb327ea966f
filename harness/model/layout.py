"""What a qwen3moe GGUF holds: the metadata keys of the config, the tensor names, their shapes and types.

One definition shared by the loader (checkpoint.py), the synthetic writer (synthetic.py) and the exporter
(export.py). Shapes are NumPy's order (GGUF lists dimensions the other way round: a GGUF tensor with
ne = [d, dff, E] reads as a NumPy array of shape (E, dff, d)).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from gguf import GGMLQuantizationType as T

from reference.model import ModelConfig
from reference.quant import QK

ARCH = "qwen3moe"

# ModelConfig field -> metadata key (without the "qwen3moe." prefix) and the value's kind. `vocab` is not here:
# it is the row count of token_embd.weight.
CONFIG_KEYS: dict[str, tuple[str, type]] = {
    "n_layer": ("block_count", int),
    "d_model": ("embedding_length", int),
    "n_head": ("attention.head_count", int),
    "n_kv_head": ("attention.head_count_kv", int),
    "head_dim": ("attention.key_length", int),
    "n_expert": ("expert_count", int),
    "n_expert_used": ("expert_used_count", int),
    "d_expert": ("expert_feed_forward_length", int),
    "rope_theta": ("rope.freq_base", float),
    "rms_eps": ("attention.layer_norm_rms_epsilon", float),
}


def config_key(field: str) -> str:
    return f"{ARCH}.{CONFIG_KEYS[field][0]}"


# One Q8_0 block as GGUF stores it (34 bytes): a structured view of a tensor's bytes reads scales and quants
# in place.
Q8_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", (QK,))])

# Tensor roles: what types the loader accepts for each.
MATRIX, ROUTER, NORM = "matrix", "router", "norm"
FLOAT_TYPES = (T.F32, T.F16, T.BF16)
ACCEPTED_TYPES = {MATRIX: (T.Q8_0,), ROUTER: (T.Q8_0,) + FLOAT_TYPES, NORM: FLOAT_TYPES}


@dataclass(frozen=True)
class TensorSlot:
    name: str                  # GGUF tensor name
    shape: tuple[int, ...]     # NumPy order
    role: str                  # MATRIX, ROUTER or NORM
    rule: str                  # where the shape comes from, in the metadata's words (for error messages)
    layer: int = -1            # block index, -1 for the model-level tensors


# (field of reference.model.LayerWeights, GGUF short name, role)
LAYER_TENSORS = (
    ("attn_norm", "attn_norm", NORM), ("wq", "attn_q", MATRIX), ("wk", "attn_k", MATRIX),
    ("wv", "attn_v", MATRIX), ("wo", "attn_output", MATRIX), ("q_norm", "attn_q_norm", NORM),
    ("k_norm", "attn_k_norm", NORM), ("ffn_norm", "ffn_norm", NORM), ("router", "ffn_gate_inp", ROUTER),
    ("gate_exps", "ffn_gate_exps", MATRIX), ("up_exps", "ffn_up_exps", MATRIX),
    ("down_exps", "ffn_down_exps", MATRIX),
)
OUTPUT = "output.weight"       # optional: absent when the LM head is tied to the embedding


def layer_slots(c: ModelConfig, i: int) -> list[TensorSlot]:
    d, q, kv, hd, e, f = c.d_model, c.q_dim, c.kv_dim, c.head_dim, c.n_expert, c.d_expert
    emb, qd = "embedding_length", "head_count*key_length"
    kvd, ne, ff = "head_count_kv*key_length", "expert_count", "expert_feed_forward_length"
    shapes = {
        "attn_norm": ((d,), f"[{emb}]"), "attn_q": ((q, d), f"[{emb}, {qd}]"),
        "attn_k": ((kv, d), f"[{emb}, {kvd}]"), "attn_v": ((kv, d), f"[{emb}, {kvd}]"),
        "attn_output": ((d, q), f"[{qd}, {emb}]"), "attn_q_norm": ((hd,), "[key_length]"),
        "attn_k_norm": ((hd,), "[key_length]"), "ffn_norm": ((d,), f"[{emb}]"),
        "ffn_gate_inp": ((e, d), f"[{emb}, {ne}]"), "ffn_gate_exps": ((e, f, d), f"[{emb}, {ff}, {ne}]"),
        "ffn_up_exps": ((e, f, d), f"[{emb}, {ff}, {ne}]"), "ffn_down_exps": ((e, d, f), f"[{ff}, {emb}, {ne}]"),
    }
    return [TensorSlot(f"blk.{i}.{short}.weight", shapes[short][0], role, shapes[short][1], i)
            for _field, short, role in LAYER_TENSORS]


def model_slots(c: ModelConfig, *, with_output: bool = True) -> list[TensorSlot]:
    """Every tensor of the model in file order (embedding, blocks, final norm, LM head)."""
    v, d = c.vocab, c.d_model
    slots = [TensorSlot("token_embd.weight", (v, d), MATRIX, "[embedding_length, vocab]")]
    for i in range(c.n_layer):
        slots += layer_slots(c, i)
    slots.append(TensorSlot("output_norm.weight", (d,), NORM, "[embedding_length]"))
    if with_output:
        slots.append(TensorSlot(OUTPUT, (v, d), MATRIX, "[embedding_length, vocab]"))
    return slots


def gguf_dims(shape: "tuple[int, ...]") -> list[int]:
    """A NumPy shape in GGUF's order (ne0 first), as GGUF tools print it."""
    return list(reversed(shape))


# The export-weights folder (export.py writes it, exported.py opens it) beside the seed's own files.
EXPORT_MANIFEST = "manifest.json"
EXPORT_TOKENS = "tokens.json"
EXPORT_FORMAT = "qconform-export-1"
ROUTER_FLOAT_EXT = "rf"       # wr{l}.rf: the float router as the checkpoint stores it (float32)

# Every file's size and a sampled SHA-256 are in the manifest beside the full SHA-256: opening the folder checks
# the sizes and the sampled hashes (fast: SAMPLE_CHUNKS reads of SAMPLE_BYTES, spread evenly over the file, the
# first and last included), and `verify="full"` re-hashes every byte.
SAMPLE_CHUNKS = 32
SAMPLE_BYTES = 4096


def sampled_sha256(path) -> str:
    """SHA-256 of the file's size and SAMPLE_CHUNKS chunks spread evenly over it (the whole file when small)."""
    import hashlib
    import os
    size = os.stat(path).st_size
    h = hashlib.sha256(str(size).encode() + b"\0")
    with open(path, "rb") as fh:
        if size <= SAMPLE_CHUNKS * SAMPLE_BYTES:
            h.update(fh.read())
        else:
            last = size - SAMPLE_BYTES
            for k in range(SAMPLE_CHUNKS):
                fh.seek(last * k // (SAMPLE_CHUNKS - 1))
                h.update(fh.read(SAMPLE_BYTES))
    return h.hexdigest()
