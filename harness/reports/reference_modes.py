"""`qconform report --backend reference`: each int8 mode's error against DEQUANT, per op and shape set.

Ops: the attention projections (q/k/v/o) and the LM head as Q8_0 GEMVs, the sparse MoE FFN, and one decode
layer end to end (norm, q/k/v, QK-norm + RoPE, GQA attention over a random cache, o-projection, residual, norm,
MoE, residual, final norm, LM head). Weights are Gaussian (std 0.02) quantized to Q8_0, activations Gaussian
with a few outlier channels (they set the int8 block scales, as in real models); everything comes from one
seed, printed and written to the report. For each GEMV the rigorous bound of reference.bounds is checked too:
the exit status is 1 if an observed error exceeds its bound (a reference bug), else 0.
"""
from __future__ import annotations

import json
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.judging import metrics
from harness.cache import atomic_write
from harness.judging.records import finite_json
from harness.judging.registry import FAIL
from reference._parallel import map_chunks
from reference.argmax import argmax_first, argmax_report
from reference.attention import decode_attention
from reference.bounds import q8_matmul_mode_bound
from reference.matmul import q8_matmul
from reference.modes import Mode
from reference.moe import MoeWeights, moe_ffn, moe_trace, route_top_k
from reference.norm import rms_norm
from reference.quant import Q8Tensor, quantize_q8_0
from reference.rope import qk_norm_rope
from reference.shapes import ShapeSet

from .document import Block, Heading, Items, Table, console, fmt, markdown

WEIGHT_STD = 0.02
OUTLIER_FRACTION = 1 / 64     # share of activation channels scaled up
OUTLIER_GAIN = 20.0
REL_FLOOR = 1e-3              # max_rel divides by max(|ref|, REL_FLOOR * max|ref|)
_GEN_ROWS_ELEMS = 1 << 22     # weights are generated and quantized in pieces of this many elements


def _key(seed: int, *names: str) -> list[int]:
    return [seed, *(zlib.crc32(n.encode()) for n in names)]


def _rng(seed: int, *names: str) -> np.random.Generator:
    return np.random.default_rng(_key(seed, *names))


def _gauss_table() -> np.ndarray:
    """The 65536 midpoint quantiles of N(0, 1) as float32: a uniform 16-bit draw through this table is a
    Gaussian sample (tails cut at 4.3 sigma) about 2x cheaper than Generator.standard_normal."""
    from statistics import NormalDist
    inv = NormalDist().inv_cdf
    return np.array([inv((i + 0.5) / 65536) for i in range(65536)], dtype=np.float32)


_GAUSS = _gauss_table()


def random_q8(key: list[int], rows: int, cols: int, std: float = WEIGHT_STD) -> Q8Tensor:
    """Gaussian (std) weights quantized to Q8_0, generated and quantized in row pieces across the cores; piece i
    draws from its own generator seeded by key + [i], so the result does not depend on the core count."""
    step = max(1, _GEN_ROWS_ELEMS // cols)
    quants = np.empty((rows, cols), dtype=np.int8)
    scales = np.empty((rows, cols // 32), dtype=np.float32)
    table = _GAUSS * np.float32(std)

    def piece(i: int) -> None:
        r0 = i * step
        n = min(step, rows - r0)
        draw = np.random.default_rng([*key, i]).integers(0, 65536, (n, cols), dtype=np.uint16)
        t = quantize_q8_0(table[draw])
        quants[r0:r0 + n], scales[r0:r0 + n] = t.quants, t.scales

    map_chunks(-(-rows // step), piece)
    return Q8Tensor(quants, scales)


class LazyMoe:
    """MoE weights whose experts are generated on first use (each from its own seed key, so the values do not
    depend on the order of use): the Qwen3 MoE holds 600M weights of which a token reads top_k/E. Untouched
    experts stay zero pages (never allocated by the OS)."""

    def __init__(self, shape: ShapeSet, key: list[int]):
        e, d, dff = shape.n_expert, shape.d, shape.dff
        self.shape, self.key, self.filled = shape, key, set()
        zeros = lambda r, c: Q8Tensor(np.zeros((r, c), np.int8), np.zeros((r, c // 32), np.float32))  # noqa: E731
        self.weights = MoeWeights(router=random_q8([*key, 0], e, d), gate=zeros(e * dff, d), up=zeros(e * dff, d),
                                  down=zeros(e * d, dff), top_k=shape.top_k)

    def ensure(self, x: np.ndarray) -> MoeWeights:
        """Generate the experts x routes to; returns the weights."""
        idx, _ = route_top_k(q8_matmul(x, self.weights.router, Mode.DEQUANT), self.shape.top_k)
        d, dff, w = self.shape.d, self.shape.dff, self.weights
        for e in (int(i) for i in idx if int(i) not in self.filled):
            for tag, (t, per, cols) in enumerate(((w.gate, dff, d), (w.up, dff, d), (w.down, d, dff)), start=1):
                part = random_q8([*self.key, tag, e], per, cols)
                t.quants[e * per:(e + 1) * per] = part.quants
                t.scales[e * per:(e + 1) * per] = part.scales
            self.filled.add(e)
        return w


def random_activation(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal(n, dtype=np.float32)
    hot = rng.choice(n, size=max(1, int(n * OUTLIER_FRACTION)), replace=False)
    x[hot] *= np.float32(OUTLIER_GAIN)
    return x


@dataclass
class Row:
    shape: str
    op: str
    mode: str
    n: int
    max_abs: float
    max_rel: float
    nmse: float
    cosine: float
    max_ulp_f32: float
    bound_max: "float | None" = None
    bound_ok: "bool | None" = None
    bound_ratio: "float | None" = None   # bound_max / max_abs: how far the rigorous bound is from the observed
    argmax_ref: "int | None" = None
    argmax_mode: "int | None" = None
    argmax_agree: "bool | None" = None
    margin_ref: "float | None" = None
    margin_mode: "float | None" = None


def _row(shape: str, op: str, mode: Mode, y: np.ndarray, y0: np.ndarray) -> Row:
    floor = REL_FLOOR * float(np.max(np.abs(y0)))
    return Row(shape=shape, op=op, mode=mode.value, n=int(y.size), max_abs=metrics.max_abs(y, y0),
               max_rel=metrics.max_rel(y, y0, floor), nmse=metrics.nmse(y, y0), cosine=metrics.cosine(y, y0),
               max_ulp_f32=metrics.max_ulp_f32(y, y0))


def _with_argmax(row: Row, y: np.ndarray, y0: np.ndarray) -> Row:
    ref, own = argmax_report(y0), argmax_report(y)
    row.argmax_ref, row.argmax_mode = ref.index, argmax_first(y)
    row.argmax_agree = row.argmax_ref == row.argmax_mode
    row.margin_ref, row.margin_mode = ref.margin, own.margin
    return row


def _gemv_rows(shape: ShapeSet, op: str, w: Q8Tensor, x: np.ndarray, modes: list[Mode], argmax: bool) -> list[Row]:
    y0 = q8_matmul(x, w, Mode.DEQUANT)
    rows = []
    for mode in modes:
        y = y0 if mode is Mode.DEQUANT else q8_matmul(x, w, mode)
        row = _row(shape.name, op, mode, y, y0)
        bound = q8_matmul_mode_bound(x, w, mode)
        err = np.abs(y - y0)
        row.bound_max = float(bound.max())
        row.bound_ok = bool(np.all(err <= bound))
        row.bound_ratio = float(bound.max() / row.max_abs) if row.max_abs > 0 else None
        rows.append(_with_argmax(row, y, y0) if argmax else row)
    return rows


@dataclass
class Layer:
    attn_norm: np.ndarray
    wq: Q8Tensor
    wk: Q8Tensor
    wv: Q8Tensor
    wo: Q8Tensor
    q_norm: np.ndarray
    k_norm: np.ndarray
    ffn_norm: np.ndarray
    moe: LazyMoe
    k_cache: np.ndarray     # (kv_len - 1, kv_dim) earlier positions
    v_cache: np.ndarray


def _layer(shape: ShapeSet, seed: int) -> Layer:
    rng = _rng(seed, shape.name, "layer")
    key = lambda name: _key(seed, shape.name, "layer", name)  # noqa: E731
    norm = lambda n: (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)  # noqa: E731
    return Layer(
        attn_norm=norm(shape.d), wq=random_q8(key("wq"), shape.q_dim, shape.d),
        wk=random_q8(key("wk"), shape.kv_dim, shape.d), wv=random_q8(key("wv"), shape.kv_dim, shape.d),
        wo=random_q8(key("wo"), shape.d, shape.q_dim),
        q_norm=norm(shape.head_dim), k_norm=norm(shape.head_dim), ffn_norm=norm(shape.d),
        moe=LazyMoe(shape, key("moe")),
        k_cache=rng.standard_normal((shape.kv_len - 1, shape.kv_dim), dtype=np.float32),
        v_cache=rng.standard_normal((shape.kv_len - 1, shape.kv_dim), dtype=np.float32),
    )


def decode_layer(shape: ShapeSet, layer: Layer, lm_head: Q8Tensor, final_norm: np.ndarray, x: np.ndarray,
                 mode: Mode) -> np.ndarray:
    """One decode step of one layer at position kv_len - 1, then the final norm and LM head: logits (vocab,).
    Every Q8 product and the MoE use `mode`; float32 buffers between kernels are rounded to float32."""
    f32 = lambda v: np.asarray(v, dtype=np.float32)  # noqa: E731
    pos = shape.kv_len - 1
    xn = f32(rms_norm(x, layer.attn_norm, shape.rms_eps))
    q = f32(q8_matmul(xn, layer.wq, mode))
    k = f32(q8_matmul(xn, layer.wk, mode))
    v = f32(q8_matmul(xn, layer.wv, mode))
    q = f32(qk_norm_rope(q, layer.q_norm, pos, shape.rope_theta, shape.head_dim, shape.rms_eps))
    k = f32(qk_norm_rope(k, layer.k_norm, pos, shape.rope_theta, shape.head_dim, shape.rms_eps))
    kc = np.vstack([layer.k_cache, k[None]])
    vc = np.vstack([layer.v_cache, v[None]])
    attn = f32(decode_attention(q, kc, vc, shape.n_head, shape.n_kv, shape.head_dim))
    h = f32(x + f32(q8_matmul(attn, layer.wo, mode)))
    hn = f32(rms_norm(h, layer.ffn_norm, shape.rms_eps))
    h2 = f32(h + f32(moe_ffn(hn, layer.moe.ensure(hn), mode)))
    return q8_matmul(f32(rms_norm(h2, final_norm, shape.rms_eps)), lm_head, mode)


def shape_rows(shape: ShapeSet, modes: list[Mode], seed: int) -> list[Row]:
    rows: list[Row] = []
    rng = _rng(seed, shape.name, "gemv")
    x_d = random_activation(rng, shape.d)
    x_q = random_activation(rng, shape.q_dim)
    for op, (n_out, k_in), x in (("q_proj", (shape.q_dim, shape.d), x_d), ("k_proj", (shape.kv_dim, shape.d), x_d),
                                 ("v_proj", (shape.kv_dim, shape.d), x_d), ("o_proj", (shape.d, shape.q_dim), x_q)):
        rows += _gemv_rows(shape, op, random_q8(_key(seed, shape.name, op), n_out, k_in), x, modes, argmax=False)
    lm_head = random_q8(_key(seed, shape.name, "lm_head"), shape.vocab, shape.d)
    rows += _gemv_rows(shape, "lm_head", lm_head, x_d, modes, argmax=True)

    layer = _layer(shape, seed)
    x_moe = random_activation(_rng(seed, shape.name, "moe_x"), shape.d)
    moe = layer.moe.ensure(x_moe)
    ref = moe_trace(x_moe, moe, Mode.DEQUANT)
    for mode in modes:
        y = ref.out if mode is Mode.DEQUANT else moe_ffn(x_moe, moe, mode)
        rows.append(_row(shape.name, "moe_ffn", mode, y, ref.out))

    final_norm = (1.0 + 0.1 * _rng(seed, shape.name, "final_norm").standard_normal(shape.d)).astype(np.float32)
    x_tok = random_activation(_rng(seed, shape.name, "layer_x"), shape.d)
    logits0 = decode_layer(shape, layer, lm_head, final_norm, x_tok, Mode.DEQUANT)
    for mode in modes:
        y = logits0 if mode is Mode.DEQUANT else decode_layer(shape, layer, lm_head, final_norm, x_tok, mode)
        rows.append(_with_argmax(_row(shape.name, "decode_layer", mode, y, logits0), y, logits0))
    return rows


COLUMNS = [("shape", "shape"), ("op", "op"), ("mode", "mode"), ("max_abs", "max abs"), ("max_rel", "max rel"),
           ("nmse", "NMSE"), ("cosine", "cosine"), ("bound_max", "bound"),
           ("bound_ok", "within bound"), ("bound_ratio", "bound/obs"), ("argmax_agree", "argmax agrees"),
           ("margin_ref", "top1-top2 (dequant)")]


def _cosine_text(r: Row) -> str:
    # 1 - cosine carries the information when cosine rounds to 1 at 3 digits; within float64 rounding it is 1
    return "1" if r.cosine >= 1.0 - 1e-15 else f"1-{1.0 - r.cosine:.2e}" if r.cosine > 0.999 else f"{r.cosine:.4f}"


def _cell(r: Row, key: str) -> str:
    v = getattr(r, key)
    if key == "cosine":
        return _cosine_text(r)
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return fmt(v)


def table(rows: list[Row], seed: int) -> Table:
    """The one table of the report: Markdown and console render it."""
    t = Table([title for _, title in COLUMNS], title=f"reference: int8 modes vs DEQUANT (seed {seed})")
    for r in rows:
        t.add([_cell(r, key) for key, _ in COLUMNS], FAIL if r.bound_ok is False else None)
    return t


def report_blocks(rows: list[Row], seed: int, elapsed: float, header: dict) -> list[Block]:
    return [Heading("qconform reference report: int8 modes against DEQUANT", 1),
            Items([f"seed: {seed} (replay: `qconform report --backend reference --seed {seed}`)",
                   f"shapes: {', '.join(header['shapes'])}; modes: {', '.join(header['modes'])}",
                   f"max rel divides by max(|ref|, {REL_FLOOR:g} * max|ref|); bound = reference.bounds (rigorous, per "
                   "output); bound/obs = bound max over observed max", f"elapsed: {elapsed:.1f} s"]),
            table(rows, seed)]


def run(shapes: list[ShapeSet], modes: list[Mode], seed: int, out_dir: Path) -> int:
    """Compute the report, print it, write report.json and report.md under out_dir; 0 unless a bound fails."""
    modes = [Mode.parse(m) for m in modes]
    if not modes:
        raise ValueError("modes: empty mode list")
    print(f"qconform reference report: seed {seed}")
    start = time.perf_counter()
    rows: list[Row] = []
    timings = {}
    for shape in shapes:
        t0 = time.perf_counter()
        rows += shape_rows(shape, modes, seed)
        timings[shape.name] = round(time.perf_counter() - t0, 3)
        print(f"  {shape.name}: {timings[shape.name]:.1f} s")
    elapsed = time.perf_counter() - start
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    header = {"shapes": [s.name for s in shapes], "modes": [m.value for m in modes]}
    doc = {"backend": "reference", "seed": seed, **header, "elapsed_s": round(elapsed, 3), "shape_seconds": timings,
           "rel_floor": REL_FLOOR, "shape_sets": {s.name: s.as_dict() for s in shapes},
           "rows": [vars(r) for r in rows]}
    # inf/nan as strings (valid JSON), written beside the target and renamed over it (as the kernel reports)
    atomic_write(out_dir / "report.json", json.dumps(finite_json(doc), indent=1, default=float, allow_nan=False) + "\n")
    atomic_write(out_dir / "report.md", markdown(report_blocks(rows, seed, elapsed, header)))
    console([table(rows, seed)], width=200)
    print(f"report.json and report.md written ({elapsed:.1f} s)")
    failed = [r for r in rows if r.bound_ok is False]
    for r in failed:
        print(f"BOUND VIOLATED: {r.shape} {r.op} {r.mode}: max abs {r.max_abs:.3g} > bound (max {r.bound_max:.3g})")
    return 1 if failed else 0
