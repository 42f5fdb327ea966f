"""The emu backend with its happens-before race detector, shared by the race scan's tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def detector():
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=60, race_check=True)
    yield backend
    backend.close()
