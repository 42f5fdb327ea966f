"""Shared fixtures for the emu backend tests: one backend (one worker process) per test session, and each
source compiled once per session (the compiled objects are also cached on disk by content hash)."""
from __future__ import annotations

import pytest

from tests.seed import seed_source


@pytest.fixture(scope="session")
def emu():
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=60)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def detector():
    """A backend with one schedule: the happens-before race detector alone, no differential runs."""
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(schedules=1, timeout_s=60)
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
    from harness.toolchain.rust_literals import kernel_sets
    return {ks.name: ks for ks in kernel_sets(seed_source(), {"i": 0, "nt": 2}) if ks.complete}   # skips without it


@pytest.fixture
def ungated(monkeypatch):
    """Builds skip the device-code gate (nvcc's device-side compile and the object checks): for tests of the
    runtime's own behaviour with host calls, and of the sandbox behind the gate. Their cache key says so, so
    no gated build ever reuses such a library."""
    from harness.backends.emu import gate
    monkeypatch.setattr(gate, "start_device_compile", lambda *a, **k: None)
    monkeypatch.setattr(gate, "check_object", lambda *a, **k: None)
    monkeypatch.setattr(gate, "cache_part", lambda: "gate:off-for-tests")
