"""Token pieces: GPT-2 byte-level token strings decoded to printable text."""
from hypothesis import given
from hypothesis import strategies as st

from harness.model.pieces import byte_encoder, piece_bytes, printable_piece

ENC = byte_encoder()


def spell(raw: bytes) -> str:
    return "".join(ENC[b] for b in raw)


def test_table_is_gpt2s():
    assert len(set(ENC.values())) == 256
    assert ENC[ord("A")] == "A" and ENC[ord(" ")] == "Ġ" and ENC[ord("\n")] == "Ċ" and ENC[0] == "Ā"
    assert ENC[0xad] == "Ń"          # soft hyphen: the last byte moved out of the printable range


def test_pieces():
    assert printable_piece("ĠHello") == " Hello"
    assert printable_piece(spell("你".encode())) == "你"
    assert printable_piece(spell("你".encode()[:2])) == "\\xe4\\xbd"       # half a character: its bytes
    assert printable_piece("Ċ") == "\\x0a"
    assert printable_piece(spell(b"\xc2\x85")) == "\\u0085"                # a valid but unprintable character
    assert printable_piece(spell(b"a\\b")) == "a\\\\b"                       # a backslash is escaped
    assert printable_piece("<|im_end|>") == "<|im_end|>"                    # special tokens read as written
    assert piece_bytes("€uro") is None and printable_piece("€uro") == "€uro"  # outside the byte alphabet


@given(st.binary(max_size=12))
def test_round_trip_and_printable(raw):
    token = spell(raw)
    assert piece_bytes(token) == raw
    text = printable_piece(token)
    assert text.isprintable()
    assert unescape(text) == raw          # unambiguous: the escapes give the bytes back


def unescape(text: str) -> bytes:
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] == "\\":
            if text[i + 1] == "\\":
                out.append(ord("\\"))
                i += 2
                continue
            width = {"x": 2, "u": 4, "U": 8}[text[i + 1]]
            code = int(text[i + 2:i + 2 + width], 16)
            out += bytes([code]) if width == 2 else chr(code).encode()
            i += 2 + width
        else:
            out += text[i].encode()
            i += 1
    return bytes(out)
