"""Fixtures of the model tests: small synthetic checkpoints (written once per session), one emu backend, and
the seed's generation kernel sets."""
from pathlib import Path

import pytest

from harness.model.synthetic import write_synthetic_gguf

SEED = Path(__file__).resolve().parents[2] / ".." / "shared" / "seed" / "qwen_emit.rs"
SEED_GEN_SETS = ("GEN_DEVICE_KERNELS", "MOE_ROUTER_TOPK_KERNELS", "MOE_SINGLE_PASS_KERNELS")


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    return write_synthetic_gguf("tiny", tmp_path_factory.mktemp("ckpt") / "tiny.gguf", seed=0, progress=False)


@pytest.fixture(scope="session")
def tiny1_gguf(tmp_path_factory):
    """One block: the file the rewrite and corruption tests start from (8 MB)."""
    return write_synthetic_gguf("tiny", tmp_path_factory.mktemp("ckpt1") / "tiny1.gguf", layers=1, seed=5,
                                progress=False)


@pytest.fixture(scope="session")
def emu():
    from harness.backends.emu.backend import EmuBackend
    backend = EmuBackend(timeout_s=120, schedules=3)
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def seed_gen_sources():
    """(label, CUDA C) of the seed's generation kernel sets, as `qconform extract` writes them."""
    if not SEED.is_file():
        pytest.skip(f"the seed kernel file is absent ({SEED.name} not found next to the repository)")
    from harness.toolchain.rust_literals import kernel_sets
    sets = {ks.name: ks for ks in kernel_sets(SEED.read_text(), {"i": 0, "nt": 2}) if ks.complete}
    return [(f"{n}.cu", sets[n].code) for n in SEED_GEN_SETS]
