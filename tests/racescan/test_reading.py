"""harness.racescan.reading: which races a verifier's narrower notion of a race counts."""
from __future__ import annotations

import pytest

from harness.racescan import MEMORY_MODEL, Reading
from harness.racescan.reading import (FAIAL_BLOCK, FAIAL_GRID, GPUVERIFY, GPUVERIFY_INTRA_GROUP, GPUVERIFY_WARP_SYNC,
                                     GPUVERIFY_WARP_SYNC_INTRA_GROUP)


def test_the_memory_model_counts_every_race():
    assert MEMORY_MODEL.counts([("warp", "same")]) and MEMORY_MODEL.counts([("grid", "differ")])
    assert MEMORY_MODEL.counts([("block", "kept")])
    assert not MEMORY_MODEL.counts([])


def test_verifiers_readings():
    same_block, diff_warp, diff_grid = ("block", "same"), ("warp", "differ"), ("grid", "differ")
    assert not GPUVERIFY.counts([same_block]) and GPUVERIFY.counts([same_block, diff_warp])
    assert not GPUVERIFY_WARP_SYNC.counts([diff_warp, same_block]) and GPUVERIFY_WARP_SYNC.counts([diff_grid])
    assert not GPUVERIFY_INTRA_GROUP.counts([diff_grid]) and GPUVERIFY_INTRA_GROUP.counts([diff_grid, diff_warp])
    assert not GPUVERIFY_WARP_SYNC_INTRA_GROUP.counts([diff_grid, diff_warp])
    assert GPUVERIFY_WARP_SYNC_INTRA_GROUP.counts([("block", "differ")])
    assert not FAIAL_BLOCK.counts([diff_grid]) and FAIAL_BLOCK.counts([diff_grid, diff_warp])
    assert not FAIAL_GRID.counts([diff_warp]) and FAIAL_GRID.counts([diff_grid])


def test_a_race_of_unknown_scope_always_counts():
    assert FAIAL_GRID.counts([("?", "differ")]) and GPUVERIFY_WARP_SYNC.counts([("?", "differ")])
    assert not GPUVERIFY.counts([("?", "same")])          # known to be same-value: benign to GPUVerify


def test_values_not_known_always_count():
    assert GPUVERIFY.counts([("block", "?")]) and FAIAL_BLOCK.counts([("block", "?")])


def test_gpuverify_but_not_faial_calls_a_store_of_the_value_read_benign():
    kept = ("block", "kept")
    assert not GPUVERIFY.counts([kept]) and not GPUVERIFY_INTRA_GROUP.counts([kept])
    assert FAIAL_BLOCK.counts([kept])                    # faial's benign races are two stores only


def test_a_reading_names_its_bad_scopes():
    with pytest.raises(ValueError, match=r"scopes: expected a non-empty subset of \('warp', 'block', 'grid'\), got \['cta'\]"):
        Reading("bad", frozenset({"cta"}))
    with pytest.raises(ValueError, match="non-empty"):
        Reading("none", frozenset())
    with pytest.raises(ValueError, match=r"benign_values: expected a subset of \('same', 'kept'\), got \['differ'\]"):
        Reading("bad", benign_values=frozenset({"differ"}))


def test_the_options_name_every_reading_and_say_what_each_leaves_out():
    from harness.cli.racescan import READINGS
    from harness.racescan.reading import BY_NAME, BY_OPTION, GKLEE, describe
    assert READINGS == tuple(BY_OPTION)                  # the option's choices
    assert BY_OPTION["memory-model"] is MEMORY_MODEL and describe(MEMORY_MODEL) == ""
    assert set(BY_NAME) == {r.name for r in BY_OPTION.values()} and len(BY_NAME) == len(BY_OPTION)
    assert describe(GPUVERIFY_WARP_SYNC_INTRA_GROUP).startswith(
        "races between lanes of one warp or threads of different blocks; races of stores that left the bytes")
    assert describe(FAIAL_BLOCK) == ("races between threads of different blocks; races of stores that left the "
                                     "bytes as they were")
    assert "their racing accesses saw" in describe(GKLEE) and "their racing accesses saw" not in describe(FAIAL_GRID)
    # the verifiers that run a warp's lanes in lock step
    assert {n for n, r in BY_OPTION.items() if r.lock_step} == {"gpuverify-warp-sync", "gpuverify-warp-sync-intra-group",
                                                                 "gklee"}
