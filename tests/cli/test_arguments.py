"""One rule per kind of argument, on every command (harness.cli.options): the same value is accepted or refused
everywhere, and the message names the option. Each refusal has its accepted counterpart."""
from __future__ import annotations

import argparse

import pytest

from harness.cli import main
from harness.cli.options import jobs, seed, token_list, usable_cores

SEEDED = [["report", "--backend", "reference"], ["check", "--source", "x.cu"], ["mutate", "--source", "x.cu"],
          ["generate"], ["make-model", "--preset", "tiny", "--out", "m.gguf"],
          ["replay-launch", "--lane", "fast", "--fed", "1", "--launch", "0"]]


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
