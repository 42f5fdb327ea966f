"""Token pieces: a GGUF ``gpt2`` (byte-level BPE) token string decoded to the text it stands for.

A byte-level vocabulary spells every byte as one printable character (GPT-2's ``bytes_to_unicode`` table:
printable Latin-1 bytes stand for themselves, the others -- space, control bytes, 0x7f-0xa0, 0xad -- are
moved to U+0100 and up, so a space reads as 'Ġ' and a newline as 'Ċ'). Reports show the decoded text with
anything unprintable escaped, so a piece is always one readable line.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def byte_encoder() -> dict[int, str]:
    """byte value -> the character a byte-level vocabulary spells it with (GPT-2's table)."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@lru_cache(maxsize=1)
def byte_decoder() -> dict[str, int]:
    return {c: b for b, c in byte_encoder().items()}


def piece_bytes(token: str) -> "bytes | None":
    """The bytes a byte-level token stands for, or None when it is not spelled in the byte alphabet (special
    tokens such as ``<|endoftext|>`` are printable ASCII, which the alphabet spells as itself)."""
    dec = byte_decoder()
    try:
        return bytes(dec[c] for c in token)
    except KeyError:
        return None


def _escape(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            code = ord(ch)
            # \xNN only below 0x80: a \xNN of 0x80..0xff always means a byte that is not valid UTF-8
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def printable_piece(token: str) -> str:
    """The text a token stands for, as one printable line: UTF-8 decoded; control characters and bytes that
    are not valid UTF-8 on their own (part of a multi-byte character) escaped as ``\\xNN``, a backslash as
    ``\\\\``; a token outside the byte alphabet (a special token) is shown as written (escaped alike)."""
    raw = piece_bytes(token)
    if raw is None:
        return _escape(token)
    text = raw.decode("utf-8", errors="surrogateescape")   # an invalid byte b becomes U+DC00+b
    return "".join(f"\\x{ord(ch) - 0xDC00:02x}" if 0xDC80 <= ord(ch) <= 0xDCFF else _escape(ch) for ch in text)


def token_pieces(tokens: "list[str]") -> list[str]:
    return [printable_piece(t) for t in tokens]
