"""Speed of the reference (issue 2, section 7). Run with `pytest tests/bench --benchmark-enable`.

Targets, read off the benchmark table by group: quantize/dequantize no slower than gguf-py on 25M elements;
q8_matmul DEQUANT on the LM head (151936 x 2048) within 6x of one float32 np.matmul over the already
dequantized weight; INT8_ACT and TWO_PASS_INT8 within 2x of DEQUANT. With --benchmark-disable (the default
suite) every benchmark runs once on a small shape as a smoke test.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

from reference.matmul import q8_matmul
from reference.modes import Mode
from reference.quant import Q8Tensor, dequantize_q8_0, quantize_q8_0
from reference.shapes import QWEN3_30B_A3B

Q8 = GGMLQuantizationType.Q8_0
SEED = 2024


def full_size(request) -> bool:
    """True when benchmarks are measured (pytest-benchmark: --benchmark-enable overrides --benchmark-disable)."""
    opt = request.config.getoption
    return bool(opt("benchmark_enable")) or not opt("benchmark_disable")


@pytest.fixture(scope="module")
def quant_input(request):
    rows = 25_000_000 // 2048 if full_size(request) else 64      # 25M elements (12207 x 2048)
    w = (np.random.default_rng(SEED).standard_normal((rows, 2048)) * 0.02).astype(np.float32)
    return w, quantize_q8_0(w), gguf_quantize(w, Q8)


@pytest.mark.benchmark(group="quantize 25M")
def test_quantize_reference(benchmark, quant_input):
    w, t, raw = quant_input
    out = benchmark(quantize_q8_0, w)
    assert np.array_equal(out.to_gguf_blocks(), raw)


@pytest.mark.benchmark(group="quantize 25M")
def test_quantize_gguf(benchmark, quant_input):
    w, _, raw = quant_input
    assert np.array_equal(benchmark(gguf_quantize, w, Q8), raw)


@pytest.mark.benchmark(group="dequantize 25M")
def test_dequantize_reference(benchmark, quant_input):
    _, t, raw = quant_input
    out = benchmark(dequantize_q8_0, t)
    assert out.dtype == np.float64 and np.array_equal(out[:4], gguf_dequantize(raw[:4], Q8))


@pytest.mark.benchmark(group="dequantize 25M")
def test_dequantize_gguf(benchmark, quant_input):
    _, t, raw = quant_input
    assert benchmark(gguf_dequantize, raw, Q8).shape == t.shape


@pytest.fixture(scope="module")
def lm_head(request):
    rows = QWEN3_30B_A3B.vocab if full_size(request) else 512
    k = QWEN3_30B_A3B.d
    rng = np.random.default_rng(SEED)
    w = Q8Tensor(rng.integers(-127, 128, (rows, k), dtype=np.int8),
                 (rng.uniform(1e-4, 1e-3, (rows, k // 32))).astype(np.float16).astype(np.float32))
    x = rng.standard_normal(k).astype(np.float32)
    return w, x


@pytest.mark.benchmark(group="lm head 151936x2048")
def test_lm_head_f32_matmul_of_dequantized_weight(benchmark, lm_head):
    w, x = lm_head
    w32 = dequantize_q8_0(w, dtype=np.float32)
    y = benchmark(np.matmul, w32, x)
    assert y.shape == (w.rows,)


@pytest.mark.benchmark(group="lm head 151936x2048")
@pytest.mark.parametrize("mode", list(Mode), ids=lambda m: m.value)
def test_lm_head_q8_matmul(benchmark, lm_head, mode):
    w, x = lm_head
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        q8_matmul(x, w, mode)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    benchmark.extra_info["peak_extra_mib"] = round(peak / 2**20, 2)   # streamed: far below the 512 MiB cap
    assert peak <= 512 * 2**20
    y = benchmark(q8_matmul, x, w, mode)
    assert y.shape == (w.rows,) and np.all(np.isfinite(y))
