"""Fixtures for the nvcc-based checks: they skip, saying why, only when no nvcc (or no SASS reader) is found."""
from __future__ import annotations

import pytest

from harness.toolchain.finder import toolchain_or_reason


@pytest.fixture(scope="session")
def toolchain():
    tc, why = toolchain_or_reason()
    if tc is None:
        pytest.skip(f"compile checks need nvcc: {why}")
    return tc


@pytest.fixture(scope="session")
def sass_toolchain(toolchain):
    if not toolchain.can_read_sass:
        pytest.skip("SASS checks need cuobjdump or nvdisasm (qconform's toolchain extra ships both); "
                    f"nvcc was found at {toolchain.nvcc} without them")
    return toolchain
