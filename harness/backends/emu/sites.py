"""Source lines of the access sites a race report names: the runtime writes each as `{pc:0x...}` (an address in
the module, the instrumented load or store) and they are resolved here, only when a report is made, from the
module's line tables (built with -g1) by binutils' addr2line."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from . import toolkit_headers

_PC = re.compile(r"\{pc:(0x[0-9a-f]+)\}")
# The file emu compiles (build.py): the kernel's lines come through its `#line` directives, so an entry in its own
# name is the compiler's code (seen for accesses of a header function it did not inline), never a kernel line. The
# '+' keeps it apart from every kernel file name, whose characters are [A-Za-z0-9_.-] (rewrite.py).
MODULE_UNIT = "emu+module.cpp"
# The folder of the build's copies of the source's own headers (build.py), in the same way apart from user paths.
HEADER_COPIES_FOLDER = "emu+headers"
# The runtime's files that hold code (the others only include emu_device.hpp): a frame in one is never the kernel's.
_RUNTIME_FILES = frozenset([p.name for p in Path(__file__).parent.glob("emu_*") if p.suffix in (".hpp", ".cpp")]
                           + [p.name for p in Path(__file__).parent.glob("cuda/**/*")]     # <cuda/atomic>
                           + [p.name for p in Path(__file__).parent.glob("cooperative_groups/*")]
                           + ["cooperative_groups.h", MODULE_UNIT])


def library_dirs() -> list[str]:
    """The folders of the libraries' headers a kernel calls into, whose lines a report tells after the kernel's: the
    toolkit's (cuRAND) and emu's CUB."""
    toolkit = toolkit_headers.toolkit_include()
    cub = Path(__file__).parent / "cub"
    return [str(d) for d in (toolkit, cub, *sorted(p for p in cub.iterdir() if p.is_dir())) if d is not None]


def _source_frame(frames: list[tuple[str, str]], library_dirs: Sequence[str]) -> "str | None":
    """`line N` of the innermost inlined frame in the kernel source (not in the emu headers or the C++ library);
    where the access itself is in a header the kernel calls, that place follows: one of `library_dirs` (the
    toolkit's cuRAND, emu's CUB), `line 9 (in curand_kernel.h:867)`, or one of the source's own headers (compiled
    from their copies in HEADER_COPIES_FOLDER), `line 9 (in tiles.cuh:40)`. An access in a header's code that no
    line of the source inlines (a kernel the header defines) is named by the header's place alone: `tiles.cuh:40`."""
    inner = None
    for file, line in frames:
        base = os.path.basename(file)
        if base in _RUNTIME_FILES or file.startswith("/usr/") or not line.isdigit() or line == "0":
            continue
        if f"/{HEADER_COPIES_FOLDER}/" in file or os.path.dirname(os.path.realpath(file)) in library_dirs:
            inner = inner or f"{base}:{line}"
            continue
        return f"line {line}" + (f" (in {inner})" if inner else "")
    return inner


def resolve(message: str, so_path: str, library_dirs: Sequence[str] = ()) -> str:
    """`message` with every `{pc:0x...}` replaced by `line N` of the kernel source (or by the address, with the
    reason, when the line tables or addr2line are missing). library_dirs: folders of headers whose lines are
    told after the kernel's (see _source_frame)."""
    library_dirs = {os.path.realpath(d) for d in library_dirs}
    pcs = list(dict.fromkeys(_PC.findall(message)))
    if not pcs:
        return message
    tool = shutil.which("addr2line")
    found: dict[str, str] = {}
    if tool:
        try:
            out = subprocess.run([tool, "-e", so_path, "-i", "-a", *pcs], capture_output=True, text=True,
                                 timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        current, frames = None, []
        for row in out.splitlines() + ["0x"]:
            if row.startswith("0x"):
                if current is not None:
                    frame = _source_frame(frames, library_dirs)
                    if frame:
                        found[current] = frame
                current, frames = (f"0x{int(row, 16):x}" if len(row) > 2 else None), []
            else:
                file, _, line = row.rpartition(":")
                frames.append((file, line.split()[0] if line.split() else ""))
    why = "no line table entry" if tool else "addr2line (binutils) not found"
    return _PC.sub(lambda m: found.get(m.group(1), f"address {m.group(1)} of the module ({why})"), message)
