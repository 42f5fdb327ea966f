"""Synthetic checkpoints: deterministic, scaled like a trained model, a loadable byte-level vocabulary, and
make-model's file written streaming to a temporary name."""
import os

import gguf
import numpy as np
import pytest

from harness.cli import main
from harness.model.checkpoint import open_checkpoint
from harness.model.pieces import byte_encoder
from harness.model.synthetic import (default_model_path, planned_bytes, preset_config, resolve_model,
                                     synthetic_weights, write_synthetic_gguf)
from harness.model.vocab import SPECIAL_TOKENS, byte_level_vocabulary
from reference.model import ModelWeights
from reference.quant import quantize_act_int8, quantize_q8_0

from .forward64 import Forward64

PROMPT = [300, 400, 500, 600]
GEN = 32


def test_seeded_and_deterministic():
    a, b, c = (synthetic_weights("tiny", layers=1, seed=s) for s in (4, 4, 5))
    assert np.array_equal(a.layer(0).gate_exps.quants, b.layer(0).gate_exps.quants)
    assert np.array_equal(a.output.scales, b.output.scales)
    assert not np.array_equal(a.layer(0).gate_exps.quants, c.layer(0).gate_exps.quants)


# SHA-256 of `make-model --preset tiny --seed 0`, per GENERATOR_VERSION (cached models are named by version).
TINY_SHA256 = {1: "188bde1b6d0bc7688728d9138abc6762715e260f9abc0869e626a5e245d28258"}


def test_generator_version_locks_the_bytes(tiny_gguf):
    import hashlib

    from harness.model.synthetic import GENERATOR_VERSION
    digest = hashlib.sha256(tiny_gguf.read_bytes()).hexdigest()
    assert digest == TINY_SHA256.get(GENERATOR_VERSION), (
        f"the tiny synthetic model's bytes changed ({digest}): bump GENERATOR_VERSION in "
        f"harness/model/synthetic.py and record the new hash here, so no stale cached model is reused")


def test_file_is_byte_identical_across_writes(tmp_path):
    p1 = write_synthetic_gguf("tiny", tmp_path / "a.gguf", layers=1, seed=2, progress=False)
    p2 = write_synthetic_gguf("tiny", tmp_path / "b.gguf", layers=1, seed=2, progress=False)
    assert p1.read_bytes() == p2.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["a.gguf", "b.gguf"]          # no temporary left behind
    assert p1.stat().st_size - planned_bytes("tiny", 1) < 64 * 1024      # tensors + header, nothing else


def test_writer_failure_leaves_nothing(tmp_path, monkeypatch):
    import harness.model.synthetic as syn

    def boom(*a, **k):
        raise RuntimeError("disk full")
    monkeypatch.setattr(syn, "quantize_q8_0", boom)
    with pytest.raises(RuntimeError):
        write_synthetic_gguf("tiny", tmp_path / "x.gguf", layers=1, progress=False)
    assert os.listdir(tmp_path) == []


def test_scales_like_a_trained_model():
    w = synthetic_weights("tiny", seed=0)
    c = w.config
    layer = w.layer(0)
    for norm in (layer.attn_norm, layer.ffn_norm, layer.q_norm, w.output_norm):
        assert norm.min() > 0 and 0.9 < norm.mean() < 1.15 and norm.std() > 0.1     # near 1, with spread
    x = np.random.default_rng(0).standard_normal(c.d_model)
    for mat in (layer.wq, layer.wk, layer.gate_exps):                               # RMS-preserving
        y = mat.dequantize() @ x
        assert 0.85 < np.sqrt(np.mean(y ** 2)) / np.sqrt(np.mean(x ** 2)) < 1.15
    gains = np.linalg.norm(layer.router_float, axis=1)
    assert gains.max() / np.median(gains) > 2.5                                      # a few dominant experts


def _generate(w: ModelWeights):
    f = Forward64(w)
    for tok in PROMPT[:-1]:
        f.step(tok)
    tok, margins, errs = PROMPT[-1], [], []
    W = w.output.dequantize()
    for _ in range(GEN):
        logits = f.step(tok)
        top = np.argsort(-logits)[:2]
        margins.append(logits[top[0]] - logits[top[1]])
        q, s = quantize_act_int8(f.last_xn.astype(np.float32))      # the LM head's int8 input
        delta = W @ ((q.reshape(-1, 32) * s[:, None].astype(np.float64)).ravel() - f.last_xn)
        errs.append(abs(delta[top[0]] - delta[top[1]]))
        tok = int(top[0])
    return np.array(margins), np.array(errs), np.array(f.experts)


def _margins_are_real(margins, errs) -> bool:
    """Greedy decoding has real margins: the median top1-top2 gap is at least one logit, and on at least 3/4 of
    the steps it exceeds ten times what int8-quantizing the LM head's input moves it by."""
    return bool(np.median(margins) >= 1.0 and np.mean(margins > 10 * errs) >= 0.75)


@pytest.fixture(scope="module")
def tiny_run():
    return _generate(synthetic_weights("tiny", seed=0))


def test_greedy_margins_are_well_above_int8_error(tiny_run):
    margins, errs, _ = tiny_run
    assert _margins_are_real(margins, errs), (np.percentile(margins, [10, 50]), np.percentile(margins / errs, [10, 50]))


def test_margin_check_fails_for_near_uniform_logits():
    """Negative control: an LM head whose rows all share one direction gives near-ties."""
    w = synthetic_weights("tiny", layers=1, seed=0)
    rng = np.random.default_rng(9)
    base = rng.standard_normal(w.config.d_model)
    flat = quantize_q8_0((base[None, :] + 0.01 * rng.standard_normal((w.config.vocab, w.config.d_model)))
                         / np.sqrt(w.config.d_model))
    bad = ModelWeights(config=w.config, token_embd=w.token_embd, output_norm=w.output_norm, output=flat,
                       layer_source=w.layer_source)
    assert not _margins_are_real(*_generate(bad)[:2])


def test_router_has_dominant_experts(tiny_run):
    """The most used quarter of the experts takes at least half of the selections (uniform routing: a quarter)."""
    experts = tiny_run[2]
    for layer in range(experts.shape[1]):
        counts = np.sort(np.bincount(experts[:, layer].ravel(), minlength=32))[::-1]
        assert counts[:8].sum() >= 0.5 * counts.sum(), counts


def test_byte_level_vocabulary_is_valid_bpe():
    v = byte_level_vocabulary(1024)
    assert len(v.tokens) == 1024 == len(set(v.tokens)) == len(v.token_types)
    enc = byte_encoder()
    assert [v.tokens[b] for b in range(256)] == [enc[b] for b in range(256)]
    index = {t: i for i, t in enumerate(v.tokens)}
    for rank, merge in enumerate(v.merges):
        left, right = merge.split(" ")
        assert index[left] < 256 + rank and index[right] < 256 + rank     # parts exist before the merge
        assert index[left + right] == 256 + rank                          # the merge makes the next token
    assert v.tokens[-3:] == SPECIAL_TOKENS and v.token_types[-3:] == (int(gguf.TokenType.CONTROL),) * 3
    assert v.bos_id == 1021 and v.eos_id == 1023
    big = byte_level_vocabulary(151936)
    assert len(set(big.tokens)) == 151936 and big.tokens[:1021] == v.tokens[:1021]   # same merges, more of them


def test_qwen3_preset_dimensions():
    c = preset_config("qwen3-30b-a3b")
    assert (c.n_layer, c.d_model, c.n_expert, c.d_expert, c.vocab, c.head_dim) == (48, 2048, 128, 768, 151936, 128)
    assert 32.4e9 < planned_bytes("qwen3-30b-a3b") < 32.6e9
    with pytest.raises(ValueError, match="32 GB"):
        synthetic_weights("qwen3-30b-a3b")


def test_metadata_llama_cpp_reads(tiny_gguf):
    """The keys llama.cpp's qwen3moe loader and gpt2 tokenizer read (see README, make-model)."""
    md = open_checkpoint(tiny_gguf).metadata
    for key in ("qwen3moe.context_length", "qwen3moe.embedding_length", "qwen3moe.block_count",
                "qwen3moe.attention.head_count", "qwen3moe.attention.head_count_kv", "qwen3moe.attention.key_length",
                "qwen3moe.attention.value_length", "qwen3moe.rope.freq_base", "qwen3moe.expert_count",
                "qwen3moe.expert_used_count", "qwen3moe.expert_feed_forward_length",
                "qwen3moe.attention.layer_norm_rms_epsilon", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        assert key in md, key
    assert md["tokenizer.ggml.model"] == "gpt2" and md["tokenizer.ggml.pre"] == "qwen2"
    reader = gguf.GGUFReader(tiny_gguf)
    dims = {t.name: [int(x) for x in t.shape] for t in reader.tensors}
    assert dims["blk.0.ffn_gate_exps.weight"] == [512, 128, 32]       # llama.cpp: {n_embd, n_ff_exp, n_expert}
    assert dims["blk.0.ffn_down_exps.weight"] == [128, 512, 32]       # {n_ff_exp, n_embd, n_expert}
    assert dims["blk.0.ffn_gate_inp.weight"] == [512, 32]             # {n_embd, n_expert}


def test_default_model_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path))
    p = default_model_path(progress=False)
    assert p.parent == tmp_path / "models" and p.name.startswith("synthetic-tiny-L2-s0-")
    mtime = p.stat().st_mtime_ns
    assert default_model_path(progress=False) == p and p.stat().st_mtime_ns == mtime
    assert resolve_model(None, progress=False) == p
    assert resolve_model(str(p)) == p
    with pytest.raises(ValueError, match="--model"):
        resolve_model(str(tmp_path / "nope.gguf"))


def test_make_model_cli(tmp_path, capsys):
    out = tmp_path / "m.gguf"
    assert main(["make-model", "--preset", "tiny", "--layers", "1", "--seed", "7", "--out", str(out),
                 "--no-progress"]) == 0
    assert "wrote" in capsys.readouterr().out
    ck = open_checkpoint(out)
    assert ck.config.n_layer == 1
    assert main(["make-model", "--preset", "tiny", "--layers", "0", "--out", str(tmp_path / "z.gguf")]) == 2
    assert "argument --layers: expected a positive integer, got 0" in capsys.readouterr().err
    assert not (tmp_path / "z.gguf").exists()


def test_tails_preset_in_memory():
    w = synthetic_weights("tails", layers=1, seed=1)
    w.check()
    assert w.config.vocab == 1000 and w.config.d_model == 672      # K = 672: not a multiple of 128
    assert len(byte_level_vocabulary(1000).tokens) == 1000


def test_no_room_is_refused_before_writing(tmp_path, monkeypatch):
    from collections import namedtuple

    import harness.cache
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(harness.cache.shutil, "disk_usage", lambda p: usage(10**12, 10**12 - 10**6, 10**6))
    with pytest.raises(ValueError, match=r"--out: 0\.01 GB to write but 0\.00 GB free in "):
        write_synthetic_gguf("tiny", tmp_path / "x.gguf", layers=1, progress=False)
    assert list(tmp_path.iterdir()) == []
