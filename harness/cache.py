"""Where compiled artefacts are cached (keyed by content hash by their users)."""
from __future__ import annotations

import os
import uuid
from pathlib import Path


def cache_dir(kind: str) -> Path:
    """A per-purpose cache folder: $QCONFORM_CACHE/<kind>, default ~/.cache/qconform/<kind>."""
    root = Path(os.environ.get("QCONFORM_CACHE") or Path.home() / ".cache" / "qconform")
    path = root / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomic_write(path: "str | Path", data: "str | bytes") -> None:
    """Write `data` to `path` all at once: a uniquely named temporary file in the same folder, then os.replace,
    so a reader sees the old file or the new one, never a part, and parallel writers never clash. Text is
    written as given (no newline translation); the file gets the usual permissions (umask, unlike mkstemp's
    0600). The folder is created if needed; the temporary file is removed if anything fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        if isinstance(data, bytes):
            with open(tmp, "xb") as fh:
                fh.write(data)
        else:
            with open(tmp, "x", newline="") as fh:
                fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
