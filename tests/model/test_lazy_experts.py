"""Expert matrices stay in GGUF block layout (reference.quant.Q8Blocks): a checkpoint's layer converts only the
routed experts' rows, with the same values as converting everything."""
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

from harness.model.checkpoint import open_checkpoint
from harness.model.synthetic import preset_config, synthetic_weights
from reference.decoder import generate
from reference.quant import Q8Blocks, Q8Tensor, quantize_q8_0

from .ggufkit import q8_bytes, rewrite


def test_q8_blocks_rows_equal_the_converted_matrix():
    w = quantize_q8_0(np.random.default_rng(3).standard_normal((12, 96)))
    blocks = Q8Blocks(w.to_gguf_blocks(), 96, name="t")
    assert blocks.shape == w.shape
    part = blocks.row_range(4, 9)
    assert np.array_equal(part.quants, w.quants[4:9]) and np.array_equal(part.scales, w.scales[4:9])
    taken = blocks.take_rows(np.array([7, 0, 11]))
    assert np.array_equal(taken.quants, w.quants[[7, 0, 11]])
    assert np.array_equal(blocks.dequantize(), w.dequantize())
    assert np.array_equal(w.row_range(4, 9).quants, w.quants[4:9])
    with pytest.raises(ValueError, match=r"rows: range \[9, 13\) must be non-empty and lie in \[0, 12\]"):
        blocks.row_range(9, 13)
    with pytest.raises(ValueError, match="t: 100 bytes per row, expected 102"):
        Q8Blocks(np.zeros((2, 100), np.uint8), 96, name="t")


def test_checkpoint_experts_are_blocks_and_decode_like_the_in_memory_model(tiny_gguf):
    ck = open_checkpoint(tiny_gguf)
    layer = ck.weights.layer(0)
    assert isinstance(layer.gate_exps, Q8Blocks) and isinstance(layer.down_exps, Q8Blocks)
    assert isinstance(layer.wq, Q8Tensor)
    mem = synthetic_weights("tiny", seed=0)
    for lane in ("precise", "twopass"):
        a = generate(ck.weights, lane, [1, 2, 3], 3)
        b = generate(mem, lane, [1, 2, 3], 3)
        assert all(np.array_equal(x.logits, y.logits) for x, y in zip(a, b)), lane


def test_a_bad_expert_scale_is_reported_when_its_rows_are_read(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    shape = (c.n_expert, c.d_expert, c.d_model)
    raw = q8_bytes(shape).copy().reshape(c.n_expert * c.d_expert, -1)
    bad_expert = 5
    raw[bad_expert * c.d_expert + 3, 0:2] = np.array([np.inf], dtype="<f2").view(np.uint8)
    path = rewrite(tiny1_gguf, tmp_path / "inf.gguf",
                   tensors={"blk.0.ffn_gate_exps.weight": (shape, T.Q8_0, raw.reshape(*shape[:2], -1))})
    gate = open_checkpoint(path).weights.layer(0).gate_exps
    gate.row_range(0, c.d_expert)                                  # expert 0 is fine
    with pytest.raises(ValueError, match=r"tensor 'blk.0.ffn_gate_exps.weight': rows \[640, 768\): scales: every "
                                         r"block scale must be finite"):
        gate.row_range(bad_expert * c.d_expert, (bad_expert + 1) * c.d_expert)
