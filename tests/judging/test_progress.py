"""One progress mechanism (harness.judging.progress.Progress) for cases, decode steps and bytes: plain lines when
the stream is not a terminal, nothing when disabled, a count that never goes back."""
import io

from harness.judging.progress import BYTES, Progress


def test_plain_byte_lines_when_not_a_terminal(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("harness.judging.progress.time.monotonic", lambda: now[0])
    out = io.StringIO()
    with Progress(4_000_000, True, title="writing x", unit=BYTES, stream=out, interval_s=10.0) as bar:
        for t, note in ((5.0, "a"), (11.0, "b"), (12.0, "c"), (30.0, "d")):
            now[0] = t
            bar.advance(1_000_000, note)     # a line at t=11 and t=30 (10 s apart at least), none at 5 and 12
        now[0] = 31.0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("writing x: 2.0/4.0 MB (50%") and lines[0].endswith(" b")
    assert lines[1].startswith("writing x: 4.0/4.0 MB (100%")
    assert lines[-1].startswith("writing x: done, 4.0/4.0 MB") and len(lines) == 3
    assert bar.done == 4_000_000


def test_silent_when_disabled():
    out = io.StringIO()
    with Progress(10, False, unit=BYTES, stream=out) as bar:
        bar.advance(10)
    assert out.getvalue() == "" and bar.done == 10


def test_the_callback_form_never_goes_back(monkeypatch):
    """show(label, done, total) as a generation run reports it: the total is set once, a smaller count or total
    changes nothing, and the last line says finished."""
    now = [0.0]
    monkeypatch.setattr("harness.judging.progress.time.monotonic", lambda: now[0])
    out = io.StringIO()
    with Progress(title="generate", unit="decode steps", stream=out, tty=False, interval_s=10.0) as bar:
        now[0] = 11.0
        bar.show("reference lanes", 5, 20)
        now[0] = 22.0
        bar.show("kernels", 3, 8)           # a caller's smaller figures do not move the bar back
        assert (bar.done, bar.total) == (5, 20)
        bar.show("done", 20, 20)
    lines = out.getvalue().splitlines()
    assert lines[0] == "generate: 5/20 decode steps done, 15 left, 0:00:11 elapsed; reference lanes"
    assert lines[1].startswith("generate: 5/20 decode steps done") and lines[-1].endswith("finished")
