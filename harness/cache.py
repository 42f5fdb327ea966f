"""Where compiled artefacts are cached (keyed by content hash by their users)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir(kind: str) -> Path:
    """A per-purpose cache folder: $QCONFORM_CACHE/<kind>, default ~/.cache/qconform/<kind>."""
    root = Path(os.environ.get("QCONFORM_CACHE") or Path.home() / ".cache" / "qconform")
    path = root / kind
    path.mkdir(parents=True, exist_ok=True)
    return path
