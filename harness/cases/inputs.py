"""Realistic, seeded kernel inputs.

Decode-time tensors of a Qwen3-30B-A3B-class model are not uniform noise: activations are Gaussian with a
few "massive" outlier channels (they set the int8 block scales), weights are Gaussian values quantized to
Q8_0, router logits can sit within a few ulps of each other at the top-K boundary, and the KV cache has
whatever length the decode position gives it. Every generator takes a ``numpy.random.Generator`` made from
the case's recorded seed, so a case replays bit for bit.
"""
from __future__ import annotations

import numpy as np

# Fraction of channels that carry an outlier and the range of their magnitude (x the Gaussian std). LLM
# residual streams show a handful of channels 20-100x larger than the rest; 1% at 20-60x keeps several
# int8 blocks dominated by one value, which is what stresses the activation quantizers.
OUTLIER_FRACTION = 0.01
OUTLIER_GAIN = (20.0, 60.0)
WEIGHT_STD = 0.02   # std of the float weights before Q8_0 quantization (typical of trained projections)


def rng_for(seed: int) -> np.random.Generator:
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: expected a non-negative int, got {seed!r}")
    return np.random.default_rng(int(seed))


def _check_count(n: int, what: str) -> int:
    if int(n) != n or n < 1:
        raise ValueError(f"{what}: expected a positive element count, got {n!r}")
    return int(n)


def activation(rng: np.random.Generator, n: int, *, outliers: bool = True, zero_block: bool = False,
               std: float = 1.0) -> np.ndarray:
    """A float32 activation vector: Gaussian, a few outlier channels, optionally one all-zero 32-block."""
    n = _check_count(n, "n")
    x = rng.standard_normal(n) * std
    if outliers:
        k = max(1, int(round(n * OUTLIER_FRACTION)))
        where = rng.choice(n, size=min(k, n), replace=False)
        x[where] *= rng.uniform(*OUTLIER_GAIN, size=where.size)
    if zero_block:
        if n < 32:
            raise ValueError(f"n: a zero 32-block needs n >= 32, got {n}")
        b = int(rng.integers(0, n // 32))
        x[b * 32:(b + 1) * 32] = 0.0
    return x.astype(np.float32)


def half_ties(rng: np.random.Generator, n: int) -> np.ndarray:
    """An activation whose every 32-block has a power-of-two scale (amax = 127 * 2^e, so amax/127 is exact)
    and whose other values sit exactly halfway between two quantization steps: round-half-to-even and
    round-half-away give different int8 codes on every such element."""
    n = _check_count(n, "n")
    if n % 32:
        raise ValueError(f"n: half ties are built per 32-block, got n={n}")
    nb = n // 32
    step = np.exp2(rng.integers(-8, 3, size=(nb, 1))).astype(np.float64)
    k = rng.integers(-126, 126, size=(nb, 32)).astype(np.float64) + 0.5
    x = k * step
    x[:, 0] = np.where(rng.random(nb) < 0.5, -127.0, 127.0) * step[:, 0]
    return x.reshape(-1).astype(np.float32)


def gaussian_matrix(rng: np.random.Generator, rows: int, cols: int, std: float = WEIGHT_STD) -> np.ndarray:
    return (rng.standard_normal((_check_count(rows, "rows"), _check_count(cols, "cols"))) * std).astype(np.float32)


def q8_weight(rng: np.random.Generator, rows: int, cols: int, std: float = WEIGHT_STD):
    """Gaussian weights quantized to Q8_0 by the reference (bit-identical to ggml): a reference.quant.Q8Tensor."""
    from reference.quant import quantize_q8_0
    if cols % 32:
        raise ValueError(f"cols: Q8_0 needs a multiple of 32 columns, got {cols}")
    return quantize_q8_0(gaussian_matrix(rng, rows, cols, std))


def router_logits(rng: np.random.Generator, n_expert: int, top_k: int, tie: str = "none") -> np.ndarray:
    """Router logits over E experts. tie: "none"; "near" (the K-th and K+1-th largest one float32 ulp apart,
    so a kernel that computes the softmax slightly differently may swap them); "exact" (bit-equal: the
    index rule decides)."""
    n_expert = _check_count(n_expert, "n_expert")
    if not 1 <= top_k < n_expert:
        raise ValueError(f"top_k: expected 1 <= top_k < n_expert ({n_expert}), got {top_k}")
    if tie not in ("none", "near", "exact"):
        raise ValueError(f"tie: expected none, near or exact, got {tie!r}")
    z = (rng.standard_normal(n_expert) * 2.0).astype(np.float32)
    if tie != "none":
        order = np.argsort(-z, kind="stable")
        kth, nxt = order[top_k - 1], order[top_k]
        # The lower index holds the larger value in a "near" tie so a first-max scan and a sort disagree
        # only if the kernel's rounding differs; in an exact tie both are equal.
        lo, hi = min(kth, nxt), max(kth, nxt)
        z[lo] = z[kth]
        z[hi] = z[lo] if tie == "exact" else np.nextafter(z[lo], np.float32(-np.inf))
    return z


def distinct_indices(rng: np.random.Generator, count: int, upper: int) -> np.ndarray:
    """`count` distinct int32 values in [0, upper) in random order (expert ids a top-K kernel would give)."""
    if count > upper:
        raise ValueError(f"count: cannot draw {count} distinct indices below {upper}")
    return rng.choice(upper, size=count, replace=False).astype(np.int32)


def routing_weights(rng: np.random.Generator, k: int) -> np.ndarray:
    """Renormalised top-K weights: positive, summing to one."""
    w = rng.dirichlet(np.full(k, 2.0))
    return w.astype(np.float32)


def norm_weight(rng: np.random.Generator, n: int) -> np.ndarray:
    """An RMSNorm / LayerNorm gain vector around one, as trained norms are."""
    return (1.0 + 0.1 * rng.standard_normal(_check_count(n, "n"))).astype(np.float32)


def kv_lengths(kv_len: int, split: int) -> dict[str, int]:
    """The cache lengths every attention kernel is judged at: 1, a few, many (the shape's default), and
    one that is not a multiple of the split count (so some split-K slabs are short or empty)."""
    if kv_len < 1 or split < 1:
        raise ValueError(f"kv_len/split: expected positive values, got {kv_len}/{split}")
    many = kv_len
    odd = many if many % split else many + 1
    out = {"len=1": 1, "len=3": 3, f"len={many}": many}
    if odd != many:
        out[f"len={odd}"] = odd
    return out


def random_of_dtype(rng: np.random.Generator, dtype: str, count: int) -> np.ndarray:
    """Generic content for an input the op's builder does not shape: Gaussian floats, small ints."""
    count = _check_count(count, "count")
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(count).astype(dt)
    if dt == np.int8:
        return rng.integers(-128, 128, size=count, dtype=np.int16).astype(np.int8)
    if dt == np.uint8:
        return rng.integers(0, 256, size=count, dtype=np.int16).astype(np.uint8)
    if dt.kind in "iu":
        return rng.integers(0, 16, size=count).astype(dt)
    raise ValueError(f"dtype: no generic input content for {dtype}")
