"""`qconform report --backend reference`: files, fields, determinism, bounds, via the CLI too."""
from __future__ import annotations

import json

import numpy as np

from harness.reports import reference_modes as reference_report
from harness.cli import main
from reference.modes import Mode
from reference.shapes import TINY

OPS = ["q_proj", "k_proj", "v_proj", "o_proj", "lm_head", "moe_ffn", "decode_layer"]


def rows_without_timing(path):
    doc = json.loads((path / "report.json").read_text())
    return doc, doc["rows"]


def test_report_on_tiny_is_complete_seeded_and_deterministic(tmp_path, capsys):
    assert reference_report.run(shapes=[TINY], modes=list(Mode), seed=5, out_dir=tmp_path / "a") == 0
    out = capsys.readouterr().out
    assert "seed 5" in out
    doc, rows = rows_without_timing(tmp_path / "a")
    assert doc["seed"] == 5 and doc["shapes"] == ["tiny"] and doc["modes"] == ["dequant", "int8act", "twopass"]
    assert [(r["op"], r["mode"]) for r in rows] == [(op, m.value) for op in OPS for m in Mode]
    by = {(r["op"], r["mode"]): r for r in rows}
    for op in OPS:
        assert by[(op, "dequant")]["max_abs"] == 0
        assert 0 < by[(op, "twopass")]["max_abs"] < by[(op, "int8act")]["max_abs"], op
        assert by[(op, "int8act")]["cosine"] > 0.99
    for r in rows:
        if r["bound_ok"] is not None:
            assert r["bound_ok"], r
    assert by[("lm_head", "int8act")]["argmax_agree"] is not None and by[("lm_head", "dequant")]["margin_ref"] >= 0
    md = (tmp_path / "a" / "report.md").read_text()
    assert "seed: 5" in md and "| tiny | lm_head | twopass |" in md
    reference_report.run(shapes=[TINY], modes=list(Mode), seed=5, out_dir=tmp_path / "b")
    assert rows_without_timing(tmp_path / "b")[1] == rows
    reference_report.run(shapes=[TINY], modes=[Mode.INT8_ACT], seed=6, out_dir=tmp_path / "c")
    other = rows_without_timing(tmp_path / "c")[1]
    assert [r["mode"] for r in other] == ["int8act"] * len(OPS)
    assert other[0]["max_abs"] != by[("q_proj", "int8act")]["max_abs"]


def test_cli_reference_backend(tmp_path, capsys):
    rc = main(["report", "--backend", "reference", "--shapes", "tiny", "--modes", "dequant,twopass",
               "--seed", "3", "--out", str(tmp_path)])
    assert rc == 0
    assert "seed 3" in capsys.readouterr().out
    assert (tmp_path / "report.json").is_file() and (tmp_path / "report.md").is_file()


def test_random_q8_is_deterministic_per_key_and_gaussian():
    a = reference_report.random_q8([1, 2], 300, 64)
    assert np.array_equal(a.quants, reference_report.random_q8([1, 2], 300, 64).quants)
    assert not np.array_equal(a.quants, reference_report.random_q8([1, 3], 300, 64).quants)
    w = a.dequantize()
    assert abs(w.std() - reference_report.WEIGHT_STD) < 0.1 * reference_report.WEIGHT_STD


def test_a_violated_bound_fails_the_report(tmp_path, monkeypatch, capsys):
    # negative control: a bound that is too small (zero) must turn the exit status to 1 and name the row
    monkeypatch.setattr(reference_report, "q8_matmul_mode_bound", lambda x, w, mode: np.zeros(w.rows))
    assert reference_report.run(shapes=[TINY], modes=[Mode.INT8_ACT], seed=8, out_dir=tmp_path) == 1
    assert "BOUND VIOLATED: tiny q_proj int8act" in capsys.readouterr().out
