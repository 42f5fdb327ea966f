"""Shared fixtures of the runner tests: one emu backend per xdist worker, the seed's kernel files."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def emu():
    from harness.backends import get_backend
    return get_backend("emu")


@pytest.fixture(scope="session")
def seed_cu_dir(tmp_path_factory):
    """The seed's complete kernel sets as .cu files (decoded at test time, never copied into the repo)."""
    from harness.rust_literals import extract_to_dir
    from tests.seed import seed_path, seed_source
    seed_source()   # skips with the reason when the seed is absent
    out = tmp_path_factory.mktemp("seed_cu")
    written, _ = extract_to_dir(seed_path(), out, {"i": 0, "nt": 2})
    return out, written
