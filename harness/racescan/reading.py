"""Which of a launch's races count, for a reader whose notion of a race is narrower than the memory model's.

The detector reports every conflicting pair that the CUDA memory model leaves unordered, and marks each race
with its scope and what its stores did to the bytes (DataRace.kinds). Verifiers and their labelled suites read
races more narrowly: GPUVerify and faial call two stores of the same value benign (GPUVerify also a store that
writes the value a racing read saw, and a read that races a store which left the value as it was),
GPUVerify's `--warp-sync` assumes the lanes of a warp run in lock step (and `--only-intra-group` checks one
block's threads), and faial checks the threads of one
block (or, with `--grid-level`, threads of different blocks) only. A Reading says which races count, so that a
verdict can be compared with such a label without changing what the detector reports."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from harness.backends.base import RACE_SCOPES, RACE_VALUES


@dataclass(frozen=True)
class Reading:
    name: str
    scopes: frozenset = frozenset(RACE_SCOPES)   # the conflicts that count ("warp", "block", "grid")
    benign_values: frozenset = frozenset()      # races whose values are these do not count (RACE_VALUES)
    lock_step: bool = False     # the verifier runs a warp's lanes in lock step (as GPUs before Volta did): a launch
    #                             whose races it leaves out is judged again with them so (EmuBackend(lock_step=True))

    def __post_init__(self):
        unknown = set(self.scopes) - set(RACE_SCOPES)
        if unknown or not self.scopes:
            raise ValueError(f"scopes: expected a non-empty subset of {RACE_SCOPES}, got {sorted(self.scopes)}")
        if not set(self.benign_values) <= set(BENIGN_CLAIMS):
            raise ValueError(f"benign_values: expected a subset of {BENIGN_CLAIMS}, got {sorted(self.benign_values)}")

    def counts(self, kinds: Iterable[tuple[str, str]]) -> bool:
        """Whether any of the races (DataRace.kinds: (scope, values) each) counts. A race whose scope or values
        are not known counts: a reading never hides what it cannot place."""
        return any((scope not in RACE_SCOPES or scope in self.scopes) and values not in self.benign_values
                   for scope, values in kinds)


BENIGN_CLAIMS = RACE_VALUES[:2]                 # "same", "kept": the claims a reading may call benign
# GPUVerify's race instrumentation (unless --no-benign) compares values: a write-write race whose stores write
# one value, a store that writes what a racing read saw, and a read racing a store that left the value, are benign
GPUVERIFY_BENIGN = frozenset({"same", "kept"})
# faial calls two stores of one value benign, and nothing involving a read
FAIAL_BENIGN = frozenset({"same"})

MEMORY_MODEL = Reading("memory model")
GPUVERIFY = Reading("GPUVerify", benign_values=GPUVERIFY_BENIGN)
GPUVERIFY_WARP_SYNC = Reading("GPUVerify --warp-sync", frozenset({"block", "grid"}), GPUVERIFY_BENIGN, lock_step=True)
# `--only-intra-group`: GPUVerify checked the threads of one block only (races across blocks were not asked)
GPUVERIFY_INTRA_GROUP = Reading("GPUVerify --only-intra-group", frozenset({"warp", "block"}), GPUVERIFY_BENIGN)
GPUVERIFY_WARP_SYNC_INTRA_GROUP = Reading("GPUVerify --warp-sync --only-intra-group", frozenset({"block"}),
                                          GPUVERIFY_BENIGN, lock_step=True)
# GKLEE (its test suite's expected.txt, verify.py) excuses a write-write or write-read race "with the same value
# (Benign)" and checks every scope: across blocks, across warps, and within a warp (ci/race_suites/gklee.py)
# (its lock step orders a warp's accesses of different instructions, which the kinds cannot tell apart, so races
# within a warp count; the launches it leaves out run with lanes in lock step, as GKLEE runs them)
GKLEE = Reading("GKLEE", benign_values=frozenset({"same", "kept"}), lock_step=True)
FAIAL_BLOCK = Reading("faial", frozenset({"warp", "block"}), FAIAL_BENIGN)
FAIAL_GRID = Reading("faial --grid-level", frozenset({"grid"}), FAIAL_BENIGN)
FAIAL_ALL_LEVELS = Reading("faial --all-levels", benign_values=FAIAL_BENIGN)

# The readings by the names `qconform racescan --reading` takes; the memory model's is the default.
BY_OPTION = {"memory-model": MEMORY_MODEL, "gpuverify": GPUVERIFY, "gpuverify-warp-sync": GPUVERIFY_WARP_SYNC,
             "gpuverify-intra-group": GPUVERIFY_INTRA_GROUP,
             "gpuverify-warp-sync-intra-group": GPUVERIFY_WARP_SYNC_INTRA_GROUP, "faial": FAIAL_BLOCK,
             "faial-grid-level": FAIAL_GRID, "faial-all-levels": FAIAL_ALL_LEVELS, "gklee": GKLEE}
BY_NAME = {r.name: r for r in BY_OPTION.values()}

_VALUE_WORDS = {"same": "races of stores that left the bytes as they were",
               "kept": "races whose stores wrote the value their racing accesses saw"}
_SCOPE_WORDS = {"warp": "lanes of one warp", "block": "warps of one block", "grid": "threads of different blocks"}


def describe(reading: Reading) -> str:
    """What `reading` leaves out, in words: 'races between lanes of one warp; races of stores that left the bytes
    as they were' (empty for the memory model's, which counts every race)."""
    parts = []
    left = [s for s in RACE_SCOPES if s not in reading.scopes]
    if left:
        parts.append("races between " + " or ".join(_SCOPE_WORDS[s] for s in left))
    parts += [_VALUE_WORDS[v] for v in BENIGN_CLAIMS if v in reading.benign_values]
    return "; ".join(parts)
