"""harness.cache: atomic_write (whole-file replacement through a temporary file in the same folder) and the one
cache-entry mechanism every compiled artefact uses (content_key, cache_entry)."""
from __future__ import annotations

import pytest

from harness.cache import atomic_write, cache_entry, content_key


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


def test_content_key_separates_its_parts():
    assert content_key("ab", "c") != content_key("a", "bc")
    assert content_key("a", b"b") == content_key(b"a", "b")
    assert len(content_key("x")) == 64


def test_cache_entry_makes_a_file_once(tmp_path):
    calls = []

    def make(tmp):
        calls.append(tmp)
        tmp.write_text("built")
    path, made = cache_entry(tmp_path / "k" / "x.o", make)
    assert made and path.read_text() == "built" and calls[0].parent == path.parent and calls[0] != path
    assert cache_entry(path, make) == (path, False) and len(calls) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.o"]


def test_cache_entry_folder_and_a_lost_race_keep_the_first(tmp_path):
    entry = tmp_path / "key"

    def make_racing(tmp):
        tmp.mkdir()
        (tmp / "result.json").write_text("mine")
        entry.mkdir()                                # another worker stores the same entry meanwhile
        (entry / "result.json").write_text("theirs")
    path, made = cache_entry(entry, make_racing)
    assert not made and (path / "result.json").read_text() == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["key"]


def test_cache_entry_stores_nothing_when_the_build_fails(tmp_path):
    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("compiler died")
    with pytest.raises(RuntimeError, match="compiler died"):
        cache_entry(tmp_path / "x.so", broken)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="produced nothing"):
        cache_entry(tmp_path / "y.so", lambda tmp: None)
