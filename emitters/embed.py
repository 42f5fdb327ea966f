"""Embedding lookup: dequantize one Q8_0 row of the token-embedding table (generation lane)."""
from __future__ import annotations

from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from ._kbuild import BLOCK_256, k_blocks
from ._kernel_text import assemble, inp, kernel, out, scalar
from .contract import KernelContract, KernelSource, Precondition

FAMILY = "embed"
MODES = (None,)


def _embed() -> tuple[KernelContract, str]:
    c = KernelContract(
        name="gk_embed", family=FAMILY, op="embed_q8", mode=None,
        params=(out("x", "float*", "E"), inp("wq", "const signed char*", "V * E", doc="V x E int8 table"),
                inp("ws", "const float*", "V * (E // 32)"),
                inp("d_tok", "const int*", "1", fill="index(V)", doc="the token id, in device memory"),
                scalar("E")),
        grid=("(E + 255) // 256", "1", "1"), block=BLOCK_256,
        preconditions=(k_blocks("E"), Precondition("V >= 1", "wq", "an empty table")),
        instances=(("token_embd", {"E": "d", "V": "vocab"}),),
        attrs={"rounding": "one f32 multiply q * scale"},
        doc="x[t] = wq[tok, t] * ws[tok, t // 32] with tok = *d_tok (not range-checked by the kernel).")
    body = ("  const int t = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (t >= E) return;\n"
            "  const long tok = *d_tok;\n"
            "  x[t] = (float)wq[tok * E + t] * ws[tok * (E / 32) + t / 32];\n")
    return c, kernel(c, body)


def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    if mode is not None:
        raise ValueError(f"mode: the embed family does not depend on the mode; pass None, not {mode!r}")
    return assemble(FAMILY, None, shape, [_embed()])
