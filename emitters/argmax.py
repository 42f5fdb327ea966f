"""Greedy sampling: argmax over the logits, then advance the device-side position (generation lane)."""
from __future__ import annotations

from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from ._kbuild import ONE
from ._kernel_text import assemble, inout, inp, kernel, out, scalar
from .contract import KernelContract, KernelSource, Precondition

FAMILY = "argmax"
MODES = (None,)
THREADS = 256   # block size; the shared candidate arrays and the halving tree are sized for it


def _argmax_adv() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="gk_argmax_adv", family=FAMILY, op="argmax_advance", mode=None,
        params=(inp("logits", "const float*", "vocab"), scalar("vocab"), out("d_tok", "int*", "1"),
                inout("d_pos", "int*", "1", fill="const(pos)")),
        grid=ONE, block=(str(THREADS), "1", "1"),
        preconditions=(Precondition("vocab >= 1", "vocab", "no logit to pick"),
                       Precondition("pos < 2147483647", "d_pos", "the position increment overflows int")),
        instances=(("lm_head", {"vocab": "vocab", "pos": "kv_len - 1"}),),
        attrs={"threads": THREADS, "initial": -1e30,
               # The halving tree keeps the lower slot on equal values, so two tied threads meet at their
               # lowest differing bit and the one with a 0 there wins: the order is that of bit-reversed t.
               "tie": "among equal maxima: the thread t = i % 256 whose 8-bit bit-reversed index is smallest, "
                      "then the lowest i within that thread; NaN never wins",
               "advance": "d_pos += 1"},
        doc="d_tok = argmax(logits) (strided per-thread scan, then a halving tree), then *d_pos += 1.")
    body = (f"  __shared__ float bval[{THREADS}];\n"
            f"  __shared__ int bidx[{THREADS}];\n"
            "  const int t = threadIdx.x;\n"
            "  float v = -1e30f; int at = 0;\n"
            "  for (int i = t; i < vocab; i += blockDim.x) { const float c = logits[i]; if (c > v) { v = c; at = i; } }\n"
            "  bval[t] = v; bidx[t] = at;\n"
            "  __syncthreads();\n"
            "  for (int h = blockDim.x / 2; h > 0; h >>= 1) {\n"
            "    // strict '>': on equal values the lower slot keeps its candidate\n"
            "    if (t < h && bval[t + h] > bval[t]) { bval[t] = bval[t + h]; bidx[t] = bidx[t + h]; }\n"
            "    __syncthreads();\n"
            "  }\n"
            "  if (t == 0) { *d_tok = bidx[0]; *d_pos = *d_pos + 1; }\n")
    return c, kernel(c, body)


def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    if mode is not None:
        raise ValueError(f"mode: the argmax family does not depend on the mode; pass None, not {mode!r}")
    return assemble(FAMILY, None, shape, [_argmax_adv()])
