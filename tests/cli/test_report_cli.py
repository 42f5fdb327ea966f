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


def test_lm_head_near_tie_flips_in_int8act_and_holds_in_twopass(emu):
    """Two logits a sub-int8-step term apart: single-pass int8 cannot see the term (an explained tie), the
    two-pass residual and f32 activations keep the greedy token (pass)."""
    from emitters.registry import emit
    from harness.cases.names import cases_for_contract
    from harness.judging.core import judge_case
    from reference.modes import Mode
    verdicts = {}
    for mode in (Mode.INT8_ACT, Mode.TWO_PASS_INT8, Mode.DEQUANT):
        src = emit("matmul", mode, "tiny")
        kernel = "k0_q8gemv" if mode is Mode.DEQUANT else "k0_q8dp4a"
        c = src.contract(kernel)
        module = emu.load(src.code)
        out = []
        for seed in (1, 2):
            case = cases_for_contract(c, "tiny", seed, instances=["lm_head"], variants=["near-tie"])[0]
            res = judge_case(module, case, c)
            tok = next(x for x in res.comparisons if x.output.startswith("token"))
            out.append((res.verdict, tok.verdict, tok.reason))
        verdicts[mode] = out
    assert all(v == "tie" and t == "tie" and "near-tie" in r for v, t, r in verdicts[Mode.INT8_ACT])
    assert all(v == "pass" for v, _, _ in verdicts[Mode.TWO_PASS_INT8] + verdicts[Mode.DEQUANT])


def test_reference_report_json_stays_valid_with_non_finite_metrics(tmp_path, monkeypatch, capsys):
    """report.json of the reference backend is strict JSON (inf/nan written as strings) and leaves no temp file."""
    from harness.reports import reference_modes as reference_report
    from reference.modes import Mode
    from reference.shapes import TINY

    def rows(shape, modes, seed):
        return [reference_report.Row(shape=shape.name, op="q_proj", mode=Mode.INT8_ACT.value, n=4, max_abs=1.0,
                                     max_rel=float("inf"), nmse=float("nan"), cosine=1.0, max_ulp_f32=2.0)]

    monkeypatch.setattr(reference_report, "shape_rows", rows)
    assert reference_report.run(shapes=[TINY], modes=[Mode.INT8_ACT], seed=3, out_dir=tmp_path) == 0
    capsys.readouterr()

    def refuse(token):
        raise AssertionError(f"report.json holds the non-JSON constant {token}")

    doc = json.loads((tmp_path / "report.json").read_text(), parse_constant=refuse)
    assert doc["rows"][0]["max_rel"] == "inf" and doc["rows"][0]["nmse"] == "nan"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]
