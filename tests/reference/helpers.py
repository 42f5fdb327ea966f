"""Shared helpers of the reference tests: seeded generators whose seed is printed on failure."""
from __future__ import annotations

import numpy as np

from reference.quant import Q8Tensor, quantize_q8_0


def rng_for(seed: int) -> np.random.Generator:
    """A generator for a recorded seed; tests put the seed in their assertion messages to replay a failure."""
    return np.random.default_rng(seed)


def gaussian_q8(rng: np.random.Generator, rows: int, cols: int, std: float = 0.02) -> Q8Tensor:
    return quantize_q8_0(rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(std))


def outlier_activation(rng: np.random.Generator, n: int, gain: float = 20.0) -> np.ndarray:
    """Gaussian activation with 1/32 of the channels scaled by `gain` (they set the int8 block scales)."""
    x = rng.standard_normal(n).astype(np.float32)
    hot = rng.choice(n, size=max(1, n // 32), replace=False)
    x[hot] *= np.float32(gain)
    return x
