"""Error budgets, derived from error bounds, never tuned.

Every budget is a per-element absolute bound ``|kernel - reference| <= budget`` built from:

* the unit roundoff of the arithmetic the kernel does: ``u = 2^-24`` (float32) or ``2^-53`` (float64);
* Higham's accumulation constant ``gamma_n = n*u / (1 - n*u)``: any summation of n terms, in ANY order
  (sequential, lane-strided, warp-shuffle tree, fused multiply-add or not), with each term itself carrying
  at most n_t roundings, errs by at most ``gamma_(n + n_t) * sum |term|`` (Higham, Accuracy and Stability of
  Numerical Algorithms, 2nd ed., Lemma 3.1 and 3.3). A fused multiply-add rounds once where a multiply and
  an add round twice, so the same bound holds with or without contraction: the CPU backend (which may
  contract differently from nvcc) and the GPU are covered by one budget;
* the documented maximum ulp error of the math functions (CUDA C++ Programming Guide, appendix
  "Mathematical Functions", single precision): the larger of CUDA's figure and glibc's for the CPU backend;
* the block scale and int8 rounding of the activation quantizers (half a quantization step per element,
  ``scale/2``; ``scale/256`` for the two-pass residual), for comparisons against the exact DEQUANT math.

A budget carries its formula as text so the report shows which bound it is. The derivations are in
docs/NUMERICS.md ("Budgets of the conformance runner").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U32 = 2.0 ** -24
U64 = 2.0 ** -53
F32_TINY = float(np.finfo(np.float32).tiny)    # absorbs underflow of products near zero

# Max ulp errors (CUDA Programming Guide, single-precision functions; glibc's are smaller or equal).
ULP = {
    "expf": 2, "rsqrtf": 2, "sqrtf": 0, "powf": 4, "sinf": 2, "cosf": 2, "div": 0, "logf": 1,
}


def expf_fast_ulp(arg_abs_max: float) -> float:
    """__expf's documented max ulp error: 2 + floor(|1.173 x|) for argument x."""
    return 2.0 + np.floor(1.173 * float(arg_abs_max))


def gamma(n: "int | float", u: float = U32) -> float:
    """Higham's gamma_n = n u / (1 - n u) (the reference's definition, reference.bounds.gamma)."""
    from reference.bounds import gamma as ref_gamma
    return ref_gamma(n, u)


@dataclass(frozen=True)
class Budget:
    """A per-element absolute error budget and the bound it came from."""
    values: np.ndarray          # float64, same shape as the compared output
    formula: str                # e.g. "gamma_(K+8) * sum|w_j s_w a_j s_a|  (f32 accumulation, Higham 3.3)"
    against: str                # "mode" (same quantization decisions) or "dequant" (exact math)

    def __post_init__(self):
        v = np.asarray(self.values, dtype=np.float64)
        if np.any(~np.isfinite(v)) or np.any(v < 0):
            raise ValueError("budget: values must be finite and non-negative")
        object.__setattr__(self, "values", v)

    def usage(self, err: np.ndarray) -> tuple[float, int]:
        """(max of err/budget, the flat index where it is reached). 0/0 counts as 0; x/0 as inf."""
        err = np.abs(np.asarray(err, dtype=np.float64)).reshape(-1)
        b = self.values.reshape(-1) if self.values.size == err.size else np.broadcast_to(self.values, err.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.where(err == 0, 0.0, err / b)
        r = np.where(np.isnan(r), np.inf, r)
        i = int(np.argmax(r)) if r.size else 0
        return (float(r[i]) if r.size else 0.0), i


# -- linear algebra ----------------------------------------------------------------------------------------
def f64_sum_to_f32(ref_abs: np.ndarray, abs_sum: np.ndarray, n_terms: int, against: str = "mode") -> Budget:
    """An f64 accumulation rounded once to f32: u32 |y| + gamma_n(u64) * sum|terms|."""
    return Budget(U32 * np.abs(ref_abs) + gamma(n_terms + 2, U64) * np.asarray(abs_sum, dtype=np.float64),
                  f"u32*|y| + gamma_{n_terms + 2}(u64) * sum|terms| (f64 accumulation, one f32 rounding)",
                  against)


def act_quant_error(step: np.ndarray, two_pass: bool = False) -> np.ndarray:
    """Per-element bound on |x - dequantized x| (reference.bounds): half a step plus the rounding of the f32
    quotient x/s, which is at most 127u in units of the step (128u slack); the two-pass residual adds up to
    16400u when its product and difference round separately (131u fused), so 16400u covers both backends."""
    from reference.bounds import INT8_ACT_SLACK, TWO_PASS_SLACK_NOFMA
    slack = TWO_PASS_SLACK_NOFMA if two_pass else INT8_ACT_SLACK
    return np.asarray(step, dtype=np.float64) * (0.5 + slack * U32)


def quantized_dot_vs_dequant(abs_w_step_sum: np.ndarray, fp_budget: np.ndarray, mode_note: str) -> Budget:
    """Mode vs exact DEQUANT for a Q8 GEMV: sum_j |w_j s_w| * (activation step_j / 2) (the activation's
    quantization error, bounded per element), plus the f32 accumulation budget of the kernel itself."""
    return Budget(np.asarray(abs_w_step_sum, dtype=np.float64) + np.asarray(fp_budget, dtype=np.float64),
                  f"sum_j |w_j s_w| * step_j/2 ({mode_note}) + f32 accumulation budget", "dequant")


# -- non-linear element functions ----------------------------------------------------------------------------
def relative(ref: np.ndarray, ulps: float, what: str, against: str = "mode", abs_floor: float = 0.0) -> Budget:
    """ulps * u32 * |ref| (+ a floor for results that underflow): for element-wise chains of correctly
    rounded ops and math functions with a documented ulp bound."""
    return Budget(ulps * U32 * np.abs(np.asarray(ref, dtype=np.float64)) + abs_floor,
                  f"{ulps:g} ulp * |ref| ({what})", against)


def silu_product(g: np.ndarray, u: np.ndarray, err_g: np.ndarray, err_u: np.ndarray) -> Budget:
    """h = silu(g) * u with g, u carrying errors err_g, err_u: |silu'| <= 1.1 everywhere, so
    |dh| <= 1.1 |u| err_g + |silu(g)| err_u + (expf ulps + 3 roundings: exp, add, divide, multiply) u32 |h|."""
    g = np.asarray(g, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    s = g / (1.0 + np.exp(-g))
    h = s * u
    ulps = ULP["expf"] + 4
    return Budget(1.1 * np.abs(u) * err_g + np.abs(s) * err_u + ulps * U32 * np.abs(h) + F32_TINY,
                  f"1.1|u| e_g + |silu g| e_u + {ulps} ulp |h| (silu' <= 1.1; expf {ULP['expf']} ulp)", "mode")


def rms_norm_rel(n: int) -> float:
    """The relative bound of an f32 RMSNorm over n terms: the f32 sum of squares errs by gamma_(n+1), which
    1/sqrt halves; rsqrtf adds its ulps; the mean, the eps add and the two products add 4 roundings."""
    return 0.5 * gamma(n + 1) + (ULP["rsqrtf"] + 4) * U32


def rms_norm(ref: np.ndarray, n: int, accumulate: str, quant_step: "np.ndarray | None" = None,
             against: str = "mode") -> Budget:
    """y = x * rsqrt(mean(x^2) + eps) * w.

    The sum of squares errs by gamma_(n+1) relative (f32 accumulation; gamma_(n+1)(u64) for f64);
    1/sqrt halves a relative error; rsqrtf adds its 2 ulp (0 for an f64 sqrt rounded once); the mean,
    the eps add and the two products add 4 roundings. A quantized output adds half its step."""
    if accumulate == "f32":
        rel = rms_norm_rel(n)
        text = f"(gamma_{n + 1}/2 + {ULP['rsqrtf'] + 4} u) |y|"
    else:
        rel = 0.5 * gamma(n + 1, U64) + 6 * U32
        text = f"(gamma_{n + 1}(u64)/2 + 6 u) |y|"
    values = rel * np.abs(np.asarray(ref, dtype=np.float64)) + F32_TINY
    if quant_step is not None:
        values = values + act_quant_error(quant_step)
        text += " + step/2 (int8 epilogue)"
    return Budget(values, text + " (RMSNorm)", against)


def softmax(ref: np.ndarray, arg_spread: np.ndarray, n: int, exp_ulps: float, against: str = "mode") -> Budget:
    """p_j = exp(z_j - m) / sum_k exp(z_k - m): the subtraction rounds once (error u |z_j - m| in the
    argument, i.e. that much relative in exp), exp adds its ulps, the f32 sum gamma_n, the division 1 ulp;
    the denominator's relative error enters every p_j."""
    rel = (exp_ulps + 2) * U32 + U32 * np.asarray(arg_spread, dtype=np.float64) + gamma(n + 1)
    return Budget(rel * np.abs(ref) + F32_TINY,
                  f"((expf {exp_ulps:g} ulp + 2) u + u|z-m| + gamma_{n + 1}) p (softmax)", against)
