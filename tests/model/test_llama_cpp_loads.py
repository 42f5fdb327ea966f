"""llama.cpp loads make-model's file: the qwen3moe metadata, tensor shapes and the gpt2 vocabulary (merges,
byte tokens, newline) are what its loader requires. Needs llama-cpp-python (the decoder's optional extra)."""
import numpy as np
import pytest

from harness.model.checkpoint import open_checkpoint

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the optional 'llama' extra)")


@pytest.fixture(scope="module")
def llama(tiny_gguf):
    return llama_cpp.Llama(model_path=str(tiny_gguf), n_ctx=32, n_threads=1, verbose=False, logits_all=True)


def test_vocabulary_round_trips(llama, tiny_gguf):
    ck = open_checkpoint(tiny_gguf)
    assert llama.n_vocab() == ck.config.vocab
    text = b"the cat\nsat on 42 mats!"
    ids = llama.tokenize(text, add_bos=False, special=False)
    assert llama.detokenize(ids) == text
    assert len(ids) < len(text)                                     # the merges are used
    assert "".join(ck.tokens[i] for i in ids).replace("\\x0a", "\n").encode() == text   # our pieces agree


# llama.cpp's evaluation in a child process: a crash of the library (llama-cpp-python 0.3.36, built from source on one
# of our machines, dies in llama_decode on this model; the same version ran it elsewhere) is then the cross-check's
# own limit, said as a skip, not the death of the test worker. Its argmax comes back on stdout.
_EVAL = """
import sys, numpy as np, llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=32, n_threads=1, verbose=False, logits_all=True)
prompt = [int(t) for t in sys.argv[2:]]
llm.eval(prompt)
print(int(np.argmax(llm.scores[len(prompt) - 1])))
"""


def test_first_greedy_token_agrees(tiny_gguf):
    """llama.cpp's next token after a prompt is the float64 forward's (the tiny model's margins are wide)."""
    import signal
    import subprocess
    import sys
    from .forward64 import Forward64
    prompt = [300, 400, 500, 600]
    run = subprocess.run([sys.executable, "-c", _EVAL, str(tiny_gguf), *map(str, prompt)], capture_output=True,
                         text=True, timeout=300)
    if run.returncode < 0:
        pytest.skip(f"llama.cpp (llama-cpp-python {llama_cpp.__version__}) died with "
                    f"{signal.Signals(-run.returncode).name} evaluating the prompt: the cross-check could not run here")
    assert run.returncode == 0, run.stderr[-2000:]
    ours = Forward64(open_checkpoint(tiny_gguf).weights)
    for tok in prompt:
        logits = ours.step(tok)
    assert int(run.stdout.split()[-1]) == int(np.argmax(logits))
