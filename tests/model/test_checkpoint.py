"""open_checkpoint: config from the metadata, tensors as the reference's Q8Tensor, and one clear error per rule."""
import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

from harness.model.checkpoint import CheckpointError, open_checkpoint, q8_from_blocks
from harness.model.synthetic import preset_config, synthetic_weights
from reference.quant import Q8Tensor

from .ggufkit import q8_bytes, rewrite


def _same(a: Q8Tensor, b: Q8Tensor) -> bool:
    return np.array_equal(a.quants, b.quants) and np.array_equal(a.scales, b.scales)


def test_config_comes_from_the_metadata(tiny_gguf):
    ck = open_checkpoint(tiny_gguf)
    assert ck.config == preset_config("tiny")
    assert ck.metadata["qwen3moe.block_count"] == 2
    assert ck.metadata["tokenizer.ggml.model"] == "gpt2"
    assert len(ck.tokens) == ck.config.vocab == 1024
    assert ck.piece(ck.raw_tokens.index("Ġt")) == " t"
    assert len(ck.sha256()) == 64


def test_stated_values_are_not_assumed(tiny1_gguf, tmp_path):
    """rope.freq_base and the eps are read, not taken from a preset."""
    path = rewrite(tiny1_gguf, tmp_path / "theta.gguf",
                   set_keys={"qwen3moe.rope.freq_base": (10000.0, V.FLOAT32)},
                   drop_keys=("qwen3moe.rope.freq_base",))
    assert open_checkpoint(path).config.rope_theta == 10000.0


def test_file_equals_the_in_memory_model(tiny_gguf):
    """The streamed file and synthetic_weights are the same model bit for bit (every tensor)."""
    ck = open_checkpoint(tiny_gguf)
    mem = synthetic_weights("tiny", seed=0)
    assert _same(ck.weights.token_embd, mem.token_embd) and _same(ck.weights.output, mem.output)
    assert np.array_equal(ck.weights.output_norm, mem.output_norm)
    for i in range(ck.config.n_layer):
        a, b = ck.weights.layer(i), mem.layer(i)
        for key, value in vars(b).items():
            got = getattr(a, key)
            assert _same(got, value) if isinstance(value, Q8Tensor) else np.array_equal(got, value), (i, key)
    ck.weights.check()


def test_q8_matrices_match_gguf_dequantization(tiny_gguf):
    """Expert-major (rows, cols) layout: row e*dff + r of gate_exps is expert e's row r, as gguf-py reads it."""
    ck = open_checkpoint(tiny_gguf)
    reader = gguf.GGUFReader(tiny_gguf)
    t = {x.name: x for x in reader.tensors}
    c = ck.config
    layer = ck.weights.layer(1)
    for name, q in (("blk.1.ffn_gate_exps.weight", layer.gate_exps), ("blk.1.ffn_down_exps.weight", layer.down_exps),
                    ("blk.1.attn_output.weight", layer.wo), ("token_embd.weight", ck.weights.token_embd)):
        want = gguf.quants.dequantize(t[name].data, T.Q8_0)
        assert np.array_equal(q.dequantize(np.float32), want.reshape(q.shape)), name
    assert layer.down_exps.shape == (c.n_expert * c.d_model, c.d_expert)


def test_router_quantization_is_gguf_py_bit_for_bit(tiny_gguf):
    ck = open_checkpoint(tiny_gguf)
    layer = ck.weights.layer(0)
    assert layer.router_float is not None and layer.router_float.dtype == np.float32
    want = gguf.quants.quantize(layer.router_float, T.Q8_0)
    assert np.array_equal(layer.router.to_gguf_blocks(), want)


def test_f16_and_bf16_norms_and_router_are_accepted(tiny1_gguf, tmp_path):
    base = open_checkpoint(tiny1_gguf).weights.layer(0)
    router16 = base.router_float.astype(np.float16)
    bf16 = (base.attn_norm.view(np.uint32) >> 16).astype(np.uint16)   # truncation: exact in bf16
    path = rewrite(tiny1_gguf, tmp_path / "f16.gguf", tensors={
        "blk.0.ffn_gate_inp.weight": (router16.shape, T.F16, router16),
        "blk.0.attn_norm.weight": (base.attn_norm.shape, T.BF16, bf16.view(np.uint8)),
    })
    layer = open_checkpoint(path).weights.layer(0)
    assert np.array_equal(layer.router_float, router16.astype(np.float32))
    assert np.array_equal(layer.router.to_gguf_blocks(), gguf.quants.quantize(router16.astype(np.float32), T.Q8_0))
    assert np.array_equal(layer.attn_norm, (bf16.astype(np.uint32) << 16).view(np.float32))


def test_q8_router_in_the_file_is_used_as_is(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    raw = q8_bytes((c.n_expert, c.d_model), seed=3)
    path = rewrite(tiny1_gguf, tmp_path / "q8router.gguf",
                   tensors={"blk.0.ffn_gate_inp.weight": ((c.n_expert, c.d_model), T.Q8_0, raw)})
    layer = open_checkpoint(path).weights.layer(0)
    assert layer.router_float is None
    assert np.array_equal(layer.router.to_gguf_blocks(), raw)


def test_absent_output_means_tied(tiny1_gguf, tmp_path):
    path = rewrite(tiny1_gguf, tmp_path / "tied.gguf", drop_tensors=("output.weight",))
    w = open_checkpoint(path).weights
    assert w.tied_output and w.output is w.token_embd
    w.check()


def test_quants_are_copied_per_layer_not_per_file(tiny_gguf):
    """Layers come from the mapping on demand; with no cache budget every call builds afresh (bounded memory),
    with one they are kept."""
    ck = open_checkpoint(tiny_gguf, layer_cache_bytes=0)
    assert ck.weights.layer(0) is not ck.weights.layer(0)
    ck = open_checkpoint(tiny_gguf)
    assert ck.weights.layer(0) is ck.weights.layer(0)


def test_q8_from_blocks_reads_a_strided_block_view():
    """The block record view reads scale and quants where GGUF puts them (negative control: a shifted view)."""
    w = np.random.default_rng(1).standard_normal((6, 64)).astype(np.float32)
    raw = gguf.quants.quantize(w, T.Q8_0)
    got = q8_from_blocks("t", raw, (6, 64))
    assert np.array_equal(got.dequantize(np.float32), gguf.quants.dequantize(raw, T.Q8_0))
    shifted = np.roll(raw, 1, axis=1)
    with pytest.raises((CheckpointError, AssertionError)):
        bad = q8_from_blocks("t", shifted, (6, 64))
        assert np.array_equal(bad.dequantize(np.float32), gguf.quants.dequantize(raw, T.Q8_0))


# ------------------------------------------------------------------------------------------------ bad input
def _err(path) -> str:
    with pytest.raises(CheckpointError) as info:
        ck = open_checkpoint(path)
        ck.weights.check()
    return str(info.value)


def test_not_a_gguf(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04" + bytes(100))
    assert "not a GGUF file" in _err(p) and "b'PK\\x03\\x04'" in _err(p)


def test_missing_file(tmp_path):
    assert "no such checkpoint file" in _err(tmp_path / "absent.gguf")


@pytest.mark.parametrize("where", ["header", "data"])
def test_truncated(tiny1_gguf, tmp_path, where):
    data = tiny1_gguf.read_bytes()
    cut = 2000 if where == "header" else len(data) - 1000
    p = tmp_path / "cut.gguf"
    p.write_bytes(data[:cut])
    msg = _err(p)
    assert "truncated file" in msg
    if where == "data":
        assert "tensor 'output.weight'" in msg and f"the file has {cut} bytes" in msg


def test_another_architecture(tiny1_gguf, tmp_path):
    msg = _err(rewrite(tiny1_gguf, tmp_path / "llama.gguf", arch="llama"))
    assert "general.architecture: expected 'qwen3moe', got 'llama'" in msg


def test_missing_key(tiny1_gguf, tmp_path):
    msg = _err(rewrite(tiny1_gguf, tmp_path / "k.gguf", drop_keys=("qwen3moe.expert_count",)))
    assert "'qwen3moe.expert_count' is missing" in msg


def test_key_of_the_wrong_kind(tiny1_gguf, tmp_path):
    msg = _err(rewrite(tiny1_gguf, tmp_path / "k.gguf", drop_keys=("qwen3moe.block_count",),
                       set_keys={"qwen3moe.block_count": (1.0, V.FLOAT32)}))
    assert "'qwen3moe.block_count': expected an integer" in msg


def test_inconsistent_config(tiny1_gguf, tmp_path):
    msg = _err(rewrite(tiny1_gguf, tmp_path / "k.gguf", drop_keys=("qwen3moe.expert_used_count",),
                       set_keys={"qwen3moe.expert_used_count": (64, V.UINT32)}))
    assert "'qwen3moe.expert_used_count'" in msg and "exceeds" in msg


def test_missing_tensor(tiny1_gguf, tmp_path):
    msg = _err(rewrite(tiny1_gguf, tmp_path / "m.gguf", drop_tensors=("blk.0.ffn_up_exps.weight",)))
    assert "tensor 'blk.0.ffn_up_exps.weight' is missing" in msg


def test_extra_tensor(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    msg = _err(rewrite(tiny1_gguf, tmp_path / "e.gguf", tensors={
        "blk.1.attn_q.weight": ((c.q_dim, c.d_model), T.Q8_0, q8_bytes((c.q_dim, c.d_model)))}))
    assert "unexpected tensor 'blk.1.attn_q.weight'" in msg and "block_count=1" in msg


def test_shape_disagrees_with_metadata(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    shape = (c.kv_dim + 32, c.d_model)
    msg = _err(rewrite(tiny1_gguf, tmp_path / "s.gguf",
                       tensors={"blk.0.attn_k.weight": (shape, T.Q8_0, q8_bytes(shape))}))
    assert "tensor 'blk.0.attn_k.weight': shape [512, 160]" in msg and "expected [512, 128]" in msg
    assert "head_count_kv*key_length" in msg


def test_vocab_disagrees_with_token_list(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    shape = (c.vocab - 32, c.d_model)
    msg = _err(rewrite(tiny1_gguf, tmp_path / "v.gguf", tensors={
        "token_embd.weight": (shape, T.Q8_0, q8_bytes(shape)), "output.weight": (shape, T.Q8_0, q8_bytes(shape))}))
    assert "tokenizer.ggml.tokens" in msg and "992 rows" in msg


def test_unsupported_matrix_type(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    n_bytes = c.q_dim * c.d_model // 256 * 144        # Q4_K: 144 bytes per 256 weights
    msg = _err(rewrite(tiny1_gguf, tmp_path / "q4k.gguf", tensors={
        "blk.0.attn_q.weight": ((c.q_dim, c.d_model), T.Q4_K, np.zeros(n_bytes, np.uint8))}))
    assert "tensor 'blk.0.attn_q.weight': type Q4_K is not supported for a matrix; expected Q8_0" in msg


def test_float_matrix_is_refused(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    msg = _err(rewrite(tiny1_gguf, tmp_path / "f32.gguf", tensors={
        "blk.0.attn_v.weight": ((c.kv_dim, c.d_model), T.F32, np.zeros((c.kv_dim, c.d_model), np.float32))}))
    assert "type F32 is not supported for a matrix" in msg


def test_non_finite_scale_is_reported_when_the_layer_is_read(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    raw = q8_bytes((c.kv_dim, c.d_model)).copy()
    raw[3, 0:2] = np.array([np.inf], dtype="<f2").view(np.uint8)
    path = rewrite(tiny1_gguf, tmp_path / "inf.gguf",
                   tensors={"blk.0.attn_v.weight": ((c.kv_dim, c.d_model), T.Q8_0, raw)})
    ck = open_checkpoint(path)            # the header is fine: weights are read when the layer is asked for
    with pytest.raises(CheckpointError, match=r"tensor 'blk.0.attn_v.weight': scales: every block scale must be finite"):
        ck.weights.layer(0)


def test_non_finite_norm(tiny1_gguf, tmp_path):
    c = preset_config("tiny")
    norm = np.ones(c.d_model, np.float32)
    norm[7] = np.nan
    path = rewrite(tiny1_gguf, tmp_path / "nan.gguf", tensors={"output_norm.weight": ((c.d_model,), T.F32, norm)})
    assert "tensor 'output_norm.weight': element (7,) is nan" in _err(path)
