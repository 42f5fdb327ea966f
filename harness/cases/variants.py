"""Input variants at the value ranges real models reach, beyond the Gaussian cases (issue: verification power).

Each variant has its own name in the case id and one generator here; the per-op judges call the generator
when the case's variant names it. What each one stresses:

- ``massive``: a few hidden channels 100x to 10000x the median magnitude, as LLM residual streams carry
  them; they set their 32-block's int8 scale (every other value of the block rounds to a few codes) and
  dominate RMSNorm's sum of squares.
- ``one-nonzero``: blocks holding a single nonzero value (scale |v|/127, the value quantizes to +-127, the
  rest to exact zeros); ``all-ties``: every rounding tie k + 1/2 of the int8 grid, k = -127..126.
- ``w-subnormal``: weight blocks whose half-precision scale is subnormal; ``w-overflow``: a weight block
  whose scale overflows half: the reference refuses it (ggml would store inf), so the case is reported as
  undefined, never as a pass.
- router logits: ``dominant``, ``dominant-first``, ``dominant-second``, ``dominant-mid`` (the last, the first, the
  second or the seventeenth expert, lane 16, 100 above the rest: an exp without the max subtracted overflows float32, and a reduction, broadcast or scan
  that misses that lane misses it; the other experts' weights, below exp(-88.7), fall under f32's smallest
  normal and may be exact zeros: docs/NUMERICS.md), ``all-equal`` (every logit 0); at tiny, ``E=128``: the
  full-size expert count, several warps per router block, with the dominant expert in the last warp.
- attention: ``spread`` (scores spanning > 100 with maxima above 88.7, where expf overflows), ``sink`` (one
  key dominates every head's scores), ``equal`` (every score equal); long caches (33, 257, the contract's
  maximum: at the CPU-backend shape sets when it is at most LONG_CACHE_CAP, else in the full-size set) and
  split counts leaving one-key splits.
- LM head: ``gap=1``, ``gap=0.5``, ``gap=0``: the top two exact logits apart by one, half and zero times the
  token judge's tie threshold.

Every generator checks its own promise on what it built (``check_*`` below, one per variant) and raises
PromiseError when it does not hold: the tool's fault, so the judge leaves the case unchecked with the reason,
never judged on inputs that do not stress what the name says.
"""
from __future__ import annotations

import numpy as np

MASSIVE_GAIN = (100.0, 10000.0)     # x the median |x| (the range reported for LLM residual streams)
MASSIVE_CHANNELS = 3
EXP_OVERFLOW = 88.73                # expf(x) overflows float32 above ~88.72
ROUTER_DOMINANCE = 100.0
SPREAD_TARGET = 150.0               # top attention score in the `spread` variant
SPREAD_SPAN = 100.0                 # ... and the least span of the scores of its widest head
SINK_LEAD = 25.0                    # score lead of the sink key over every other key
HALF_MAX_SCALE = 65504.0 * 127.0    # a Q8_0 block amax above this has a half scale of inf
UNDEFINED = "undefined"
# the MoE GEMVs' Kd in their wide case: 7 x 512 + 3 x 128 + 96, so every loop runs and the 32-wide tail takes three
# strides (a wrong stride skips columns); the smallest multiple of 32 where Kd / 127 exceeds Kd / 128 (a block
# count from a wrong divisor reads past the row)
WIDE_EXPERT_K = 4064
MANY_EXPERTS = 128                  # the router kernels' expert count in their multi-warp case (qwen3-30b-a3b's)
# ... with fewer output rows (the case's cost stays near that of the Gaussian one), and a count that is not a
# multiple of the 8 warp-rows per 256-thread block, so the last block has warps past the end (a row guard off by
# one lets one through). Also the router's expert count in its own odd-rows case
WIDE_EXPERT_N = 61
WHOLE_CHUNK_K = 1536                # a dff that is a multiple of 512 (qwen3-235b-a22b's): no 128-wide or tail part             # prefix of the reason of a case whose result the reference leaves undefined

ACT_QUANT_VARIANTS = ("massive", "one-nonzero", "all-ties")
GEMV_VARIANTS = ("massive", "w-subnormal", "w-overflow")
ROUTER_VARIANTS = ("dominant", "dominant-first", "dominant-second", "dominant-mid", "all-equal")
ATTENTION_VARIANTS = ("spread", "sink", "equal")
LM_HEAD_GAPS = {"gap=1": 1.0, "gap=0.5": 0.5, "gap=0": 0.0}


class PromiseError(RuntimeError):
    """A variant's inputs do not do what its name promises (a bug of the tool, not of the kernel)."""


def _promise(variant: str, holds, rule: str) -> None:
    if not bool(holds):
        raise PromiseError(f"variant {variant}: its inputs break its promise: {rule}")


def massive_activation(rng: np.random.Generator, n: int) -> np.ndarray:
    """Gaussian values with MASSIVE_CHANNELS channels at 100x..10000x (log-uniform) the median |x| (the median
    of the vector as returned: the channels are placed twice, the second time against the final median)."""
    x = rng.standard_normal(n)
    k = min(MASSIVE_CHANNELS, n)
    where = rng.choice(n, size=k, replace=False)
    gain = np.exp(rng.uniform(np.log(MASSIVE_GAIN[0]), np.log(MASSIVE_GAIN[1]), size=k))
    sign = np.sign(rng.standard_normal(k))
    for _ in range(2):
        x[where] = sign * float(np.median(np.abs(x))) * gain
    out = x.astype(np.float32)
    check_massive(out)
    return out


def check_massive(x: np.ndarray) -> None:
    a = np.abs(x.astype(np.float64))
    ratio = np.sort(a)[::-1][:min(MASSIVE_CHANNELS, a.size)] / np.median(a)
    _promise("massive", (ratio >= MASSIVE_GAIN[0] * (1 - 1e-6)).all() and (ratio <= MASSIVE_GAIN[1] * (1 + 1e-6)).all(),
             f"its {MASSIVE_CHANNELS} largest channels are {MASSIVE_GAIN[0]:g}x to {MASSIVE_GAIN[1]:g}x the median "
             f"|x| (got {ratio.min():.3g}x to {ratio.max():.3g}x)")


def one_nonzero_blocks(rng: np.random.Generator, n: int) -> np.ndarray:
    """Every other 32-block holds exactly one nonzero value; the others are Gaussian."""
    if n % 32:
        raise ValueError(f"n: one-nonzero blocks are built per 32-block, got n={n}")
    x = rng.standard_normal((n // 32, 32))
    lone = np.arange(0, n // 32, 2)
    x[lone] = 0.0
    x[lone, rng.integers(0, 32, size=lone.size)] = rng.standard_normal(lone.size) * 3.0
    out = x.reshape(-1).astype(np.float32)
    check_one_nonzero(out)
    return out


def check_one_nonzero(x: np.ndarray) -> None:
    counts = np.count_nonzero(x.reshape(-1, 32)[::2], axis=1)
    _promise("one-nonzero", (counts == 1).all(), f"every other 32-block holds exactly one nonzero value (counts "
             f"{sorted(set(counts.tolist()))})")


def all_ties(rng: np.random.Generator, n: int) -> np.ndarray:
    """Every rounding tie k + 1/2 (k = -127..126) of the int8 grid, cycled over the vector: each 32-block has
    amax 127 * 2^e (so amax/127 is exact) in its first element and ties in the other 31."""
    if n % 32:
        raise ValueError(f"n: ties are built per 32-block, got n={n}")
    nb = n // 32
    ties = np.arange(-127, 127, dtype=np.float64) + 0.5          # 254 ties
    k = np.resize(np.roll(ties, int(rng.integers(0, ties.size))), nb * 31).reshape(nb, 31)
    step = np.exp2(rng.integers(-6, 3, size=(nb, 1))).astype(np.float64)
    first = np.where(rng.random((nb, 1)) < 0.5, -127.0, 127.0)
    out = (np.concatenate([first, k], axis=1) * step).reshape(-1).astype(np.float32)
    check_all_ties(out)
    return out


def check_all_ties(x: np.ndarray) -> None:
    """Each block's first element is its amax (so the int8 step is amax/127, exact), every other element an
    exact tie k + 1/2 of that step, and the ties cycled over cover every k = -127..126 the vector can hold."""
    b = x.astype(np.float64).reshape(-1, 32)
    step = np.abs(b[:, :1]) / 127.0
    k = b[:, 1:] / step
    ties = set(np.floor(k).astype(int).ravel().tolist())
    _promise("all-ties", (np.abs(b).max(axis=1) == np.abs(b[:, 0])).all() and (k - np.floor(k) == 0.5).all()
             and len(ties) == min(254, k.size) and ties <= set(range(-127, 127)),
             "every element but each block's amax is an exact rounding tie, every tie k + 1/2 (k = -127..126) "
             "that fits is present")


def weight_matrix(rng: np.random.Generator, rows: int, cols: int, variant: str, std: float) -> np.ndarray:
    """Float weights of a GEMV variant before Q8_0 quantization."""
    w = rng.standard_normal((rows, cols)) * std
    if variant == "w-subnormal":
        # amax ~ 4e-4 gives scales ~ 3e-6, below half's smallest normal 6.1e-5: subnormal half scales
        w *= 1e-4 / std
    elif variant == "w-overflow":
        w[int(rng.integers(0, rows)), int(rng.integers(0, cols))] = 2.0 * HALF_MAX_SCALE
    out = w.astype(np.float32)
    check_weight(out, variant)
    return out


HALF_MIN_NORMAL = 2.0 ** -14


def check_weight(w: np.ndarray, variant: str) -> None:
    """w-subnormal: every block's scale amax/127 is a half subnormal (nonzero, below 2^-14); w-overflow: some
    block's scale overflows half."""
    scale = np.abs(w.astype(np.float64)).reshape(w.shape[0], -1, 32).max(axis=2) / 127.0
    if variant == "w-subnormal":
        _promise(variant, (scale > 0).all() and (scale < HALF_MIN_NORMAL).all(),
                 f"every block's half scale is subnormal (0 < amax/127 < 2^-14; largest {scale.max():.3g})")
    elif variant == "w-overflow":
        _promise(variant, (scale > 65504.0).any(), "a block's scale amax/127 overflows half (> 65504)")


def router_logits(rng: np.random.Generator, n_expert: int, variant: str) -> np.ndarray:
    z = (rng.standard_normal(n_expert) * 2.0).astype(np.float32)
    if variant.startswith("dominant"):
        # where the dominant expert sits decides which broken reductions it exposes: the last (a shuffle tree
        # with too small offsets, or a scan one short, misses it first), the first (a broadcast from the
        # wrong lane misses it), the second (reachable in a shuffle tree only through offset 1: a tree with
        # shifted offsets misses it), lane 16 (reachable only through offset 16: a tree starting at 17 misses it)
        at = _dominant_at(variant, n_expert)
        # at least ROUTER_DOMINANCE above zero too, so its exp overflows whatever the others are
        z[at] = np.float32(max(float(z.max()), 0.0) + ROUTER_DOMINANCE)
    elif variant == "all-equal":
        # 0, not any value: the block max is then exactly 0, so a kernel that divides by a sum it never stored
        # (which would hold the max) divides by 0
        z[:] = 0.0
    else:
        raise ValueError(f"variant: no router logits for {variant!r}")
    check_router(z, variant)
    return z


def _dominant_at(variant: str, n_expert: int) -> int:
    # dominant-mid: lane 16 of the first warp; fewer than 17 experts (no kernel of the family: E % 32 == 0) the middle
    mid = 16 if n_expert > 16 else n_expert // 2
    return {"dominant": n_expert - 1, "dominant-first": 0, "dominant-second": 1, "dominant-mid": mid}[variant]


def check_router(z: np.ndarray, variant: str) -> None:
    if variant == "all-equal":
        _promise(variant, (z == 0).all(), "every router logit is 0")
        return
    at = _dominant_at(variant, z.size)
    rest = np.delete(z.astype(np.float64), at)
    lead = float(z[at]) - float(rest.max())
    _promise(variant, lead >= ROUTER_DOMINANCE * (1 - 1e-6) and float(z[at]) > EXP_OVERFLOW,
             f"expert {at}'s logit leads the rest by {ROUTER_DOMINANCE:g} and exceeds expf's overflow at "
             f"{EXP_OVERFLOW} (lead {lead:.4g}, logit {float(z[at]):.4g})")


def attention_qk(rng: np.random.Generator, variant: str, q: np.ndarray, k: np.ndarray, nh: int, nkv: int, hd: int,
                 L: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(q, k) reshaped for an attention variant: q (nh*hd,), k (rows, nkv*hd) with the first L rows cached."""
    q = q.astype(np.float64).reshape(nh, hd).copy()
    k = k.astype(np.float64).reshape(-1, nkv, hd).copy()
    group = nh // nkv
    if variant == "equal":
        k[:L] = k[0]
    elif variant == "spread":
        # The keys are scaled (a fused kernel renormalizes the query) so that the largest SIGNED score lands on
        # SPREAD_TARGET (the keys are negated when the scores' largest magnitude is negative: scaling that one
        # to the target would leave every maximum far below expf's overflow), and at least one head's scores
        # span SPREAD_SPAN (scaled further where needed).
        s = _scores(q, k, L, nh, group, scale)
        sign = 1.0 if s.max() >= -s.min() else -1.0
        top = max(float((sign * s).max()), 1e-3)
        span = float((s.max(axis=1) - s.min(axis=1)).max()) if L > 1 else 0.0
        factor = SPREAD_TARGET / top
        if L > 1 and span > 0:
            factor = max(factor, SPREAD_SPAN / span)
        k[:L] *= sign * factor
    elif variant == "sink":
        j = int(rng.integers(0, L))
        for g in range(nkv):
            heads = q[g * group:(g + 1) * group]
            k[j, g] = 0.0
            others = np.einsum("hd,nd->hn", heads, k[:L, g]) * scale
            # a direction every head of the group projects on with 1 (the least-norm solution of heads @ d = 1:
            # the normalized sum of the heads misses some head of a group of 8), scaled so that the sink's
            # score leads the rest by SINK_LEAD in every head
            d = np.linalg.lstsq(heads, np.ones(group), rcond=None)[0]
            k[j, g] = d * (float((others.max(axis=1) + SINK_LEAD).max()) / scale)
    else:
        raise ValueError(f"variant: no attention inputs for {variant!r}")
    q32, k32 = q.reshape(-1).astype(np.float32), k.reshape(k.shape[0], -1).astype(np.float32)
    check_attention(variant, q32, k32, nh, nkv, hd, L, scale)
    return q32, k32


def _scores(q: np.ndarray, k: np.ndarray, L: int, nh: int, group: int, scale: float) -> np.ndarray:
    """(nh, L) float64 scores of q (nh, hd) against the first L keys (rows, nkv, hd)."""
    return np.einsum("hd,nhd->hn", q.astype(np.float64), k[:L, np.arange(nh) // group].astype(np.float64)) * scale


def check_attention(variant: str, q: np.ndarray, k: np.ndarray, nh: int, nkv: int, hd: int, L: int,
                    scale: float) -> None:
    """The promise, on the scores of the (q, k) as handed to the kernel (a kernel that normalizes q itself, the
    fused ones, scores against its own normalized q)."""
    s = _scores(q.reshape(nh, hd), k.reshape(k.shape[0], nkv, hd), L, nh, nh // nkv, scale)
    if variant == "equal":
        _promise(variant, (k.reshape(k.shape[0], -1)[:L] == k.reshape(k.shape[0], -1)[0]).all(),
                 "every cached key is the same, so every score of a head is equal")
    elif variant == "spread":
        span = float((s.max(axis=1) - s.min(axis=1)).max())
        _promise(variant, float(s.max()) > EXP_OVERFLOW and (L < 2 or span >= SPREAD_SPAN * (1 - 1e-4)),
                 f"the largest score exceeds expf's overflow at {EXP_OVERFLOW} (got {float(s.max()):.4g}) and a "
                 f"head's scores span {SPREAD_SPAN:g} (got {span:.4g})")
    elif variant == "sink":
        top2 = np.sort(s, axis=1)[:, -2:] if L > 1 else None
        sink = np.argmax(s, axis=1)
        _promise(variant, L < 2 or ((top2[:, 1] - top2[:, 0]) >= SINK_LEAD * (1 - 1e-4)).all()
                 and (sink == sink[0]).all(),
                 f"one key leads every head's scores by {SINK_LEAD:g}")


def check_gap(variant: str, y_exact: np.ndarray, top: int, twin: int, reached: float) -> None:
    """LM-head gaps: the exact logits' top two are the top row and its lower-index twin, `reached` apart (the
    gap the codes could make; gap=0: an exact tie, the twin first)."""
    y = np.asarray(y_exact, dtype=np.float64)
    order = np.argsort(-y, kind="stable")[:2]
    gap = float(y[top] - y[twin])
    _promise(variant, set(order.tolist()) == {top, twin} and abs(gap - reached) <= 1e-9 * max(abs(y[top]), 1.0),
             f"the top two exact logits are rows {top} and {twin}, {reached:.6g} apart (top two {order.tolist()}, "
             f"gap {gap:.6g})")


# The longest cache the CPU-backend shape sets run: a 4096-position attention takes ~100 s per case on the
# CPU backend; kernels allowing more are run at their maximum in the full-size shape set (GPU matrix).
LONG_CACHE_CAP = {"tiny": 512, "tails": 512}
FULL_CACHE_CAP = 1 << 15


def long_cache_lengths(allowed, split: int, shape: str = "") -> dict[str, int]:
    """Cache lengths past the default ones: 33 and 257 (more than 32 and 256 cached positions), the largest
    length the contract allows (when it is within the shape set's cap), and lengths giving one-key splits
    (L = split, 2 split + 1), each kept where `allowed(L)` holds."""
    out = {}
    for L in (33, 257, split, 2 * split + 1):
        if L > 3 and allowed(L):
            out[f"len={L}"] = L
    cap = LONG_CACHE_CAP.get(shape, FULL_CACHE_CAP)
    if allowed(1) and not allowed(cap):
        lo, hi = 1, cap
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if allowed(mid) else (lo, mid)
        if lo > 3:
            out[f"len={lo}"] = lo
    return out
