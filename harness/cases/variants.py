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
- router logits: ``dominant``, ``dominant-first``, ``dominant-second`` (the last, the first or the second expert
  100 above the rest: an exp without the max subtracted overflows float32, and a reduction, broadcast or scan
  that misses that lane misses it), ``all-equal``.
- attention: ``spread`` (scores spanning > 100 with maxima above 88.7, where expf overflows), ``sink`` (one
  key dominates every head's scores), ``equal`` (every score equal); long caches (33, 257, the contract's
  maximum: at the CPU-backend shape sets when it is at most LONG_CACHE_CAP, else in the full-size set) and
  split counts leaving one-key splits.
- LM head: ``gap=1``, ``gap=0.5``, ``gap=0``: the top two exact logits apart by one, half and zero times the
  token judge's tie threshold.
"""
from __future__ import annotations

import numpy as np

MASSIVE_GAIN = (100.0, 10000.0)     # x the median |x| (the range reported for LLM residual streams)
MASSIVE_CHANNELS = 3
EXP_OVERFLOW = 88.73                # expf(x) overflows float32 above ~88.72
ROUTER_DOMINANCE = 100.0
SPREAD_TARGET = 150.0               # top attention score in the `spread` variant
SINK_LEAD = 25.0                    # score lead of the sink key over every other key
HALF_MAX_SCALE = 65504.0 * 127.0    # a Q8_0 block amax above this has a half scale of inf
UNDEFINED = "undefined"
WIDE_EXPERT_K = 1184                # the MoE GEMVs' Kd in their wide case: 2 x 512 + 128 + 32 (every loop runs)
WIDE_EXPERT_N = 64                  # ... with fewer output rows (the case's cost stays that of the Gaussian one)             # prefix of the reason of a case whose result the reference leaves undefined

ACT_QUANT_VARIANTS = ("massive", "one-nonzero", "all-ties")
GEMV_VARIANTS = ("massive", "w-subnormal", "w-overflow")
ROUTER_VARIANTS = ("dominant", "dominant-first", "dominant-second", "all-equal")
ATTENTION_VARIANTS = ("spread", "sink", "equal")
LM_HEAD_GAPS = {"gap=1": 1.0, "gap=0.5": 0.5, "gap=0": 0.0}


def massive_activation(rng: np.random.Generator, n: int) -> np.ndarray:
    """Gaussian values with MASSIVE_CHANNELS channels at 100x..10000x (log-uniform) the median |x|."""
    x = rng.standard_normal(n)
    med = float(np.median(np.abs(x)))
    k = min(MASSIVE_CHANNELS, n)
    where = rng.choice(n, size=k, replace=False)
    gain = np.exp(rng.uniform(np.log(MASSIVE_GAIN[0]), np.log(MASSIVE_GAIN[1]), size=k))
    x[where] = np.sign(rng.standard_normal(k)) * med * gain
    return x.astype(np.float32)


def one_nonzero_blocks(rng: np.random.Generator, n: int) -> np.ndarray:
    """Every other 32-block holds exactly one nonzero value; the others are Gaussian."""
    if n % 32:
        raise ValueError(f"n: one-nonzero blocks are built per 32-block, got n={n}")
    x = rng.standard_normal((n // 32, 32))
    lone = np.arange(0, n // 32, 2)
    x[lone] = 0.0
    x[lone, rng.integers(0, 32, size=lone.size)] = rng.standard_normal(lone.size) * 3.0
    return x.reshape(-1).astype(np.float32)


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
    return (np.concatenate([first, k], axis=1) * step).reshape(-1).astype(np.float32)


def weight_matrix(rng: np.random.Generator, rows: int, cols: int, variant: str, std: float) -> np.ndarray:
    """Float weights of a GEMV variant before Q8_0 quantization."""
    w = rng.standard_normal((rows, cols)) * std
    if variant == "w-subnormal":
        # amax ~ 4e-4 gives scales ~ 3e-6, below half's smallest normal 6.1e-5: subnormal half scales
        w *= 1e-4 / std
    elif variant == "w-overflow":
        w[int(rng.integers(0, rows)), int(rng.integers(0, cols))] = 2.0 * HALF_MAX_SCALE
    return w.astype(np.float32)


def router_logits(rng: np.random.Generator, n_expert: int, variant: str) -> np.ndarray:
    z = (rng.standard_normal(n_expert) * 2.0).astype(np.float32)
    if variant.startswith("dominant"):
        # where the dominant expert sits decides which broken reductions it exposes: the last (a shuffle tree
        # with too small offsets, or a scan one short, misses it first), the first (a broadcast from the
        # wrong lane misses it), the second (reachable in a shuffle tree only through offset 1: a tree with
        # shifted offsets misses it)
        at = {"dominant": n_expert - 1, "dominant-first": 0, "dominant-second": 1}[variant]
        z[at] = np.float32(z.max() + ROUTER_DOMINANCE)
    elif variant == "all-equal":
        z[:] = np.float32(rng.standard_normal())
    else:
        raise ValueError(f"variant: no router logits for {variant!r}")
    return z


def attention_qk(rng: np.random.Generator, variant: str, q: np.ndarray, k: np.ndarray, nh: int, nkv: int, hd: int,
                 L: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(q, k) reshaped for an attention variant: q (nh*hd,), k (rows, nkv*hd) with the first L rows cached."""
    q = q.astype(np.float64).reshape(nh, hd).copy()
    k = k.astype(np.float64).reshape(-1, nkv, hd).copy()
    group = nh // nkv
    if variant == "equal":
        k[:L] = k[0]
    elif variant == "spread":
        # the keys are scaled (a fused kernel renormalizes the query): the top score lands on SPREAD_TARGET
        s = np.einsum("hd,nhd->hn", q, k[:L, np.arange(nh) // group]) * scale
        top = float(np.max(np.abs(s))) if s.size else 1.0
        k[:L] *= SPREAD_TARGET / max(top, 1e-3)
    elif variant == "sink":
        j = int(rng.integers(0, L))
        for g in range(nkv):
            heads = q[g * group:(g + 1) * group]
            d = heads.sum(axis=0)
            d /= np.linalg.norm(d) or 1.0
            k[j, g] = 0.0
            others = np.einsum("hd,nd->hn", heads, k[:L, g]) * scale
            # the sink's score along every head of the group leads the rest by SINK_LEAD
            proj = heads @ d * scale
            need = float(np.max((others.max(axis=1) + SINK_LEAD) / np.where(proj > 0.1, proj, np.nan)))
            k[j, g] = d * (need if np.isfinite(need) else SINK_LEAD / scale)
    else:
        raise ValueError(f"variant: no attention inputs for {variant!r}")
    return q.reshape(-1).astype(np.float32), k.reshape(k.shape[0], -1).astype(np.float32)


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
