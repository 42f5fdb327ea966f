"""Run a GGUF through llama.cpp (the optional extra ``llama``: llama-cpp-python) the way the comparison needs
it: float32 KV cache, flash attention off, one token per batch, the logits of every position kept; greedy
tokens and teacher-forced logits, to be judged like a lane against the exact lane.

llama.cpp's CPU matmuls for Q8_0 weights quantize the activation to Q8_0 (float16 block scales, round half away
from zero): an int8-activation computation, so its streams are judged with the derived bound of the ``fast``
lane (Int8Act) at the same step.

llama.cpp runs in a child process (`python -m harness.model.llama_cpp JOB OUT`): a crash of the library (one
build of llama-cpp-python 0.3.36 dies in its AMX matmul on some CPUs) then ends only that process, and the
stream comes back unchecked with the signal and the library's version, while the lanes are still judged. The child
reports each token it evaluates; one that makes no progress for `stall_s` seconds (a hang of the library) is killed,
and its stream is unchecked the same way.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

from harness.cache import scratch_folder
from harness.model.reference_lanes import ExternalStream

GGML_TYPE_F32 = 0
NAME = "llama.cpp"
# The longest wait for the child's next token (loading included). Generous: one token of a 32 GB checkpoint that
# does not fit in memory is read from disk (3 GB of active weights per token, seconds to minutes on a slow disk).
STALL_S = 600.0


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


def _no_tick() -> None:
    pass


def _feed(llm, tokens: list[int], tick: Callable[[], None]) -> None:
    """Evaluate `tokens` one at a time (each its own batch, as configured), calling tick after each."""
    for token in tokens:
        llm.eval([token])
        tick()


def _eval_logits(llm, tokens: list[int], tick: Callable[[], None] = _no_tick) -> list[np.ndarray]:
    """Feed `tokens` one per batch from an empty context; the logits after each, float64."""
    llm.reset()
    _feed(llm, tokens, tick)
    return [np.array(llm.scores[i], dtype=np.float64) for i in range(len(tokens))]


def greedy(llm, prompt: list[int], n_tokens: int, tick: Callable[[], None] = _no_tick) -> list[int]:
    """Prefill the prompt, then n_tokens greedy tokens (argmax, first index on exact ties)."""
    llm.reset()
    _feed(llm, prompt, tick)
    out = [int(np.argmax(llm.scores[llm.n_tokens - 1]))]
    while len(out) < n_tokens:
        _feed(llm, [out[-1]], tick)
        out.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
    return out


def _evaluations(prompt: list[int], fed: list[int], n_tokens: int) -> int:
    """How many tokens the child evaluates: the free-running stream, then the teacher-forced one."""
    return len(prompt) + n_tokens - 1 + len(fed)


def _streams_here(path, prompt: list[int], fed: list[int], n_tokens: int,
                  tick: Callable[[], None] = _no_tick) -> tuple[list[int], np.ndarray]:
    """In this process: llama.cpp's greedy tokens and its teacher-forced logits over `fed` (steps x vocab)."""
    llm = load(path, n_ctx=len(prompt) + n_tokens + 1)
    tick()
    try:
        vocab = llm.n_vocab()
        tokens = greedy(llm, prompt, n_tokens, tick)
        logits = _eval_logits(llm, fed, tick)
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


def _watch(child: subprocess.Popen, progress: int, stall_s: float) -> tuple[int, "int | None"]:
    """Wait for the child, counting the ticks it writes to the pipe `progress`; kill it when none comes for stall_s
    seconds. Returns (ticks, returncode), returncode None when it was killed for stalling."""
    ticks, stalled = 0, False
    with selectors.DefaultSelector() as sel:
        sel.register(progress, selectors.EVENT_READ)
        deadline = time.monotonic() + stall_s
        while True:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                stalled = True
                break
            chunk = os.read(progress, 4096)
            if not chunk:                                   # the child closed its end: it is ending
                break
            ticks += len(chunk)
            deadline = time.monotonic() + stall_s
    if stalled:
        child.kill()
    child.wait()
    return ticks, None if stalled else child.returncode


def llama_streams(path, prompt: list[int], fed: list[int], n_tokens: int,
                  stall_s: float = STALL_S) -> list[ExternalStream]:
    """llama.cpp's free-running tokens and its teacher-forced logits over `fed` (the exact lane's sequence),
    computed in a child process (module docstring). A load error is a ValueError naming the file; a crash of
    the child, or no progress for stall_s seconds, is an unchecked stream with the reason."""
    version = getattr(import_llama(), "__version__", "unknown version")
    with scratch_folder("llama") as tmp:
        job, out, err = tmp / "job.json", tmp / "streams.npz", tmp / "stderr.txt"
        job.write_text(json.dumps({"model": str(path), "prompt": [int(t) for t in prompt],
                                   "fed": [int(t) for t in fed], "n_tokens": int(n_tokens)}))
        # Progress comes on a pipe of its own: the native library may print to stdout.
        progress, child_end = os.pipe()
        try:
            with open(err, "wb") as err_file:
                child = subprocess.Popen([sys.executable, "-m", __name__, str(job), str(out), str(child_end)],
                                         stdout=err_file, stderr=err_file, stdin=subprocess.DEVNULL,
                                         pass_fds=(child_end,), env=_child_env())
            os.close(child_end)
            child_end = -1
            try:
                ticks, returncode = _watch(child, progress, stall_s)
            finally:                                        # an interrupt of the parent ends the child too
                if child.poll() is None:
                    child.kill()
                    child.wait()
        finally:
            os.close(progress)
            if child_end >= 0:
                os.close(child_end)
        library = f"llama.cpp (llama-cpp-python {version})"
        if returncode is None or returncode < 0:
            if returncode is not None:
                what = f"died with {signal.Signals(-returncode).name}"
            else:                                           # the first tick is the load
                where = ("while loading the file" if ticks == 0 else
                         f"after loading and {ticks - 1} of {_evaluations(prompt, fed, n_tokens)} token evaluations")
                what = f"made no progress for {stall_s:g} s {where} and was killed"
            why = (f"{library} {what} in its child process; the comparison could not run here (the "
                   f"cross-check's limit, not the model's)")
            return [ExternalStream(name=NAME, tokens=[], logits=[], bound_lane="fast", unchecked=why)]
        if returncode != 0:
            lines = err.read_text(errors="replace").strip().splitlines() or [f"exit status {returncode}"]
            raise ValueError(lines[-1])
        with np.load(out) as data:
            tokens, logits = data["tokens"].tolist(), list(data["logits"])
    return [ExternalStream(name=NAME, tokens=[int(t) for t in tokens], logits=logits, bound_lane="fast")]


def _child_main(argv: list[str]) -> int:
    """`python -m harness.model.llama_cpp JOB OUT FD`: the streams of JOB (json) written to OUT (npz), one byte
    written to the pipe FD after the load and after each token. A ValueError (the file does not load) is one
    line on stderr and exit status 2."""
    job_path, out_path, fd = argv
    progress = int(fd)

    def tick() -> None:                                     # the parent's sign of progress
        os.write(progress, b".")

    job = json.loads(Path(job_path).read_text())
    try:
        tokens, logits = _streams_here(job["model"], job["prompt"], job["fed"], job["n_tokens"], tick)
    except ValueError as exc:
        print(str(exc).replace("\n", " "), file=sys.stderr)
        return 2
    with open(out_path, "wb") as f:
        np.savez(f, tokens=np.array(tokens, dtype=np.int64), logits=logits)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
