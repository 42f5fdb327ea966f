"""Token exactness of the lanes (harness.model.generation), its verdicts, the report and `qconform generate`."""
import json

import numpy as np
import pytest

from harness.cli import main
from harness.judging.registry import FAIL, PASS, TIE
from harness.model.generation import bound_parts, exact_stats, judge_divergence, run_generation
from harness.model.reference_lanes import ExternalStream
from harness.model.teacher import kl_divergence
from harness.reports.generation import write_generation_report
from reference.decoder import generate, teacher_forced
from tests.model.weights import small_weights

PROMPT = [1, 2, 3]
N = 10


@pytest.fixture(scope="module")
def weights():
    return small_weights(0)


@pytest.fixture(scope="module")
def run(weights):
    return run_generation(weights, prompt=PROMPT, n_tokens=N)


def test_every_lane_passes_or_ties_and_the_report_is_written(run, tmp_path):
    assert [s.name for s in run.lanes] == ["precise", "fast", "flash", "twopass"]
    assert all(s.verdict in (PASS, TIE) for s in run.lanes)
    assert not run.failed
    for s in run.lanes:
        assert len(s.tokens) == N
        assert s.teacher.steps == len(PROMPT) + N - 1
        assert s.teacher.within_budget
        assert len(s.hidden_error) == 2 and len(s.per_step) == N
    paths = write_generation_report(tmp_path, run, pieces=[f"p{t}" for t in range(run.config.vocab)])
    doc = json.loads(paths[0].read_text())
    assert doc["exact_tokens"] == run.exact_tokens and doc["exact_pieces"][0] == f"p{run.exact_tokens[0]}"
    assert doc["router_effect"]["available"] is True
    html = paths[2].read_text()
    assert html.count("<svg") == len(run.lanes) + 1            # margin/bound per lane + hidden error per layer
    md = paths[1].read_text()
    assert "| precise |" in md
    # the bound and the observed error side by side per lane (md, html, json)
    fast = next(s for s in run.lanes if s.name == "fast").teacher
    assert "median step: error / bound" in md and "median step: error / bound" in html
    assert f"| {fast.median_step_error:.3g} / {fast.median_step_bound:.3g} |" in md
    lane = next(d for d in doc["lanes"] if d["name"] == "fast")["teacher_forced"]
    assert 1.0 <= lane["bound_over_error_min"] <= lane["bound_over_error_median"]


def test_free_running_stream_equals_an_independent_free_run(weights, run):
    for s in run.lanes:
        recs = generate(weights, s.name, PROMPT, N)
        assert s.tokens == [r.token for r in recs[len(PROMPT) - 1:]], s.name


def _exact(weights):
    exact = generate(weights, "exact", PROMPT, N)
    tokens = [r.token for r in exact[len(PROMPT) - 1:]]
    return exact, tokens, PROMPT + tokens[:-1]


def test_a_swapped_token_is_fail_above_the_bound_and_tie_below(weights):
    """Negative control: a stream that differs from exact where exact's gap exceeds the fast lane's bound must
    fail; where the gap is below the bound it is a tie."""
    exact, tokens, fed = _exact(weights)
    fast = bound_parts(teacher_forced(weights, "fast", fed), "fast", exact)
    step = len(PROMPT) - 1
    order = np.argsort(-exact[step].logits)
    far, near = int(order[-1]), int(order[1])
    verdict, div = judge_divergence([far] + tokens[1:], exact, fast, len(PROMPT))
    assert verdict == FAIL and div.index == 0 and div.exact_gap > div.bound
    verdict, div = judge_divergence([near] + tokens[1:], exact, fast, len(PROMPT))
    assert div.exact_gap == pytest.approx(exact[step].margin)
    assert verdict == (TIE if div.exact_gap <= div.bound else FAIL)
    assert judge_divergence(tokens, exact, fast, len(PROMPT)) == (PASS, None)


def test_a_broken_decoder_fails(weights):
    """Negative control: an external stream from a decoder with the wrong RoPE base (1e4 instead of 1e6),
    judged with the fast lane's bound, is a fail."""
    import dataclasses
    broken = dataclasses.replace(weights, config=dataclasses.replace(weights.config, rope_theta=10.0))
    exact, tokens, fed = _exact(weights)

    def external(prompt, fed_):
        recs = generate(broken, "exact", prompt, N)
        tf = teacher_forced(broken, "exact", fed_)
        return [ExternalStream("broken", [r.token for r in recs[len(prompt) - 1:]], [r.logits for r in tf], "fast")]

    result = run_generation(weights, prompt=PROMPT, n_tokens=N, lanes=("exact",), router_check=False,
                            external=external)
    ext = result.external[0]
    assert ext.verdict == FAIL and result.failed
    assert not ext.teacher.within_budget


def test_teacher_stats_of_identical_logits(weights):
    exact, _, fed = _exact(weights)
    stats = exact_stats(exact, [r.logits for r in exact], bound_parts(exact, "exact", exact))
    assert stats.kl_max == 0 and stats.top1_agreement == 1 and stats.max_logit_error == 0


def test_kl_divergence():
    a = np.array([0.0, np.log(3.0)])          # p = (1/4, 3/4)
    b = np.array([0.0, 0.0])                  # q = (1/2, 1/2)
    want = 0.25 * np.log(0.5) + 0.75 * np.log(1.5)
    assert kl_divergence(a, b) == pytest.approx(want, rel=1e-12)
    assert kl_divergence(a, a + 7.0) == pytest.approx(0.0, abs=1e-15)


def test_router_effect_unavailable_without_a_float_router():
    import dataclasses
    w = small_weights(1)
    stripped = dataclasses.replace(w, layer_source=lambda i: dataclasses.replace(w.layer(i), router_float=None))
    r = run_generation(stripped, prompt=[4], n_tokens=2, lanes=("exact",))
    assert not r.router.available and "Q8_0 only" in r.router.reason


# ------------------------------------------------------------------------------------------- the command
def test_generate_command_on_the_tiny_checkpoint(tiny_gguf, tmp_path, capsys):
    out = tmp_path / "gen"
    rc = main(["generate", "--model", str(tiny_gguf), "--backend", "reference", "--lanes", "exact,precise,twopass",
               "--prompt-tokens", "1,2,3", "--tokens", "4", "--out", str(out)])
    doc = json.loads((out / "report.json").read_text())
    assert rc == (1 if doc["failed"] else 0)
    assert [s["name"] for s in doc["lanes"]] == ["precise", "twopass"]
    assert len(doc["exact_pieces"]) == 4 and (out / "report.html").is_file()


@pytest.mark.parametrize("argv, message", [
    (["--lanes", "exact,slow"], "--lanes: unknown lane 'slow'"),
    (["--lanes", "fast,fast"], "--lanes: a lane is listed twice"),
    (["--prompt-tokens", "1,x"], "argument --prompt-tokens: entry 2 of '1,x': 'x' is not an integer token id"),
    (["--prompt-tokens", "1,99999"], "--prompt-tokens: token 99999 outside the model's vocabulary [0, 1024)"),
    (["--tokens", "0"], "argument --tokens: expected a positive integer, got 0"),
    (["--update-lock"], "--update-lock: applies to the kernels; give --backend emu, gpu or auto"),
    (["--backend", "emu", "--update-lock"], "--update-lock: give the lock file with --lock"),
    (["--lock", "x.lock"], "--lock: applies to the kernels; give --backend emu, gpu or auto"),
])
def test_generate_bad_arguments(tiny_gguf, tmp_path, capsys, argv, message):
    rc = main(["generate", "--model", str(tiny_gguf), "--out", str(tmp_path), *argv])
    assert rc == 2
    assert message in capsys.readouterr().err
