"""CUDA C fragments more than one family emits: the prelude and the per-32-block activation quantizer.

The quantizer exists in two zero-block rules because the kernel family has both (see docs/NUMERICS.md):
  "floor": amax is floored at 1e-30, scale = amax/127, q = rint(v/scale) clamped to [-128, 127]
           (the fused-MoE and forward-path quantizers and the norm/attention quant epilogues);
  "unit":  scale = amax > 0 ? amax/127 : 1, q = round-to-nearest-even(v/scale), no clamp
           (the generation-lane quantizers).
"""
from __future__ import annotations

PRELUDE = (
    "#include <cuda_runtime.h>\n"
    "#include <cuda_fp16.h>\n"
    "#include <stdint.h>\n"
)

ZERO_RULES = ("floor", "unit")


def warp_max(var: str, indent: str = "  ") -> str:
    """Butterfly-free max over a full warp, result broadcast from lane 0 (the family's reduction order)."""
    return (f"{indent}for (int off = 16; off > 0; off >>= 1) {var} = fmaxf({var}, __shfl_down_sync(0xffffffffu, {var}, off));\n"
            f"{indent}{var} = __shfl_sync(0xffffffffu, {var}, 0);\n")


def warp_sum(var: str, indent: str = "  ") -> str:
    """Tree sum over a warp into lane 0 (shfl_down order, as the family reduces)."""
    return f"{indent}for (int off = 16; off > 0; off >>= 1) {var} += __shfl_down_sync(0xffffffffu, {var}, off);\n"


def block_quant_body(value: str, lane: str, q_out: str, scale_out: str, zero_rule: str = "floor",
                     lo_out: "str | None" = None, indent: str = "  ") -> str:
    """Statements that quantize one 32-element block held one element per lane of a full warp.

    value: expression for this lane's f32 element; q_out/lo_out: lvalue expressions for this lane's int8
    outputs; scale_out: lvalue for the block's scale (written by lane 0). lo_out adds the two-pass residual byte
    (scale/128, same rounding and clamp).
    """
    if zero_rule not in ZERO_RULES:
        raise ValueError(f"zero_rule: expected one of {ZERO_RULES}, got {zero_rule!r}")
    if lo_out is not None and zero_rule != "floor":
        raise ValueError("lo_out: the two-pass residual byte is only defined with the 'floor' zero rule")
    i = indent
    s = f"{i}float qv = {value};\n{i}float qa = fabsf(qv);\n" + warp_max("qa", i)
    if zero_rule == "floor":
        s += f"{i}float qs = fmaxf(qa, 1e-30f) / 127.0f;\n"
        s += f"{i}int qi = (int)rintf(qv / qs);\n{i}qi = min(127, max(-128, qi));\n"
    else:
        s += f"{i}float qs = qa > 0.0f ? qa / 127.0f : 1.0f;\n"
        s += f"{i}int qi = __float2int_rn(qv / qs);\n"
    s += f"{i}if ({lane} == 0) {scale_out} = qs;\n{i}{q_out} = (signed char)qi;\n"
    if lo_out is not None:
        # The residual keeps nvcc's default contraction (one rounding), as the family's kernels do.
        s += (f"{i}float qr = qv - (float)qi * qs;\n{i}float qls = qs * 0.0078125f;\n"
              f"{i}int qlo = (int)rintf(qr / qls);\n{i}qlo = min(127, max(-128, qlo));\n{i}{lo_out} = (signed char)qlo;\n")
    return s
