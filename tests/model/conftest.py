"""Small synthetic checkpoints shared by the model tests (written once per session)."""
import pytest

from harness.model.synthetic import write_synthetic_gguf


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    return write_synthetic_gguf("tiny", tmp_path_factory.mktemp("ckpt") / "tiny.gguf", seed=0, progress=False)


@pytest.fixture(scope="session")
def tiny1_gguf(tmp_path_factory):
    """One block: the file the rewrite and corruption tests start from (8 MB)."""
    return write_synthetic_gguf("tiny", tmp_path_factory.mktemp("ckpt1") / "tiny1.gguf", layers=1, seed=5,
                                progress=False)
