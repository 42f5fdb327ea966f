"""Run a GGUF through llama.cpp (the optional extra ``llama``: llama-cpp-python) the way the comparison needs
it: float32 KV cache, flash attention off, one token per batch, the logits of every position kept; greedy
tokens and teacher-forced logits, to be judged like a lane against the exact lane.

llama.cpp's CPU matmuls for Q8_0 weights quantize the activation to Q8_0 (float16 block scales, round half away
from zero): an int8-activation computation, so its streams are judged with the derived bound of the ``fast``
lane (Int8Act) at the same step.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from harness.model.reference_lanes import ExternalStream

GGML_TYPE_F32 = 0
NAME = "llama.cpp"


class LlamaCppUnavailable(ValueError):
    """llama-cpp-python is not importable (the optional extra ``llama`` is not installed)."""


def import_llama():
    """The llama_cpp module, or LlamaCppUnavailable saying why."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise LlamaCppUnavailable(f"llama-cpp-python is not installed ({exc}); install the extra: "
                                  f"pip install 'qconform[llama]'") from None
    return llama_cpp


def load(path: "str | os.PathLike[str]", n_ctx: int):
    """A llama_cpp.Llama on the GGUF at path, configured for a comparison (module docstring). Raises ValueError
    naming the file when llama.cpp cannot load it."""
    llama_cpp = import_llama()
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--model: {path} is not a file")
    try:
        return llama_cpp.Llama(model_path=str(path), n_ctx=max(int(n_ctx), 8), n_batch=1, n_ubatch=1,
                               logits_all=True, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, flash_attn=False,
                               n_gpu_layers=0, n_threads=max(1, min(2, os.cpu_count() or 1)), seed=0,
                               verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise ValueError(f"llama.cpp could not load {path}: {exc}") from None


def _eval_logits(llm, tokens: list[int]) -> list[np.ndarray]:
    """Feed `tokens` one per batch from an empty context; the logits after each, float64."""
    llm.reset()
    llm.eval(tokens)
    return [np.array(llm.scores[i], dtype=np.float64) for i in range(len(tokens))]


def greedy(llm, prompt: list[int], n_tokens: int) -> list[int]:
    """Prefill the prompt, then n_tokens greedy tokens (argmax, first index on exact ties)."""
    llm.reset()
    llm.eval(prompt)
    out = [int(np.argmax(llm.scores[llm.n_tokens - 1]))]
    while len(out) < n_tokens:
        llm.eval([out[-1]])
        out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
    return out


def llama_streams(path, prompt: list[int], fed: list[int], n_tokens: int) -> list[ExternalStream]:
    """llama.cpp's free-running tokens and its teacher-forced logits over `fed` (the exact lane's sequence)."""
    llm = load(path, n_ctx=len(prompt) + n_tokens + 1)
    try:
        vocab = llm.n_vocab()
        tokens = greedy(llm, prompt, n_tokens)
        logits = _eval_logits(llm, fed)
    finally:
        llm.close() if hasattr(llm, "close") else None
    if logits and logits[0].shape != (vocab,):
        raise ValueError(f"llama.cpp returned logits of shape {logits[0].shape}, expected ({vocab},)")
    return [ExternalStream(name=NAME, tokens=tokens, logits=logits, bound_lane="fast")]
