"""`--compare llama.cpp`: the same GGUF through llama.cpp, judged like a lane (needs the extra 'llama')."""
import json
import sys
import time

import numpy as np
import pytest

from harness.cli import main
from harness.judging.registry import FAIL
from harness.model import llama_cpp
from harness.model.generation import run_generation


def _require_llama():
    try:
        return llama_cpp.import_llama()
    except llama_cpp.LlamaCppUnavailable as exc:
        pytest.skip(f"llama.cpp comparison needs the 'llama' extra: {exc}")


def test_missing_extra_is_a_clear_error(monkeypatch, tiny_gguf, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)          # import llama_cpp raises ImportError
    with pytest.raises(llama_cpp.LlamaCppUnavailable, match=r"pip install 'qconform\[llama\]'"):
        llama_cpp.import_llama()
    rc = main(["generate", "--model", str(tiny_gguf), "--compare", "llama.cpp", "--tokens", "2", "--out",
               str(tmp_path)])
    assert rc == 2 and "llama-cpp-python is not installed" in capsys.readouterr().err


def test_llama_cpp_agrees_with_the_exact_lane_on_the_tiny_model(tiny_gguf):
    """The synthetic model loads in llama.cpp; its greedy stream passes or ties against exact and its
    teacher-forced logits stay within the Int8Act (fast lane) bound, llama.cpp quantizing its activations."""
    _require_llama()
    from harness.model.checkpoint import open_checkpoint
    ckpt = open_checkpoint(tiny_gguf)
    prompt, n = [1, 2, 3], 8
    result = run_generation(ckpt.weights, prompt=prompt, n_tokens=n, lanes=("exact",), router_check=False,
                            external=lambda p, fed: llama_cpp.llama_streams(tiny_gguf, p, fed, n))
    ext = result.external[0]
    assert ext.name == "llama.cpp" and len(ext.tokens) == n
    assert ext.verdict != FAIL, ext.divergence
    assert ext.teacher.within_budget, ext.teacher.worst
    assert ext.teacher.steps == len(prompt) + n - 1


def test_llama_cpp_teacher_forced_logits_follow_the_context(tiny_gguf):
    """The logits llama.cpp returns per fed token are the ones of that position (not a stale buffer)."""
    _require_llama()
    llm = llama_cpp.load(tiny_gguf, n_ctx=8)
    a = llama_cpp._eval_logits(llm, [1, 2, 3])
    b = llama_cpp._eval_logits(llm, [1, 2, 4])
    assert np.array_equal(a[1], b[1]) and not np.array_equal(a[2], b[2])


def test_compare_command_writes_the_llama_stream(tiny_gguf, tmp_path):
    _require_llama()
    out = tmp_path / "g"
    rc = main(["generate", "--model", str(tiny_gguf), "--lanes", "exact,fast", "--tokens", "4", "--compare",
               "llama.cpp", "--no-router-effect", "--out", str(out)])
    doc = json.loads((out / "report.json").read_text())
    assert [s["name"] for s in doc["external"]] == ["llama.cpp"]
    assert doc["external"][0]["judged_with_bound_of"] == "fast"
    assert 0 <= doc["external"][0]["leading_tokens_equal_to_that_lane"] <= 4
    assert rc == (1 if doc["failed"] else 0)


# A stand-in for llama-cpp-python, found first on the child's path: it loads, or refuses the file, or dies the
# way a crashing native library does. It needs no llama extra, so these run everywhere.
_FAKE_LLAMA = """
import os, signal, time
__version__ = "0.0-stand-in"
MODE = os.environ.get("STAND_IN_LLAMA", "crash")
class Llama:
    def __init__(self, model_path, **kw):
        if MODE == "refuse":
            raise ValueError("failed to load model from " + model_path)
        if MODE == "hang-loading":
            time.sleep(3600)
        self.evals = 0
    def n_vocab(self):
        return 1024
    def reset(self):
        pass
    def eval(self, tokens):
        print("." * 80, flush=True)          # native libraries print; this must not count as progress
        self.evals += 1
        if MODE == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if MODE == "hang" and self.evals == 3:
            time.sleep(3600)
        if MODE == "slow":
            time.sleep(0.5)
    @property
    def n_tokens(self):
        return self.evals
    @property
    def scores(self):
        return [[0.0] * 1024] * (self.evals + 1)
"""


@pytest.fixture
def stand_in_llama(tmp_path, monkeypatch):
    pkg = tmp_path / "stand_in" / "llama_cpp"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(_FAKE_LLAMA)
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.syspath_prepend(str(pkg.parent))
    monkeypatch.setenv("PYTHONPATH", str(pkg.parent))
    return monkeypatch


def test_a_crash_of_llama_cpp_is_an_unchecked_stream_and_the_lanes_are_still_judged(stand_in_llama, tiny_gguf,
                                                                                     tmp_path, capsys):
    out = tmp_path / "g"
    rc = main(["generate", "--model", str(tiny_gguf), "--lanes", "exact,fast", "--tokens", "2", "--compare",
               "llama.cpp", "--no-router-effect", "--out", str(out)])
    doc = json.loads((out / "report.json").read_text())
    (ext,) = doc["external"]
    assert ext["verdict"] == "unchecked" and ext["tokens"] == []
    assert "died with SIGSEGV" in ext["reason"] and "0.0-stand-in" in ext["reason"]
    (fast,) = doc["lanes"]                                            # the fast lane, judged as ever
    assert fast["name"] == "fast" and fast["verdict"] in ("pass", "tie") and fast["teacher_forced"]["steps"] > 0
    assert rc == 0 and not doc["failed"]                              # the tool's limit is not a failure
    assert "llama.cpp: unchecked: llama.cpp (llama-cpp-python 0.0-stand-in) died with SIGSEGV" in capsys.readouterr().out
    assert "unchecked" in (out / "report.md").read_text()


def test_a_file_llama_cpp_refuses_is_a_clear_error(stand_in_llama, tiny_gguf, tmp_path, capsys):
    stand_in_llama.setenv("STAND_IN_LLAMA", "refuse")
    rc = main(["generate", "--model", str(tiny_gguf), "--tokens", "2", "--compare", "llama.cpp", "--out",
               str(tmp_path / "g")])
    err = capsys.readouterr().err
    assert rc == 2 and f"llama.cpp could not load {tiny_gguf}: failed to load model" in err


@pytest.mark.parametrize("mode, where", [("hang", "after loading and 2 of 6 token evaluations"),
                                         ("hang-loading", "while loading the file")])
def test_a_hang_of_llama_cpp_is_killed_and_its_stream_unchecked(stand_in_llama, tiny_gguf, mode, where):
    """A child that stops making progress is killed after the stall limit; where it stopped is said. (The limit
    leaves a loaded machine time to start the child's Python, which counts as loading.)"""
    stand_in_llama.setenv("STAND_IN_LLAMA", mode)
    start = time.monotonic()
    (stream,) = llama_cpp.llama_streams(tiny_gguf, [1, 2], [1, 2, 3], 2, stall_s=8)
    assert time.monotonic() - start < 60                    # not the stand-in's hour
    assert stream.tokens == [] and stream.unchecked
    assert f"made no progress for 8 s {where} and was killed" in stream.unchecked, stream.unchecked


def test_a_child_that_keeps_making_progress_is_not_killed(stand_in_llama, tiny_gguf):
    """Negative control of the stall limit: the limit is on the wait for the next token, not on the whole run. Six
    tokens of 0.5 s each take longer than the limit, and every one comes within it."""
    stand_in_llama.setenv("STAND_IN_LLAMA", "slow")
    start = time.monotonic()
    (stream,) = llama_cpp.llama_streams(tiny_gguf, [1, 2], [1, 2, 3], 2, stall_s=2.5)
    assert time.monotonic() - start > 2.5
    assert stream.unchecked is None and len(stream.tokens) == 2 and len(stream.logits) == 3


def test_compare_stall_needs_compare(tiny_gguf, tmp_path, capsys):
    rc = main(["generate", "--model", str(tiny_gguf), "--compare-stall", "5", "--out", str(tmp_path / "g")])
    assert rc == 2 and "--compare-stall: limits the --compare run; give --compare too" in capsys.readouterr().err
    assert main(["generate", "--compare", "llama.cpp", "--compare-stall", "0", "--out", str(tmp_path / "h")]) == 2
    assert "--compare-stall" in capsys.readouterr().err
    assert llama_cpp.STALL_S == 600                         # the default the option's help states
