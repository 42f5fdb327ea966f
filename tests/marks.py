"""Marks shared by the test modules."""
from __future__ import annotations

import pytest

from harness.backends.emu import gate

# nvcc's device-side check of emu's builds: without nvcc it is skipped, so tests of what it refuses cannot run
needs_nvcc = pytest.mark.skipif(gate.nvcc_gate()[0] is None,
                                reason="no nvcc: the device-side gate is skipped (the toolchain extra installs nvcc)")
