"""A CUDA program's own headers: the files its `#include` lines name, found in the build's include folders (or, for
a header's own includes, beside that header), followed recursively. System and toolkit headers, found in no such
folder, are not the program's."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Optional, Sequence

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)


def read_text(path: Path) -> str:
    """A source file's text, every byte kept (latin-1 maps each byte to one character and back)."""
    return path.read_bytes().decode("latin-1")


def find_include(name: str, here: Optional[Path], dirs: Sequence[Path]) -> Optional[Path]:
    """The file `#include "name"` reaches: beside the including file (`here`, its folder), then in `dirs` in
    order; absolute and normalized as the compiler names it (a link is not followed: the link's own folder is
    where the file's own includes are looked for), or None."""
    for d in ([here] if here else []) + list(dirs):
        if (d / name).is_file():
            return Path(os.path.abspath(d / name))
    return None


def local_headers(source: str, dirs: Sequence[Path],
                  readable: Callable[[Path], bool] = lambda path: True) -> dict[Path, str]:
    """Every header `source` includes, recursively, that is found in `dirs` (the build's -I folders, searched in
    order) or beside the header that includes it: resolved path -> text (read once), in the order found. Every
    `#include` line counts, also one in a branch the build drops. A file `readable` refuses is not read (an
    untrusted source names it; the confined compiler is refused it too)."""
    out: dict[Path, str] = {}
    todo: list[tuple[str, "Path | None"]] = [(source, None)]
    while todo:
        text, here = todo.pop()
        for name in INCLUDE.findall(text):
            path = find_include(name, here, dirs)
            if path is not None and path not in out and readable(path):
                out[path] = read_text(path)
                todo.append((out[path], path.parent))
    return out
