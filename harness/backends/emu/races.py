"""Every distinct data race of one launch, as one DataRace.

The runtime's happens-before detector (emu_race.hpp) records each distinct race of a launch, distinct by
(unordered pair of access sites, buffer or __shared__ variable), and goes on running: a race does not corrupt the
emulator. It hands them over as record lines (`race_report`), and also writes each new one to stderr at once
(`emu-race: ` lines), so that a launch that then kills the worker still reports its races; the worker's last words
(written when a memory fault or the CPU limit ends it, and on the parent's SIGUSR1 before a kill at the time limit)
then give their final counts, extents, values and scopes. Here the sites are
resolved to source lines, records whose sites resolve to the same two lines are merged (several instructions of
one line: an unrolled loop), and the report is worded: the first race as the runtime words it, then the others,
each with its extent, at most SHOWN of them in detail; how many were left out, and what stopped the launch
when another fault did, are said. A race whose every conflict was two plain stores that left the bytes as they
were is marked `same value` (benign by GPUVerify's and compute-sanitizer racecheck's convention; still a race
by the memory model, and still reported); one whose every store left the bytes as its racing accesses saw them,
reads included, is marked `kept value` (GPUVerify also calls those benign). Each race also says its scope, the widest of its conflicts: `warp` (only
lanes of one warp: a __syncwarp would order them, and a verifier that assumes lock-step warps, GPUVerify's
`--warp-sync`, calls it race-free), `block` (threads of one block) or `grid` (across blocks)."""
from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, replace

from harness.backends.base import RACE_SCOPES as SCOPES, RACE_VALUES as VALUES, DataRace, KernelFault, LaunchInfo

from . import sites

SHOWN = 16                  # races told in detail in one report; the rest are counted
VALUE_NOTES = {"same": "same value: every racing store left the bytes as they were",
               "kept": "kept value: every racing store left the bytes as its racing reads and stores saw them"}
SCOPE_NOTES = {"warp": "within one warp", "block": "across warps of one block", "grid": "across blocks"}
STDERR_PREFIX = "emu-race: "         # a race announced when first found
STATE_PREFIX = "emu-race-state: "    # its state in the runtime's last words (emu_race.hpp: race_last_words)
LAST_WORDS_END = "emu-race-end"      # the end of the last words asked for with SIGUSR1
_PLURAL = {"index": "indices", "byte": "bytes"}


@dataclass(frozen=True)
class Race:
    count: int              # racing accesses that met the pair (0: not known, the worker died before its report)
    lo: int                 # smallest and largest element index (or byte offset, unit "byte") raced on
    hi: int
    unit: str               # "index", "byte" or "-" (memory without positions)
    values: str             # "same" (only plain stores of the bytes already there), "kept" (stores and reads, each
                            # store of the bytes the others saw), "differ", "?" (not known)
    scope: str              # the widest conflict: "warp", "block", "grid" (SCOPES), "?" (not known)
    site_a: str             # the two access sites: `{pc:0x..}` tokens until resolved, then `line N`
    site_b: str
    region: str             # the buffer or __shared__ variable
    text: str               # the first occurrence, naming both accesses

    def extent(self) -> str:
        """'63 racing accesses, index 0' / '4096 racing accesses, indices 0..255'."""
        parts = [f"{self.count} racing access{'es' if self.count != 1 else ''}"] if self.count else []
        if self.unit in _PLURAL:
            parts.append(f"{self.unit} {self.lo}" if self.lo == self.hi else f"{_PLURAL[self.unit]} {self.lo}..{self.hi}")
        return ", ".join(parts)

    @property
    def same_value(self) -> bool:
        return self.values == "same"

    def worded(self) -> str:
        notes = [n for n in (self.extent(), SCOPE_NOTES.get(self.scope, ""), VALUE_NOTES.get(self.values, "")) if n]
        return f"{self.text} [{'; '.join(notes)}]" if notes else self.text


@dataclass(frozen=True)
class Races:
    races: tuple[Race, ...]
    more: int = 0           # distinct races the runtime kept no details of
    unkeyed: int = 0        # racing accesses met after the runtime stopped telling races apart

    @property
    def distinct(self) -> int:
        return len(self.races) + self.more

    @property
    def same_value_only(self) -> bool:
        """Every race of the launch is known to be a same-value write-write race."""
        return bool(self.races) and not self.more and not self.unkeyed and all(r.same_value for r in self.races)

    @property
    def scope(self) -> str:
        """The widest scope of the launch's races ("?" where one is not known)."""
        if not self.races or self.more or self.unkeyed or any(r.scope not in SCOPES for r in self.races):
            return "?"
        return max((r.scope for r in self.races), key=SCOPES.index)

    def __bool__(self) -> bool:
        return bool(self.races or self.more or self.unkeyed)


def _record(line: str) -> Race:
    count, lo, hi, unit, values, scope, site_a, site_b, region, text = line.split("\t", 9)
    return Race(int(count), int(lo), int(hi), unit, values, scope, site_a, site_b, region, text)


def _merged_values(a: str, b: str) -> str:
    """What two records of one line pair claim together: the weaker claim."""
    return max(a, b, key=VALUES.index)


def _merged_scope(a: str, b: str) -> str:
    return "?" if "?" in (a, b) else max(a, b, key=SCOPES.index)


def parse(report: str) -> Races:
    """The runtime's emu_race_report text."""
    races, more, unkeyed = [], 0, 0
    for line in report.splitlines():
        if line.startswith("more\t"):
            _, m, u = line.split("\t")
            more, unkeyed = int(m), int(u)
        elif line:
            races.append(_record(line))
    return Races(tuple(races), more, unkeyed)


def from_stderr(text: str) -> Races:
    """The races a worker announced on stderr (`emu-race: <n> <record>`) before it died or was stopped, each
    updated by the state its last words gave (`emu-race-state: <n> <count> <lo> <hi> <values> <scope>`, and a
    `more` line) where it could: without them, counts and extents are not known and values and scopes are `?`.
    Read in order: an announcement of a number already seen starts another detector run, whose states are its
    own (a request has one detector run with races today: the runs stop at the first that finds any)."""
    races: list[Race] = []
    current: dict[int, int] = {}       # record number of the current run -> index into races
    more = unkeyed = 0
    for line in text.splitlines():     # a line the runtime did not write whole (the kernel shares stderr) is not read
        with suppress(ValueError):
            if line.startswith(STDERR_PREFIX):
                number, record = line[len(STDERR_PREFIX):].split("\t", 1)
                race = _record(record)
                if int(number) in current:
                    current = {}
                current[int(number)] = len(races)
                races.append(race)
            elif line.startswith(STATE_PREFIX):
                fields = line[len(STATE_PREFIX):].split("\t")
                if fields[0] == "more":
                    more, unkeyed = int(fields[1]), int(fields[2])
                elif len(fields) == 6 and int(fields[0]) in current and fields[4] in VALUES and fields[5] in SCOPES:
                    number, count, lo, hi = map(int, fields[:4])
                    at = current[number]
                    races[at] = replace(races[at], count=count, lo=lo, hi=hi, values=fields[4], scope=fields[5])
    return Races(tuple(races), more, unkeyed)


def resolve(found: Races, so_path: str) -> Races:
    """`found` with its sites resolved to source lines (one addr2line run), merged by (line pair, region)."""
    if not found.races:
        return found
    rows = sites.resolve("\n".join(f"{r.site_a}\t{r.site_b}\t{r.text}" for r in found.races), so_path,
                         sites.library_dirs()).split("\n")
    merged: dict[tuple, Race] = {}
    for race, row in zip(found.races, rows):
        site_a, site_b, text = row.split("\t", 2)
        race = replace(race, site_a=site_a, site_b=site_b, text=text)
        key = (frozenset((site_a, site_b)), race.region)
        if key in merged:
            first = merged[key]
            known = first.count and race.count
            race = replace(first, count=first.count + race.count if known else 0, lo=min(first.lo, race.lo),
                           hi=max(first.hi, race.hi), values=_merged_values(first.values, race.values),
                           scope=_merged_scope(first.scope, race.scope))
        merged[key] = race
    return replace(found, races=tuple(merged.values()))


def fault(launch: "LaunchInfo | None", found: Races, where: str, stopped_by: "Exception | None") -> DataRace:
    """The DataRace of a launch's races: `where` (the schedule) follows the first; `stopped_by` is the fault
    that ended the launch after them, if one did."""
    shown = found.races[:SHOWN]
    worded = tuple(r.worded() for r in shown)
    lines = [f"{worded[0]} ({where})" if worded else f"data races the detector could not describe ({where})"]
    if found.distinct > 1:
        lines[0] = f"{found.distinct} distinct data races in this launch; the first: {lines[0]}"
        lines += [f"  race {i}: {w}" for i, w in enumerate(worded[1:], 2)]
    left = found.distinct - len(shown)
    if left:
        lines.append(f"  {left} more distinct race(s) left out (only the first {len(shown)} are told)")
    if found.unkeyed:
        lines.append(f"  {found.unkeyed} further racing access(es) after the detector's table of distinct races "
                     "was full, not told apart")
    stop = None
    if stopped_by is not None:
        stop = (f"{type(stopped_by).__name__}: {stopped_by.detail}" if isinstance(stopped_by, KernelFault)
                else str(stopped_by))
        lines.append(f"then the launch was stopped by {stop}")
    kinds = tuple((r.scope, r.values) for r in found.races) + ((("?", "?"),) if found.more or found.unkeyed else ())
    return DataRace(launch, "\n".join(lines), races=worded, distinct=found.distinct, stopped_by=stop,
                    same_value=found.same_value_only, scope=found.scope, kinds=kinds)
