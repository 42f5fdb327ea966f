"""Test helpers: rewrite a valid GGUF with one thing changed (architecture, a key, a tensor's presence, type or
shape), through gguf-py's own reader and writer, so each bad-input rule can be exercised alone."""
from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType


def rewrite(src: Path, dst: Path, *, arch: str = "qwen3moe", drop_keys=(), set_keys=None, drop_tensors=(),
            tensors=None) -> Path:
    """Copy `src` to `dst` with changes. `tensors`: name -> (numpy shape, GGML type, raw bytes as uint8 or a
    float array) replacing or adding a tensor."""
    r = GGUFReader(src)
    w = gguf.GGUFWriter(dst, arch)
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop_keys:
            continue
        if f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), GGUFValueType.ARRAY, sub_type=f.types[-1])
        else:
            w.add_key_value(key, f.contents(), f.types[0])
    for key, (value, vtype) in (set_keys or {}).items():
        w.add_key_value(key, value, vtype)
    new = dict(tensors or {})
    plan = []
    for t in r.tensors:
        if t.name in drop_tensors:
            continue
        if t.name in new:
            plan.append((t.name,) + tuple(new.pop(t.name)))
        else:
            plan.append((t.name, tuple(int(x) for x in reversed(t.shape)), t.tensor_type, np.asarray(t.data)))
    for name, spec in new.items():
        plan.append((name,) + tuple(spec))
    for name, shape, qtype, data in plan:
        data = np.ascontiguousarray(data)
        if qtype in (T.F32, T.F16):
            w.add_tensor_info(name, shape, data.dtype, data.nbytes)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), data.nbytes, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _name, _shape, _qtype, data in plan:
        w.write_tensor_data(np.ascontiguousarray(data))
    w.close()
    return dst


def q8_bytes(shape, seed: int = 0) -> np.ndarray:
    """Valid Q8_0 bytes for a matrix of `shape` (numpy order)."""
    rows = int(np.prod(shape[:-1]))
    w = np.random.default_rng(seed).standard_normal((rows, shape[-1])).astype(np.float32)
    return gguf.quants.quantize(w, T.Q8_0)
