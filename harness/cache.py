"""Where compiled artefacts are cached, and the one way they are stored: a folder per purpose (`cache_dir`),
entries named by the hash of everything that determines them (`content_key`), built once and renamed into
place atomically (`cache_entry`); plus `atomic_write` for any file the project writes."""
from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable


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


def content_key(*parts: "str | bytes") -> str:
    """The sha256 (hex) of `parts`, each followed by a separator, so that ("ab", "c") and ("a", "bc") differ.
    Every compiled artefact is cached under the key of everything that determines it."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\x00\x01")
    return h.hexdigest()


def cache_entry(path: "str | Path", make: Callable[[Path], None]) -> tuple[Path, bool]:
    """The cached file or folder at `path`, made once: when it is absent, `make(tmp)` builds it at a unique
    temporary path beside it (a file, or a folder it creates), which is then renamed into place. Readers see
    the whole entry or none, and parallel makers never clash: the first rename wins and a later maker's
    identical work is dropped. Returns (path, True when made by this call). If `make` raises, nothing is
    stored and its temporary is removed."""
    path = Path(path)
    if path.exists():
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        make(tmp)
        if not tmp.exists():
            raise RuntimeError(f"cache: building {path.name} produced nothing")
        if tmp.is_dir():
            try:
                os.rename(tmp, path)      # refuses to replace a folder another maker stored first
            except OSError:
                if not path.is_dir():
                    raise
                return path, False
        else:
            os.replace(tmp, path)
        return path, True
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
