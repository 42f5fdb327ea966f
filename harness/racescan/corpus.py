"""Labelled corpus files: a CUDA source whose leading comment says whether it races, which class of race it
stands for, and how to launch it:

    // qconform-race: racy            (or: race-free)
    // class: shared write-write by every thread on one slot whose value never reaches an output
    // launch: KERNEL grid=X[,Y,Z] block=X[,Y,Z] [shared=BYTES]
    // args: name:dtype[count]=fill ... (see harness.racescan.spec)
    // differential: missed ...      (optional: a race no thread schedule can show, e.g. coinciding values)
    // accesses: source ...          (optional: a race only the build that makes every access of the source shows,
                                      EmuBackend(accesses="source"), e.g. on a load whose value nothing uses)
    // warp-order: syncwarp ...      (optional: a race only the rule that __syncwarp alone orders a warp's lanes
                                      shows, EmuBackend(warp_order="syncwarp"), e.g. with a shuffle between)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.backends.emu.backend import WARP_ORDERS
from harness.backends.emu.toolchain import ACCESS_FLAGS

from .spec import ArgSpec, parse_args

LABELS = ("racy", "race-free")
ACCESSES = tuple(ACCESS_FLAGS)         # the emu backend's builds


@dataclass(frozen=True)
class CorpusEntry:
    path: Path
    source: str
    racy: bool
    what: str                          # the class of race (or of race-free twin) the kernel stands for
    kernel: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared_bytes: int
    args: list[ArgSpec]
    differential_sees: bool            # whether differing thread schedules can show the race (racy entries)
    accesses: str = "compiled"         # the build whose accesses show the race (EmuBackend accesses)
    warp_order: str = "collectives"    # the rule of a warp's lanes under which the race shows (EmuBackend warp_order)


def _dims(text: str, what: str, where: str) -> tuple[int, ...]:
    if not re.fullmatch(r"\d+(,\d+){0,2}", text) or 0 in (int(v) for v in text.split(",")):
        raise ValueError(f"{where}: launch {what}={text!r} is not 1 to 3 comma-separated positive sizes")
    return tuple(int(v) for v in text.split(","))


@dataclass(frozen=True)
class LaunchLine:
    kernel: str
    grid: tuple[int, ...]
    block: tuple[int, ...]
    shared_bytes: int


def parse_launch(text: str, where: str) -> LaunchLine:
    """`KERNEL grid=X[,Y,Z] block=X[,Y,Z] [shared=BYTES]` (KERNEL may hold spaces between words:
    `k<8,unsigned int>`); a ValueError names `where` and the rule broken."""
    m = re.match(r"^\s*(?P<kernel>[^=]+?)\s+(?P<fields>(?:grid|block|shared)=.*)$", text)
    launch = [m.group("kernel"), *m.group("fields").split()] if m else []
    fields = dict(f.split("=", 1) for f in launch[1:] if "=" in f)
    if not launch or "=" in launch[0] or len(fields) != len(launch) - 1 or "grid" not in fields \
            or "block" not in fields or set(fields) - {"grid", "block", "shared"}:
        raise ValueError(f"{where}: launch {text!r} is not `KERNEL grid=.. block=.. [shared=..]`")
    shared = fields.get("shared", "0")
    if not shared.isdigit():
        raise ValueError(f"{where}: launch shared={shared!r} is not a number of bytes")
    return LaunchLine(launch[0], _dims(fields["grid"], "grid", where), _dims(fields["block"], "block", where),
                      int(shared))


def read_header(source: str) -> dict[str, str]:
    """The `// key: value` lines of the source's leading comment (qconform-race, class, launch, args, differential,
    accesses, warp-order)."""
    header: dict[str, str] = {}
    for line in source.splitlines():
        m = re.match(r"^//\s*(qconform-race|class|launch|args|differential|accesses|warp-order):\s*(.*?)\s*$", line)
        if m:
            header[m.group(1)] = m.group(2)
        elif not line.startswith("//"):
            break
    return header


def read_entry(path: "str | Path") -> CorpusEntry:
    path = Path(path)
    source = path.read_text()
    header = read_header(source)
    missing = [k for k in ("qconform-race", "class", "launch", "args") if k not in header]
    if missing:
        raise ValueError(f"{path}: the header lacks {', '.join(missing)} (see harness.racescan.corpus)")
    if header["qconform-race"] not in LABELS:
        raise ValueError(f"{path}: label {header['qconform-race']!r} is not one of {', '.join(LABELS)}")
    launch = parse_launch(header["launch"], str(path))
    accesses = header.get("accesses", "compiled").split(" ", 1)[0]
    if accesses not in ACCESSES:
        raise ValueError(f"{path}: accesses {accesses!r} is not one of {', '.join(ACCESSES)}")
    warp_order = header.get("warp-order", WARP_ORDERS[0]).split(" ", 1)[0]
    if warp_order not in WARP_ORDERS:
        raise ValueError(f"{path}: warp-order {warp_order!r} is not one of {', '.join(WARP_ORDERS)}")
    return CorpusEntry(path, source, header["qconform-race"] == "racy", header["class"], launch.kernel,
                       launch.grid, launch.block, launch.shared_bytes, parse_args(header["args"]),
                       not header.get("differential", "").startswith("missed"), accesses, warp_order)
