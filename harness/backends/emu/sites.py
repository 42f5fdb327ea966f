"""Source lines of the access sites a race report names: the runtime writes each as `{pc:0x...}` (an address in
the module, the instrumented load or store) and they are resolved here, only when a report is made, from the
module's line tables (built with -g1) by binutils' addr2line."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

_PC = re.compile(r"\{pc:(0x[0-9a-f]+)\}")
_RUNTIME_FILES = ("emu_device.hpp", "emu_runtime.cpp", "emu_race.hpp")


def _source_frame(frames: list[tuple[str, str]]) -> "tuple[str, str] | None":
    """The innermost inlined frame in the kernel source (not in the emu headers or the C++ library)."""
    for file, line in frames:
        base = os.path.basename(file)
        if base not in _RUNTIME_FILES and not file.startswith("/usr/") and line.isdigit() and line != "0":
            return base, line
    return None


def resolve(message: str, so_path: str) -> str:
    """`message` with every `{pc:0x...}` replaced by `line N` of the kernel source (or by the address, with the
    reason, when the line tables or addr2line are missing)."""
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
                    frame = _source_frame(frames)
                    if frame:
                        found[current] = f"line {frame[1]}"
                current, frames = (f"0x{int(row, 16):x}" if len(row) > 2 else None), []
            else:
                file, _, line = row.rpartition(":")
                frames.append((file, line.split()[0] if line.split() else ""))
    why = "no line table entry" if tool else "addr2line (binutils) not found"
    return _PC.sub(lambda m: found.get(m.group(1), f"address {m.group(1)} of the module ({why})"), message)
