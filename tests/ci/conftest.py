"""The verdicts of a test module's GPUVerify-style files: each module that names its cases in `CASES` (name ->
file text) gets them scored once, as the adapter scores the suite (gpuverify_cases.score_cases)."""
from __future__ import annotations

import pytest

from .gpuverify_cases import score_cases


@pytest.fixture(scope="module")
def scorer():
    """ci/score_race_suite.py, the script that scores a public suite (its adapters, readings and summary)."""
    from ci import score_race_suite
    return score_race_suite


@pytest.fixture(scope="module")
def verdicts(request, tmp_path_factory):
    return score_cases(tmp_path_factory.mktemp("gv"), request.module.CASES)
