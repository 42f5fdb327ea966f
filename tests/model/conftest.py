"""Fixtures of the model-level tests: one emu backend per session, the seed's generation kernel sets."""
from __future__ import annotations

from pathlib import Path

import pytest

SEED = Path(__file__).resolve().parents[2] / ".." / "shared" / "seed" / "qwen_emit.rs"
SEED_GEN_SETS = ("GEN_DEVICE_KERNELS", "MOE_ROUTER_TOPK_KERNELS", "MOE_SINGLE_PASS_KERNELS")


@pytest.fixture(scope="session")
def emu():
    from harness.backends.emu import EmuBackend
    backend = EmuBackend(timeout_s=120, schedules=3)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def seed_gen_sources():
    """(label, CUDA C) of the seed's generation kernel sets, as `qconform extract` writes them."""
    if not SEED.is_file():
        pytest.skip(f"the seed kernel file is absent ({SEED.name} not found next to the repository)")
    from harness.rust_literals import kernel_sets
    sets = {ks.name: ks for ks in kernel_sets(SEED.read_text(), {"i": 0, "nt": 2}) if ks.complete}
    return [(f"{n}.cu", sets[n].code) for n in SEED_GEN_SETS]
