"""Token exactness: does greedy decoding pick the same token from the kernel's logits as from the reference's?

A disagreement is not automatically a failure: when the reference's own top-1 and the kernel's pick are
closer than twice the mode's measured logit error, the logits cannot decide between them (an explained
near-tie, verdict "tie"); when they are further apart the kernel picked a token the numerics cannot
explain (verdict "fail"). An exact tie in an argmax kernel's input is a tie whichever equal index it returns.
"""
from __future__ import annotations

import numpy as np

from .registry import FAIL, PASS, TIE, Comparison


def _argmax_first(z: np.ndarray) -> int:
    from reference.argmax import argmax_first
    return int(argmax_first(np.asarray(z)))


def top2_margin(z: np.ndarray) -> float:
    z = np.asarray(z, dtype=np.float64).reshape(-1)
    if z.size < 2:
        return float("inf")
    top = np.partition(z, -2)[-2:]
    return float(top[1] - top[0])


def token_comparison(y_kernel: np.ndarray, y_exact: np.ndarray, y_mode: np.ndarray,
                     fp_budget: "np.ndarray | float | None" = None) -> Comparison:
    """Greedy token of an LM-head GEMV's output against the exact DEQUANT logits' token.

    The mode's logit error is measured on the reference side, never from the kernel's own output (a kernel
    with one wild logit must not excuse itself): max |y_mode - y_exact| (what the mode's quantization does to
    these logits) plus the largest f32 accumulation budget of the kernel."""
    yk = np.asarray(y_kernel, dtype=np.float64).reshape(-1)
    ye = np.asarray(y_exact, dtype=np.float64).reshape(-1)
    ym = np.asarray(y_mode, dtype=np.float64).reshape(-1)
    tk, te = int(np.argmax(yk)), _argmax_first(ye)
    fp = 0.0 if fp_budget is None else float(np.max(fp_budget))
    err = float(np.max(np.abs(ym - ye))) + fp
    margin = top2_margin(ye)
    metrics = {"token_kernel": tk, "token_reference": te, "ref_top1_top2_margin": margin,
               "mode_logit_error": err, "token_mode_reference": _argmax_first(ym),
               "kernel_logit_error": float(np.max(np.abs(yk - ye)))}
    if tk == te:
        return Comparison("token (greedy argmax)", "dequant", PASS, metrics, "same token")
    gap = float(ye[te] - ye[tk])
    metrics["ref_gap_to_kernel_token"] = gap
    if gap <= 2.0 * err:
        return Comparison("token (greedy argmax)", "dequant", TIE, metrics, "gap <= 2 x mode logit error",
                          reason=f"token differs (kernel {tk}, reference {te}) but the reference's gap between them "
                                 f"({gap:.3g}) is within twice the mode's logit error ({err:.3g}): explained "
                                 f"near-tie")
    return Comparison("token (greedy argmax)", "dequant", FAIL, metrics, "gap <= 2 x mode logit error",
                      reason=f"token differs (kernel {tk}, reference {te}); the reference's gap {gap:.3g} exceeds "
                             f"twice the mode's logit error {err:.3g}")


def argmax_comparison(tok: int, logits: np.ndarray) -> Comparison:
    """An argmax kernel's token against the reference's first maximum; exact ties are reported as ties."""
    z = np.asarray(logits).reshape(-1)
    ref = _argmax_first(z)
    ties = np.flatnonzero(z == z[ref])
    metrics = {"token_kernel": tok, "token_reference": ref, "tied_indices": ties[:8].tolist(),
               "ref_top1_top2_margin": top2_margin(z)}
    if tok == ref:
        return Comparison("d_tok (argmax)", "exact", PASS, metrics, "same index")
    if not 0 <= tok < z.size:
        return Comparison("d_tok (argmax)", "exact", FAIL, metrics, "same index",
                          reason=f"argmax index {tok} outside 0..{z.size - 1}")
    if z[tok] == z[ref]:
        return Comparison("d_tok (argmax)", "exact", TIE, metrics, "same index; exact ties reported",
                          reason=f"exact tie: kernel returned index {tok}, the first maximum is {ref} (equal logits "
                                 f"{float(z[ref])!r})")
    return Comparison("d_tok (argmax)", "exact", FAIL, metrics, "same index",
                      reason=f"argmax index {tok} (logit {float(z[tok])!r}) is not a maximum; the first maximum is "
                             f"{ref} (logit {float(z[ref])!r})")
