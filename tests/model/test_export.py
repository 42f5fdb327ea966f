"""export-weights: the file set and sizes the seed's generation program reads, the kernels' layouts, verified."""
import re

import numpy as np
import pytest

import harness.model.export as export_mod
from harness.cli import main
from harness.model.checkpoint import CheckpointError, open_checkpoint
from harness.model.export import ExportError, export_weights

from ..seed import seed_source
from .ggufkit import rewrite

# `snprintf(p,512,"%s/wq%d.q",W,l); wq_q[l]=Li(p,(long)QD*E);` in the Rust string literal (quotes escaped)
_LOAD = re.compile(r'snprintf\(p,512,\\"%s/([a-z]+)(%d)?\.([qsf])\\",W(?:,l)?\); *'
                   r'[a-z_]+(?:\[l\])?=L([ifh])\(p,(.+?)\);')


def seed_files(config) -> dict[str, int]:
    """File name -> bytes, from the loads in emit_qwen30b_generate's main, sized with the model's #defines."""
    src = seed_source()
    body = src[src.index("pub fn emit_qwen30b_generate"):]
    body = body[:body.index("\npub fn ", 10)]
    c = config
    env = {"E": c.d_model, "QD": c.q_dim, "KD": c.kv_dim, "FF": c.d_expert, "NE": c.n_expert, "VOCAB": c.vocab,
           "HD": c.head_dim}
    out = {}
    loads = _LOAD.findall(body)
    assert len(loads) >= 20, "the seed's weight loads were not found"
    for stem, per_layer, ext, loader, count in loads:
        n = eval(count.replace("(long)", "").replace("/", "//"), {}, dict(env))
        size = n if loader == "i" else 4 * n
        for layer in (range(c.n_layer) if per_layer else [""]):
            out[f"{stem}{layer}.{ext}"] = size
    return out


@pytest.fixture(scope="module")
def exported(tiny_gguf, tmp_path_factory):
    out = tmp_path_factory.mktemp("exp") / "weights"
    res = export_weights(tiny_gguf, out, progress=False)
    return res, open_checkpoint(tiny_gguf)


def test_file_set_and_sizes_are_the_seeds(exported):
    res, ck = exported
    want = seed_files(ck.config)
    extras = {"manifest.json", "tokens.json"} | {f"wr{l}.rf" for l in range(ck.config.n_layer)}
    got = {p.name: p.stat().st_size for p in res.folder.iterdir() if p.name not in extras}
    assert got == want
    assert res.files == len(want) + len(extras) - 1        # every file but the manifest has a SHA-256 in it


def test_contents_are_the_kernels_layout(exported):
    res, ck = exported
    w = ck.weights
    rd = lambda name, dt: np.fromfile(res.folder / name, dtype=dt)   # noqa: E731
    for layer in range(ck.config.n_layer):
        L = w.layer(layer)
        for stem, t in (("wq", L.wq), ("wo", L.wo), ("wr", L.router), ("wg", L.gate_exps), ("wd", L.down_exps)):
            assert np.array_equal(rd(f"{stem}{layer}.q", np.int8), t.quants.ravel()), (stem, layer)
            assert np.array_equal(rd(f"{stem}{layer}.s", "<f4"), t.scales.ravel()), (stem, layer)
        assert np.array_equal(rd(f"aqn{layer}.f", "<f4"), L.q_norm)
        assert np.array_equal(rd(f"fn{layer}.f", "<f4"), L.ffn_norm)
    assert np.array_equal(rd("emb.q", np.int8), w.token_embd.quants.ravel())
    assert np.array_equal(rd("wout.s", "<f4"), w.output.scales.ravel())
    assert np.array_equal(rd("on.f", "<f4"), w.output_norm)
    # expert-major: expert 3's down rows start at 3 * d_model
    c = ck.config
    wd = rd("wd1.q", np.int8).reshape(c.n_expert * c.d_model, c.d_expert)
    assert np.array_equal(wd[3 * c.d_model:4 * c.d_model], w.layer(1).down_exps.quants[3 * c.d_model:4 * c.d_model])


def test_tied_output_exports_the_embedding(tiny1_gguf, tmp_path):
    src = rewrite(tiny1_gguf, tmp_path / "tied.gguf", drop_tensors=("output.weight",))
    res = export_weights(src, tmp_path / "w", progress=False)
    assert (res.folder / "wout.q").read_bytes() == (res.folder / "emb.q").read_bytes()


def test_verification_catches_a_bad_write(tiny1_gguf, tmp_path, monkeypatch):
    """Negative control: a writer that flips one quant is caught by the read-back, and nothing is left."""
    real = export_mod._write_q8

    def flipped(ck, item, folder, bar, digests):
        real(ck, item, folder, bar, digests)
        if item.stem == "wu0":
            with open(folder / "wu0.q", "r+b") as fh:
                fh.seek(1234)
                b = fh.read(1)
                fh.seek(1234)
                fh.write(bytes([b[0] ^ 1]))
    monkeypatch.setattr(export_mod, "_write_q8", flipped)
    with pytest.raises(ExportError, match=r"wu0.q/.s: row 2 column 210"):
        export_weights(tiny1_gguf, tmp_path / "w", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_bad_input_writes_nothing(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGML" + bytes(64))
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        export_weights(bad, tmp_path / "w", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.gguf"]


def test_never_overwrites(tiny1_gguf, tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(ValueError, match="already exists"):
        export_weights(tiny1_gguf, out, progress=False)
    assert [p.name for p in out.iterdir()] == ["keep"]


def test_cli(tiny1_gguf, tmp_path, capsys):
    assert main(["export-weights", str(tiny1_gguf), "--out", str(tmp_path / "w"), "--no-progress"]) == 0
    assert "verified against gguf-py" in capsys.readouterr().out
    assert main(["export-weights", str(tmp_path / "missing.gguf"), "--out", str(tmp_path / "v")]) == 2
    assert "model: no such file" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ open_exported
def test_exported_folder_is_the_same_model_as_views(exported):
    from harness.model.exported import open_exported
    from harness.model.synthetic import resolve_model
    res, ck = exported
    ex = open_exported(res.folder, verify=True)
    assert ex.config == ck.config and ex.tokens == ck.tokens
    ex.weights.check()
    for layer in range(ck.config.n_layer):
        a, b = ex.weights.layer(layer), ck.weights.layer(layer)
        for key, value in vars(b).items():
            got = getattr(a, key)
            same = (np.array_equal(got.quants, value.quants) and np.array_equal(got.scales, value.scales)
                    if hasattr(value, "quants") else np.array_equal(got, value))
            assert same, (layer, key)
        assert isinstance(a.gate_exps.quants, np.memmap)          # mapped, not copied
    assert resolve_model(str(res.folder)) == res.folder
    assert open_checkpoint(res.folder).sha256() == ex.sha256()       # --model accepts the folder


def test_exported_folder_damage_is_refused(exported, tmp_path):
    import shutil

    from harness.model.exported import open_exported
    from harness.model.layout import SAMPLE_BYTES, SAMPLE_CHUNKS
    res, _ = exported
    bad = tmp_path / "bad"
    shutil.copytree(res.folder, bad)
    open_exported(bad)                                            # negative control: untouched, it opens

    def flip(name: str, offset: int) -> None:
        with open(bad / name, "r+b") as fh:                       # same size, one byte changed
            fh.seek(offset)
            b = fh.read(1)
            fh.seek(offset)
            fh.write(bytes([b[0] ^ 4]))

    flip("wu1.q", 77)                                             # inside the first sampled chunk
    with pytest.raises(CheckpointError, match="wu1.q: its sampled SHA-256 differs"):
        open_exported(bad)
    with pytest.raises(CheckpointError, match="wu1.q: SHA-256"):
        open_exported(bad, verify="full")
    flip("wu1.q", 77)                                             # restored
    open_exported(bad)
    # a byte between two sampled chunks: the fast path cannot see it, the full check does
    size = (bad / "wu1.q").stat().st_size
    assert size > SAMPLE_CHUNKS * SAMPLE_BYTES, "the file must be sampled, not hashed whole, for this check"
    gap = SAMPLE_BYTES + ((size - SAMPLE_BYTES) // (SAMPLE_CHUNKS - 1) - SAMPLE_BYTES) // 2
    flip("wu1.q", gap)
    open_exported(bad)
    with pytest.raises(CheckpointError, match="wu1.q: SHA-256"):
        open_exported(bad, verify=True)
    flip("wu1.q", gap)
    # the probe: the LM head overwritten by other bytes of the same size
    n = (bad / "wout.q").stat().st_size
    (bad / "wout.q").write_bytes(np.random.default_rng(3).integers(-127, 128, n, dtype=np.int8).tobytes())
    with pytest.raises(CheckpointError, match="wout.q: its sampled SHA-256 differs"):
        open_exported(bad)
    shutil.copy(res.folder / "wout.q", bad / "wout.q")
    (bad / "wd0.s").write_bytes(b"\0" * 8)
    with pytest.raises(CheckpointError, match=r"wd0.s: 8 bytes, the manifest records"):
        open_exported(bad)
    (bad / "manifest.json").write_text("{}")
    with pytest.raises(CheckpointError, match="format None"):
        open_exported(bad)
