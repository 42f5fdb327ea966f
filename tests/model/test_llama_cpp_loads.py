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


def test_first_greedy_token_agrees(tiny_gguf):
    """llama.cpp's next token after a prompt is the float64 forward's (the tiny model's margins are wide).
    llama.cpp runs as `generate --compare` runs it, in a child process: a crash of the library there is the
    cross-check's own limit, said as a skip, not a dead test worker."""
    from harness.model.llama_cpp import llama_streams
    from .forward64 import Forward64
    prompt = [300, 400, 500, 600]
    (stream,) = llama_streams(tiny_gguf, prompt, prompt, 1)
    if stream.unchecked:
        pytest.skip(stream.unchecked)
    ours = Forward64(open_checkpoint(tiny_gguf).weights)
    for tok in prompt:
        logits = ours.step(tok)
    assert stream.tokens[0] == int(np.argmax(logits))
    assert int(np.argmax(stream.logits[-1])) == stream.tokens[0]          # the same position, teacher-forced
