"""The device code of a program, as both backends build it: the source and its own headers with their host
functions dropped (cudasrc.host_code), the headers as copies that keep each one's absolute place beneath one
folder, searched before the originals.

A GPU build of a whole program compiles its host code too; qconform loads only device code, so host code written
against a framework whose headers are not here (a torch binding) is not the kernel's to answer for. What stays is
checked as it is: a device function that names such a type is still refused."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from cudasrc.host_code import without_host_functions


def device_headers(headers: dict[Path, str], words: set[str], names: set[str] = frozenset()) -> dict[Path, str]:
    """Each header's text (path -> text) with its host functions dropped. `words`: the macros of all the program's
    files that mark a function as device code; `names`: what the code they keep names (program_names), whose host
    functions keep their declarations."""
    return {path: without_host_functions(text, words, names)[0] for path, text in headers.items()}


def write_header_copies(texts: dict[Path, str], into: Path,
                        transform: Optional[Callable[[Path, str], str]] = None) -> None:
    """`texts` (path -> a header's device text, device_headers) written under `into`, each at its absolute place
    mirrored there, so that a header's `#include "../x.h"` finds the copy of x.h; `transform(path, text)`, in path
    order, rewrites a copy further (emu's `__shared__` slots and inline PTX)."""
    for path, text in sorted(texts.items()):
        copy = into / path.relative_to(path.anchor)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes((transform(path, text) if transform else text).encode("latin-1"))


def copies_first(cmd_flags: Sequence[str], flags: Sequence[str], headers: dict[Path, str],
                 into: Path) -> tuple[str, ...]:
    """`cmd_flags` with each -I folder of `flags` preceded by its copy under `into` (write_header_copies), the
    original after it for what the source's reading did not see (a computed `#include MACRO`)."""
    if not headers:
        return tuple(cmd_flags)
    user = set(f for f in flags if f.startswith("-I") and len(f) > 2)
    out: list[str] = []
    for f in cmd_flags:
        if f in user:
            d = Path(f[2:]).resolve()
            out += [f"-I{into / d.relative_to(d.anchor)}", f]
        else:
            out.append(f)
    return tuple(out)
