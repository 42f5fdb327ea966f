"""The GEMV budgets are bounds, not tolerances: a float32 simulation of the family's warp-per-row dp4a GEMV
(lane-strided blocks, shuffle-tree reduction) and of a serial thread-per-output sum stays within them on
random and adversarial inputs (cancellation, wide dynamic range, saturated int8), and a wrong scale does not."""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from harness.judging.core import gemv_mode_budget, gemv_terms


def warp_gemv_f32(wq, ws, xq, xs, K):
    """y[o] in float32 as a 32-lane warp computes it: lane l takes blocks l, l+32, ... (one 32-block per
    iteration), acc += (float)dot * (ws*xs), then a shfl_down tree (16, 8, 4, 2, 1)."""
    N, nb = wq.shape[0], K // 32
    dots = (wq.reshape(N, nb, 32).astype(np.int64) * xq.reshape(1, nb, 32)).sum(axis=2)
    acc = np.zeros((N, 32), dtype=np.float32)
    for b in range(0, nb, 32):                      # iterations of the per-lane loop (<= K/1024)
        blk = np.arange(b, min(b + 32, nb))
        term = dots[:, blk].astype(np.float32) * (ws[:, blk] * xs[blk]).astype(np.float32)
        acc[:, : blk.size] += term.astype(np.float32)
    off = 16
    while off:
        acc[:, :off] += acc[:, off:2 * off]
        off //= 2
    return acc[:, 0]


@given(seed=st.integers(0, 2**31 - 1), nb=st.integers(1, 80), spread=st.integers(0, 30),
       cancel=st.booleans())
def test_int8_gemv_budget_holds_for_the_warp_reduction(seed, nb, spread, cancel):
    rng = np.random.default_rng(seed)
    K, N = 32 * nb, 16
    wq = rng.integers(-128, 128, size=(N, K)).astype(np.int8)
    ws_exp = min(spread, 14)                     # Q8_0 scales are float16 values: |exponent| <= 14 here
    ws = np.exp2(rng.integers(-ws_exp, ws_exp + 1, size=(N, nb))).astype(np.float16).astype(np.float32)
    xq = rng.integers(-128, 128, size=K).astype(np.int8)
    xs = np.exp2(rng.integers(-spread, spread + 1, size=nb)).astype(np.float32) * np.float32(0.01)
    if cancel:                                   # second half of every row cancels the first: y ~ 0
        half = (nb // 2) * 32
        wq[:, half:2 * half] = wq[:, :half]
        xq[half:2 * half] = -np.maximum(xq[:half], -127)
        ws[:, nb // 2: 2 * (nb // 2)] = ws[:, : nb // 2]
        xs[nb // 2: 2 * (nb // 2)] = xs[: nb // 2]
    y32 = warp_gemv_f32(wq, ws, xq, xs, K).astype(np.float64)
    y, a = gemv_terms(wq, ws, {"int8": (xq, xs)}, K)
    bud = gemv_mode_budget("f32", K, y[0], a[0])
    usage, _ = bud.usage(y32 - y[0])
    assert usage <= 1.0, f"observed error exceeds the derived budget ({usage:.3g}x)"


def test_a_wrong_scale_exceeds_the_budget():
    rng = np.random.default_rng(1)
    K, N = 512, 64
    wq = rng.integers(-128, 128, size=(N, K)).astype(np.int8)
    ws = (rng.random((N, K // 32)) * 0.01).astype(np.float16).astype(np.float32)
    xq = rng.integers(-128, 128, size=K).astype(np.int8)
    xs = (rng.random(K // 32) * 0.1).astype(np.float32)
    y, a = gemv_terms(wq, ws, {"int8": (xq, xs)}, K)
    bud = gemv_mode_budget("f32", K, y[0], a[0])
    wrong = warp_gemv_f32(wq, np.roll(ws, 1, axis=1), xq, xs, K).astype(np.float64)
    assert bud.usage(wrong - y[0])[0] > 1.0
