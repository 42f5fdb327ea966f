"""A CUDA program's own headers: the files its `#include` lines name, found in the build's include folders (or, for
a header's own includes, beside that header), followed recursively. System and toolkit headers, found in no such
folder, are not the program's."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def read_text(path: Path) -> str:
    """A source file's text, every byte kept (latin-1 maps each byte to one character and back)."""
    return path.read_bytes().decode("latin-1")


def local_headers(source: str, dirs: Sequence[Path]) -> list[Path]:
    """Every header `source` includes, recursively, that is found in `dirs` (the build's -I folders, searched in
    order) or beside the header that includes it, resolved, each once, in the order found. Every `#include` line
    counts, also one in a branch the build drops."""
    out: list[Path] = []
    seen: set[Path] = set()
    todo: list[tuple[str, "Path | None"]] = [(source, None)]
    while todo:
        text, here = todo.pop()
        for name in INCLUDE.findall(text):
            for d in ([here] if here else []) + list(dirs):
                path = d / name
                if path.is_file():
                    path = path.resolve()
                    if path not in seen:
                        seen.add(path)
                        out.append(path)
                        todo.append((read_text(path), path.parent))
                    break
    return out
