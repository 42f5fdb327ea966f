"""A deterministic byte-level BPE vocabulary for synthetic checkpoints (a GGUF ``gpt2`` tokenizer).

Token ids 0..255 are the 256 bytes (spelled with GPT-2's byte alphabet, id = byte value), then merged tokens,
then three control tokens. Every merge "A B" joins two existing tokens into a new one, so llama.cpp's BPE
tokenizer can load and use it. The merges are enumerated, not learned: left tokens in creation order against
a fixed list of frequent characters, along anti-diagonals, so short common-looking strings come first.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from gguf import TokenType

from .pieces import byte_encoder

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Right-hand parts of merges: space, lower-case letters by English frequency, upper case, digits, punctuation.
_RIGHT = " etaoinshrdlcumwfgypbvkjxqz" + "ETAOINSHRDLCUMWFGYPBVKJXQZ" + "0123456789" + ".,;:!?'\"-_()\n"


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[str, ...]
    bos_id: int
    eos_id: int
    pad_id: int


@lru_cache(maxsize=4)
def byte_level_vocabulary(size: int) -> Vocabulary:
    n_merges = size - 256 - len(SPECIAL_TOKENS)
    if n_merges < 0:
        raise ValueError(f"vocab: {size} tokens cannot hold the 256 byte tokens and {len(SPECIAL_TOKENS)} "
                         f"control tokens")
    enc = byte_encoder()
    tokens = [enc[b] for b in range(256)]
    # left parts: every byte, most frequent characters first
    order = [enc[ord(c)] for c in _RIGHT] + [t for t in tokens if t not in {enc[ord(c)] for c in _RIGHT}]
    right = [enc[ord(c)] for c in _RIGHT]
    left = list(order)
    known = set(tokens)
    merges: list[str] = []
    s = 0
    while len(merges) < n_merges:
        for j in range(min(s, len(right) - 1), -1, -1):
            i = s - j
            if i >= len(left) or len(merges) >= n_merges:
                continue
            new = left[i] + right[j]
            if new in known:
                continue
            known.add(new)
            merges.append(f"{left[i]} {right[j]}")
            tokens.append(new)
            left.append(new)
        s += 1
    first_special = len(tokens)
    tokens += SPECIAL_TOKENS
    types = [int(TokenType.NORMAL)] * first_special + [int(TokenType.CONTROL)] * len(SPECIAL_TOKENS)
    return Vocabulary(tokens=tuple(tokens), token_types=tuple(types), merges=tuple(merges),
                      bos_id=first_special, eos_id=first_special + 2, pad_id=first_special)
