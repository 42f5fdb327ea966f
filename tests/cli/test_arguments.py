"""One rule per kind of argument, on every command (harness.cli.options): the same value is accepted or refused
everywhere, and the message names the option. Each refusal has its accepted counterpart."""
from __future__ import annotations

import argparse

import pytest

from harness.cli import main
from harness.cli.options import jobs, seed, token_list, usable_cores

SEEDED = [["report", "--backend", "reference"], ["check", "--source", "x.cu"], ["mutate", "--source", "x.cu"],
          ["generate"], ["make-model", "--preset", "tiny", "--out", "m.gguf"],
          ["replay-launch", "--lane", "fast", "--fed", "1", "--launch", "0"], ["racescan", "x.cu"]]


def usage_error(argv, capsys) -> str:
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv", SEEDED, ids=lambda a: a[0])
@pytest.mark.parametrize("bad", ["-1", "4294967296", "x"])
def test_every_command_refuses_the_same_seeds_naming_the_option(argv, bad, capsys):
    err = usage_error(argv + [f"--seed={bad}"], capsys)
    assert "argument --seed" in err and bad.lstrip("-") in err


def test_the_seed_rule_accepts_its_range():
    assert seed("0") == 0 and seed("4294967295") == 2**32 - 1
    with pytest.raises(argparse.ArgumentTypeError):
        seed("-1")


def test_token_lists_are_read_strictly(capsys):
    assert token_list("1, 2,3") == [1, 2, 3]
    for bad, why in (("1,,2", "entry 2 of '1,,2' is empty"), ("1,x", "'x' is not an integer"),
                     ("-3", "token ids are >= 0"), ("", "entry 1 of '' is empty")):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            token_list(bad)
    err = usage_error(["generate", "--prompt-tokens", "1,,2"], capsys)
    assert "argument --prompt-tokens" in err and "is empty" in err


def test_replay_launch_names_its_own_option(capsys):
    assert main(["replay-launch", "--lane", "fast", "--fed", "1,2,99999", "--launch", "0", "--backend", "emu"]) == 2
    err = capsys.readouterr().err
    assert "--fed: token 99999 outside the model's vocabulary" in err and "--prompt-tokens" not in err


def test_model_positions_zero_is_refused(capsys):
    err = usage_error(["report", "--inputs-from", "m.gguf", "--model-positions", "0"], capsys)
    assert "argument --model-positions: expected a positive integer, got 0" in err
    assert main(["report", "--backend", "reference", "--model-positions", "3"]) == 2       # without --inputs-from
    assert "--model-positions: applies to --inputs-from" in capsys.readouterr().err


def test_jobs_are_capped_at_the_cores_with_a_warning(capsys):
    cores = usable_cores()
    assert jobs(str(cores)) == cores and capsys.readouterr().err == ""
    assert jobs("1000") == cores
    assert f"-j 1000: this machine gives the run {cores} core(s); using -j {cores}" in capsys.readouterr().err
    assert "expected a positive integer" in usage_error(["mutate", "--source", "x.cu", "-j", "0"], capsys)


def test_tokens_past_the_models_context_are_refused_before_decoding(tmp_path, capsys):
    out = tmp_path / "g"
    assert main(["generate", "--tokens", "40960", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--tokens: the prompt (3 tokens) and 40960 generated tokens need 40963 positions, past the model's " \
           "context of 40960" in err
    assert not out.exists()
    err = usage_error(["generate", "--tokens", "0"], capsys)
    assert "argument --tokens: expected a positive integer, got 0" in err


@pytest.mark.parametrize("argv", [["--sample", "0"], ["--time-limit", "0"], ["--min-score", "1.5"]])
def test_mutate_numbers(argv, capsys):
    assert "argument " + argv[0] in usage_error(["mutate", "--source", "x.cu"] + argv, capsys)


def test_byte_tokens_print_escaped_once(tmp_path, capsys):
    """Token 164 of the byte-level vocabulary is the byte 0xa4 (not valid UTF-8 alone): shown as \\xa4, the
    four characters, on the console and in report.json; 833 is plain text."""
    import json
    assert main(["generate", "--prompt-tokens", "165,200", "--tokens", "3", "--lanes", "exact,precise",
                 "--out", str(tmp_path / "g")]) == 0
    out = capsys.readouterr().out
    assert "exact tokens: 164[\\xa4] 177[\\xb1] 833[fg]" in out and "\\\\x" not in out
    doc = json.loads((tmp_path / "g" / "report.json").read_text())
    assert doc["exact_pieces"][:2] == ["\\xa4", "\\xb1"]


def test_emu_schedule_rules(capsys):
    assert main(["generate", "--emu-schedule", "warp-greedy"]) == 2
    assert "--emu-schedule: applies to the kernels; give --backend emu" in capsys.readouterr().err
    assert "argument --emu-schedule: invalid choice" in usage_error(["generate", "--backend", "emu",
                                                                    "--emu-schedule", "greedy"], capsys)
    assert main(["generate", "--backend", "emu", "--emu-schedule", "warp-greedy", "--emu-schedules", "2"]) == 2
    assert "--emu-schedule: runs one schedule; leave out --emu-schedules" in capsys.readouterr().err


def test_unchecked_cases_are_grouped_by_reason():
    from harness.judging.records import grouped_reasons
    rows = [{"case": f"k[w-overflow,seed={i}]", "verdict": "unchecked",
             "reason": f"undefined: block ({i}, {i % 3}) has amax/127 = 131008.0 beyond float16's range"}
            for i in range(26)]
    rows += [{"case": "t[gauss]", "verdict": "unchecked", "reason": "KernelTimeout: block took 120 s"},
             {"case": "p[gauss]", "verdict": "pass", "reason": ""}]
    groups = grouped_reasons(rows, "unchecked")
    assert [(n, ex) for _, n, ex in groups] == [(26, "k[w-overflow,seed=0]"), (1, "t[gauss]")]
    assert groups[0][0] == rows[0]["reason"]                 # the example keeps its full reason


def test_an_unreadable_input_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    import os
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* y){ y[0] = 0.f; }\n")
    real = os.access
    # root reads any file whatever its mode, so the refusal is exercised with access() saying no
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(src) else real(p, mode, **kw))
    assert main(["check", "--source", str(src), "--out", str(tmp_path / "o")]) == 2
    assert f"--source: {src} is not readable (permission denied)" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    monkeypatch.undo()                                      # negative control: readable, it runs
    assert main(["check", "--source", str(src), "--backend", "emu", "--out", str(tmp_path / "o")]) == 3


def test_exported_weights_are_verified_when_generate_loads_them(tiny_model_file, tmp_path, capsys):
    folder = tmp_path / "w"
    assert main(["export-weights", str(tiny_model_file), "--out", str(folder), "--no-progress"]) == 0
    argv = ["generate", "--model", str(folder), "--tokens", "2", "--lanes", "exact,precise"]
    assert main(argv + ["--out", str(tmp_path / "g0")]) == 0             # negative control: untouched
    wout = folder / "wout.q"
    good = wout.read_bytes()
    wout.write_bytes(bytes(b ^ 0x55 for b in good))                      # same size, other bytes
    capsys.readouterr()
    assert main(argv + ["--out", str(tmp_path / "g1")]) == 2
    assert "wout.q: its sampled SHA-256 differs from the manifest's" in capsys.readouterr().err
    assert not (tmp_path / "g1").exists()
