"""Q8_0 weights (bit-identical to ggml / gguf-py) and the kernels' int8 activation quantizers.

Weights: a Q8_0 block is 32 int8 quants plus one float16 scale ``d = amax / 127``; the quants are
``roundf(x * (1/d))`` with the reciprocal and the product in float32 and ties rounded away from zero (C ``roundf``).

Activations: the kernels quantize a float32 activation per 32-block, in float32, with an IEEE (correctly
rounded) division and round-half-to-even. Two single-pass variants exist in the kernel family, differing in how
they treat a block whose amax is zero or tiny (``zero_rule``), and a two-pass variant (hi byte + residual byte).
docs/NUMERICS.md gives the kernels' exact arithmetic; this module reproduces it bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference._parallel import over_rows
from reference._validate import QK, block_multiple, choice, float_array
from reference.modes import Mode

BLOCK_BYTES = 2 + QK                      # one GGUF Q8_0 block: float16 scale, then 32 int8 quants
F16_MAX = float(np.finfo(np.float16).max)  # 65504
ACT_AMAX_FLOOR = np.float32(1e-30)         # the `amax > 1e-30f ? amax : 1e-30f` floor of moe_qact / k*_qact
TWO_PASS_LO = np.float32(0.0078125)        # the residual byte's scale is hi_scale * 2^-7 (exact in float32)
ZERO_RULES = ("floor", "unit")
# Rows per chunk when quantizing or dequantizing: keeps temporaries in cache-sized pieces, memory bounded.
_CHUNK_ELEMS = 1 << 18


@dataclass(frozen=True)
class Q8Tensor:
    """A Q8_0 matrix: ``quants`` int8 (rows, cols) and ``scales`` float32 (rows, cols // 32).

    Every scale is finite and exactly representable in float16 (it is a GGUF block scale widened to float32),
    so narrowing it to ``__half`` -- as the ``k*_q8dp4a`` kernels do -- is lossless. Row ``r``, column ``c``
    dequantizes to ``scales[r, c // 32] * quants[r, c]``. The arrays are stored as given (not copied).
    """

    quants: np.ndarray
    scales: np.ndarray

    def __post_init__(self) -> None:
        q, s = self.quants, self.scales
        if not isinstance(q, np.ndarray) or q.dtype != np.int8 or q.ndim != 2:
            raise ValueError(f"quants: expected a 2-D int8 array, got {getattr(q, 'dtype', type(q))} "
                             f"shape {getattr(q, 'shape', None)}")
        block_multiple("quants columns", q.shape[1])
        if q.shape[0] <= 0:
            raise ValueError(f"quants: expected at least one row, got shape {q.shape}")
        if not isinstance(s, np.ndarray) or s.dtype != np.float32 or s.shape != (q.shape[0], q.shape[1] // QK):
            raise ValueError(f"scales: expected float32 of shape {(q.shape[0], q.shape[1] // QK)}, got "
                             f"{getattr(s, 'dtype', type(s))} shape {getattr(s, 'shape', None)}")
        if not np.all(np.isfinite(s)):
            raise ValueError("scales: every block scale must be finite")
        if not np.array_equal(s.astype(np.float16).astype(np.float32), s):
            bad = np.argwhere(s.astype(np.float16).astype(np.float32) != s)[0]
            raise ValueError(f"scales: every block scale must be exactly representable in float16 (a GGUF Q8_0 "
                             f"scale); scales[{bad[0]}, {bad[1]}] = {s[tuple(bad)]!r} is not")

    @property
    def shape(self) -> tuple[int, int]:
        return self.quants.shape  # type: ignore[return-value]

    @property
    def rows(self) -> int:
        return self.quants.shape[0]

    @property
    def cols(self) -> int:
        return self.quants.shape[1]

    @classmethod
    def from_gguf_blocks(cls, raw_uint8, shape) -> "Q8Tensor":
        """Read GGUF Q8_0 bytes: per row, cols/32 blocks of 34 bytes (float16 scale little-endian, 32 int8)."""
        raw = np.asarray(raw_uint8)
        if raw.dtype != np.uint8:
            raise ValueError(f"raw_uint8: expected uint8 bytes, got dtype {raw.dtype}")
        try:
            rows, cols = (int(v) for v in shape)
        except (TypeError, ValueError):
            raise ValueError(f"shape: expected (rows, cols), got {shape!r}") from None
        if rows <= 0:
            raise ValueError(f"shape: rows must be positive, got {rows}")
        block_multiple("shape cols", cols)
        need = rows * (cols // QK) * BLOCK_BYTES
        if raw.size != need:
            raise ValueError(f"raw_uint8: {rows}x{cols} Q8_0 needs {need} bytes ({BLOCK_BYTES} per 32-block), "
                             f"got {raw.size}")
        blocks = np.ascontiguousarray(raw).reshape(rows, cols // QK, BLOCK_BYTES)
        scales = blocks[:, :, :2].copy().view("<f2").reshape(rows, cols // QK).astype(np.float32)
        quants = blocks[:, :, 2:].copy().view(np.int8).reshape(rows, cols)
        return cls(quants, scales)

    def to_gguf_blocks(self) -> np.ndarray:
        """The GGUF Q8_0 bytes, shape (rows, cols/32*34) uint8 (what gguf-py's quantize returns)."""
        rows, nb = self.rows, self.cols // QK
        out = np.empty((rows, nb, BLOCK_BYTES), dtype=np.uint8)
        out[:, :, :2] = self.scales.astype("<f2").view(np.uint8).reshape(rows, nb, 2)
        out[:, :, 2:] = self.quants.view(np.uint8).reshape(rows, nb, QK)
        return out.reshape(rows, nb * BLOCK_BYTES)

    def take_rows(self, rows) -> "Q8Tensor":
        """A Q8Tensor of the given row indices (a copy), e.g. the rows of the experts a router chose."""
        idx = np.asarray(rows)
        if idx.dtype.kind not in "iu" or idx.ndim != 1:
            raise ValueError(f"rows: expected a 1-D integer index array, got dtype {idx.dtype} shape {idx.shape}")
        if idx.size and (idx.min() < 0 or idx.max() >= self.rows):
            raise ValueError(f"rows: indices must lie in [0, {self.rows}), got min {idx.min()} max {idx.max()}")
        return Q8Tensor(self.quants[idx], self.scales[idx])

    def row_range(self, lo: int, hi: int) -> "Q8Tensor":
        """Rows [lo, hi) as a view (no copy), e.g. one expert of an expert-major stacked matrix."""
        if not 0 <= lo < hi <= self.rows:
            raise ValueError(f"rows: range [{lo}, {hi}) must be non-empty and lie in [0, {self.rows}]")
        return Q8Tensor(self.quants[lo:hi], self.scales[lo:hi])

    def dequantize(self, dtype=np.float64) -> np.ndarray:
        return dequantize_q8_0(self, dtype=dtype)


@dataclass(frozen=True)
class Q8Blocks:
    """A Q8_0 matrix left in GGUF block layout: ``raw`` uint8 (rows, cols/32*34), e.g. a memory-mapped tensor.

    Rows become a Q8Tensor only when taken (``row_range``, ``take_rows``), so a decoder reads the routed
    experts' rows of a stacked expert tensor (2.4 GB at qwen3-30b-a3b width per layer) and nothing else; the
    block checks (finite, float16 scales) run on the rows taken, their errors prefixed with ``name``.
    ``quants``, ``scales`` and ``dequantize`` convert the whole matrix (for tests and small models).
    """

    raw: np.ndarray
    cols: int
    name: str = "tensor"

    def __post_init__(self) -> None:
        r = self.raw
        if not isinstance(r, np.ndarray) or r.dtype != np.uint8 or r.ndim != 2:
            raise ValueError(f"{self.name}: expected 2-D uint8 GGUF Q8_0 blocks, got {getattr(r, 'dtype', type(r))} "
                             f"shape {getattr(r, 'shape', None)}")
        block_multiple(f"{self.name} cols", self.cols)
        if r.shape[1] != self.cols // QK * BLOCK_BYTES or r.shape[0] <= 0:
            raise ValueError(f"{self.name}: {r.shape[1]} bytes per row, expected {self.cols // QK * BLOCK_BYTES} "
                             f"({self.cols} columns in {BLOCK_BYTES}-byte blocks of {QK})")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.raw.shape[0], self.cols)

    @property
    def rows(self) -> int:
        return self.raw.shape[0]

    def _convert(self, raw: np.ndarray, what: str) -> Q8Tensor:
        try:
            return Q8Tensor.from_gguf_blocks(raw, (raw.shape[0], self.cols))
        except ValueError as exc:
            raise ValueError(f"{self.name}: {what}: {exc}") from None

    def row_range(self, lo: int, hi: int) -> Q8Tensor:
        if not 0 <= lo < hi <= self.rows:
            raise ValueError(f"rows: range [{lo}, {hi}) must be non-empty and lie in [0, {self.rows}]")
        return self._convert(self.raw[lo:hi], f"rows [{lo}, {hi})")

    def take_rows(self, rows) -> Q8Tensor:
        idx = np.asarray(rows)
        if idx.dtype.kind not in "iu" or idx.ndim != 1 or idx.size == 0:
            raise ValueError(f"rows: expected a non-empty 1-D integer index array, got dtype {idx.dtype} shape "
                             f"{idx.shape}")
        if idx.min() < 0 or idx.max() >= self.rows:
            raise ValueError(f"rows: indices must lie in [0, {self.rows}), got min {idx.min()} max {idx.max()}")
        return self._convert(self.raw[idx], "taken rows")

    def materialize(self) -> Q8Tensor:
        return self.row_range(0, self.rows)

    @property
    def quants(self) -> np.ndarray:
        return self.materialize().quants

    @property
    def scales(self) -> np.ndarray:
        return self.materialize().scales

    def dequantize(self, dtype=np.float64) -> np.ndarray:
        return self.materialize().dequantize(dtype)


def _round_half_away_f32(v: np.ndarray) -> np.ndarray:
    """C roundf on float32 values with |v| < 2^23, up to the final truncation toward zero.

    Returns ``v + copysign(0.5 - 2^-25, v)`` in float32; truncating it (a C or NumPy float->int cast) gives roundf.
    The constant is 0.5 minus half an ulp of 0.5, so the single float32 addition never carries a value below a
    half across the next integer, while an exact half still reaches it (proof in docs/NUMERICS.md, Q8_0).
    """
    out = np.copysign(np.float32(0.5 - 2.0 ** -25), v)
    out += v
    return out


def _quantize_rows_q8(w: np.ndarray, r0: int, quants: np.ndarray, scales: np.ndarray) -> None:
    """Quantize float32 rows `w` (r, cols) into the int8 `quants` and float16-valued float32 `scales` views."""
    blocks = w.reshape(-1, QK)
    amax = np.maximum(blocks.max(axis=1), -blocks.min(axis=1)) + np.float32(0)  # +0 not -0; NaN/Inf propagate
    if not np.all(np.isfinite(amax)):
        bad = np.argwhere(~np.isfinite(w))[0]
        raise ValueError(f"w: Q8_0 cannot represent NaN/Inf; w[{bad[0] + r0}, {bad[1]}] = {w[tuple(bad)]}")
    d = amax / np.float32(127)
    with np.errstate(over="ignore"):
        d16 = d.astype(np.float16)
    if not np.all(np.isfinite(d16)):
        bad = int(np.argmax(~np.isfinite(d16)))
        per_row = w.shape[1] // QK
        raise ValueError(f"w: block ({bad // per_row + r0}, {bad % per_row}) has amax/127 = {d[bad]} beyond "
                         f"float16's range (max {F16_MAX}); Q8_0 cannot store its scale")
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
        v = blocks * inv[:, None]
    overflowed = np.isinf(inv)
    if overflowed.any():
        # 1/d overflows when amax < ~3.7e-37 (the float16 scale is 0 there anyway): ggml's cast of the inf/NaN
        # products to int8 is undefined; gguf-py on x86-64 yields 0, which is what we define.
        v[overflowed] = 0
    quants.reshape(-1, QK)[...] = _round_half_away_f32(v)   # the float->int8 assignment truncates toward zero
    scales.reshape(-1)[...] = d16


def quantize_q8_0(w) -> Q8Tensor:
    """Quantize a (rows, cols) real matrix to Q8_0, bit-identical to ggml's ``quantize_row_q8_0_ref``.

    The input is first rounded to float32 (as gguf-py does). Raises ValueError for NaN/Inf (ggml's cast of
    them to int8 is undefined) and for a block whose scale ``amax/127`` overflows float16 (amax/127 >= 65520,
    amax ~ 8.32e6; ggml would store an infinite scale). Blocks so small that 1/d overflows get zero quants
    (and a zero scale).
    """
    arr = float_array("w", w, ndim=2, dtype=np.float32)
    rows, cols = arr.shape
    if rows <= 0:
        raise ValueError(f"w: expected at least one row, got shape {arr.shape}")
    block_multiple("w columns", cols)
    quants = np.empty((rows, cols), dtype=np.int8)
    scales = np.empty((rows, cols // QK), dtype=np.float32)
    step = max(1, _CHUNK_ELEMS // cols)

    def work(lo: int, hi: int) -> None:
        for r0 in range(lo, hi, step):
            r1 = min(r0 + step, hi)
            _quantize_rows_q8(np.ascontiguousarray(arr[r0:r1]), r0, quants[r0:r1], scales[r0:r1])

    over_rows(rows, cols, work)
    return Q8Tensor(quants, scales)


def dequantize_q8_0(t: Q8Tensor, dtype=np.float64) -> np.ndarray:
    """``scales[r, c // 32] * quants[r, c]`` as float64 (exact: an 8-bit by 11-bit product).

    ``dtype=np.float32`` is also exact and gives gguf-py's ``dequantize`` values.
    """
    if not isinstance(t, Q8Tensor):
        raise ValueError(f"t: expected a Q8Tensor, got {type(t).__name__}")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype: expected float32 or float64, got {dt}")
    rows, cols = t.shape
    nb = cols // QK
    out = np.empty((rows, nb, QK), dtype=dt)
    step = max(1, _CHUNK_ELEMS // (2 * cols))

    def work(lo: int, hi: int) -> None:
        widened = np.empty((step, nb, QK), dtype=np.float32)   # int8 -> float32 is a fast, exact cast
        for r0 in range(lo, hi, step):
            n = min(step, hi - r0)
            np.copyto(widened[:n], t.quants[r0:r0 + n].reshape(n, nb, QK), casting="unsafe")
            np.multiply(widened[:n], t.scales[r0:r0 + n, :, None], out=out[r0:r0 + n])

    over_rows(rows, cols, work)
    return out.reshape(rows, cols)


# ---------------------------------------------------------------------------------------------- activations
def _act_blocks(x, name: str = "x") -> np.ndarray:
    arr = float_array(name, x, ndim=(1, 2), dtype=np.float32)
    block_multiple(f"{name} last axis", arr.shape[-1])
    return arr.reshape(*arr.shape[:-1], arr.shape[-1] // QK, QK)


def _block_amax(xb: np.ndarray) -> np.ndarray:
    # fmaxf semantics of the warp max-reduce: a NaN lane is ignored unless every lane is NaN.
    return np.fmax.reduce(np.abs(xb), axis=-1)


def _rint_div_to_int(v: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """rint(v / scale) in float32 as float64, NaN -> 0 and saturated to int32 (CUDA's float->int conversion)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        t = np.rint(v / scale[..., None]).astype(np.float64)
    t[np.isnan(t)] = 0.0
    return np.clip(t, -2.0 ** 31, 2.0 ** 31 - 1)


def _floor_scale(xb: np.ndarray) -> np.ndarray:
    amax = _block_amax(xb)
    amax = np.where(amax > ACT_AMAX_FLOOR, amax, ACT_AMAX_FLOOR).astype(np.float32)
    return amax / np.float32(127)


def quantize_act_int8(x, zero_rule: str = "floor") -> tuple[np.ndarray, np.ndarray]:
    """Single-pass int8 activation quantization per 32-block, bit-exact to the kernels.

    x: float32 (K,) or (M, K), K a multiple of 32 (other float dtypes are rounded to float32 first, as the
    kernels read float32). Returns (q int8 like x, scales float32 (..., K // 32)).

    zero_rule="floor" (default; moe_qact, k*_qact and every fused quantizing epilogue, i.e. every int8-mode
    matmul and MoE input of the emitted forward): ``amax = max(amax, 1e-30f)``, ``scale = amax / 127``,
    ``q = clamp(rintf(v / scale), -128, 127)``. zero_rule="unit" (gk_quant_act, gk_rmsnorm_q8,
    gk_add_rmsnorm_q8a of the generation runtime): ``scale = amax > 0 ? amax / 127 : 1``,
    ``q = (signed char)__float2int_rn(v / scale)`` (no clamp; the int32 result's low byte).
    NaN lanes: ignored by the amax (fmaxf), quantized to 0. An Inf lane makes the block's scale Inf and all its
    quants 0. The default follows the emitted forward's quantizers (see docs/NUMERICS.md).
    """
    choice("zero_rule", zero_rule, ZERO_RULES)
    xb = _act_blocks(x)
    if zero_rule == "floor":
        scale = _floor_scale(xb)
        q = np.clip(_rint_div_to_int(xb, scale), -128, 127).astype(np.int8)
    else:
        amax = _block_amax(xb)
        with np.errstate(invalid="ignore"):
            positive = amax > 0
        scale = np.where(positive, amax / np.float32(127), np.float32(1)).astype(np.float32)
        q = (_rint_div_to_int(xb, scale).astype(np.int64) & 0xFF).astype(np.uint8).view(np.int8)
    return q.reshape(*xb.shape[:-2], -1), scale


def quantize_act_two_pass(x, fma: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-pass (hi + lo byte) activation quantization, bit-exact to the two-pass moe_qact / k*_qact.

    hi: exactly ``quantize_act_int8(x, "floor")``. Residual ``r = v - qh*sh`` in float32; nvcc contracts this
    into one fused multiply-add by default (``-fmad=true``), so ``fma=True`` rounds it once (emulated exactly in
    float64: qh*sh has at most 32 significant bits and v - qh*sh spans at most ~33 bits for a finite block);
    ``fma=False`` rounds the product and the difference separately (nvcc ``-fmad=false``). Then
    ``sl = sh * 2^-7`` (exact) and ``lo = clamp(rintf(r / sl), -128, 127)``.
    Returns (hi int8, lo int8, scales float32 = sh); the lo scale is ``scales * 0.0078125``.
    """
    if not isinstance(fma, (bool, np.bool_)):
        raise ValueError(f"fma: expected a bool, got {fma!r}")
    xb = _act_blocks(x)
    sh = _floor_scale(xb)
    qh = np.clip(_rint_div_to_int(xb, sh), -128, 127)
    with np.errstate(invalid="ignore", over="ignore"):
        if fma:
            r = (xb.astype(np.float64) - qh * sh[..., None].astype(np.float64)).astype(np.float32)
        else:
            r = xb - (qh.astype(np.float32) * sh[..., None])
    sl = sh * TWO_PASS_LO
    ql = np.clip(_rint_div_to_int(r, sl), -128, 127)
    shape = (*xb.shape[:-2], -1)
    return qh.astype(np.int8).reshape(shape), ql.astype(np.int8).reshape(shape), sh


@dataclass(frozen=True)
class QuantizedActivation:
    """An activation as an int8 kernel holds it: ``hi`` int8 (..., K), ``scales`` float32 (..., K // 32), and
    for the two-pass mode ``lo`` int8 (..., K) with scale ``scales * 2^-7``. Pass a kernel's own quantized
    activation to reference.matmul.q8_matmul(act=...) to judge the matmul alone."""

    hi: np.ndarray
    scales: np.ndarray
    lo: "np.ndarray | None" = None

    def __post_init__(self) -> None:
        h, s, lo = self.hi, self.scales, self.lo
        if not isinstance(h, np.ndarray) or h.dtype != np.int8 or h.ndim not in (1, 2):
            raise ValueError(f"hi: expected a 1-D or 2-D int8 array, got {getattr(h, 'dtype', type(h))}")
        block_multiple("hi last axis", h.shape[-1])
        want = (*h.shape[:-1], h.shape[-1] // QK)
        if not isinstance(s, np.ndarray) or s.dtype != np.float32 or s.shape != want:
            raise ValueError(f"scales: expected float32 of shape {want}, got {getattr(s, 'dtype', type(s))} "
                             f"shape {getattr(s, 'shape', None)}")
        if lo is not None and (not isinstance(lo, np.ndarray) or lo.dtype != np.int8 or lo.shape != h.shape):
            raise ValueError(f"lo: expected int8 of shape {h.shape} (or None), got {getattr(lo, 'dtype', type(lo))} "
                             f"shape {getattr(lo, 'shape', None)}")

    @property
    def mode(self) -> Mode:
        return Mode.INT8_ACT if self.lo is None else Mode.TWO_PASS_INT8

    def dequantize(self) -> np.ndarray:
        """The activation value the int8 dots see, float64 (exact: hi*s + lo*s/128 fits in 53 bits)."""
        k = self.hi.shape[-1]
        s = self.scales.astype(np.float64)[..., None]
        val = self.hi.reshape(*self.hi.shape[:-1], k // QK, QK) * s
        if self.lo is not None:
            val = val + self.lo.reshape(val.shape) * (s * float(TWO_PASS_LO))
        return val.reshape(self.hi.shape)


def quantize_activation(x, mode, zero_rule: str = "floor", fma: bool = True) -> "QuantizedActivation | None":
    """The activation as `mode`'s kernels quantize it (None for DEQUANT, which reads float32 directly)."""
    mode = Mode.parse(mode)
    if mode is Mode.DEQUANT:
        return None
    if mode is Mode.INT8_ACT:
        return QuantizedActivation(*quantize_act_int8(x, zero_rule))
    if zero_rule != "floor":
        raise ValueError(f"zero_rule: the two-pass quantizers only use the 'floor' rule, got {zero_rule!r}")
    hi, lo, s = quantize_act_two_pass(x, fma=fma)
    return QuantizedActivation(hi, s, lo)
