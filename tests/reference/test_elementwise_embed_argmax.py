"""Element-wise chains, the Q8 embedding lookup, greedy argmax and the kernel's tree-reduction tie rule."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from reference.argmax import argmax_first, argmax_kernel_tree, argmax_report
from reference.elementwise import add, chain, mul, silu, sub, transpose
from reference.embed import embed_q8
from tests.reference.helpers import gaussian_q8, rng_for


def test_silu_values_and_extremes():
    x = np.array([0.0, 1.0, -1.0, 50.0, -800.0])
    y = silu(x)
    assert y[0] == 0 and np.isclose(y[1], 1 / (1 + np.exp(-1)), rtol=1e-15)
    assert np.isclose(y[2], -1 / (1 + np.e), rtol=1e-15) and y[3] == 50.0 and y[4] == 0.0


def test_chains_apply_left_to_right():
    rng = rng_for(81)
    a, b, c, d = (rng.standard_normal(16) for _ in range(4))
    assert np.array_equal(chain("sub", a, b, [("mul", c), "silu", ("add", d)]), silu((a - b) * c) + d)
    assert np.array_equal(add(a, b), a + b) and np.array_equal(sub(a, b), a - b) and np.array_equal(mul(a, b), a * b)
    assert not np.array_equal(chain("sub", a, b), b - a)       # order matters: a wrong operand order is caught
    with pytest.raises(ValueError, match="shape"):
        add(a, b[:8])
    with pytest.raises(ValueError, match="first_op"):
        chain("div", a, b)
    with pytest.raises(ValueError, match=r"steps\[0\]"):
        chain("add", a, b, ["relu"])


def test_transpose():
    x = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(transpose(x), x.T) and transpose(x).flags["C_CONTIGUOUS"]
    with pytest.raises(ValueError, match="2-D"):
        transpose(np.ones(3))


def test_embed_is_the_dequantized_row():
    t = gaussian_q8(rng_for(82), 10, 96)
    assert np.array_equal(embed_q8(t, 7), t.dequantize()[7])
    assert not np.array_equal(embed_q8(t, 7), t.dequantize()[6])
    for bad in (10, -1, 2.0, True):
        with pytest.raises(ValueError, match="token"):
            embed_q8(t, bad)


def test_argmax_first_ties_and_report():
    v = np.array([1.0, 5.0, 2.0, 5.0, 4.5])
    assert argmax_first(v) == 1
    r = argmax_report(v)
    assert r.index == 1 and r.ties == (1, 3) and r.is_tie and r.margin == 0.0 and r.runner_up == 3
    r2 = argmax_report(np.array([1.0, 5.0, 4.5]))
    assert not r2.is_tie and r2.runner_up == 2 and r2.margin == 0.5
    assert argmax_report(np.array([3.0])).margin == float("inf")
    with pytest.raises(ValueError, match="NaN"):
        argmax_first(np.array([1.0, np.nan]))


def literal_kernel_argmax(logits: np.ndarray, block: int) -> int:
    """gk_argmax_adv written out thread by thread (scalar float32), the oracle for the vectorized emulation."""
    bv, bi = [], []
    for t in range(block):
        best_v, best_i = np.float32(-1e30), 0
        for i in range(t, logits.size, block):
            if logits[i] > best_v:
                best_v, best_i = logits[i], i
        bv.append(best_v)
        bi.append(best_i)
    k = block // 2
    while k > 0:
        for t in range(k):
            if bv[t + k] > bv[t]:
                bv[t], bi[t] = bv[t + k], bi[t + k]
        k //= 2
    return bi[0]


@given(st.integers(0, 2**31 - 1), st.sampled_from([16, 32, 256]), st.integers(1, 700))
def test_kernel_tree_emulation_matches_the_kernel_written_out(seed, block, vocab):
    rng = rng_for(seed)
    logits = rng.integers(-3, 4, vocab).astype(np.float32)         # many exact ties
    if vocab > 4:
        logits[rng.integers(0, vocab)] = np.nan
    assert argmax_kernel_tree(logits, block) == literal_kernel_argmax(logits, block), f"seed {seed}"


def test_kernel_tree_does_not_always_return_the_lowest_tied_index():
    logits = np.zeros(600, np.float32)
    logits[[1, 256]] = 1.0
    assert argmax_first(logits) == 1
    assert argmax_kernel_tree(logits, 256) == 256          # 256 lives on thread 0, 1 on thread 1
    logits[[1, 256]] = 0.0
    logits[[300, 5]] = 2.0                                 # threads 44 and 5: the even thread wins at the last merge
    assert argmax_kernel_tree(logits, 256) == 300
    logits[[300, 5]] = 0.0
    logits[[1, 2]] = 3.0                                   # even adjacent ties: thread 2 beats thread 1
    assert argmax_kernel_tree(logits, 256) == 2
    assert argmax_kernel_tree(np.full(10, -1e31, np.float32)) == 0   # nothing beats the -1e30 start


@given(arrays(np.float32, st.integers(1, 300), elements=st.floats(-1e6, 1e6, width=32)))
def test_kernel_tree_agrees_with_argmax_when_the_max_is_unique(v):
    top = v.max()
    if np.count_nonzero(v == top) == 1 and top > -1e30:
        assert argmax_kernel_tree(v) == argmax_first(v)


def bit_reversed(t: np.ndarray, bits: int) -> np.ndarray:
    out = np.zeros_like(t)
    for b in range(bits):
        out |= ((t >> b) & 1) << (bits - 1 - b)
    return out


@given(st.integers(0, 2**31 - 1))
def test_tie_winner_is_the_smallest_bit_reversed_thread_then_the_smallest_index(seed):
    rng = rng_for(seed)
    logits = np.zeros(1000, np.float32)
    tied = rng.choice(1000, size=int(rng.integers(2, 12)), replace=False)
    logits[tied] = 1.0
    key = bit_reversed(tied % 256, 8) * 1000 + tied            # documented rule, as a sortable key
    assert argmax_kernel_tree(logits, 256) == int(tied[np.argmin(key)]), f"seed {seed}"
