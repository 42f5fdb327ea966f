"""The generation program on a GPU (`pytest -m gpu`): the qwen3-30b-a3b dims with 2 layers, every lane, 32
tokens; the kernels must match their reference lane token for token. Skipped with the reason where no GPU is
usable."""
from __future__ import annotations

import json
import os

import pytest

from harness.backends import gpu_unavailable_reason
from harness.backends.gpu import DRIVER_ENV

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def qwen_two_layers(tmp_path_factory):
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    if os.environ.get(DRIVER_ENV):
        pytest.skip(f"${DRIVER_ENV} names a stand-in driver ({os.environ[DRIVER_ENV]}), which runs no kernel")
    from harness.model.synthetic import write_synthetic_gguf
    return write_synthetic_gguf("qwen3-30b-a3b", tmp_path_factory.mktemp("qwen") / "qwen2.gguf", layers=2, seed=0,
                                progress=False)


def test_generate_on_gpu_qwen3_dims_two_layers_every_lane(qwen_two_layers, tmp_path):
    from harness.cli import main
    out = tmp_path / "gen"
    rc = main(["generate", "--backend", "gpu", "--model", str(qwen_two_layers), "--tokens", "32",
               "--no-router-effect", "--out", str(out)])
    doc = json.loads((out / "report.json").read_text())
    verdicts = {k["lane"]: (k["verdict"], k.get("fault"), (k.get("blame") or {}).get("finding")) for k in doc["kernels"]}
    assert sorted(verdicts) == ["fast", "flash", "precise", "twopass"]
    assert all(v[0] == "pass" for v in verdicts.values()), verdicts
    assert all(k["tokens"] == k["ref_tokens"] and len(k["tokens"]) == 32 for k in doc["kernels"])
    assert rc == 0
