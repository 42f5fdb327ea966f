"""Token-stream locks: the generated tokens of a (checkpoint, prompt, lane, backend) recorded in a JSON file,
like the golden locks of emitted kernels. `--lock FILE` records the streams when the file does not exist and
otherwise checks every stream against it, naming the first step that changed; only an explicit
`--update-lock` re-blesses a lock (writes the current streams over the locked ones)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from harness.cache import atomic_write

LOCK_KIND = "qconform-token-lock"
LOCK_VERSION = 1


class LockError(ValueError):
    """A lock file that cannot be read as a token lock."""


@dataclass(frozen=True)
class Stream:
    checkpoint_sha256: str
    prompt: tuple[int, ...]
    lane: str
    backend: str
    tokens: tuple[int, ...]
    source: str = ""              # what produced it (kernel source label); informational

    @property
    def key(self) -> tuple:
        return (self.checkpoint_sha256, self.prompt, self.lane, self.backend)

    def as_dict(self) -> dict:
        return {"checkpoint_sha256": self.checkpoint_sha256, "prompt": list(self.prompt), "lane": self.lane,
                "backend": self.backend, "tokens": list(self.tokens), "source": self.source}


@dataclass
class LockCheck:
    stream: Stream
    status: str                      # "match" | "changed" | "recorded" | "updated" | "not locked"
    first_changed: Optional[int] = None
    locked_token: Optional[int] = None
    new_token: Optional[int] = None
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.status in ("changed", "not locked")

    def as_dict(self) -> dict:
        return {"lane": self.stream.lane, "backend": self.stream.backend, "status": self.status,
                "first_changed": self.first_changed, "locked_token": self.locked_token, "new_token": self.new_token,
                "message": self.message}


def read_lock(path: Path) -> list[Stream]:
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LockError(f"--lock: cannot read {path} as JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != LOCK_KIND:
        raise LockError(f"--lock: {path} is not a token lock (expected \"kind\": \"{LOCK_KIND}\")")
    if doc.get("version") != LOCK_VERSION:
        raise LockError(f"--lock: {path} has version {doc.get('version')!r}; this qconform reads version "
                        f"{LOCK_VERSION}")
    out = []
    for i, e in enumerate(doc.get("streams", [])):
        try:
            out.append(Stream(str(e["checkpoint_sha256"]), tuple(int(t) for t in e["prompt"]), str(e["lane"]),
                              str(e["backend"]), tuple(int(t) for t in e["tokens"]), str(e.get("source", ""))))
        except (KeyError, TypeError, ValueError) as exc:
            raise LockError(f"--lock: {path}: streams[{i}] is malformed ({type(exc).__name__}: {exc})") from None
    return out


def write_lock(path: Path, streams: Sequence[Stream]) -> None:
    doc = {"kind": LOCK_KIND, "version": LOCK_VERSION,
           "streams": [s.as_dict() for s in sorted(streams, key=lambda s: (s.lane, s.backend, s.prompt,
                                                                               s.checkpoint_sha256))]}
    atomic_write(Path(path), json.dumps(doc, indent=1) + "\n")


def first_difference(locked: Sequence[int], new: Sequence[int]) -> Optional[int]:
    for i, (a, b) in enumerate(zip(locked, new)):
        if a != b:
            return i
    return None if len(locked) == len(new) else min(len(locked), len(new))


def apply_lock(path: "str | Path", streams: Sequence[Stream], update: bool = False) -> list[LockCheck]:
    """Record (no file yet), check (file exists) or re-bless (update=True) the streams."""
    path = Path(path)
    if not path.exists():
        write_lock(path, streams)
        return [LockCheck(s, "recorded", message=f"recorded in {path}") for s in streams]
    locked = {s.key: s for s in read_lock(path)}
    checks = []
    for s in streams:
        old = locked.get(s.key)
        if update:
            status = "updated" if old is not None and old.tokens != s.tokens else ("match" if old else "recorded")
            checks.append(LockCheck(s, status, message=f"{status} in {path}"))
            locked[s.key] = s
            continue
        if old is None:
            checks.append(LockCheck(s, "not locked", message=(
                f"lane {s.lane} ({s.backend}): {path} holds no stream for this checkpoint, prompt, lane and backend; "
                "add it with --update-lock")))
            continue
        i = first_difference(old.tokens, s.tokens)
        if i is None:
            checks.append(LockCheck(s, "match", message="same tokens as the lock"))
            continue
        a = old.tokens[i] if i < len(old.tokens) else None
        b = s.tokens[i] if i < len(s.tokens) else None
        checks.append(LockCheck(s, "changed", i, a, b, (
            f"lane {s.lane} ({s.backend}): the token stream changed at generated step {i}: locked {a}, now {b} "
            f"(locked {len(old.tokens)} tokens, now {len(s.tokens)}); re-bless with --update-lock if intended")))
    if update:
        write_lock(path, list(locked.values()))
    return checks


@dataclass(frozen=True)
class LockRequest:
    """--lock FILE (and --update-lock) for a run on the checkpoint with this sha256."""

    path: Path
    checkpoint_sha256: str
    update: bool = False


def check_kernel_streams(request: LockRequest, prompt: Sequence[int], results: Sequence) -> list[LockCheck]:
    """apply_lock on the kernel lanes' generated streams (harness.model.kernel_lane.KernelLaneResult)."""
    streams = [Stream(request.checkpoint_sha256, tuple(prompt), r.lane, r.backend, tuple(r.tokens), r.source)
               for r in results]
    return apply_lock(request.path, streams, update=request.update)


__all__ = ["LockCheck", "LockError", "LockRequest", "Stream", "apply_lock", "check_kernel_streams",
           "first_difference", "read_lock", "write_lock"]
