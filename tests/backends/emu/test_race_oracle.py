"""The race detector against an independent happens-before oracle, on random straight-line kernels (hb_programs):
barriers, `__syncwarp` with partial masks, guarded reads, stores and atomics of shared and global memory, one to
three blocks. On one schedule the detector must report a race exactly when the oracle finds one, name only pairs
of statements the oracle calls racing, and cover every element the oracle finds raced on (the first race of each
element is always reported; later pairs on an element already raced on may be folded into it).

Seeded: QCONFORM_HB_SEED and QCONFORM_HB_COUNT pick the programs (a failure prints the seed, the program's name
and its source, which replay it)."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from harness.backends import DataRace
from harness.backends.emu import races as race_records

from .hb_programs import GLOBAL_LEN, programs

SEED = int(os.environ.get("QCONFORM_HB_SEED", "2"))
COUNT = int(os.environ.get("QCONFORM_HB_COUNT", "160"))
_SITES = re.compile(r"at line (\d+) and (?:\w+ )+by .* at line (\d+) are unordered")
_EXTENT = re.compile(r"\[(?:\d+ racing access(?:es)?, )?(?:index (\d+)|indices (\d+)\.\.(\d+))")


def _region(text: str) -> str:
    return "s" if text.startswith("data race on __shared__ 's'") else "g" if text.startswith("data race on 'g'") else "?"


def _reported(err: DataRace, offset: int) -> tuple[set, dict]:
    """({(region, line, line)}, {region: [(lo, hi), ...]}) of a DataRace, lines relative to the program."""
    pairs, extents = set(), {}
    for text in err.races:
        sites = _SITES.search(text)
        assert sites, text
        a, b = sorted(int(x) - offset for x in sites.groups())
        pairs.add((_region(text), a, b))
        ext = _EXTENT.search(text)
        assert ext, text
        lo, hi = (int(ext.group(1)),) * 2 if ext.group(1) else (int(ext.group(2)), int(ext.group(3)))
        extents.setdefault(_region(text), []).append((lo, hi))
    return pairs, extents


@pytest.fixture(scope="module")
def generated():
    progs = programs(SEED, COUNT)
    return progs, "".join(p.source() for p in progs)


@pytest.fixture(scope="module")
def module(detector, generated):
    return detector.load(generated[1])


def test_the_detector_agrees_with_the_happens_before_oracle(module, generated):
    progs, _ = generated
    offset, judged, racy = 0, 0, 0
    disagreements = []
    for prog in progs:
        here = offset
        offset += prog.source().count("\n")
        if not prog.judgeable():
            continue
        judged += 1
        want_pairs, want_elements = prog.races()
        racy += bool(want_pairs)
        g = np.zeros(GLOBAL_LEN, np.int32)
        out = np.zeros(prog.grid * prog.block, np.int32)
        try:
            module.launch(prog.name, (prog.grid,), (prog.block,), 0, [g, out])
            got_pairs, extents, shown_all = set(), {}, True
        except DataRace as err:
            got_pairs, extents = _reported(err, here)
            shown_all = err.distinct <= race_records.SHOWN
        problems = []
        if bool(got_pairs) != bool(want_pairs):
            problems.append(f"verdict: detector {'RACE' if got_pairs else 'CLEAN'}, oracle "
                            f"{'RACE' if want_pairs else 'CLEAN'}")
        if got_pairs - want_pairs:
            problems.append(f"pairs the oracle calls ordered: {sorted(got_pairs - want_pairs)}")
        if shown_all:
            uncovered = sorted((r, e) for r, e in want_elements
                               if not any(lo <= e <= hi for lo, hi in extents.get(r, [])))
            if uncovered:
                problems.append(f"elements raced on but in no report: {uncovered}")
        if problems:
            disagreements.append(f"{prog.name} <<<{prog.grid}, {prog.block}>>> (QCONFORM_HB_SEED={SEED}): "
                                 + "; ".join(problems) + f"; oracle pairs {sorted(want_pairs)}\n{prog.source()}")
    assert not disagreements, f"{len(disagreements)} of {judged} programs:\n" + "\n".join(disagreements[:5])
    # the programs must exercise both verdicts, and few may be left unjudged
    assert judged >= 0.7 * len(progs) and 0.2 * judged <= racy <= 0.9 * judged, (judged, racy, len(progs))
