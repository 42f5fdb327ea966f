"""harness.cache.atomic_write: whole-file replacement through a temporary file in the same folder."""
from __future__ import annotations

import pytest

from harness.cache import atomic_write


def test_atomic_write_text_and_bytes_replace_whole_file(tmp_path):
    path = tmp_path / "sub" / "dir" / "f.txt"        # missing folders are created
    atomic_write(path, "a\r\nb\n")
    assert path.read_bytes() == b"a\r\nb\n"          # text is written as given: no newline translation
    atomic_write(path, b"\x00\xffbytes")
    assert path.read_bytes() == b"\x00\xffbytes"
    atomic_write(str(path), "short")
    assert path.read_text() == "short"
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.txt"]


def test_atomic_write_failure_keeps_old_file_and_removes_temp(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write(path, "old")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(path, "new \ud800")               # a lone surrogate cannot be encoded: the write fails
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_atomic_write_gives_the_usual_permissions(tmp_path):
    import os
    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "r.json", "{}")
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644   # a report others may read, not mkstemp's 0600
