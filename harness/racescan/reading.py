"""Which of a launch's races count, for a reader whose notion of a race is narrower than the memory model's.

The detector reports every conflicting pair that the CUDA memory model leaves unordered, and marks each race
with its scope and whether its stores left the bytes as they were (DataRace.kinds). Verifiers and their
labelled suites read races more narrowly: GPUVerify and faial call two stores of the same value benign,
GPUVerify's `--warp-sync` assumes the lanes of a warp run in lock step (and `--only-intra-group` checks one
block's threads), and faial checks the threads of one
block (or, with `--grid-level`, threads of different blocks) only. A Reading says which races count, so that a
verdict can be compared with such a label without changing what the detector reports."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from harness.backends.base import RACE_SCOPES


@dataclass(frozen=True)
class Reading:
    name: str
    scopes: frozenset = frozenset(RACE_SCOPES)   # the conflicts that count ("warp", "block", "grid")
    same_value_benign: bool = False              # a race whose every store left the bytes as they were does not

    def __post_init__(self):
        unknown = set(self.scopes) - set(RACE_SCOPES)
        if unknown or not self.scopes:
            raise ValueError(f"scopes: expected a non-empty subset of {RACE_SCOPES}, got {sorted(self.scopes)}")

    def counts(self, kinds: Iterable[tuple[str, bool]]) -> bool:
        """Whether any of the races (DataRace.kinds: (scope, same value) each) counts. A race whose scope is not
        known counts: a reading never hides what it cannot place."""
        return any((scope not in RACE_SCOPES or scope in self.scopes) and not (same and self.same_value_benign)
                   for scope, same in kinds)


MEMORY_MODEL = Reading("memory model")
GPUVERIFY = Reading("GPUVerify", same_value_benign=True)
GPUVERIFY_WARP_SYNC = Reading("GPUVerify --warp-sync", frozenset({"block", "grid"}), same_value_benign=True)
# `--only-intra-group`: GPUVerify checked the threads of one block only (races across blocks were not asked)
GPUVERIFY_INTRA_GROUP = Reading("GPUVerify --only-intra-group", frozenset({"warp", "block"}), same_value_benign=True)
GPUVERIFY_WARP_SYNC_INTRA_GROUP = Reading("GPUVerify --warp-sync --only-intra-group", frozenset({"block"}),
                                          same_value_benign=True)
FAIAL_BLOCK = Reading("faial", frozenset({"warp", "block"}), same_value_benign=True)
FAIAL_GRID = Reading("faial --grid-level", frozenset({"grid"}), same_value_benign=True)
FAIAL_ALL_LEVELS = Reading("faial --all-levels", same_value_benign=True)
