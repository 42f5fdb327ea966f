"""`qconform report` on emu and `qconform replay`: files, rows, exit status, the seed printed."""
from __future__ import annotations

import json

from harness.cli import main


def test_report_on_emu_writes_json_md_html(tmp_path, capsys):
    out = tmp_path / "rep"
    rc = main(["report", "--backend", "emu", "--shapes", "tiny", "--modes", "int8act", "--families",
               "embed,argmax,moe", "--seed", "42", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 0 and "seed 42" in err
    doc = json.loads((out / "report.json").read_text())
    assert doc["meta"]["seed"] == 42 and doc["summary"]["fail"] == 0
    kernels = {r["kernel"] for r in doc["rows"]}
    assert {"gk_embed", "gk_argmax_adv", "moe_gate_up_silu", "moe_topk_idx"} <= kernels
    need = {"case", "kernel", "mode", "shape", "seed", "backend", "source_sha256", "verdict", "metrics", "budget",
            "margin", "reason", "replay"}
    for r in doc["rows"]:
        assert need <= set(r)
    gemv = next(r for r in doc["rows"] if r["kernel"] == "moe_gate_up_silu")
    assert {"max_abs", "max_rel", "nmse", "max_ulp", "cosine", "worst_index"} <= set(gemv["metrics"])
    assert gemv["error_distribution"]["counts"] and 0 < gemv["margin"] < 1
    md = (out / "report.md").read_text()
    assert "| `moe_gate_up_silu` | int8act | **pass**" in md
    html = (out / "report.html").read_text()
    with_errors = {(r["kernel"], r["mode"]) for r in doc["rows"] if (r["error_distribution"] or {}).get("counts")}
    assert html.count("<svg") >= len(with_errors) >= 4
    assert all(f"<code>{k}</code>" in html for k in kernels)


def test_replay_prints_seed_and_full_comparison(capsys):
    rc = main(["replay", "gk_gemv[int8act,tiny,lm_head,gauss,seed=77]", "--backend", "emu"])
    out = capsys.readouterr().out
    assert rc == 0 and "default_rng(77)" in out and "token (greedy argmax)" in out and "budget" in out


def test_replay_refuses_unknown_case():
    assert main(["replay", "gk_gemv[int8act,tiny,nowhere,gauss,seed=77]", "--backend", "emu"]) == 2
