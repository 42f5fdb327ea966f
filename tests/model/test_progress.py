"""Progress of streamed work: plain periodic lines when the stream is not a terminal, nothing when disabled."""
import io

from harness.model.progress import ByteProgress


def test_plain_lines_when_not_a_terminal(monkeypatch):
    clock = iter([0.0, 5.0, 11.0, 12.0, 30.0, 31.0])     # enter, four advances, exit
    monkeypatch.setattr("harness.model.progress.time.monotonic", lambda: next(clock))
    out = io.StringIO()
    with ByteProgress("writing x", 4_000_000, True, stream=out) as bar:
        bar.advance(1_000_000, "a")      # t=5: too soon for a line
        bar.advance(1_000_000, "b")      # t=11: a line
        bar.advance(1_000_000, "c")      # t=12: too soon
        bar.advance(1_000_000, "d")      # t=30: a line
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("writing x: 2.0/4.0 MB (50%") and lines[0].endswith(" b")
    assert lines[1].startswith("writing x: 4.0/4.0 MB (100%")
    assert lines[-1].startswith("writing x: done, 4.0/4.0 MB") and len(lines) == 3
    assert bar.done == 4_000_000


def test_silent_when_disabled():
    out = io.StringIO()
    with ByteProgress("x", 10, False, stream=out) as bar:
        bar.advance(10)
    assert out.getvalue() == "" and bar.done == 10
