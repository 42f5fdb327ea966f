"""Run a GGUF through llama.cpp (the optional extra ``llama``: llama-cpp-python) the way the comparison needs
it: float32 KV cache, flash attention off, one token per batch, the logits of every position kept; greedy
tokens and teacher-forced logits, to be judged like a lane against the exact lane.

llama.cpp's CPU matmuls for Q8_0 weights quantize the activation to Q8_0 (float16 block scales, round half away
from zero): an int8-activation computation, so its streams are judged with the derived bound of the ``fast``
lane (Int8Act) at the same step.

llama.cpp runs in a child process (`python -m harness.model.llama_cpp JOB OUT`): a crash of the library (one
build of llama-cpp-python 0.3.36 dies in its AMX matmul on some CPUs) then ends only that process, and the
stream comes back unchecked with the signal and the library's version, while the lanes are still judged.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from harness.cache import scratch_folder
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


def _streams_here(path, prompt: list[int], fed: list[int], n_tokens: int) -> tuple[list[int], np.ndarray]:
    """In this process: llama.cpp's greedy tokens and its teacher-forced logits over `fed` (steps x vocab)."""
    llm = load(path, n_ctx=len(prompt) + n_tokens + 1)
    try:
        vocab = llm.n_vocab()
        tokens = greedy(llm, prompt, n_tokens)
        logits = _eval_logits(llm, fed)
    finally:
        llm.close() if hasattr(llm, "close") else None
    if logits and logits[0].shape != (vocab,):
        raise ValueError(f"llama.cpp returned logits of shape {logits[0].shape}, expected ({vocab},)")
    return tokens, np.array(logits, dtype=np.float64).reshape(len(fed), vocab)


def _child_env() -> dict:
    """The child finds this checkout's packages first, also where they are not installed."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def llama_streams(path, prompt: list[int], fed: list[int], n_tokens: int) -> list[ExternalStream]:
    """llama.cpp's free-running tokens and its teacher-forced logits over `fed` (the exact lane's sequence),
    computed in a child process (module docstring). A load error is a ValueError naming the file; a crash of
    the child is an unchecked stream with the reason."""
    version = getattr(import_llama(), "__version__", "unknown version")
    with scratch_folder("llama") as tmp:
        job, out = tmp / "job.json", tmp / "streams.npz"
        job.write_text(json.dumps({"model": str(path), "prompt": [int(t) for t in prompt],
                                   "fed": [int(t) for t in fed], "n_tokens": int(n_tokens)}))
        run = subprocess.run([sys.executable, "-m", __name__, str(job), str(out)], capture_output=True, text=True,
                             env=_child_env())
        if run.returncode < 0:
            why = (f"llama.cpp (llama-cpp-python {version}) died with {signal.Signals(-run.returncode).name} "
                   f"in its child process; the comparison could not run here (the cross-check's limit, "
                   f"not the model's)")
            return [ExternalStream(name=NAME, tokens=[], logits=[], bound_lane="fast", unchecked=why)]
        if run.returncode != 0:
            lines = run.stderr.strip().splitlines() or [f"exit status {run.returncode}"]
            raise ValueError(lines[-1])
        with np.load(out) as data:
            tokens, logits = data["tokens"].tolist(), list(data["logits"])
    return [ExternalStream(name=NAME, tokens=[int(t) for t in tokens], logits=logits, bound_lane="fast")]


def _child_main(argv: list[str]) -> int:
    """`python -m harness.model.llama_cpp JOB OUT`: the streams of JOB (json) written to OUT (npz). A
    ValueError (the file does not load) is one line on stderr and exit status 2."""
    job_path, out_path = argv
    job = json.loads(Path(job_path).read_text())
    try:
        tokens, logits = _streams_here(job["model"], job["prompt"], job["fed"], job["n_tokens"])
    except ValueError as exc:
        print(str(exc).replace("\n", " "), file=sys.stderr)
        return 2
    with open(out_path, "wb") as f:
        np.savez(f, tokens=np.array(tokens, dtype=np.int64), logits=logits)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
