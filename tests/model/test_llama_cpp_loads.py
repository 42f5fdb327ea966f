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


def test_first_greedy_token_agrees(llama, tiny_gguf):
    """llama.cpp's next token after a prompt is the float64 forward's (the tiny model's margins are wide)."""
    from .forward64 import Forward64
    prompt = [300, 400, 500, 600]
    llama.eval(prompt)
    ours = Forward64(open_checkpoint(tiny_gguf).weights)
    for tok in prompt:
        logits = ours.step(tok)
    assert int(np.argmax(llama.scores[len(prompt) - 1])) == int(np.argmax(logits))
