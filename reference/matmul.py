"""Q8_0 matrix products in the three numeric modes, as exact (float64) values of what each mode computes.

DEQUANT: ``y[o] = sum_b s_w[o,b] * sum_j w[o,b,j] * x[b,j]`` with x the float32 activation.
INT8_ACT: ``y[o] = sum_b s_w[o,b] * s_a[b] * sum_j w[o,b,j] * q[b,j]`` (the int32 ``__dp4a`` dot per block).
TWO_PASS_INT8: ``y[o] = sum_b s_w[o,b] * (s_a[b] * dot(w, hi) + s_a[b]/128 * dot(w, lo))``.

Every product of an int8 with a float32 value is exact in float64 and each 32-term block dot is summed in
float64, so the result is the mode's real-number value up to float64 rounding (bound: gamma_K in float64 times
sum |terms|, about 1e-13 relative for K = 2048). The kernels' own float32 accumulation error is NOT reproduced;
reference.bounds gives it. The weight is streamed in row chunks (a few MiB per core), so an LM head of
151936 x 2048 never materializes dequantized.
"""
from __future__ import annotations

import numpy as np

from reference._parallel import over_rows
from reference._validate import QK, choice, float_array
from reference.modes import Mode
from reference.quant import TWO_PASS_LO, Q8Tensor, QuantizedActivation, quantize_activation

WEIGHT_SCALES = ("f32", "f16")
# Elements of the weight widened to float64 at once per core: 2 MiB, cache-resident for the block dots.
_CHUNK_ELEMS = 1 << 18


def _check_weight(w) -> Q8Tensor:
    if not isinstance(w, Q8Tensor):
        raise ValueError(f"w: expected a reference.quant.Q8Tensor, got {type(w).__name__}")
    return w


def blocked_product(w: Q8Tensor, x_eff: np.ndarray, absolute: bool = False, squared: bool = False) -> np.ndarray:
    """``sum_b s_w[o,b] * sum_j w[o,b,j] * x_eff[m,b,j]`` for float64 x_eff (M, K): (M, N) float64.

    absolute=True uses |w| and |x_eff| (sum |terms|, the quantity accumulation bounds scale with);
    squared=True uses the squared weights, ``sum_k w[o,k]^2 * x_eff[m,k]`` (the variance of a sum of
    independent errors of variance x_eff; what the probabilistic logit bound scales with).
    Streams w in row chunks, in parallel over the cores.
    """
    if absolute and squared:
        raise ValueError("absolute, squared: choose at most one")
    m, k = x_eff.shape
    n, nb = w.rows, w.cols // QK
    xb = x_eff.reshape(m, nb, QK)
    if absolute:
        xb = np.abs(xb)
    out = np.empty((n, m), dtype=np.float64)
    step = max(1, _CHUNK_ELEMS // k)

    def work(lo: int, hi: int) -> None:
        buf = np.empty((step, nb, QK), dtype=np.float64)
        for r0 in range(lo, hi, step):
            r1 = min(r0 + step, hi)
            b = buf[: r1 - r0]
            src = w.quants[r0:r1].reshape(-1, nb, QK)
            if absolute:
                np.abs(src, out=b, dtype=np.float64, casting="unsafe")   # |-128| needs the wider type
            else:
                np.copyto(b, src, casting="unsafe")
            sw = w.scales[r0:r1].astype(np.float64)
            if squared:
                np.square(b, out=b)
                sw = sw * sw
            dots = np.einsum("obj,mbj->obm", b, xb)         # (rows, nb, M): the per-block dots, float64
            out[r0:r1] = np.einsum("obm,ob->om", dots, sw)

    over_rows(n, k, work)
    return out.T


def blocked_product_quantized(w: Q8Tensor, act: QuantizedActivation) -> np.ndarray:
    """``blocked_product(w, act.dequantize())`` for an int8 activation, (M, N) float64, the same values faster.

    Each 32-term block dot of int8 weights with int8 activation bytes is an integer below 2^19 in magnitude, so a
    float32 matrix product computes it exactly (every partial sum is an integer below 2^24); times the
    activation scale (and 2^-7 for the residual byte) it is exact in float64, and equals blocked_product's
    float64 block dot of the dequantized activation (also exact). The block dots are then weighted by the weight
    scales in the same float64 contraction as blocked_product, so the two agree bit for bit.
    """
    hi = np.atleast_2d(act.hi)
    m, k = hi.shape
    n, nb = w.rows, w.cols // QK
    parts = [hi] if act.lo is None else [hi, np.atleast_2d(act.lo)]
    p_count = len(parts)
    # activation bytes as float32, (nb, 32, P*M): column p*M + i is part p of row i
    a = np.stack(parts).astype(np.float32).reshape(p_count * m, nb, QK).transpose(1, 2, 0).copy()
    s = np.atleast_2d(act.scales).astype(np.float64)                  # (M, nb)
    fac = np.concatenate([s] + ([s * float(TWO_PASS_LO)] if p_count == 2 else []), axis=0).T   # (nb, P*M)
    out = np.empty((n, m), dtype=np.float64)
    step = max(1, _CHUNK_ELEMS // k)

    def work(lo: int, hi_: int) -> None:
        buf = np.empty((step, nb, QK), dtype=np.float32)
        ints = np.empty((step, nb, p_count * m), dtype=np.float32)
        for r0 in range(lo, hi_, step):
            r1 = min(r0 + step, hi_)
            b, d = buf[: r1 - r0], ints[: r1 - r0]
            np.copyto(b, w.quants[r0:r1].reshape(-1, nb, QK), casting="unsafe")
            np.matmul(b.transpose(1, 0, 2), a, out=d.transpose(1, 0, 2))   # exact integers, (rows, nb, P*M)
            dots = d.astype(np.float64) * fac
            if p_count == 2:
                dots = dots[:, :, :m] + dots[:, :, m:]                # hi*s + lo*s/128: exact in float64
            sw = w.scales[r0:r1].astype(np.float64)
            for i in range(m):      # row by row: a row's value does not depend on the other rows
                di = dots if m == 1 else np.ascontiguousarray(dots[:, :, i:i + 1])
                out[r0:r1, i] = np.einsum("obm,ob->om", di, sw)[:, 0]

    over_rows(n, k, work)
    return out.T


def _check_act(act, x, k: int, mode: Mode) -> None:
    if mode is Mode.DEQUANT:
        raise ValueError("act: a quantized activation cannot feed a DEQUANT product (it reads float32)")
    if not isinstance(act, QuantizedActivation):
        raise ValueError(f"act: expected a reference.quant.QuantizedActivation, got {type(act).__name__}")
    if act.mode is not mode:
        raise ValueError(f"act: holds a {act.mode.value} activation, but mode is {mode.value}")
    if x is not None:
        raise ValueError("x: give either x or act, not both")
    if act.hi.shape[-1] != k:
        raise ValueError(f"act: length {act.hi.shape[-1]} does not match the weight's K = {k}")


def _activation(x, k: int, mode: Mode, act, zero_rule: str, fma: bool) -> tuple[np.ndarray, bool]:
    """(effective float64 activation (M, K), was_1d) as `mode`'s dots see it."""
    if act is not None:
        _check_act(act, x, k, mode)
        one_d = act.hi.ndim == 1
        return np.atleast_2d(act.dequantize()), one_d
    if x is None:
        raise ValueError("x: required unless act is given")
    arr = float_array("x", x, ndim=(1, 2), dtype=np.float32)
    if arr.shape[-1] != k:
        raise ValueError(f"x: length {arr.shape[-1]} does not match the weight's K = {k} (w is (N, K))")
    one_d = arr.ndim == 1
    return effective_activation(np.atleast_2d(arr), mode, zero_rule=zero_rule, fma=fma), one_d


def _quantized(x, k: int, mode: Mode, act, zero_rule: str, fma: bool) -> tuple[QuantizedActivation, bool]:
    """(the int8 activation `mode`'s dots read, was_1d): `act` itself, checked, or x quantized."""
    if act is not None:
        _check_act(act, x, k, mode)
        return act, act.hi.ndim == 1
    if x is None:
        raise ValueError("x: required unless act is given")
    arr = float_array("x", x, ndim=(1, 2), dtype=np.float32)
    if arr.shape[-1] != k:
        raise ValueError(f"x: length {arr.shape[-1]} does not match the weight's K = {k} (w is (N, K))")
    return quantize_activation(arr, mode, zero_rule=zero_rule, fma=fma), arr.ndim == 1


def q8_matmul(x, w: Q8Tensor, mode, *, act: "QuantizedActivation | None" = None, weight_scale: str = "f32",
              zero_rule: str = "floor", fma: bool = True) -> np.ndarray:
    """``y = W x`` for a Q8_0 weight W (N, K) in `mode`: x (K,) -> (N,), x (M, K) -> (M, N); float64.

    x is the float32 activation (other float dtypes are rounded to float32 first, as the kernels read float32).
    In the int8 modes x is quantized as the mode's kernels do (``zero_rule`` picks the single-pass quantizer
    variant, ``fma`` the two-pass residual's rounding; see reference.quant). To judge a kernel's matmul alone,
    pass its own quantized activation as ``act`` (a QuantizedActivation; x must then be None).

    weight_scale: the precision the kernel holds the weight scales in: "f32" (gk_gemv, moe_*: float scales) or
    "f16" (k*_q8dp4a: ``const __half*`` scales, ``__half2float`` on read). A Q8Tensor's scales are float16
    values (Q8Tensor checks this), so both give the same result; "f16" makes the narrowing explicit.
    """
    mode = Mode.parse(mode)
    w = _check_weight(w)
    choice("weight_scale", weight_scale, WEIGHT_SCALES)
    if mode is not Mode.DEQUANT:
        qa, one_d = _quantized(x, w.cols, mode, act, zero_rule, fma)
        y = blocked_product_quantized(w, qa)
        return y[0] if one_d else y
    x_eff, one_d = _activation(x, w.cols, mode, act, zero_rule, fma)
    y = blocked_product(w, x_eff)
    return y[0] if one_d else y


def effective_activation(x, mode, *, zero_rule: str = "floor", fma: bool = True) -> np.ndarray:
    """The activation value (float64, x's shape) `mode`'s int8 dots multiply with: x itself for DEQUANT."""
    mode = Mode.parse(mode)
    arr = float_array("x", x, ndim=(1, 2), dtype=np.float32)
    if mode is Mode.DEQUANT:
        return arr.astype(np.float64)
    return quantize_activation(arr, mode, zero_rule=zero_rule, fma=fma).dequantize()
