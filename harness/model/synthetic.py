"""Synthetic qwen3moe checkpoints: seeded weights scaled like a trained model's, in memory or streamed to GGUF.

Every tensor is generated in fixed chunks (one expert, or CHUNK_ROWS rows), each from its own random stream
keyed by (seed, tensor name, chunk), so the in-memory model and the streamed file are identical bit for bit and
the 32 GB preset is never held in memory: one chunk is generated, quantized and written at a time.

Scales (why): projections draw N(0, 1/fan_in) so they preserve the RMS of their input; norm weights are
log-normal around 1 (a trained model's spread, never negative); the router's rows carry log-normal gains so a
few experts dominate the top-K; the LM head's rows give logits a standard deviation of about LM_HEAD_GAIN with a
spread of row norms, so greedy decoding has margins of the size real models have rather than near-ties.
"""
from __future__ import annotations

import os
import zlib
from collections import deque
from pathlib import Path
from typing import Iterator, Optional

import gguf
import numpy as np

from harness.cache import cache_dir, cache_entry, check_free_space, content_key, temp_sibling
from harness.interrupts import helper_pool, raise_if_interrupted
from reference.model import LayerWeights, ModelConfig, ModelWeights
from reference.quant import BLOCK_BYTES, QK, Q8Tensor, quantize_q8_0
from reference.shapes import get_shape

from .layout import ARCH, LAYER_TENSORS, MATRIX, NORM, ROUTER, TensorSlot, layer_slots, model_slots
from harness.judging.progress import BYTES, Progress
from .vocab import byte_level_vocabulary

PRESETS = ("tiny", "tails", "qwen3-30b-a3b")
CONTEXT_LENGTH = 40960        # Qwen3-30B-A3B's trained context
CHUNK_ROWS = 2048             # rows per random stream of a 2-D matrix (part of the definition of the weights)
NORM_SPREAD = 0.2             # log-normal sigma of norm weights
ROUTER_GAIN = 2.0             # router logit std for a unit-RMS input, before the per-expert gains
ROUTER_SPREAD = 0.7           # log-normal sigma of per-expert router gains (a few experts dominate)
LM_HEAD_GAIN = 4.0            # LM-head logit std for a unit-RMS input
LM_HEAD_SPREAD = 0.3          # log-normal sigma of per-token LM-head row gains
# The version of the bytes make-model writes: part of every cached model's name. Any change to what is
# written (weights, vocabulary, metadata) must bump it; tests/model/test_synthetic.py locks the tiny model's
# SHA-256 per version, so a change that forgets to bump fails there.
GENERATOR_VERSION = 1


def preset_config(preset: str, layers: Optional[int] = None) -> ModelConfig:
    if preset not in PRESETS:
        raise ValueError(f"preset: unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    s = get_shape(preset)
    n_layer = s.n_layer if layers is None else layers
    if not isinstance(n_layer, int) or isinstance(n_layer, bool) or n_layer <= 0:
        raise ValueError(f"layers: expected a positive integer, got {layers!r}")
    # GGUF stores the two floats as float32: the in-memory config holds what the file will state
    return ModelConfig(n_layer=n_layer, d_model=s.d, n_head=s.n_head, n_kv_head=s.n_kv, head_dim=s.head_dim,
                       n_expert=s.n_expert, n_expert_used=s.top_k, d_expert=s.dff, vocab=s.vocab,
                       rope_theta=float(np.float32(s.rope_theta)), rms_eps=float(np.float32(s.rms_eps)))


# ------------------------------------------------------------------------------------------------ generation
def _rng(seed: int, name: str, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(entropy=int(seed),
                                                        spawn_key=(zlib.crc32(name.encode()), chunk + 1)))


def _short(slot: TensorSlot) -> str:
    return slot.name.split(".")[-2]


def _fan_in_std(c: ModelConfig, short: str) -> float:
    fan_in = {"attn_q": c.d_model, "attn_k": c.d_model, "attn_v": c.d_model, "attn_output": c.q_dim,
              "ffn_gate_exps": c.d_model, "ffn_up_exps": c.d_model, "ffn_down_exps": c.d_expert}
    return 1.0 / np.sqrt(fan_in[short])


def float_tensor(c: ModelConfig, slot: TensorSlot, seed: int) -> np.ndarray:
    """A norm weight vector or the float router (small tensors, one stream each), float32."""
    rng = _rng(seed, slot.name, 0)
    if slot.role == NORM:
        return np.exp(NORM_SPREAD * rng.standard_normal(slot.shape)).astype(np.float32)
    if slot.role == ROUTER:
        gains = ROUTER_GAIN * np.exp(ROUTER_SPREAD * rng.standard_normal((slot.shape[0], 1)))
        return (rng.standard_normal(slot.shape) * gains / np.sqrt(c.d_model)).astype(np.float32)
    raise ValueError(f"{slot.name}: not a float tensor")


def _chunks(slot: TensorSlot) -> list[tuple[int, int]]:
    """(first row, rows) of each chunk of a matrix in the (rows, cols) view, experts one chunk each."""
    if len(slot.shape) == 3:
        per = slot.shape[1]
        return [(e * per, per) for e in range(slot.shape[0])]
    rows = slot.shape[0]
    return [(r, min(CHUNK_ROWS, rows - r)) for r in range(0, rows, CHUNK_ROWS)]


def _row_gain(slot: TensorSlot, seed: int) -> "np.ndarray | None":
    if slot.name != "output.weight":
        return None
    spread = LM_HEAD_SPREAD * _rng(seed, slot.name, -1).standard_normal(slot.shape[0])
    return LM_HEAD_GAIN / np.sqrt(slot.shape[-1]) * np.exp(spread)


def matrix_chunk(c: ModelConfig, slot: TensorSlot, seed: int, k: int, row_gain=None) -> np.ndarray:
    """Chunk k of a matrix as float32 rows (the Q8_0 quantization of each chunk is what the file holds)."""
    short = slot.name.split(".")[0] if slot.layer < 0 else _short(slot)
    r0, n = _chunks(slot)[k]
    w = _rng(seed, slot.name, k).standard_normal((n, slot.shape[-1]), dtype=np.float32)
    if short == "token_embd":
        return w                                   # unit RMS: the residual stream starts at the scale of a layer
    if short == "output":
        w *= row_gain[r0:r0 + n, None].astype(np.float32)
    else:
        w *= np.float32(_fan_in_std(c, short))
    return w


def quantized_chunks(c: ModelConfig, slot: TensorSlot, seed: int, workers: int = 0) -> Iterator[Q8Tensor]:
    """The Q8_0 chunks of a matrix in order, generated on `workers` threads (default: one per core; NumPy's
    generators and arithmetic release the GIL) with at most workers+1 chunks in memory."""
    from reference._parallel import cpu_count
    gain = _row_gain(slot, seed)
    n_chunks = len(_chunks(slot))
    workers = workers or min(cpu_count(), n_chunks)
    if workers <= 1:
        for k in range(n_chunks):
            yield quantize_q8_0(matrix_chunk(c, slot, seed, k, gain))
        return
    with helper_pool(workers, thread_name_prefix="qconform-synth") as pool:
        pending: deque = deque()
        for k in range(n_chunks):
            pending.append(pool.submit(lambda k=k: quantize_q8_0(matrix_chunk(c, slot, seed, k, gain))))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def quantized_matrix(c: ModelConfig, slot: TensorSlot, seed: int) -> Q8Tensor:
    parts = list(quantized_chunks(c, slot, seed))
    return Q8Tensor(np.concatenate([p.quants for p in parts]), np.concatenate([p.scales for p in parts]))


def synthetic_weights(preset: str, *, layers: Optional[int] = None, seed: int = 0) -> ModelWeights:
    """The synthetic model in memory (tiny and tails; the full preset is for write_synthetic_gguf). Identical
    to what ``open_checkpoint`` reads from ``write_synthetic_gguf``'s file with the same arguments."""
    c = preset_config(preset, layers)
    if preset == "qwen3-30b-a3b":
        raise ValueError("preset: qwen3-30b-a3b is ~32 GB; write it with write_synthetic_gguf and open the file")
    built: list[LayerWeights] = []
    for i in range(c.n_layer):
        parts = {}
        for (attr, _short, role), slot in zip(LAYER_TENSORS, layer_slots(c, i)):
            if role == MATRIX:
                parts[attr] = quantized_matrix(c, slot, seed)
            elif role == NORM:
                parts[attr] = float_tensor(c, slot, seed)
            else:
                parts["router_float"] = float_tensor(c, slot, seed)
                parts[attr] = quantize_q8_0(parts["router_float"])
        built.append(LayerWeights(**parts))
    slots = {s.name: s for s in model_slots(c)}
    return ModelWeights(config=c, token_embd=quantized_matrix(c, slots["token_embd.weight"], seed),
                        output_norm=float_tensor(c, slots["output_norm.weight"], seed),
                        output=quantized_matrix(c, slots["output.weight"], seed), layer_source=built.__getitem__,
                        name=f"synthetic-{preset}-s{seed}")


# ------------------------------------------------------------------------------------------------ GGUF file
def _add_metadata(w: gguf.GGUFWriter, c: ModelConfig, preset: str, seed: int) -> None:
    w.add_name(f"qconform synthetic {preset} (seed {seed})")
    w.add_type("model")
    w.add_context_length(CONTEXT_LENGTH)
    w.add_embedding_length(c.d_model)
    w.add_block_count(c.n_layer)
    w.add_head_count(c.n_head)
    w.add_head_count_kv(c.n_kv_head)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_dimension_count(c.head_dim)
    w.add_rope_freq_base(float(c.rope_theta))
    w.add_layer_norm_rms_eps(float(c.rms_eps))
    w.add_expert_count(c.n_expert)
    w.add_expert_used_count(c.n_expert_used)
    w.add_expert_feed_forward_length(c.d_expert)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    v = byte_level_vocabulary(c.vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(list(v.tokens))
    w.add_token_types(list(v.token_types))
    w.add_token_merges(list(v.merges))
    w.add_bos_token_id(v.bos_id)
    w.add_eos_token_id(v.eos_id)
    w.add_pad_token_id(v.pad_id)
    w.add_add_bos_token(False)


def _q8_nbytes(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape[:-1])) * (shape[-1] // QK) * BLOCK_BYTES


def tensor_nbytes(slot: TensorSlot) -> int:
    """Bytes of a tensor's data as make-model writes it (Q8_0 matrices, F32 norms and router)."""
    return _q8_nbytes(slot.shape) if slot.role == MATRIX else 4 * int(np.prod(slot.shape))


def planned_bytes(preset: str, layers: Optional[int] = None) -> int:
    """The tensor bytes of a synthetic model (the file adds its header and alignment padding)."""
    return sum(tensor_nbytes(s) for s in model_slots(preset_config(preset, layers)))


class _StreamedTensor:
    """What GGUFWriter.write_tensor_data needs of a tensor (its size, and writing itself to the file), produced
    chunk by chunk so a 214 MB expert tensor never exists whole."""

    def __init__(self, c: ModelConfig, slot: TensorSlot, seed: int, bar: Progress):
        self.c, self.slot, self.seed, self.bar = c, slot, seed, bar
        self.nbytes = _q8_nbytes(slot.shape)

    def tofile(self, fh) -> None:
        written = 0
        for q8 in quantized_chunks(self.c, self.slot, self.seed):
            raw = q8.to_gguf_blocks()
            fh.write(memoryview(np.ascontiguousarray(raw)).cast("B"))   # not tofile: it can swallow an interrupt
            written += raw.nbytes
            self.bar.advance(raw.nbytes, self.slot.name)
        if written != self.nbytes:
            raise RuntimeError(f"{self.slot.name}: wrote {written} bytes, planned {self.nbytes}")


def write_synthetic_gguf(preset: str, out: "str | os.PathLike[str]", *, layers: Optional[int] = None,
                         seed: int = 0, progress: bool = True) -> Path:
    """Write the synthetic model as a qwen3moe GGUF (Q8_0 matrices, F32 norms and router, a byte-level gpt2
    vocabulary), streamed, to a temporary name renamed to `out` at the end. Returns `out`."""
    c = preset_config(preset, layers)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    check_free_space(out.parent, sum(tensor_nbytes(s) for s in model_slots(c)), "--out")
    tmp = temp_sibling(out)
    slots = model_slots(c)
    w = None
    try:
        w = gguf.GGUFWriter(tmp, ARCH)     # inside the try: an interrupt right after it still removes tmp
        _add_metadata(w, c, preset, seed)
        total = 0
        for s in slots:
            nbytes = tensor_nbytes(s)
            raw = gguf.GGMLQuantizationType.Q8_0 if s.role == MATRIX else None
            w.add_tensor_info(s.name, s.shape, np.dtype(np.float32), nbytes, raw_dtype=raw)
            total += nbytes
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        with Progress(total, progress, title=f"make-model {preset} -> {out.name}", unit=BYTES, interval_s=10.0) as bar:
            for s in slots:
                if s.role == MATRIX:
                    w.write_tensor_data(_StreamedTensor(c, s, seed, bar))
                else:
                    data = float_tensor(c, s, seed)
                    w.write_tensor_data(data)
                    bar.advance(data.nbytes, s.name)
        w.close()
        raise_if_interrupted()        # a signal a library swallowed: never commit an interrupted write
        os.replace(tmp, out)
    except BaseException:
        if w is not None:
            w.close()
        tmp.unlink(missing_ok=True)
        raise
    return out


def cached_model_path(preset: str = "tiny", *, layers: Optional[int] = None, seed: int = 0,
                      progress: bool = True) -> Path:
    """A synthetic model made once and cached (harness.cache): named by the key of preset, layers, seed and
    GENERATOR_VERSION, so a changed generator never reuses a stale file. The full-depth qwen3-30b-a3b preset
    (~32 GB) is not cached."""
    c = preset_config(preset, layers)
    if preset == "qwen3-30b-a3b" and layers is None:
        raise ValueError("preset: the full qwen3-30b-a3b model is ~32 GB and is not cached; write it with "
                         "make-model (or give layers)")
    key = content_key("synthetic-gguf", preset, str(c.n_layer), str(seed), str(GENERATOR_VERSION))[:16]
    path = cache_dir("models") / f"synthetic-{preset}-L{c.n_layer}-s{seed}-{key}.gguf"
    made, _ = cache_entry(path, lambda tmp: write_synthetic_gguf(preset, tmp, layers=layers, seed=seed,
                                                                 progress=progress))
    return made


def default_model_path(seed: int = 0, *, progress: bool = True) -> Path:
    """The tiny synthetic model: the embedded default of every model-level command."""
    return cached_model_path("tiny", seed=seed, progress=progress)


def resolve_model(spec: "str | os.PathLike[str] | None", *, seed: int = 0, progress: bool = True) -> Path:
    """What a model-level command's ``--model`` accepts: nothing (the cached tiny synthetic model), a cached
    synthetic preset by name (``tiny``, ``tails``), the path of a qwen3moe GGUF file, or a folder written by
    export-weights (open_checkpoint maps it without copying)."""
    if spec is None:
        return default_model_path(seed, progress=progress)
    text = os.fspath(spec)
    if text in ("tiny", "tails") and not Path(text).exists():
        return cached_model_path(text, seed=seed, progress=progress)
    path = Path(text)
    if not (path.is_file() or (path / "manifest.json").is_file()):
        raise ValueError(f"--model: {text!r} is neither a GGUF file, an export-weights folder nor a synthetic "
                         f"preset (tiny, tails)")
    return path
