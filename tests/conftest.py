"""Shared test configuration: the hypothesis profiles, one emu backend per xdist worker, the seed's kernel files.
(tests/backends/emu overrides `emu` with its own time limit.)"""
import os

import pytest
from hypothesis import HealthCheck, settings

# Deterministic, bounded property tests in CI; the seed of a failure is printed by hypothesis.
settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def emu():
    from harness.backends import get_backend
    return get_backend("emu")


@pytest.fixture(scope="session")
def seed_cu_dir(tmp_path_factory):
    """The seed's complete kernel sets as .cu files (decoded at test time, never copied into the repo)."""
    from harness.toolchain.rust_literals import extract_to_dir
    from tests.seed import SEED_RS, seed_source
    seed_source()   # skips with the reason when the seed is absent
    out = tmp_path_factory.mktemp("seed_cu")
    written, _ = extract_to_dir(SEED_RS, out, {"i": 0, "nt": 2})
    return out, written
