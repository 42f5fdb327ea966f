"""Export a checkpoint as the raw weight files the seed's generation program loads (emit_qwen30b_generate's
``main``): int8 quants (``.q``), float32 block scales (``.s``) and float32 norm weights (``.f``), every matrix
row-major (out, in) and the experts expert-major, as its kernels index them.

Files, with E = d_model, QD = q_dim, KD = kv_dim, FF = d_expert, NE = experts, V = vocab:
``emb.q/.s`` (V x E); per layer l ``an{l}.f fn{l}.f`` (E), ``aqn{l}.f akn{l}.f`` (head_dim), ``wq{l}`` (QD x E),
``wk{l} wv{l}`` (KD x E), ``wo{l}`` (E x QD), ``wr{l}`` (NE x E: the Q8_0 router the kernels read),
``wg{l} wu{l}`` (NE*FF x E), ``wd{l}`` (NE*E x FF), each ``.q/.s``; then ``on.f`` (E) and ``wout.q/.s`` (V x E).
Beside them, not read by the seed's program: ``wr{l}.rf`` (the float router as the checkpoint stores it, when
it is a float type), ``tokens.json`` (the vocabulary) and ``manifest.json`` (format, config, metadata, each
file's tensor and shape, and every file's SHA-256). The folder is then a whole model in the kernels' own
layout, which ``harness.model.exported.open_exported`` maps without copying.

Streamed: a bounded chunk of rows is read from the mapping, split into quants and scales and appended; every
file is then read back and compared, chunk by chunk, with gguf-py's own dequantization of the GGUF tensor
(exact equality). Everything goes into a temporary folder renamed to the output at the end.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

from harness.cache import check_free_space, temp_sibling
from harness.interrupts import raise_if_interrupted
from reference.quant import QK, quantize_q8_0

from .checkpoint import CheckpointError, CheckpointHeader, float_vector, read_header, release_pages
from .layout import EXPORT_FORMAT, EXPORT_MANIFEST, EXPORT_TOKENS, OUTPUT, Q8_BLOCK, ROUTER_FLOAT_EXT, sampled_sha256
from harness.judging.progress import BYTES, Progress

CHUNK_BYTES = 8 << 20        # GGUF bytes per streamed chunk (its float32 temporaries are ~16x that)


class ExportError(RuntimeError):
    """The files written do not read back as the checkpoint's weights (a bug or a failing disk)."""


@dataclass(frozen=True)
class ExportItem:
    stem: str          # file name without extension
    tensor: str        # GGUF tensor name
    kind: str          # "q8" (matrix), "router" (Q8_0 as the kernels read it) or "norm"
    shape: tuple       # (rows, cols) for q8/router, (n,) for norms


def export_plan(ck: CheckpointHeader) -> list[ExportItem]:
    c = ck.config
    E, QD, KD, FF, NE, V = c.d_model, c.q_dim, c.kv_dim, c.d_expert, c.n_expert, c.vocab
    items = [ExportItem("emb", "token_embd.weight", "q8", (V, E))]
    for l in range(c.n_layer):
        b = f"blk.{l}."
        items += [
            ExportItem(f"an{l}", b + "attn_norm.weight", "norm", (E,)),
            ExportItem(f"fn{l}", b + "ffn_norm.weight", "norm", (E,)),
            ExportItem(f"aqn{l}", b + "attn_q_norm.weight", "norm", (c.head_dim,)),
            ExportItem(f"akn{l}", b + "attn_k_norm.weight", "norm", (c.head_dim,)),
            ExportItem(f"wq{l}", b + "attn_q.weight", "q8", (QD, E)),
            ExportItem(f"wk{l}", b + "attn_k.weight", "q8", (KD, E)),
            ExportItem(f"wv{l}", b + "attn_v.weight", "q8", (KD, E)),
            ExportItem(f"wo{l}", b + "attn_output.weight", "q8", (E, QD)),
            ExportItem(f"wr{l}", b + "ffn_gate_inp.weight", "router", (NE, E)),
            ExportItem(f"wg{l}", b + "ffn_gate_exps.weight", "q8", (NE * FF, E)),
            ExportItem(f"wu{l}", b + "ffn_up_exps.weight", "q8", (NE * FF, E)),
            ExportItem(f"wd{l}", b + "ffn_down_exps.weight", "q8", (NE * E, FF)),
        ]
    items.append(ExportItem("on", "output_norm.weight", "norm", (E,)))
    items.append(ExportItem("wout", "token_embd.weight" if ck.tied_output else OUTPUT, "q8", (V, E)))
    return items


def _out_bytes(item: ExportItem) -> int:
    if item.kind == "norm":
        return 4 * item.shape[0]
    rows, cols = item.shape
    return rows * cols + rows * (cols // QK) * 4


def _blocks(ck: CheckpointHeader, item: ExportItem) -> np.ndarray:
    """The tensor's Q8_0 bytes as (rows, blocks*34) uint8, a view of the mapping."""
    rows, cols = item.shape
    return np.asarray(ck.tensors[item.tensor].data).reshape(rows, (cols // QK) * (QK + 2))


def _row_chunks(rows: int, row_bytes: int) -> Iterator[tuple[int, int]]:
    step = max(1, CHUNK_BYTES // max(row_bytes, 1))
    for r0 in range(0, rows, step):
        yield r0, min(rows, r0 + step)


class _Out:
    """A weight file being written, hashed as it goes (the manifest records every file's SHA-256)."""

    def __init__(self, path: Path, digests: dict):
        self.path, self.digests = path, digests
        self.fh = open(path, "wb")
        self.h = hashlib.sha256()

    def put(self, arr: np.ndarray) -> None:
        data = memoryview(np.ascontiguousarray(arr)).cast("B")
        self.fh.write(data)          # not ndarray.tofile, which turns an interrupt (SIGINT) into a TypeError
        self.h.update(data)

    def __enter__(self) -> "_Out":
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()
        self.digests[self.path.name] = self.h.hexdigest()


def _write_q8(ck: CheckpointHeader, item: ExportItem, folder: Path, bar: Progress, digests: dict) -> None:
    rows, cols = item.shape
    t = ck.tensors[item.tensor]
    blocks = _blocks(ck, item)
    rb = blocks.shape[1]
    with _Out(folder / f"{item.stem}.q", digests) as fq, _Out(folder / f"{item.stem}.s", digests) as fs:
        for r0, r1 in _row_chunks(rows, rb):
            rec = blocks[r0:r1].view(Q8_BLOCK)
            scales = rec["d"].astype("<f4")
            if not np.all(np.isfinite(scales)):
                bad = np.argwhere(~np.isfinite(scales))[0]
                raise CheckpointError(f"{ck.path}: tensor {item.tensor!r}: block scale ({r0 + bad[0]}, {bad[1]}) is "
                                      f"{scales[tuple(bad)]}; scales must be finite")
            fq.put(rec["qs"])
            fs.put(scales)
            release_pages(t, r0 * rb, r1 * rb)
            bar.advance((r1 - r0) * (cols + cols // QK * 4), item.stem)


def _write_item(ck: CheckpointHeader, item: ExportItem, folder: Path, bar: Progress, digests: dict) -> None:
    t = ck.tensors[item.tensor]
    if item.kind == "norm":
        with _Out(folder / f"{item.stem}.f", digests) as f:
            f.put(float_vector(item.tensor, t).astype("<f4"))
        bar.advance(_out_bytes(item), item.stem)
    elif item.kind == "router" and t.tensor_type != T.Q8_0:
        # the kernels read the Q8_0 quantization of the float router (bit-identical to gguf-py's); the float
        # router is kept beside it (not read by the seed's program) so the folder is the whole model
        router = float_vector(item.tensor, t)
        q8 = quantize_q8_0(router)
        for ext, arr in (("q", q8.quants), ("s", q8.scales.astype("<f4")), (ROUTER_FLOAT_EXT, router.astype("<f4"))):
            with _Out(folder / f"{item.stem}.{ext}", digests) as f:
                f.put(arr)
        bar.advance(_out_bytes(item), item.stem)
    else:
        _write_q8(ck, item, folder, bar, digests)


# ------------------------------------------------------------------------------------------------ verification
def _verify_item(ck: CheckpointHeader, item: ExportItem, folder: Path) -> None:
    """Read the written files back (chunk by chunk, plain reads: nothing stays resident) and compare them with
    gguf-py's dequantization of the GGUF tensor."""
    t = ck.tensors[item.tensor]
    if item.kind == "norm":
        got = np.fromfile(folder / f"{item.stem}.f", dtype="<f4")
        want = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1)
        if got.shape != item.shape or not np.array_equal(got, want.astype(np.float32)):
            raise ExportError(f"{item.stem}.f does not read back as {item.tensor}")
        return
    rows, cols = item.shape
    nb = cols // QK
    for ext, size in (("q", rows * cols), ("s", rows * nb * 4)):
        actual = (folder / f"{item.stem}.{ext}").stat().st_size
        if actual != size:
            raise ExportError(f"{item.stem}.{ext}: {actual} bytes written, {size} expected for {item.shape}")
    from_file = not (item.kind == "router" and t.tensor_type != T.Q8_0)
    # the float router's reference is gguf-py's own Q8_0 quantization of it
    source = _blocks(ck, item) if from_file else gguf.quants.quantize(float_vector(item.tensor, t), T.Q8_0)
    rb = source.shape[1]
    with open(folder / f"{item.stem}.q", "rb") as fq, open(folder / f"{item.stem}.s", "rb") as fs:
        for r0, r1 in _row_chunks(rows, rb):
            n = r1 - r0
            q = np.fromfile(fq, dtype=np.int8, count=n * cols).reshape(n, nb, QK)
            s = np.fromfile(fs, dtype="<f4", count=n * nb).reshape(n, nb, 1)
            want = gguf.quants.dequantize(np.asarray(source[r0:r1]), T.Q8_0).reshape(n, cols)
            if from_file:
                release_pages(t, r0 * rb, r1 * rb)
            got = (q * s).reshape(n, cols)
            if not np.array_equal(got, want):
                bad = np.argwhere(got != want)[0]
                raise ExportError(f"{item.stem}.q/.s: row {r0 + bad[0]} column {bad[1]} reads back as "
                                  f"{got[tuple(bad)]}, gguf-py dequantizes {item.tensor} to {want[tuple(bad)]}")


# ------------------------------------------------------------------------------------------------ driver
@dataclass(frozen=True)
class ExportResult:
    folder: Path
    files: int
    bytes: int
    seconds: float


def export_weights(path: "str | os.PathLike[str]", out: "str | os.PathLike[str]", *,
                   progress: bool = True, replace: bool = False) -> ExportResult:
    """Export to the folder `out`, which must not exist or be empty unless `replace` (then it is replaced as a
    whole once the new folder is complete)."""
    ck = read_header(path)
    out = Path(out)
    if not replace and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out: {out} already exists and is not an empty folder (give --force to replace it)")
    plan = export_plan(ck)
    total = sum(_out_bytes(i) for i in plan)
    out.parent.mkdir(parents=True, exist_ok=True)
    check_free_space(out.parent, total, "--out")
    tmp = temp_sibling(out)
    t0 = time.monotonic()
    try:
        tmp.mkdir()                # inside the try: an interrupt right after it still removes it
        digests: dict[str, str] = {}
        with Progress(total, progress, title=f"export-weights {ck.path.name}", unit=BYTES, interval_s=10.0) as bar:
            for item in plan:
                _write_item(ck, item, tmp, bar, digests)
                _verify_item(ck, item, tmp)
        if ck.raw_tokens is not None:
            text = json.dumps(ck.raw_tokens, ensure_ascii=False) + "\n"
            (tmp / EXPORT_TOKENS).write_text(text, encoding="utf-8")
            digests[EXPORT_TOKENS] = hashlib.sha256((tmp / EXPORT_TOKENS).read_bytes()).hexdigest()
        manifest = {
            "format": EXPORT_FORMAT, "source": ck.path.name, "source_bytes": ck.path.stat().st_size,
            "name": ck.name, "config": asdict(ck.config), "tied_output": ck.tied_output,
            "metadata": {k: v for k, v in ck.metadata.items() if not (isinstance(v, str) and v.startswith("<array"))},
            "files": {i.stem: {"tensor": i.tensor, "kind": i.kind, "shape": list(i.shape)} for i in plan},
            "sha256": dict(sorted(digests.items())),
            "bytes": {name: (tmp / name).stat().st_size for name in sorted(digests)},
            "sampled_sha256": {name: sampled_sha256(tmp / name) for name in sorted(digests)},
        }
        (tmp / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
        raise_if_interrupted()        # a signal a library swallowed: never commit an interrupted write
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(out, len(digests), total, time.monotonic() - t0)


def _swap_in(tmp: Path, out: Path) -> None:
    """Put the finished folder `tmp` at `out`, replacing what is there as a whole."""
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()
    if not out.exists():
        os.replace(tmp, out)
        return
    aside = temp_sibling(out)
    os.rename(out, aside)
    os.rename(tmp, out)
    if aside.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
    else:
        aside.unlink()
