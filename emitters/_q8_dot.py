"""CUDA statements for one lane's share of a warp-per-row Q8_0 dot product, in the family's exact numerics.

The kernel family streams a weight row in up to three tiers, each lane taking a contiguous slice:
  512 tier: one 16-byte int4 per lane per step; the 32-block of a lane's 16 bytes is  b*16 + lane/2;
  128 tier: one 4-byte int (or char4) per lane per step; its 32-block is               b*4 + lane/8;
  scalar tail: element t = start + lane, start + lane + 32, ...; its 32-block is      t/32.
Which tiers a kernel has changes the f32 summation order, so each generator states its tiers. The
expressions keep the family's operand order (e.g. `(ws * as) * dot` accumulated with `+=`), because
nvcc's default multiply-add contraction follows that order and the result must be bit-identical to any
kernel that meets the same contract. Every stream is (accumulator, weight-row pointer, weight-scale row
pointer); streams in one call share the activation and are accumulated independently (gate and up).
"""
from __future__ import annotations

from typing import Callable, Sequence

from .cuda_snippets import warp_sum

Stream = tuple[str, str, str]     # (accumulator, int8 weight row, weight-scale row)
ScaleLoad = Callable[[str], str]  # weight-scale row pointer -> C expression of its element [blk]


def f32_scale(row: str) -> str:
    return f"{row}[blk]"


def f16_scale(row: str) -> str:
    return f"__half2float({row}[blk])"


def _dp4a_chain(dst: str, w: str, a: str) -> str:
    # Four int32 dot-accumulates over the int4's words; integer sums are exact in any order.
    return (f"int {dst} = __dp4a({w}.x, {a}.x, 0); {dst} = __dp4a({w}.y, {a}.y, {dst}); "
            f"{dst} = __dp4a({w}.z, {a}.z, {dst}); {dst} = __dp4a({w}.w, {a}.w, {dst});")


def f32_act_int4(streams: Sequence[Stream], x: str, k: str, ind: str = "  ") -> str:
    """f32 activation x int8 weight: 512 tier (16 products summed per lane, then scaled) + scalar tail."""
    s = (f"{ind}const int n512 = {k} / 512;\n"
         f"{ind}for (int b = 0; b < n512; ++b) {{\n"
         f"{ind}  const int blk = b * 16 + lane / 2;\n"
         f"{ind}  const float* xv = {x} + b * 512 + lane * 16;\n")
    for i, (acc, row, _) in enumerate(streams):
        s += (f"{ind}  const int4 wpack{i} = ((const int4*){row})[b * 32 + lane];\n"
              f"{ind}  const signed char* wb{i} = (const signed char*)&wpack{i};\n"
              f"{ind}  float part{i} = 0.f;\n")
    s += f"{ind}  for (int i = 0; i < 16; ++i) {{\n{ind}    const float xi = xv[i];\n"
    for i, _ in enumerate(streams):
        s += f"{ind}    part{i} += (float)wb{i}[i] * xi;\n"
    s += f"{ind}  }}\n"
    for i, (acc, _, srow) in enumerate(streams):
        s += f"{ind}  {acc} += {srow}[blk] * part{i};\n"
    s += (f"{ind}}}\n"
          f"{ind}for (int t = n512 * 512 + lane; t < {k}; t += 32) {{\n"
          f"{ind}  const int blk = t / 32;\n"
          f"{ind}  const float xi = {x}[t];\n")
    for acc, row, srow in streams:
        s += f"{ind}  {acc} += {srow}[blk] * (float){row}[t] * xi;\n"
    return s + f"{ind}}}\n"


def f32_act_char4(acc: str, row: str, srow: str, x: str, k: str, ind: str = "  ") -> str:
    """f32 activation x int8 weight: 128 tier (char4, 4 products then scaled) + scalar tail (the fast router)."""
    return (f"{ind}const int n128 = {k} / 128;\n"
            f"{ind}for (int b = 0; b < n128; ++b) {{\n"
            f"{ind}  const char4 wc = ((const char4*){row})[b * 32 + lane];\n"
            f"{ind}  const int blk = b * 4 + lane / 8;\n"
            f"{ind}  const float* xv = {x} + b * 128 + lane * 4;\n"
            f"{ind}  {acc} += {srow}[blk] * ((float)wc.x * xv[0] + (float)wc.y * xv[1] + (float)wc.z * xv[2] + (float)wc.w * xv[3]);\n"
            f"{ind}}}\n"
            f"{ind}for (int t = n128 * 128 + lane; t < {k}; t += 32) {{\n"
            f"{ind}  const int blk = t / 32;\n"
            f"{ind}  {acc} += {srow}[blk] * (float){row}[t] * {x}[t];\n"
            f"{ind}}}\n")


def int8_act(streams: Sequence[Stream], xq: str, xs: str, k: str, tiers: str = "512,128",
             wscale: ScaleLoad = f32_scale, scale_first: bool = True, premultiply512: bool = False,
             ind: str = "  ") -> str:
    """int8 activation x int8 weight, one __dp4a dot per step, scaled per 32-block.

    tiers: "512,128" (int4 then int then scalar) or "512" (int4 then scalar). scale_first picks the
    family's two spellings of the same product: `(ws * as) * dot` or `dot * (ws * as)`; both round
    ws*as first and contract to one fma with the accumulator. premultiply512 forms ws*as before the
    int4 dots of the 512 tier (same value; it keeps nvcc's instruction order equal to kernels spelled so).
    """
    if tiers not in ("512,128", "512"):
        raise ValueError(f"tiers: expected '512,128' or '512', got {tiers!r}")

    def acc_line(acc: str, srow: str, dot: str, pad: str, pre: "str | None" = None) -> str:
        if pre is not None:
            return f"{pad}{acc} += (float){dot} * {pre};\n"
        sc = f"{wscale(srow)} * asc"
        return (f"{pad}{acc} += {sc} * (float){dot};\n" if scale_first
                else f"{pad}{acc} += (float){dot} * ({sc});\n")

    s = (f"{ind}const int n512 = {k} / 512;\n"
         f"{ind}for (int b = 0; b < n512; ++b) {{\n"
         f"{ind}  const int blk = b * 16 + lane / 2;\n"
         f"{ind}  const float asc = {xs}[blk];\n"
         f"{ind}  const int4 apack = ((const int4*){xq})[b * 32 + lane];\n")
    for i, (acc, row, srow) in enumerate(streams):
        s += f"{ind}  const int4 wpack{i} = ((const int4*){row})[b * 32 + lane];\n"
        if premultiply512:
            s += f"{ind}  const float wa{i} = {wscale(srow)} * asc;\n"
    for i, _ in enumerate(streams):
        s += f"{ind}  {_dp4a_chain(f'dot{i}', f'wpack{i}', 'apack')}\n"
    for i, (acc, _, srow) in enumerate(streams):
        s += acc_line(acc, srow, f"dot{i}", ind + "  ", f"wa{i}" if premultiply512 else None)
    s += f"{ind}}}\n"
    start = "n512 * 512"
    if tiers == "512,128":
        s += (f"{ind}const int n128 = {k} / 128;\n"
              f"{ind}for (int b = n512 * 4; b < n128; ++b) {{\n"
              f"{ind}  const int blk = b * 4 + lane / 8;\n"
              f"{ind}  const float asc = {xs}[blk];\n"
              f"{ind}  const int aword = ((const int*){xq})[b * 32 + lane];\n")
        for i, (acc, row, srow) in enumerate(streams):
            s += f"{ind}  const int wword{i} = ((const int*){row})[b * 32 + lane];\n"
            s += acc_line(acc, srow, f"__dp4a(wword{i}, aword, 0)", ind + "  ")
        s += f"{ind}}}\n"
        start = "n128 * 128"
    s += (f"{ind}for (int t = {start} + lane; t < {k}; t += 32) {{\n"
          f"{ind}  const int blk = t / 32;\n"
          f"{ind}  const float asc = {xs}[blk];\n"
          f"{ind}  const int av = (int){xq}[t];\n")
    for acc, row, srow in streams:
        prod = f"((int){row}[t] * av)" if scale_first else f"(av * (int){row}[t])"
        s += acc_line(acc, srow, prod, ind + "  ")
    return s + f"{ind}}}\n"


def int8x2_act(streams: Sequence[Stream], xqh: str, xql: str, xs: str, k: str,
               wscale: ScaleLoad = f32_scale, inline_lo_scale: bool = False, ind: str = "  ") -> str:
    """Two-pass activation (hi byte at scale sh, lo residual byte at sh/128): 128 tier + scalar tail.

    Per step: acc += ws * (sh * hi_dot + sl * lo_dot), the hi term first (contraction order).
    inline_lo_scale writes sl as `sh * 0.0078125f` inside the sum (the same value: a power-of-two scaling),
    which keeps nvcc's instruction order identical to kernels spelled that way.
    """
    sl_decl = "" if inline_lo_scale else f"{ind}  const float sl = sh * 0.0078125f;\n"
    sl = "sh * 0.0078125f" if inline_lo_scale else "sl"
    s = (f"{ind}const int n128 = {k} / 128;\n"
         f"{ind}for (int b = 0; b < n128; ++b) {{\n"
         f"{ind}  const int blk = b * 4 + lane / 8;\n"
         f"{ind}  const int hword = ((const int*){xqh})[b * 32 + lane];\n"
         f"{ind}  const int lword = ((const int*){xql})[b * 32 + lane];\n"
         f"{ind}  const float sh = {xs}[blk];\n" + sl_decl)
    for i, (acc, row, srow) in enumerate(streams):
        s += (f"{ind}  const int wword{i} = ((const int*){row})[b * 32 + lane];\n"
              f"{ind}  {acc} += {wscale(srow)} * (sh * (float)__dp4a(wword{i}, hword, 0) + "
              f"{sl} * (float)__dp4a(wword{i}, lword, 0));\n")
    s += (f"{ind}}}\n"
          f"{ind}for (int t = n128 * 128 + lane; t < {k}; t += 32) {{\n"
          f"{ind}  const int blk = t / 32;\n"
          f"{ind}  const float sh = {xs}[blk];\n" + sl_decl +
          f"{ind}  const int hv = (int){xqh}[t];\n"
          f"{ind}  const int lv = (int){xql}[t];\n")
    for acc, row, srow in streams:
        s += (f"{ind}  {{ const int wv = (int){row}[t]; "
              f"{acc} += {wscale(srow)} * (sh * (float)(wv * hv) + {sl} * (float)(wv * lv)); }}\n")
    return s + f"{ind}}}\n"


def warp_total(accs: Sequence[str], ind: str = "  ") -> str:
    """Reduce each accumulator over the warp into lane 0 (shfl_down tree, the family's order)."""
    if len(accs) == 1:
        return warp_sum(accs[0], ind)
    body = " ".join(f"{a} += __shfl_down_sync(0xffffffffu, {a}, off);" for a in accs)
    return f"{ind}for (int off = 16; off > 0; off >>= 1) {{ {body} }}\n"


def warp_row_head(rows: str, row: str = "row", wide: bool = False, ind: str = "  ") -> str:
    """One warp per output row: the row index, the early exit past `rows`, and the lane."""
    if wide:
        return (f"{ind}const long {row} = (blockIdx.x * (long)blockDim.x + threadIdx.x) >> 5;\n"
                f"{ind}if ({row} >= {rows}) return;\n{ind}const int lane = threadIdx.x & 31;\n")
    return (f"{ind}const int {row} = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n"
            f"{ind}if ({row} >= {rows}) return;\n{ind}const int lane = threadIdx.x & 31;\n")
