"""Rigorous error bounds: each int8 mode against DEQUANT, and float32 accumulation of a kernel.

Derivations are in docs/NUMERICS.md ("Error bounds"). In short, with u = 2^-24 (float32 unit roundoff):

* single-pass activation (either zero rule, finite input): ``|x - q*s| <= s * (0.5 + 128u)`` per element
  (round-to-nearest of the correctly rounded quotient ``fl(x/s)``, ``|x/s| <= 127/(1-u)``);
* two-pass activation: ``|x - qh*sh - ql*sl| <= sl * (0.5 + 131u)`` with the residual's fused multiply-add
  (``fma=True``), ``sl * (0.5 + 16400u)`` with a separately rounded product (``fma=False``); ``sl = sh/128``;
* a Q8_0 product then errs against DEQUANT by at most ``sum_b s_w[o,b] * e_b * sum_j |w[o,b,j]|`` where e_b is
  the per-element activation bound of block b -- linear in K and in the block scales;
* a float32 sum of n terms, each formed with at most t roundings, in any order (sequential, strided, tree,
  fused or not) errs by at most ``gamma_(n+t) * sum |terms|`` with ``gamma_n = n u / (1 - n u)`` (Higham).

The activation bounds assume a finite block; for the "unit" zero rule also that amax/127 does not underflow
(amax >= 127 * 2^-149); outside that the quantizer's output is defined (see reference.quant) but unbounded.
"""
from __future__ import annotations

import numpy as np

from reference._validate import QK, choice, float_array
from reference.matmul import blocked_product, effective_activation
from reference.modes import Mode
from reference.quant import TWO_PASS_LO, ZERO_RULES, Q8Tensor, quantize_act_int8, quantize_act_two_pass

U32 = 2.0 ** -24
U64 = 2.0 ** -53
INT8_ACT_SLACK = 128      # |x/s| <= 127/(1-u) < 128: the quotient's rounding, in units of u * s
TWO_PASS_SLACK_FMA = 131
TWO_PASS_SLACK_NOFMA = 16400


def gamma(n: "int | float", u: float = U32) -> float:
    """Higham's gamma_n = n u / (1 - n u); ValueError when n u >= 1 (the bound says nothing then)."""
    nu = float(n) * u
    if n < 0 or nu >= 1.0:
        raise ValueError(f"n: gamma_n needs 0 <= n*u < 1, got n={n}, u={u}")
    return nu / (1.0 - nu)


def hoeffding_factor(n_events: int, failure: float) -> float:
    """``sqrt(2 ln(2 n / p))``: a sum Z of independent zero-mean terms, term i confined to [-r_i, r_i], has
    ``P(|Z| >= t sigma) <= 2 exp(-t^2 / 2)`` with ``sigma^2 = sum r_i^2`` (Hoeffding), so ``|Z| <= factor * sigma``
    holds for each of n such sums at once except with probability at most p (union bound)."""
    if isinstance(n_events, bool) or not isinstance(n_events, (int, np.integer)) or n_events <= 0:
        raise ValueError(f"n_events: expected a positive integer, got {n_events!r}")
    if not 0.0 < failure < 1.0:
        raise ValueError(f"failure: expected a probability in (0, 1), got {failure!r}")
    return float(np.sqrt(2.0 * np.log(2.0 * int(n_events) / failure)))


def warp_row_depth(k: int) -> int:
    """Roundings any term of a warp-per-output-row Q8 kernel of this family (gk_gemv*, k*_q8dp4a, moe_*)
    passes through: <= K/32 serial adds per lane (the scalar tail loop is the worst case), <= 16 adds inside
    an in-register 16-element sub-block (the *_deq kernels), 5 shuffle-tree levels, <= 3 roundings forming
    the term (scale product, product with the dot or weight, the float conversion of a dot is exact)."""
    return k // QK + 16 + 5 + 3


def act_error_bound(x, mode, *, zero_rule: str = "floor", fma: bool = True) -> np.ndarray:
    """Per-block bound e_b on |x - x_quantized| for each element of block b: (..., K // 32) float64.

    Zero for DEQUANT (it reads x itself).
    """
    mode = Mode.parse(mode)
    choice("zero_rule", zero_rule, ZERO_RULES)
    arr = float_array("x", x, ndim=(1, 2), dtype=np.float32)
    if mode is Mode.DEQUANT:
        return np.zeros((*arr.shape[:-1], arr.shape[-1] // QK))
    if mode is Mode.INT8_ACT:
        _, s = quantize_act_int8(arr, zero_rule)
        return s.astype(np.float64) * (0.5 + INT8_ACT_SLACK * U32)
    _, _, s = quantize_act_two_pass(arr, fma=fma)
    slack = TWO_PASS_SLACK_FMA if fma else TWO_PASS_SLACK_NOFMA
    return s.astype(np.float64) * float(TWO_PASS_LO) * (0.5 + slack * U32)


def q8_matmul_mode_bound(x, w: Q8Tensor, mode, *, zero_rule: str = "floor", fma: bool = True) -> np.ndarray:
    """Per-output bound on |q8_matmul(x, w, mode) - q8_matmul(x, w, DEQUANT)|, shaped like the product.

    ``sum_b s_w[o,b] * e_b * sum_j |w[o,b,j]|`` (exact math of both sides; add f32_accumulation_bound for a
    kernel's own rounding).
    """
    if not isinstance(w, Q8Tensor):
        raise ValueError(f"w: expected a reference.quant.Q8Tensor, got {type(w).__name__}")
    e = act_error_bound(x, mode, zero_rule=zero_rule, fma=fma)
    one_d = e.ndim == 1
    e2 = np.atleast_2d(e)
    if e2.shape[-1] != w.cols // QK:
        raise ValueError(f"x: length {e2.shape[-1] * QK} does not match the weight's K = {w.cols}")
    # sum_j |w| e_b == the blocked product of |w| with an activation equal to e_b on every element of block b.
    y = blocked_product(w, np.repeat(e2, QK, axis=-1), absolute=True)
    return y[0] if one_d else y


def f32_accumulation_bound(x, w: Q8Tensor, mode, *, depth: "int | None" = None, zero_rule: str = "floor",
                           fma: bool = True, u: float = U32) -> np.ndarray:
    """Per-output bound on a kernel's own rounding: ``gamma_depth * sum_k |w_k * x_eff_k|`` where x_eff is
    the activation `mode` multiplies with. depth defaults to warp_row_depth(K) (float32 warp-per-row kernels);
    for a float64 thread-per-output kernel (moe_gemv, k*_q8gemv) pass depth=K + 2 and u=U64. Add the final
    rounding of the stored float32 output (u * |y|) separately."""
    if not isinstance(w, Q8Tensor):
        raise ValueError(f"w: expected a reference.quant.Q8Tensor, got {type(w).__name__}")
    x_eff = effective_activation(x, mode, zero_rule=zero_rule, fma=fma)
    one_d = x_eff.ndim == 1
    if x_eff.shape[-1] != w.cols:
        raise ValueError(f"x: length {x_eff.shape[-1]} does not match the weight's K = {w.cols}")
    n = warp_row_depth(w.cols) if depth is None else int(depth)
    y = gamma(n, u) * blocked_product(w, np.atleast_2d(x_eff), absolute=True)
    return y[0] if one_d else y
