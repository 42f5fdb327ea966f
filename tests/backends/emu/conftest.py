"""Shared fixtures for the emu backend tests: one backend (one worker process) per test session, and each
source compiled once per session (the compiled objects are also cached on disk by content hash)."""
from __future__ import annotations

from pathlib import Path

import pytest

SEED = Path(__file__).resolve().parents[3] / ".." / "shared" / "seed" / "qwen_emit.rs"


@pytest.fixture(scope="session")
def emu():
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=60)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def load(emu):
    modules = {}

    def _load(source: str):
        if source not in modules:
            modules[source] = emu.load(source)
        return modules[source]
    return _load


@pytest.fixture(scope="session")
def seed_sets():
    if not SEED.is_file():
        pytest.skip(f"the seed kernel file is absent ({SEED.name} not found next to the repository)")
    from harness.toolchain.rust_literals import kernel_sets
    return {ks.name: ks for ks in kernel_sets(SEED.read_text(), {"i": 0, "nt": 2}) if ks.complete}
