"""Every kernel fault survives pickling whole: a verdict raised in a process pool or a Dask worker reaches the
caller with its fields (a plain Exception pickles as cls(*args), which keyword fields do not survive)."""
from __future__ import annotations

import pickle

import pytest

from harness.backends import base


def _faults(cls=base.KernelFault):
    for sub in cls.__subclasses__():
        yield sub
        yield from _faults(sub)


LAUNCH = base.LaunchInfo("k", (2, 1, 1), (64, 1, 1), 0)


@pytest.mark.parametrize("cls", sorted({base.KernelFault, *_faults()}, key=lambda c: c.__name__),
                         ids=lambda c: c.__name__)
def test_a_fault_round_trips_through_pickle(cls):
    fault = cls(LAUNCH, "what was seen", coverage={"blocks": 2})
    back = pickle.loads(pickle.dumps(fault))
    assert type(back) is cls and str(back) == str(fault) and back.args == fault.args
    assert vars(back) == vars(fault)


def test_a_data_race_keeps_its_races_and_marks():
    race = base.DataRace(LAUNCH, "data race on 's'", races=("race one", "race two"), distinct=3,
                         stopped_by="OutOfBounds: y", same_value=True, scope="warp",
                         kinds=(("warp", "same"), ("?", "?")))
    back = pickle.loads(pickle.dumps(race))
    assert (back.races, back.distinct, back.stopped_by, back.same_value, back.scope, back.kinds, back.launch) == \
        (("race one", "race two"), 3, "OutOfBounds: y", True, "warp", (("warp", "same"), ("?", "?")), LAUNCH)
    assert not back.tool_limit and pickle.loads(pickle.dumps(base.ResourceExhausted(None, "x"))).tool_limit
