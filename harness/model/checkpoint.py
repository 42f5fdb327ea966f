"""Open a qwen3moe GGUF checkpoint as the reference's ModelWeights, memory-mapped, one layer at a time.

The file is read through ``gguf.GGUFReader`` (a NumPy memmap). The config comes from the metadata
(``qwen3moe.*`` keys; nothing the file states is assumed), the vocabulary size from the rows of
``token_embd.weight``. Every tensor's presence, type and shape is checked against that config before any
weight is read (``read_header``), and every bad input is one ``CheckpointError`` naming the file, the key or
tensor, and what was expected.

Q8_0 storage: a GGUF Q8_0 block is a float16 scale followed by its 32 int8 quants, so the quants of a row are
not evenly spaced in the file and no strided (rows, cols) view of them exists. Reading a matrix therefore
copies its quants out of the mapping through a structured view of the blocks (no temporaries) and widens its
scales to float32, a chunk at a time, dropping each copied chunk's mapped pages. ``open_checkpoint`` reads the
embedding and the LM head; ``layer(i)`` reads layer i when asked. Peak memory is those two, the layers kept
(``layer_cache_bytes``, default 1 GiB: a small model is kept whole, a full-width one keeps its first layer)
and the layer being read -- never the file.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType

from reference.model import LayerWeights, ModelConfig, ModelWeights
from reference.quant import BLOCK_BYTES, QK, Q8Blocks, Q8Tensor, quantize_q8_0

from .base import Checkpoint, CheckpointError
from .layout import (ACCEPTED_TYPES, ARCH, CONFIG_KEYS, LAYER_TENSORS, MATRIX, NORM, OUTPUT, Q8_BLOCK,
                     TensorSlot, config_key, gguf_dims, layer_slots, model_slots)
from .exported import open_exported
from .pieces import token_pieces

GGUF_MAGIC = b"GGUF"
DEFAULT_LAYER_CACHE_BYTES = 1 << 30


class _Truncated(Exception):
    def __init__(self, end: int, size: int):
        super().__init__(end, size)
        self.end, self.size = end, size


class _GuardedReader(GGUFReader):
    """GGUFReader that refuses to read past the end of the file (the stock reader would silently get short
    arrays there, and a corrupted array length could make it loop for as long as the length says), and checks
    every tensor's data lies inside the file before building views of it."""

    def _get(self, offset, dtype, count=1, override_order=None):
        count = int(count)
        offset = int(offset)
        end = offset + np.dtype(dtype).itemsize * count
        if count < 0 or end > len(self.data):
            raise _Truncated(end, len(self.data))
        # one plain ndarray on the map per part: a slice of the np.memmap itself carries the map's attributes
        # and a fresh dtype, which for the ~300k strings of a real vocabulary costs ~0.5 GB
        cache = self.__dict__.setdefault("_get_cache", {})
        plain = cache.get("plain")
        if plain is None:
            plain = cache["plain"] = self.data.view(np.ndarray)
        order = self.byte_order if override_order is None else override_order
        dt = cache.get((dtype, order))
        if dt is None:
            dt = cache[(dtype, order)] = np.dtype(dtype).newbyteorder(order)
        return np.ndarray((count,), dtype=dt, buffer=plain, offset=offset)   # one small object per field part

    def _build_tensors(self, start_offs, fields):
        from gguf.constants import GGML_QUANT_SIZES
        size = len(self.data)
        for f in fields:
            _nl, name_data, _nd, dims, raw_dtype, offset = f.parts
            name = bytes(name_data).decode("utf-8", errors="replace")
            try:
                qtype = T(int(raw_dtype[0]))
            except ValueError:
                raise CheckpointError(f"tensor {name!r}: unknown GGML type id {int(raw_dtype[0])}") from None
            block, type_size = GGML_QUANT_SIZES[qtype]
            n = 1
            for dim in dims.tolist():
                n *= int(dim)
            if n % block:
                raise CheckpointError(f"tensor {name!r}: {n} elements is not a whole number of {qtype.name} "
                                      f"blocks of {block}")
            begin = int(start_offs) + int(offset[0])
            end = begin + n // block * type_size
            if end > size:
                raise CheckpointError(f"truncated file: tensor {name!r} ({qtype.name}, dims "
                                      f"{[int(x) for x in dims]}) needs bytes [{begin}, {end}) but the file "
                                      f"has {size} bytes")
        super()._build_tensors(start_offs, fields)


# ------------------------------------------------------------------------------------------------ header
def _read(path: Path) -> GGUFReader:
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic != GGUF_MAGIC:
        raise CheckpointError(f"{path}: not a GGUF file: it starts with {magic!r}, expected the magic {GGUF_MAGIC!r}")
    if size < 24:
        raise CheckpointError(f"{path}: truncated file: {size} bytes, a GGUF header needs at least 24")
    try:
        reader = _GuardedReader(path, "r")
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    except _Truncated as exc:
        raise CheckpointError(f"{path}: truncated file (or a damaged length in the header): the header needs bytes "
                              f"up to offset {exc.end}, the file has {exc.size}") from None
    except (ValueError, KeyError, IndexError, OverflowError, TypeError, MemoryError) as exc:
        # what the stock parser raises on a damaged header (unknown value type, duplicate key, bad UTF-8,
        # an absurd count): all the same rule broken, the header is not valid GGUF
        raise CheckpointError(f"{path}: invalid GGUF header: {type(exc).__name__}: {exc}") from None
    if reader.byte_order != "I" or reader.endianess.name != "LITTLE":
        raise CheckpointError(f"{path}: a big-endian GGUF; only little-endian files (what llama.cpp writes) are "
                              f"supported")
    return reader


def _scalar(reader: GGUFReader, key: str, kind: type) -> Any:
    f = reader.get_field(key)
    if f is None:
        raise CheckpointError(f"metadata key {key!r} is missing (a qwen3moe checkpoint states it)")
    if not f.types or f.types[0] in (GGUFValueType.ARRAY, GGUFValueType.STRING, GGUFValueType.BOOL):
        got = f.types[0].name if f.types else "nothing"
        raise CheckpointError(f"metadata key {key!r}: expected a {'number' if kind is float else 'integer'}, "
                              f"got {got}")
    value = f.contents()
    if kind is int:
        if f.types[0] in (GGUFValueType.FLOAT32, GGUFValueType.FLOAT64):
            raise CheckpointError(f"metadata key {key!r}: expected an integer, got the float {value!r}")
        return int(value)
    return float(value)


def _string(reader: GGUFReader, key: str) -> Optional[str]:
    f = reader.get_field(key)
    if f is None:
        return None
    if f.types != [GGUFValueType.STRING]:
        raise CheckpointError(f"metadata key {key!r}: expected a string, got "
                              f"{'/'.join(t.name for t in f.types) or 'nothing'}")
    return _decoded(f, key, "not valid UTF-8")


def _metadata(reader: GGUFReader) -> dict[str, Any]:
    """Every key with its value; arrays longer than 16 items are summarised (the vocabulary is in .tokens)."""
    out: dict[str, Any] = {}
    for key, f in reader.fields.items():
        if key.startswith("GGUF.") or not f.types:
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            if len(f.data) > 16:
                out[key] = f"<array of {len(f.data)} {f.types[-1].name.lower()}>"
                continue
        try:
            out[key] = f.contents()
        except (UnicodeDecodeError, ValueError) as exc:
            raise CheckpointError(f"metadata key {key!r}: unreadable value ({exc})") from None
    return out


def _config(reader: GGUFReader, tensors: dict) -> ModelConfig:
    arch = _string(reader, "general.architecture")
    if arch is None:
        raise CheckpointError(f"metadata key 'general.architecture' is missing; expected {ARCH!r}")
    if arch != ARCH:
        raise CheckpointError(f"general.architecture: expected {ARCH!r}, got {arch!r} (only Qwen3-MoE "
                              f"checkpoints are supported)")
    values = {name: _scalar(reader, config_key(name), kind) for name, (_k, kind) in CONFIG_KEYS.items()}
    emb = tensors.get("token_embd.weight")
    if emb is None:
        raise CheckpointError("tensor 'token_embd.weight' is missing (its rows give the vocabulary size)")
    if len(emb.shape) != 2:
        raise CheckpointError(f"tensor 'token_embd.weight': expected 2 dimensions [embedding_length, vocab], got "
                              f"{[int(x) for x in emb.shape]}")
    values["vocab"] = int(emb.shape[1])
    try:
        return ModelConfig(**values)
    except ValueError as exc:
        field_name = str(exc).split(":", 1)[0]
        where = f"metadata key {config_key(field_name)!r}" if field_name in CONFIG_KEYS else field_name
        raise CheckpointError(f"{where}: {str(exc).split(':', 1)[-1].strip()}") from None


def _check_inventory(config: ModelConfig, tensors: dict) -> tuple[list[TensorSlot], bool]:
    tied = OUTPUT not in tensors
    slots = model_slots(config, with_output=not tied)
    want = {s.name for s in slots}
    for s in slots:
        if s.name not in tensors:
            raise CheckpointError(f"tensor {s.name!r} is missing (a qwen3moe model with block_count="
                                  f"{config.n_layer} has it)")
    extra = [n for n in tensors if n not in want]
    if extra:
        raise CheckpointError(f"unexpected tensor {extra[0]!r}: not part of a qwen3moe model with block_count="
                              f"{config.n_layer}" + (f" ({len(extra) - 1} more)" if len(extra) > 1 else ""))
    for s in slots:
        t = tensors[s.name]
        accepted = ACCEPTED_TYPES[s.role]
        if t.tensor_type not in accepted:
            raise CheckpointError(f"tensor {s.name!r}: type {t.tensor_type.name} is not supported for a {s.role}; "
                                  f"expected {' or '.join(a.name for a in accepted)}")
        dims = [int(x) for x in t.shape]
        if dims != gguf_dims(s.shape):
            raise CheckpointError(f"tensor {s.name!r}: shape {dims} (GGUF order) disagrees with the metadata: "
                                  f"expected {gguf_dims(s.shape)} = {s.rule}")
    return slots, tied


# ------------------------------------------------------------------------------------------------ tensors
COPY_CHUNK_BYTES = 32 << 20     # GGUF bytes copied (then released from the map) at a time


def q8_from_blocks(name: str, data: np.ndarray, shape: tuple[int, ...], tensor=None) -> Q8Tensor:
    """A GGUF Q8_0 tensor's bytes (uint8, any leading shape, last axis = blocks*34) as a (rows, cols) Q8Tensor
    with the leading axes folded into rows (expert-major): quants copied out of the blocks, scales widened.
    Given the ReaderTensor, each copied chunk's mapped pages are released at once (peak: the copy + a chunk)."""
    cols = shape[-1]
    rows = int(np.prod(shape[:-1]))
    nb = cols // QK
    row_bytes = nb * BLOCK_BYTES
    blocks = np.asarray(data).reshape(rows, row_bytes).view(Q8_BLOCK)    # a view of the map, never a copy
    quants = np.empty((rows, cols), dtype=np.int8)
    scales = np.empty((rows, nb), dtype=np.float32)
    step = max(1, COPY_CHUNK_BYTES // row_bytes)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        np.copyto(quants[r0:r1].reshape(r1 - r0, nb, QK), blocks["qs"][r0:r1])
        np.copyto(scales[r0:r1], blocks["d"][r0:r1], casting="safe")
        if tensor is not None:
            release_pages(tensor, r0 * row_bytes, r1 * row_bytes)
    try:
        return Q8Tensor(quants, scales)
    except ValueError as exc:
        raise CheckpointError(f"tensor {name!r}: {exc}") from None


EXPERT_MATRICES = ("gate_exps", "up_exps", "down_exps")


def q8_blocks(name: str, data: np.ndarray, shape: tuple[int, ...]) -> Q8Blocks:
    """A GGUF Q8_0 tensor's bytes as (rows, blocks*34) Q8Blocks, leading axes folded into rows (expert-major),
    without a copy; rows are checked and converted when taken."""
    cols = shape[-1]
    rows = int(np.prod(shape[:-1]))
    return Q8Blocks(np.asarray(data).reshape(rows, cols // QK * BLOCK_BYTES), cols, name=f"tensor {name!r}")


def float_vector(name: str, t) -> np.ndarray:
    """An F32/F16/BF16 tensor as a float32 array (a copy; these are small), checked finite."""
    if t.tensor_type == T.F32:
        out = np.array(t.data, dtype=np.float32)
    elif t.tensor_type == T.F16:
        out = np.asarray(t.data).astype(np.float32)
    elif t.tensor_type == T.BF16:
        raw = np.ascontiguousarray(t.data).view("<u2").astype(np.uint32) << 16
        out = raw.view(np.float32)
    else:  # the inventory check admits only these three here
        raise CheckpointError(f"tensor {t.name!r}: expected F32, F16 or BF16, got {t.tensor_type.name}")
    out = out.reshape([int(x) for x in reversed(t.shape)])
    if not np.all(np.isfinite(out)):
        bad = np.argwhere(~np.isfinite(out))[0]
        raise CheckpointError(f"tensor {name!r}: element {tuple(int(b) for b in bad)} is {out[tuple(bad)]}; "
                              f"weights must be finite")
    return out


def release_pages(t, lo: int = 0, hi: "int | None" = None) -> None:
    """Drop bytes [lo, hi) of a tensor's mapped data from this process (the pages stay in the OS page cache):
    once copied out they would otherwise count in the resident set until the whole file is unmapped. Only
    pages wholly inside the range are dropped (MADV_DONTNEED on a read-only map re-reads on the next touch)."""
    data = t.data
    while data is not None and not isinstance(data, np.memmap):
        data = data.base
    mm = getattr(data, "_mmap", None)
    if mm is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    hi = int(t.n_bytes) if hi is None else hi
    page = mmap.PAGESIZE
    start = -(-(int(t.data_offset) + lo) // page) * page
    end = min((int(t.data_offset) + hi) // page * page, len(mm))
    if end > start:
        mm.madvise(mmap.MADV_DONTNEED, start, end - start)


class _LayerSource:
    """layer(i) for ModelWeights: builds LayerWeights from the mapping, keeps layers while they fit the budget
    (no eviction: a decoder visits layers in a cycle, where keeping the first ones is the best any cache of
    that size can do)."""

    def __init__(self, tensors: dict, config: ModelConfig, cache_bytes: int, path: Path):
        self.tensors, self.config, self.cache_bytes, self.path = tensors, config, int(cache_bytes), path
        self.cache: dict[int, LayerWeights] = {}
        self.cached_bytes = 0

    def __call__(self, i: int) -> LayerWeights:
        hit = self.cache.get(i)
        if hit is not None:
            return hit
        try:
            layer = self.build(i)
        except CheckpointError as exc:
            raise CheckpointError(f"{self.path}: {exc}") from None
        size = layer_nbytes(layer)
        if self.cached_bytes + size <= self.cache_bytes:
            self.cache[i] = layer
            self.cached_bytes += size
        return layer

    def build(self, i: int) -> LayerWeights:
        parts: dict[str, Any] = {}
        for (attr, _short, role), slot in zip(LAYER_TENSORS, layer_slots(self.config, i)):
            t = self.tensors[slot.name]
            if role == NORM:
                parts[attr] = float_vector(slot.name, t)
            elif attr in EXPERT_MATRICES:
                # left in GGUF blocks (a view of the mapping): the decoder converts only the routed experts' rows
                parts[attr] = q8_blocks(slot.name, t.data, slot.shape)
            elif role == MATRIX or t.tensor_type == T.Q8_0:
                parts[attr] = q8_from_blocks(slot.name, t.data, slot.shape, tensor=t)
            else:   # a float router: the kernels read its Q8_0 quantization (what gguf-py would write)
                router = float_vector(slot.name, t)
                parts["router_float"] = router
                try:
                    parts[attr] = quantize_q8_0(router)
                except ValueError as exc:
                    raise CheckpointError(f"tensor {slot.name!r}: cannot be quantized to Q8_0: {exc}") from None
        layer = LayerWeights(**parts)
        try:
            layer.check(self.config, i)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from None
        return layer


def layer_nbytes(layer: LayerWeights) -> int:
    total = 0
    for value in vars(layer).values():
        if isinstance(value, Q8Tensor):      # (Q8Blocks stay in the mapping: nothing resident)
            total += value.quants.nbytes + value.scales.nbytes
        elif isinstance(value, np.ndarray):
            total += value.nbytes
    return total


@dataclass(frozen=True)
class CheckpointHeader:
    """A checkpoint's validated header: config, metadata and tensor inventory; no weight has been read."""

    path: Path
    config: ModelConfig
    tied_output: bool
    name: str
    metadata: dict
    raw_tokens: Optional[list[str]]
    tensors: dict            # GGUF name -> gguf-py ReaderTensor (data: a view of the mapped file)


def _prefixed(path: Path, fn):
    try:
        return fn()
    except CheckpointError as exc:
        if str(exc).startswith(f"{path}: "):
            raise
        raise CheckpointError(f"{path}: {exc}") from None


def read_header(path: "str | os.PathLike[str]") -> CheckpointHeader:
    """Check a qwen3moe GGUF's header, config and tensor inventory (types, shapes) without reading weights."""
    path = Path(path)

    def run() -> CheckpointHeader:
        reader = _read(path)
        tensors = {t.name: t for t in reader.tensors}
        config = _config(reader, tensors)
        _slots, tied = _check_inventory(config, tensors)
        return CheckpointHeader(path=path, config=config, tied_output=tied,
                                name=_string(reader, "general.name") or path.stem, metadata=_metadata(reader),
                                raw_tokens=_tokens(reader, config), tensors=tensors)
    return _prefixed(path, run)


def open_checkpoint(path: "str | os.PathLike[str]", *,
                    layer_cache_bytes: int = DEFAULT_LAYER_CACHE_BYTES, verify: str = "sampled") -> Checkpoint:
    """Open a qwen3moe GGUF: header and tensor inventory checked now, the embedding and LM head read, layers
    read when asked for. Every CheckpointError message starts with the file's path. A folder written by
    export-weights is opened as memory-mapped views instead (harness.model.exported), its files checked
    against the manifest's sizes and hashes (`verify`: "sampled" or "full")."""
    if Path(path).is_dir():
        return open_exported(path, verify=verify)
    head = read_header(path)
    return _prefixed(head.path, lambda: _open(head, layer_cache_bytes))


def _open(head: CheckpointHeader, layer_cache_bytes: int) -> Checkpoint:
    tensors, config = head.tensors, head.config
    vd = (config.vocab, config.d_model)
    emb = tensors["token_embd.weight"]
    token_embd = q8_from_blocks(emb.name, emb.data, vd, tensor=emb)
    output = token_embd if head.tied_output else q8_from_blocks(OUTPUT, tensors[OUTPUT].data, vd,
                                                                tensor=tensors[OUTPUT])
    weights = ModelWeights(config=config, token_embd=token_embd,
                           output_norm=float_vector("output_norm.weight", tensors["output_norm.weight"]),
                           output=output, layer_source=_LayerSource(tensors, config, layer_cache_bytes, head.path),
                           name=head.name, tied_output=head.tied_output)
    raw = head.raw_tokens
    return Checkpoint(path=head.path, config=config, weights=weights, metadata=head.metadata,
                      tokens=token_pieces(raw) if raw is not None else None, raw_tokens=raw,
                      tensor_types={n: t.tensor_type.name for n, t in tensors.items()}, _tensors=tensors)


def _tokens(reader: GGUFReader, config: ModelConfig) -> Optional[list[str]]:
    key = "tokenizer.ggml.tokens"
    f = reader.get_field(key)
    if f is None:
        return None
    if f.types != [GGUFValueType.ARRAY, GGUFValueType.STRING]:
        raise CheckpointError(f"metadata key {key!r}: expected an array of strings, got "
                              f"{'/'.join(t.name for t in f.types)}")
    if len(f.data) != config.vocab:
        raise CheckpointError(f"metadata key {key!r}: {len(f.data)} tokens, but token_embd.weight has "
                              f"{config.vocab} rows (one per token)")
    return _decoded(f, key, "a token is not valid UTF-8")


def _decoded(f, key: str, what: str):
    """A string field's contents; text that is not UTF-8 is the checkpoint's error, named by its key."""
    try:
        return f.contents()
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"metadata key {key!r}: {what} ({exc})") from None
