"""The device code of a program, as both backends build it: the source and its own headers with their host
functions dropped (cudasrc.host_code), the headers as copies that keep each one's absolute place beneath one
folder, searched before the originals.

A GPU build of a whole program compiles its host code too; qconform loads only device code, so host code written
against a framework whose headers are not here (a torch binding) is not the kernel's to answer for. What stays is
checked as it is: a device function that names such a type is still refused."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

from cudasrc.host_code import Program


def device_headers(headers: dict[Path, str], program: Program) -> dict[Path, str]:
    """Each header's text (path -> text) with its host functions dropped, as `program` (cudasrc.host_code.program_of
    the source and these headers) sees them."""
    return {path: program.device_code(text) for path, text in headers.items()}


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
    original after it for what the source's reading did not see (a computed `#include MACRO`). Each copy's folder
    is made, header or not: `#include "../x.cuh"` from a folder without headers of its own (llama.cpp's
    template-instances/) climbs through it to the copy of x.cuh, where a missing folder would send the compiler on
    to the original, host code and all."""
    if not headers:
        return tuple(cmd_flags)
    user = set(f for f in flags if f.startswith("-I") and len(f) > 2)
    out: list[str] = []
    for f in cmd_flags:
        if f in user:
            d = Path(f[2:]).resolve()
            (into / d.relative_to(d.anchor)).mkdir(parents=True, exist_ok=True)
            out += [f"-I{into / d.relative_to(d.anchor)}", f]
        else:
            out.append(f)
    return tuple(out)
