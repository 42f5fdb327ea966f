"""Damaged files: any flip or truncation of a valid checkpoint is either refused with CheckpointError or gives
a model whose every shape and weight checks out -- never another exception, never a hang."""
import signal

import gguf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.model.checkpoint import CheckpointError, open_checkpoint

HANG_LIMIT_S = 60


@pytest.fixture(scope="module")
def original(tiny1_gguf):
    data = tiny1_gguf.read_bytes()
    header_end = gguf.GGUFReader(tiny1_gguf).data_offset
    return data, header_end


def _alarm(signum, frame):
    raise TimeoutError(f"open_checkpoint ran past {HANG_LIMIT_S} s")


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_corrupted_file_is_refused_or_sound(original, tmp_path_factory, data):
    raw, header_end = original
    where = st.one_of(st.integers(0, 40), st.integers(0, header_end - 1), st.integers(0, len(raw) - 1))
    flips = data.draw(st.lists(st.tuples(where, st.integers(1, 255)), max_size=6), label="flips (offset, xor)")
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw) - 1)), label="truncate at")
    buf = bytearray(raw)
    for offset, xor in flips:
        buf[offset] ^= xor
    if cut is not None:
        del buf[cut:]
    path = tmp_path_factory.getbasetemp() / "corrupt.gguf"
    path.write_bytes(bytes(buf))
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_LIMIT_S)
    try:
        try:
            ck = open_checkpoint(path, layer_cache_bytes=0)
            ck.weights.check()
        except CheckpointError as exc:
            assert str(exc)          # a message, never empty
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_negative_control_unguarded_reader_misreads_a_truncated_file(original, tmp_path):
    """Why the guard exists: gguf-py's own reader does not stop at the end of a file cut inside its header
    (it raises something other than a clear error, or reads short arrays)."""
    raw, header_end = original
    path = tmp_path / "cut.gguf"
    path.write_bytes(raw[:header_end // 2])
    with pytest.raises(Exception) as info:
        gguf.GGUFReader(path)
    assert not isinstance(info.value, CheckpointError)
    with pytest.raises(CheckpointError, match="truncated file"):
        open_checkpoint(path)
