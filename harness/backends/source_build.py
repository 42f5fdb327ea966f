"""What a source's build reads besides its text: its compile flags and the texts of its own headers, carried with
the work to wherever it is built.

A worker of a remote `--cluster` is another machine: the headers may not be at the paths the source was checked
with there, or other versions may be. A build there that found no header would blame the kernel (`fail`) for what
is the tool's doing, and one that found other versions would judge other code than the report names. So the
headers' texts travel with the work; a worker that lacks one of them, or has another text at its path, builds
from a copy in its cache, laid out beneath one folder at the same absolute paths, with each -I folder moved there
(a relative `#include "../common/x.h"` reaches the same file in the copy).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from cudasrc.includes import read_text
from harness import confine
from harness.cache import cache_dir, cache_entry, content_key

from .base import source_flags


@dataclass(frozen=True)
class SourceBuild:
    flags: tuple[str, ...] = ()                        # -I its own folder and each of its include folders, absolute
    headers: tuple[tuple[str, str], ...] = ()          # (absolute path, text) of each own header the build reads

    @classmethod
    def of(cls, code: str, paths: Sequence["str | Path"] = (), include_dirs: Sequence["str | Path"] = ()
           ) -> "SourceBuild":
        """The build of `code` from the files `paths` with -I `include_dirs` (backends.base.source_flags), its own
        headers read now (confine.own_headers: only those a confined compile may read)."""
        flags = source_flags(paths, include_dirs)
        return cls(flags, tuple((str(p), text) for p, text in confine.own_headers(code, flags).items()))

    def digests(self) -> list[str]:
        """`path:SHA-256` of each header (confine.header_digests)."""
        return confine.header_digests({Path(p): text for p, text in self.headers})

    def context(self) -> str:
        """The headers' texts, for reading the source's declarations (typedefs, enumerations) in their light."""
        return "\n".join(text for _, text in self.headers)

    def here(self) -> tuple[str, ...]:
        """The flags to build with on this machine: as given where every header is at its path with its text,
        else the flags into the cache's copy of the headers. Asked at each build: a header may go or change
        between two builds of one long-lived worker."""
        return self.flags if self._found_here() else self._copied()

    def _found_here(self) -> bool:
        for path, text in self.headers:
            try:
                if read_text(Path(path)) != text:
                    return False
            except OSError:
                return False
        return True

    def _copied(self) -> tuple[str, ...]:
        key = content_key(*self.flags, *(part for header in self.headers for part in header))[:40]

        def make(tmp: Path) -> None:
            for folder in confine.include_dirs(self.flags):
                _beneath(tmp, folder).mkdir(parents=True, exist_ok=True)
            for path, text in self.headers:
                copy = _beneath(tmp, Path(path))
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_bytes(text.encode("latin-1"))

        root, _ = cache_entry(cache_dir("headers") / key, make)
        return tuple(f"-I{_beneath(root, Path(f[2:]))}" if _include(f) else f for f in self.flags)


def _include(flag: str) -> bool:
    return flag.startswith("-I") and len(flag) > 2


def _beneath(root: Path, path: Path) -> Path:
    """`path` (absolute) at the same place beneath `root`."""
    return root / Path(os.path.normpath(path)).relative_to(Path(path).anchor)

