"""The parts of the worker machinery every backend shares (harness.backends: client, faults, guards,
resident): one fault-name table, one guard-band message, one resident-buffer book."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import base, faults
from harness.backends.base import GUARD_BYTES, SENTINEL_BYTE, Buffer, LaunchInfo
from harness.backends.client import WorkerDied, WorkerTimedOut
from harness.backends.guards import guard_fault
from harness.backends.resident import ResidentBook

LAUNCH = LaunchInfo("k", (1, 1, 1), (32, 1, 1), 0)


def _band():
    return np.full(GUARD_BYTES, SENTINEL_BYTE, np.uint8)


def test_guard_damage_names_side_element_and_offset():
    assert guard_fault("args[1] (y)", _band(), _band(), 40, 4) is None
    after = _band()
    after[4] = 0                                  # 4 bytes past the end of a 40-byte buffer
    msg = guard_fault("args[1] (y)", _band(), after, 40, 4)
    assert msg.startswith("write to args[1] (y) 5 byte(s) past its end (element 11 of 10) at byte offset 44, ")
    assert "before" not in msg
    before = _band()
    before[-1] = 7                                # the byte just before the start
    msg = guard_fault("b", before, _band(), 40, 4)
    assert "1 byte(s) before its start (element -1) at byte offset -1," in msg and "past" not in msg
    both = guard_fault("b", before, after, 40, 4)
    assert "past its end" in both and "before its start" in both


def test_one_fault_table_for_every_backend():
    for cls in (base.OutOfBounds, base.RaceDetected, base.LaunchRefused, base.ContextFailure, base.BufferLost):
        err = faults.fault_error(cls.__name__, LAUNCH, "seen")
        assert type(err) is cls and err.launch == LAUNCH and err.detail == "seen"
    assert isinstance(faults.fault_error(faults.BAD_LAUNCH, LAUNCH, "grid"), ValueError)
    assert isinstance(faults.fault_error("BuildError", None, "rejected"), base.BuildError)
    # negative controls: a name that is no KernelFault, and the harness's own error, are never a kernel verdict
    for name in ("Buffer", "NoSuchFault", faults.HARNESS_ERROR):
        err = faults.fault_error(name, LAUNCH, "x", "gpu worker")
        assert type(err) is RuntimeError and "gpu worker failed on k<<<" in str(err)


def test_reply_values_and_errors():
    assert faults.reply_value({"ok": 3}, None, "w") == 3
    with pytest.raises(base.UnwrittenOutput, match="half"):
        faults.reply_value({"fault": ("UnwrittenOutput", "half"), "retire": False}, LAUNCH, "w")
    with pytest.raises(RuntimeError, match="w failed:\nTraceback"):
        faults.reply_value({"error": "Traceback ..."}, None, "w")


def test_fault_fields_are_declared_not_attached():
    plain = base.KernelCrash(LAUNCH, "x")
    assert plain.tool_limit is False and plain.coverage is None
    slow = faults.timed_out(LAUNCH, WorkerTimedOut("run 2"), "did not finish", 2.0, "stopped", tool_limit=True)
    assert isinstance(slow, base.KernelTimeout) and slow.tool_limit is True
    assert "did not finish within 2 s (last step: run 2); stopped" in str(slow)
    dead = faults.died(LAUNCH, WorkerDied("signal SIGSEGV", "boom", "run 1"))
    assert isinstance(dead, base.KernelCrash) and not dead.tool_limit
    assert "died with signal SIGSEGV during run 1; its last output:\nboom" in str(dead)


class _FakeWorker:
    def __init__(self):
        self.generation, self.up = 1, True

    def alive(self):
        return self.up


def test_resident_book_tracks_the_worker_that_holds_each_buffer():
    worker = _FakeWorker()
    book = ResidentBook(worker, "emu")
    buf, init = book.new("y", 4, np.float32, np.zeros(4, np.float32))
    other, _ = book.new("z", 4, np.float32, None)
    assert buf.id != other.id and init.dtype == np.float32
    book.add(buf)
    assert book.live(buf, "buf") is buf
    with pytest.raises(ValueError, match="z' .*is not a live resident buffer of this module"):
        book.live(other, "buf")                    # never added: not this module's
    with pytest.raises(ValueError, match="expected a Buffer"):
        book.live(np.zeros(4), "buf")
    worker.generation = 2                          # the worker was restarted: its buffers are gone
    with pytest.raises(base.BufferLost, match="buf: resident buffer 'y' .*was lost: the emu worker process"):
        book.live(buf, "buf")
    assert book.forget(buf, "buf") is False        # a lost buffer is freed without asking the worker
    with pytest.raises(ValueError, match="was freed"):
        book.live(buf, "buf")
    fresh, _ = book.new("y", 4, np.float32, None)
    book.add(fresh)
    assert book.forget(fresh, "buf") is True       # a live one must be released by its worker
    with pytest.raises(ValueError, match="shape"):
        book.new("bad", (0,), np.float32, None)
    assert isinstance(fresh, Buffer)


def _getattr_of_fault_fields(source: str) -> list[str]:
    """getattr(x, "<field>", ...) for a field KernelFault declares: a declared field is read as an attribute."""
    import ast
    import inspect
    fields = [p for p in inspect.signature(base.KernelFault.__init__).parameters if p not in ("self", "launch", "detail")]
    return [f"line {n.lineno}: getattr(..., {n.args[1].value!r})" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and len(n.args) >= 2
            and isinstance(n.args[1], ast.Constant) and n.args[1].value in fields]


def test_fault_fields_are_read_as_declared_attributes_everywhere():
    from pathlib import Path
    root = Path(base.__file__).resolve().parents[1]
    wrong = {str(p.relative_to(root.parent)): w for p in root.rglob("*.py") if (w := _getattr_of_fault_fields(p.read_text()))}
    assert not wrong, f"fault fields read with getattr (KernelFault declares them): {wrong}"
    # negative control: the old way of reading them is found
    assert _getattr_of_fault_fields('if getattr(exc, "tool_limit", False): pass\nc = getattr(e, "coverage", None)') == [
        "line 1: getattr(..., 'tool_limit')", "line 2: getattr(..., 'coverage')"]


def test_every_fault_name_a_worker_sends_is_in_the_one_table():
    # The emu runtime's fault codes and every Fault(kind, ...) the gpu worker raises resolve through
    # faults.fault_error to the exception the caller gets: a KernelFault, or for these three a caller's or
    # the harness's error.
    import ast
    from pathlib import Path
    from harness.backends import gpu_worker
    from harness.backends.emu.native import FAULT_NAMES
    tree = ast.parse(Path(gpu_worker.__file__).read_text())
    sent = {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id == "Fault" and n.args and isinstance(n.args[0], ast.Constant)}
    assert {"KernelTimeout", "LaunchRefused", "ContextFailure"} <= sent         # the walker finds them
    sent |= set(FAULT_NAMES.values()) | {"ResourceExhausted", "UnwrittenOutput", "UninitializedRead", "RaceDetected"}
    special = {faults.BAD_LAUNCH, "BuildError"}
    assert all(faults.fault_class(n) is not None for n in sent - special), sorted(
        n for n in sent - special if faults.fault_class(n) is None)
    assert faults.fault_class("DataRaces") is None and faults.fault_class("LaunchInfo") is None


def test_the_worker_loop_answers_faults_errors_and_memory(monkeypatch):
    import os
    import sys
    from harness.backends import protocol
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    for msg in ({"op": "ok"}, {"op": "bug"}, {"op": "big"}):
        protocol.send(req_w, msg)
    os.close(req_w)                                  # the parent is done: the loop returns 0

    class Stdin:
        def fileno(self):
            return req_r
    monkeypatch.setattr(sys, "stdin", Stdin())

    def handle(req):
        if req["op"] == "bug":
            raise KeyError("no such buffer")
        if req["op"] == "big":
            raise MemoryError("2 GiB")
        return {"ok": 1}
    idle = []
    assert protocol.serve(rep_w, handle, lambda exc: {"fault": ("ResourceExhausted", str(exc))},
                          after=lambda: idle.append(1)) == 0
    replies = [protocol.receive(rep_r, 5.0) for _ in range(3)]
    assert replies[0] == {"ok": 1} and "KeyError: 'no such buffer'" in replies[1]["error"]
    assert replies[2] == {"fault": ("ResourceExhausted", "2 GiB")} and idle == [1, 1, 1]
    with pytest.raises(base.ResourceExhausted, match="2 GiB"):
        faults.reply_value(replies[2], None, "emu worker")
    for fd in (req_r, rep_r, rep_w):
        os.close(fd)
