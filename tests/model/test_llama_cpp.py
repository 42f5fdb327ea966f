"""`--compare llama.cpp`: the same GGUF through llama.cpp, judged like a lane (needs the extra 'llama')."""
import json
import sys

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
