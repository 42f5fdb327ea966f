"""Row norms: RMSNorm (weight, residual, fused int8 quant epilogue), fused add+RMSNorm, softmax and
LayerNorm rows, and the f32 generation-lane norms.

Two lanes with different numerics live here:
  forward lane (`k{i}_row`, `k{i}_add_row`): one block of 256 threads per row, the row length `cols` and
    `eps` compiled into the text, sums of squares in double over a shared double[256] halving tree,
    `scale = 1/sqrt(mean + eps)` in double, the weight applied as a float product after rounding;
  generation lane (`gk_*`): one block of 256 threads for the single decode row, f32 sums over a shared
    float[256] tree, `rsqrtf(mean + eps)`, `x * scale * w` in float.

Grouping by mode:
  DEQUANT   k0_row (rms, weight), k1_row (rms, no weight), k2_row (rms, weight, residual input),
            k3_row (softmax), k4_row (LayerNorm, weight + bias), k5_add_row (add + rms, weight),
            k7_add_row (add + rms, no weight), gk_rmsnorm, gk_add_rmsnorm;
  INT8_ACT  the quant-epilogue variants: k0_row (rms, weight, quant), k1_row (rms, weight, residual,
            quant), k2_add_row (add + rms, weight, quant), gk_add_rmsnorm_q8, gk_rmsnorm_q8,
            gk_add_rmsnorm_q8a.
An add+norm takes two stage numbers (the sum and the norm), as the forward numbers its stages.

The forward-lane quant epilogue writes row r's int8 values and block scales at row offset r; at one row
(the decode forward) that is exactly the seed's layout (see docs/KERNELS.md, section 2 for rows > 1).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

from reference.modes import Mode
from reference.shapes import ShapeSet

from ._kernel_text import (assemble, baked, baked_value, c_double, exact_threads, inout, inp, kernel, out, positive,
                           scalar, tree_reduce, tree_threads, warp_blocks_quant)
from .contract import KernelContract, KernelSource, Precondition

FAMILY = "norm"
MODES = (Mode.DEQUANT, Mode.INT8_ACT)

ROW_THREADS = "256"
_QUANT_WARPS = Precondition("threads >= 32", "threads",
                            "the quant epilogue strides by blockDim.x/32 warps; under one warp it never advances")


def _row_instances(cols: str) -> tuple:
    common = {"cols": cols, "eps": "rms_eps", "threads": ROW_THREADS}
    return (("decode", {"rows": "1", **common}), ("prefill_3", {"rows": "3", **common}))


# -- forward lane: k{i}_row ---------------------------------------------------------------------------
def _row_contract(stage: int, reduce: str, mode: Mode, *, weight: bool = False, residual: bool = False,
                  bias: bool = False, quant: bool = False, cols: str = "d") -> KernelContract:
    name = f"k{stage}_row"
    params = [inp("x", "const float*", "rows*cols")]
    if weight:
        params.append(inp("w", "const float*", "cols"))
    if residual:
        params.append(inp("res", "const float*", "rows*cols", doc="summed into x (in double) before the norm"))
    if bias:
        params.append(inp("bias", "const float*", "cols"))
    params.append(out("y", "float*", "rows*cols"))
    pre = [tree_threads(256, "sh"), *positive("rows", "cols")]
    if quant:
        params += [out("yq", "signed char*", "rows*cols"), out("ys", "float*", "rows*(cols//32)")]
        pre += [Precondition("cols % 32 == 0", "cols", "the epilogue quantizes whole 32-blocks; a ragged tail "
                             "would leave yq/ys elements unwritten"), _QUANT_WARPS]
    if reduce == "rms":
        op, attrs = "rms_norm", {"weight": weight, "residual": "input" if residual else "none",
                                 "accumulate": "f64", "quant": "floor" if quant else None, "writes_norm": True}
    elif reduce == "softmax":
        op, attrs = "softmax_rows", {"accumulate": "f64"}
    elif reduce == "layernorm":
        op, attrs = "layer_norm", {"weight": weight, "bias": bias, "accumulate": "f64"}
    else:
        raise ValueError(f"reduce: expected rms, softmax or layernorm, got {reduce!r}")
    attrs["variant"] = reduce
    return KernelContract(
        name=name, family=FAMILY, op=op, mode=mode, params=tuple(params),
        grid=("rows", "1", "1"), block=("threads", "1", "1"), shared_bytes="0",
        preconditions=tuple(pre), name_pattern=r"k\d+_row", instances=_row_instances(cols), attrs=attrs,
        doc=f"one block per row; cols and eps compiled in ({reduce})")


def _row_body(c: KernelContract, cols: int, eps: float) -> str:
    has = {p.name for p in c.params}
    variant = c.attrs["variant"]
    n, e = str(cols), c_double(eps)
    s = ("  const int tid = threadIdx.x;\n"
         f"  const long base = (long)blockIdx.x * {n};\n"
         "  const float* xr = x + base;\n"
         "  float* yr = y + base;\n")
    if "res" in has:
        s += "  const float* rr = res + base;\n"
    s += "  __shared__ double sh[256];\n"
    if variant == "rms":
        val = "((double)xr[i] + (double)rr[i])" if "res" in has else "(double)xr[i]"
        wmul = " * w[i]" if "w" in has else ""
        s += ("  double sq = 0.0;\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) {{ const double v = {val}; sq += v * v; }}\n"
              "  sh[tid] = sq;\n  __syncthreads();\n" + tree_reduce("sh") +
              f"  const double inv = 1.0 / sqrt(sh[0] / (double){n} + {e});\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) yr[i] = (float)({val} * inv){wmul};\n")
    elif variant == "softmax":
        s += ("  double top = -1e30;\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) top = fmax(top, (double)xr[i]);\n"
              "  sh[tid] = top;\n  __syncthreads();\n" + tree_reduce("sh", "fmax") +
              "  const double rowmax = sh[0];\n  __syncthreads();\n"
              "  double se = 0.0;\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) se += exp((double)xr[i] - rowmax);\n"
              "  sh[tid] = se;\n  __syncthreads();\n" + tree_reduce("sh") +
              "  const double total = sh[0];\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) yr[i] = (float)(exp((double)xr[i] - rowmax) / total);\n")
    else:  # layernorm: mean, then the population variance about it, both in double
        wmul = " * (double)w[i]" if "w" in has else ""
        badd = " + (double)bias[i]" if "bias" in has else ""
        s += ("  double s1 = 0.0;\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) s1 += (double)xr[i];\n"
              "  sh[tid] = s1;\n  __syncthreads();\n" + tree_reduce("sh") +
              f"  const double mean = sh[0] / (double){n};\n  __syncthreads();\n"
              "  double s2 = 0.0;\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) {{ const double dv = (double)xr[i] - mean; s2 += dv * dv; }}\n"
              "  sh[tid] = s2;\n  __syncthreads();\n" + tree_reduce("sh") +
              f"  const double denom = sqrt(sh[0] / (double){n} + {e});\n"
              f"  for (int i = tid; i < {n}; i += blockDim.x) yr[i] = (float)(((double)xr[i] - mean) / denom{wmul}{badd});\n")
    if "yq" in has:
        s += _row_quant(cols)
    return s


def _row_quant(cols: int) -> str:
    nb = cols // 32
    return ("  __syncthreads();  // every yr element of the row is written before warps read whole blocks\n"
            + warp_blocks_quant("yr[qb * 32 + ql]", "yq[base + qb * 32 + ql]",
                                f"ys[(long)blockIdx.x * {nb} + qb]", str(nb), "floor"))


# -- forward lane: k{i}_add_row -----------------------------------------------------------------------
def _add_row_contract(stage: int, mode: Mode, *, weight: bool, quant: bool) -> KernelContract:
    params = [inp("a", "const float*", "rows*cols"), inp("b", "const float*", "rows*cols")]
    if weight:
        params.append(inp("w", "const float*", "cols"))
    params += [out("c", "float*", "rows*cols", doc="the sum a + b, kept for the next residual"),
               out("y", "float*", "rows*cols")]
    pre = [tree_threads(256, "sh"), *positive("rows", "cols")]
    if quant:
        params += [out("yq", "signed char*", "rows*cols"), out("ys", "float*", "rows*(cols//32)")]
        pre += [Precondition("cols % 32 == 0", "cols", "the epilogue quantizes whole 32-blocks; a ragged tail "
                             "would leave yq/ys elements unwritten"), _QUANT_WARPS]
    attrs = {"weight": weight, "residual": "add_out", "accumulate": "f64", "quant": "floor" if quant else None,
             "writes_norm": True, "variant": "add_rms"}
    return KernelContract(
        name=f"k{stage}_add_row", family=FAMILY, op="rms_norm", mode=mode, params=tuple(params),
        grid=("rows", "1", "1"), block=("threads", "1", "1"), shared_bytes="0", preconditions=tuple(pre),
        name_pattern=r"k\d+_add_row", instances=_row_instances("d"), attrs=attrs,
        doc="c = a + b (float), y = rmsnorm(c) in double; cols and eps compiled in")


def _add_row_body(c: KernelContract, cols: int, eps: float) -> str:
    has = {p.name for p in c.params}
    n = str(cols)
    wmul = " * w[i]" if "w" in has else ""
    s = ("  const int tid = threadIdx.x;\n"
         f"  const long base = (long)blockIdx.x * {n};\n"
         "  const float* ar = a + base;\n  const float* br = b + base;\n"
         "  float* cr = c + base;\n  float* yr = y + base;\n"
         "  __shared__ double sh[256];\n"
         "  double sq = 0.0;\n"
         f"  for (int i = tid; i < {n}; i += blockDim.x) {{ const float v = ar[i] + br[i]; cr[i] = v; sq += (double)v * v; }}\n"
         "  sh[tid] = sq;\n  __syncthreads();\n" + tree_reduce("sh") +
         f"  const double inv = 1.0 / sqrt(sh[0] / (double){n} + {c_double(eps)});\n"
         f"  for (int i = tid; i < {n}; i += blockDim.x) yr[i] = (float)((double)cr[i] * inv){wmul};\n")
    if "yq" in has:
        s += _row_quant(cols)
    return s


# -- generation lane ------------------------------------------------------------------------------------
_GK_INSTANCES = (("attn_norm", {"n": "d", "eps": "rms_eps", "threads": "256"}),)
_N_BLOCKS = Precondition("n % 32 == 0", "n", "the quant covers n/32 whole blocks; the last n % 32 values would "
                         "have no int8 code or scale")


def _gk(name: str, mode: Mode, params: list, attrs: dict, pre: list, doc: str) -> KernelContract:
    return KernelContract(
        name=name, family=FAMILY, op="rms_norm", mode=mode, params=tuple(params), grid=("1", "1", "1"),
        block=("threads", "1", "1"), shared_bytes="0", preconditions=tuple(pre + positive("n")),
        instances=_GK_INSTANCES, attrs={**attrs, "accumulate": "f32"}, doc=doc)


_N, _EPS = scalar("n", "int", "n"), scalar("eps", "float", "eps")


def _gk_rmsnorm() -> KernelContract:
    return _gk("gk_rmsnorm", Mode.DEQUANT,
               [out("out", "float*", "n"), inp("x", "const float*", "n"), inp("w", "const float*", "n"), _N, _EPS],
               {"weight": True, "residual": "none", "quant": None, "writes_norm": True},
               [tree_threads(256, "sh")], "one block for the decode row; f32 tree, rsqrtf")


def _gk_add_rmsnorm() -> KernelContract:
    return _gk("gk_add_rmsnorm", Mode.DEQUANT,
               [inout("x", "float*", "n", doc="x += y, kept as the residual"), inp("y", "const float*", "n"),
                out("out", "float*", "n"), inp("w", "const float*", "n"), _N, _EPS],
               {"weight": True, "residual": "add_inplace", "quant": None, "writes_norm": True},
               [tree_threads(256, "sh")], "x += y in place, out = rmsnorm(x) * w")


def _gk_add_rmsnorm_q8() -> KernelContract:
    return _gk("gk_add_rmsnorm_q8", Mode.INT8_ACT,
               [inout("x", "float*", "n"), inp("y", "const float*", "n"), out("out", "float*", "n"),
                inp("w", "const float*", "n"), out("oq", "signed char*", "n"), out("os_", "float*", "n//32"), _N, _EPS],
               {"weight": True, "residual": "add_inplace", "quant": "floor", "writes_norm": True},
               [tree_threads(256, "sh"), _QUANT_WARPS, _N_BLOCKS], "add + rmsnorm, out also quantized (floor rule)")


_EXACT_256 = exact_threads(256, "the tree starts at 128 and the quant loop strides by 8 warps: exactly 256 threads")


def _gk_rmsnorm_q8() -> KernelContract:
    return _gk("gk_rmsnorm_q8", Mode.INT8_ACT,
               [inp("x", "const float*", "n"), out("xq", "signed char*", "n"), out("xs", "float*", "n//32"),
                inp("w", "const float*", "n"), _N, _EPS],
               {"weight": True, "residual": "none", "quant": "unit", "writes_norm": False},
               [_EXACT_256, _N_BLOCKS], "rmsnorm(x) * w quantized (unit rule); the f32 norm is not stored")


def _gk_add_rmsnorm_q8a() -> KernelContract:
    return _gk("gk_add_rmsnorm_q8a", Mode.INT8_ACT,
               [inout("x", "float*", "n"), inp("y", "const float*", "n"), out("xq", "signed char*", "n"),
                out("xs", "float*", "n//32"), inp("w", "const float*", "n"), _N, _EPS],
               {"weight": True, "residual": "add_inplace", "quant": "unit", "writes_norm": False},
               [_EXACT_256, _N_BLOCKS], "x += y, then rmsnorm(x) * w quantized (unit rule)")


def _gk_body(c: KernelContract) -> str:
    has = {p.name for p in c.params}
    adds = c.attrs["residual"] == "add_inplace"
    s = "  const int tid = threadIdx.x;\n  __shared__ float sh[256];\n  float sq = 0.0f;\n"
    if adds:
        s += "  for (int i = tid; i < n; i += blockDim.x) { const float v = x[i] + y[i]; x[i] = v; sq += v * v; }\n"
    else:
        s += "  for (int i = tid; i < n; i += blockDim.x) sq += x[i] * x[i];\n"
    # The unit-rule kernels are built for exactly 256 threads (their contracts say so): the tree starts at 128
    # and the quant loop strides by 8 warps, compile-time constants as in the family's kernels.
    fixed = "xq" in has
    s += ("  sh[tid] = sq;\n  __syncthreads();\n" + tree_reduce("sh", start="128" if fixed else "blockDim.x / 2")
          + "  const float inv = rsqrtf(sh[0] / n + eps);\n")
    if "out" in has:
        s += "  for (int i = tid; i < n; i += blockDim.x) out[i] = x[i] * inv * w[i];\n"
    if "oq" in has:
        s += ("  __syncthreads();  // warps read whole 32-blocks of out written by other threads\n"
              + warp_blocks_quant("out[qb * 32 + ql]", "oq[qb * 32 + ql]", "os_[qb]", "n / 32", "floor"))
    elif "xq" in has:
        s += warp_blocks_quant("x[qb * 32 + ql] * inv * w[qb * 32 + ql]", "xq[qb * 32 + ql]", "xs[qb]",
                               "n / 32", "unit", warp_stride="8")
    return s


# -- emit ---------------------------------------------------------------------------------------------
def contracts(mode: Optional[Mode]) -> list[KernelContract]:
    if mode is Mode.DEQUANT:
        return [_row_contract(0, "rms", mode, weight=True),
                _row_contract(1, "rms", mode),
                _row_contract(2, "rms", mode, weight=True, residual=True),
                _row_contract(3, "softmax", mode, cols="n_expert"),   # the router's probabilities
                _row_contract(4, "layernorm", mode, weight=True, bias=True),
                _add_row_contract(5, mode, weight=True, quant=False),    # an add+norm takes stages 5 and 6
                _add_row_contract(7, mode, weight=False, quant=False),
                _gk_rmsnorm(), _gk_add_rmsnorm()]
    if mode is Mode.INT8_ACT:
        return [_row_contract(0, "rms", mode, weight=True, quant=True),
                _row_contract(1, "rms", mode, weight=True, residual=True, quant=True),
                _add_row_contract(2, mode, weight=True, quant=True),
                _gk_add_rmsnorm_q8(), _gk_rmsnorm_q8(), _gk_add_rmsnorm_q8a()]
    raise ValueError(f"mode: the norm family is emitted in {', '.join(m.value for m in MODES)}, not {mode}")


def emit(mode: Optional[Mode], shape: ShapeSet) -> KernelSource:
    kernels, baked_consts = [], {}
    for c in contracts(mode):
        if c.name.startswith("gk_"):
            kernels.append((c, kernel(c, _gk_body(c), c.doc)))
            continue
        cols, eps = baked_value(c, shape, "cols"), c.dims_for(shape)["eps"]
        c = _with_baked(c, cols, eps)
        body = _add_row_body(c, cols, eps) if c.attrs["variant"] == "add_rms" else _row_body(c, cols, eps)
        kernels.append((c, kernel(c, body, c.doc)))
        baked_consts[c.name] = {"cols": cols, "eps": eps}
    return assemble(FAMILY, mode, shape, kernels, {"baked": baked_consts, "threads": int(ROW_THREADS)})


def _with_baked(c: KernelContract, cols: int, eps: float) -> KernelContract:
    """The compiled-in row length (and eps, where the kernel reads it) become preconditions of the contract."""
    pre = [baked("cols", cols, c.name)]
    if c.attrs["variant"] != "softmax":
        pre.append(Precondition(f"eps == {c_double(eps)}", "eps", f"{c.name} has eps={c_double(eps)} compiled in"))
    return replace(c, preconditions=(*pre, *c.preconditions))
