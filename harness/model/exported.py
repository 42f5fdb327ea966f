"""Open an ``export-weights`` folder as a Checkpoint whose Q8_0 matrices are true views of the mapped files.

In a GGUF, Q8_0 scales are interleaved with the quants, so the loader must copy a layer to hand out
(rows, cols) quants (see checkpoint.py). The exported folder holds the kernels' layout instead -- int8 quants
row-major, float32 scales beside them -- so here every matrix is a read-only np.memmap: building a layer
reads only its scales (Q8Tensor checks them) and a decoder touching 8 of 128 experts reads 8 experts' rows.
The folder is checked against its manifest (format, every file present with the size its shape needs), and
every file against its recorded size and sampled SHA-256 (layout.sampled_sha256: a file overwritten by other
bytes of the same size is refused); ``verify="full"`` re-hashes every byte against the manifest's SHA-256.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from reference.model import LayerWeights, ModelConfig, ModelWeights
from reference.quant import QK, Q8Tensor

from .base import Checkpoint, CheckpointError
from .layout import EXPORT_FORMAT, EXPORT_MANIFEST, EXPORT_TOKENS, LAYER_TENSORS, ROUTER_FLOAT_EXT, sampled_sha256

VERIFY = ("sampled", "full")
from .pieces import token_pieces

# LayerWeights field -> exported file stem prefix (per layer: f"{prefix}{l}")
_STEMS = {"attn_norm": "an", "ffn_norm": "fn", "q_norm": "aqn", "k_norm": "akn", "wq": "wq", "wk": "wk",
          "wv": "wv", "wo": "wo", "router": "wr", "gate_exps": "wg", "up_exps": "wu", "down_exps": "wd"}


def _fail(folder: Path, msg: str) -> CheckpointError:
    return CheckpointError(f"{folder}: {msg}")


def _manifest(folder: Path) -> dict:
    path = folder / EXPORT_MANIFEST
    if not path.is_file():
        raise _fail(folder, f"no {EXPORT_MANIFEST}: not an export-weights folder")
    try:
        m = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(folder, f"{EXPORT_MANIFEST} is not valid JSON ({exc})") from None
    if not isinstance(m, dict) or m.get("format") != EXPORT_FORMAT:
        found = m.get("format") if isinstance(m, dict) else None
        raise _fail(folder, f"{EXPORT_MANIFEST}: format {found!r}, expected {EXPORT_FORMAT!r}")
    return m


class _Files:
    def __init__(self, folder: Path, manifest: dict):
        self.folder, self.files = folder, manifest.get("files", {})

    def _path(self, name: str, size: int) -> Path:
        p = self.folder / name
        if not p.is_file():
            raise _fail(self.folder, f"{name} is missing")
        if p.stat().st_size != size:
            raise _fail(self.folder, f"{name}: {p.stat().st_size} bytes, expected {size}")
        return p

    def shape(self, stem: str, want: tuple) -> tuple:
        entry = self.files.get(stem)
        if entry is None or tuple(entry.get("shape", ())) != tuple(want):
            found = entry and entry.get("shape")
            raise _fail(self.folder, f"{EXPORT_MANIFEST}: {stem} has shape {found}, the config needs {list(want)}")
        return tuple(want)

    def q8(self, stem: str, shape: tuple) -> Q8Tensor:
        rows, cols = self.shape(stem, shape)
        q = np.memmap(self._path(f"{stem}.q", rows * cols), dtype=np.int8, mode="r", shape=(rows, cols))
        s = np.memmap(self._path(f"{stem}.s", rows * cols // QK * 4), dtype="<f4", mode="r",
                      shape=(rows, cols // QK))
        try:
            return Q8Tensor(q, s)
        except ValueError as exc:
            raise _fail(self.folder, f"{stem}.s: {exc}") from None

    def vector(self, stem: str, n: int, ext: str = "f") -> np.ndarray:
        v = np.fromfile(self._path(f"{stem}.{ext}", 4 * n), dtype="<f4").astype(np.float32)
        if not np.all(np.isfinite(v)):
            raise _fail(self.folder, f"{stem}.{ext}: non-finite weights")
        return v


def verify_files(folder: Path, m: dict, verify: str) -> None:
    """Every file the manifest hashes: present, its recorded size, and its sampled (or, with "full", its
    whole) SHA-256."""
    if verify not in VERIFY:
        raise ValueError(f"verify: expected one of {', '.join(VERIFY)}, got {verify!r}")
    sizes, sampled = m.get("bytes", {}), m.get("sampled_sha256", {})
    for name, digest in m.get("sha256", {}).items():
        path = folder / name
        if not path.is_file():
            raise _fail(folder, f"{name} is missing")
        if name in sizes and path.stat().st_size != sizes[name]:
            raise _fail(folder, f"{name}: {path.stat().st_size} bytes, the manifest records {sizes[name]}")
        if verify == "full":
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 24), b""):
                    h.update(chunk)
            if h.hexdigest() != digest:
                raise _fail(folder, f"{name}: SHA-256 {h.hexdigest()} differs from the manifest's {digest}: the "
                                    f"file changed since export-weights wrote it")
        elif name in sampled and sampled_sha256(path) != sampled[name]:
            raise _fail(folder, f"{name}: its sampled SHA-256 differs from the manifest's: the file changed since "
                                f"export-weights wrote it")


def open_exported(folder: "str | os.PathLike[str]", *, verify: "str | bool" = "sampled") -> Checkpoint:
    """verify: "sampled" (sizes and sampled hashes: fast) or "full" (every byte; True is "full")."""
    folder = Path(folder)
    verify = {True: "full", False: "sampled"}.get(verify, verify) if isinstance(verify, bool) else verify
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: no such export-weights folder")
    m = _manifest(folder)
    try:
        c = ModelConfig(**m["config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(folder, f"{EXPORT_MANIFEST}: config: {exc}") from None
    verify_files(folder, m, verify)
    files = _Files(folder, m)
    E, QD, KD, FF, NE = c.d_model, c.q_dim, c.kv_dim, c.d_expert, c.n_expert
    mats = {"wq": (QD, E), "wk": (KD, E), "wv": (KD, E), "wo": (E, QD), "router": (NE, E),
            "gate_exps": (NE * FF, E), "up_exps": (NE * FF, E), "down_exps": (NE * E, FF)}
    vecs = {"attn_norm": E, "ffn_norm": E, "q_norm": c.head_dim, "k_norm": c.head_dim}

    def layer(i: int) -> LayerWeights:
        parts: dict[str, Any] = {}
        for attr, _short, _role in LAYER_TENSORS:
            stem = f"{_STEMS[attr]}{i}"
            parts[attr] = files.q8(stem, mats[attr]) if attr in mats else files.vector(stem, vecs[attr])
        if (folder / f"wr{i}.{ROUTER_FLOAT_EXT}").exists():
            parts["router_float"] = files.vector(f"wr{i}", NE * E, ROUTER_FLOAT_EXT).reshape(NE, E)
        return LayerWeights(**parts)

    emb = files.q8("emb", (c.vocab, E))
    weights = ModelWeights(config=c, token_embd=emb, output_norm=files.vector("on", E),
                           output=files.q8("wout", (c.vocab, E)), layer_source=layer,
                           name=m.get("name", folder.name), tied_output=bool(m.get("tied_output")))
    raw = None
    if (folder / EXPORT_TOKENS).is_file():
        raw = json.loads((folder / EXPORT_TOKENS).read_text(encoding="utf-8"))
        if not isinstance(raw, list) or len(raw) != c.vocab:
            raise _fail(folder, f"{EXPORT_TOKENS}: expected a list of {c.vocab} token strings")
    return Checkpoint(path=folder, config=c, weights=weights, metadata=m.get("metadata", {}),
                      tokens=token_pieces(raw) if raw is not None else None, raw_tokens=raw,
                      _sha256=hashlib.sha256((folder / EXPORT_MANIFEST).read_bytes()).hexdigest())
