"""Speed of the reference decoder (issue 8, section 4). Run with `pytest tests/bench/test_bench_decoder.py
--benchmark-enable`.

Target: one token of the 48-layer qwen3-30b-a3b in the precise lane within 3 s on a 2-core machine. Measured
per layer on one full-width layer held in memory (random int8 quants and float16-valued scales: the speed of
the integer arithmetic does not depend on the values; ~0.7 GB) at position 0 (the attention over a few
hundred cached positions is negligible next to the ~56M weights a layer reads), and the LM head (151936 x
2048) alone; a token costs 48 layers + the LM head. Each layer benchmark also records the CPU seconds of all
threads (extra_info cpu_s_min): on a shared, busy machine the wall time overstates what two free cores need.
With --benchmark-disable (the default suite) each
benchmark runs once on a narrow layer as a smoke test.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from reference.decoder import LANES, Decoder, lane_spec
from reference.matmul import q8_matmul
from reference.model import LayerWeights, ModelConfig, ModelWeights
from reference.modes import Mode
from reference.quant import Q8Tensor, QuantizedActivation, quantize_act_int8, quantize_activation
from reference.shapes import QWEN3_30B_A3B as Q

SEED = 8
LAYERS_PER_TOKEN = 48


def full_size(request) -> bool:
    opt = request.config.getoption
    return bool(opt("benchmark_enable")) or not opt("benchmark_disable")


def _random_q8(rng, rows: int, cols: int) -> Q8Tensor:
    quants = rng.integers(-127, 128, size=(rows, cols), dtype=np.int8)
    scales = (rng.uniform(0.5, 1.5, size=(rows, cols // 32)) * 2.0 ** -9).astype(np.float16).astype(np.float32)
    return Q8Tensor(quants, scales)


def _config(full: bool, vocab: int) -> ModelConfig:
    if full:
        return ModelConfig(n_layer=1, d_model=Q.d, n_head=Q.n_head, n_kv_head=Q.n_kv, head_dim=Q.head_dim,
                           n_expert=Q.n_expert, n_expert_used=Q.top_k, d_expert=Q.dff, vocab=vocab,
                           rope_theta=Q.rope_theta, rms_eps=Q.rms_eps)
    return ModelConfig(n_layer=1, d_model=256, n_head=4, n_kv_head=2, head_dim=64, n_expert=16, n_expert_used=4,
                       d_expert=64, vocab=vocab, rope_theta=1e6, rms_eps=1e-6)


@pytest.fixture(scope="module")
def one_layer(request) -> ModelWeights:
    """One full-width layer and a 256-token head (the head's cost is measured separately)."""
    c = _config(full_size(request), 256)
    rng = np.random.default_rng(SEED)
    ones = np.ones(c.d_model, dtype=np.float32)
    layer = LayerWeights(attn_norm=ones, wq=_random_q8(rng, c.q_dim, c.d_model), wk=_random_q8(rng, c.kv_dim, c.d_model),
                         wv=_random_q8(rng, c.kv_dim, c.d_model), wo=_random_q8(rng, c.d_model, c.q_dim),
                         q_norm=np.ones(c.head_dim, dtype=np.float32), k_norm=np.ones(c.head_dim, dtype=np.float32),
                         ffn_norm=ones, router=_random_q8(rng, c.n_expert, c.d_model),
                         gate_exps=_random_q8(rng, c.n_expert * c.d_expert, c.d_model),
                         up_exps=_random_q8(rng, c.n_expert * c.d_expert, c.d_model),
                         down_exps=_random_q8(rng, c.n_expert * c.d_model, c.d_expert))
    head = _random_q8(rng, c.vocab, c.d_model)
    return ModelWeights(config=c, token_embd=head, output_norm=ones, output=head, layer_source=lambda i: layer)


@pytest.fixture(scope="module")
def lm_head(request) -> Q8Tensor:
    full = full_size(request)
    return _random_q8(np.random.default_rng(SEED + 1), Q.vocab if full else 1024, Q.d if full else 256)


@pytest.mark.benchmark(group="decoder: one full-width layer + 256-token head, position 0")
@pytest.mark.parametrize("lane", LANES)
def test_bench_layer(benchmark, one_layer, lane):
    dec = Decoder(one_layer, lane, max_positions=1)
    cpu = []

    def one_step():
        dec.position = 0
        t0 = time.process_time()
        rec = dec.step(7)
        cpu.append(time.process_time() - t0)
        return rec

    rec = benchmark.pedantic(one_step, rounds=3, iterations=1, warmup_rounds=1)
    # CPU seconds of all threads: on a busy shared machine the wall time overstates what two free cores take
    benchmark.extra_info["cpu_s_min"] = min(cpu)
    assert rec.logits.shape == (one_layer.config.vocab,)


@pytest.mark.benchmark(group="decoder: LM head 151936 x 2048")
@pytest.mark.parametrize("lane", LANES)
def test_bench_lm_head(benchmark, lm_head, lane):
    spec = lane_spec(lane)
    x = np.random.default_rng(SEED + 2).standard_normal(lm_head.cols).astype(np.float32)
    if spec.mode is Mode.DEQUANT:
        act = None
    elif spec.mode is Mode.INT8_ACT:
        act = QuantizedActivation(*quantize_act_int8(x, spec.norm_rule))
    else:
        act = quantize_activation(x, spec.mode)
    run = (lambda: q8_matmul(x, lm_head, Mode.DEQUANT)) if act is None else \
        (lambda: q8_matmul(None, lm_head, spec.mode, act=act))
    y = benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=0)
    assert y.shape == (lm_head.rows,)
