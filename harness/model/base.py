"""What an opened model is, whatever it was opened from (a GGUF file: checkpoint.py; an export-weights
folder: exported.py), and the one error for a model that cannot be used as given."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from reference.model import ModelConfig, ModelWeights


class CheckpointError(ValueError):
    """A checkpoint that cannot be used as given; the message names the file, the key or tensor, and the rule."""


@dataclass
class Checkpoint:
    """An opened checkpoint. ``weights.layer(i)`` reads layer i from the mapping when asked."""

    path: Path
    config: ModelConfig
    weights: ModelWeights
    metadata: dict[str, Any]
    tokens: Optional[list[str]]          # printable token pieces (GPT-2 byte-level decoded), or None
    raw_tokens: Optional[list[str]] = None   # the token strings as stored
    tensor_types: dict[str, str] = field(default_factory=dict)
    _tensors: dict = field(default_factory=dict, repr=False)
    _sha256: Optional[str] = None

    def raw_tensor(self, name: str):
        """gguf-py's ReaderTensor of a tensor (its .data is a view of the mapped file: uint8 blocks for Q8_0)."""
        try:
            return self._tensors[name]
        except KeyError:
            raise ValueError(f"tensor: {name!r} is not in {self.path}") from None

    def sha256(self) -> str:
        """SHA-256 of the whole file, streamed (computed once; an export-weights folder: of its manifest, which
        holds every file's SHA-256)."""
        if self._sha256 is None:
            h = hashlib.sha256()
            with open(self.path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 24), b""):
                    h.update(chunk)
            self._sha256 = h.hexdigest()
        return self._sha256

    def piece(self, token: int) -> str:
        """The printable piece of a token id ('' when the file has no vocabulary)."""
        if self.tokens is None:
            return ""
        if not 0 <= int(token) < len(self.tokens):
            raise ValueError(f"token: id {token} outside the vocabulary [0, {len(self.tokens)})")
        return self.tokens[int(token)]
