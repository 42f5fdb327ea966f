"""harness.cache: atomic_write (whole-file replacement through a temporary file in the same folder) and the one
cache-entry mechanism every compiled artefact uses (content_key, cache_entry)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.cache import atomic_write, cache_entry, content_key, tool_env
from tests.fake_tools import recording_tool, stand_in_system_folder, temporaries_made


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


def _dead_pid() -> int:
    import subprocess
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_the_first_use_of_a_cache_folder_removes_what_killed_processes_left(tmp_path, monkeypatch):
    import os
    from harness import cache
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path))
    monkeypatch.setattr(cache, "_SWEPT", set())
    folder = tmp_path / "emu"
    folder.mkdir()
    dead, host = _dead_pid(), cache._HOST
    stale_file = folder / f".k1.so.{dead}@{host}.0123abcd.tmp"
    stale_file.write_bytes(b"half a shared object")
    stale_dir = folder / f".scratch.{dead}@{host}.89abcdef.tmp"
    (stale_dir / "sub").mkdir(parents=True)
    (stale_dir / "sub" / "module.o").write_bytes(b"x")
    old_style = folder / f".k2.so.{dead}.0badf00d.tmp"      # a name from before names carried the machine
    old_style.write_bytes(b"")
    live = folder / f".k3.so.{os.getpid()}@{host}.01234567.tmp"
    live.write_bytes(b"")
    other_machine = folder / f".k4.so.{dead}@{'0' * 8 if host != '0' * 8 else '1' * 8}.01234567.tmp"
    other_machine.write_bytes(b"")
    entry = folder / "k5.so"
    entry.write_bytes(b"a finished entry")
    assert cache.cache_dir("emu") == folder
    assert sorted(p.name for p in folder.iterdir()) == sorted([live.name, other_machine.name, entry.name])
    stale_file.write_bytes(b"")                 # a second use in the same process does not list the folder again
    cache.cache_dir("emu")
    assert stale_file.exists()


def test_a_scratch_folder_of_a_killed_process_is_removed_by_the_next_run(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    env = dict(os.environ, QCONFORM_CACHE=str(tmp_path))
    child = subprocess.Popen([sys.executable, "-c",
                              "import time; from harness.cache import scratch_folder\n"
                              "with scratch_folder('emu') as w:\n"
                              "    (w / 'module.cpp').write_text('int x;')\n"
                              "    print(w, flush=True); time.sleep(600)"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        work = Path(child.stdout.readline().strip())
        assert work.parent == tmp_path / "emu" and (work / "module.cpp").is_file()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert work.is_dir()                        # SIGKILL: nothing could clean up
    subprocess.run([sys.executable, "-c", "from harness.cache import cache_dir; cache_dir('emu')"], env=env,
                   check=True)
    assert not work.exists() and list((tmp_path / "emu").iterdir()) == []


def test_no_module_makes_temporary_folders_outside_the_cache():
    """One mechanism for working folders (harness.cache.scratch_folder): a folder made with tempfile outlives a
    killed process in the system's temporary folder, where nothing finds it again."""
    import re
    root = Path(__file__).resolve().parents[1]
    offenders = [str(p.relative_to(root)) for pkg in ("harness", "cudasrc", "emitters", "reference")
                 for p in (root / pkg).rglob("*.py")
                 if re.search(r"tempfile\.(TemporaryDirectory|mkdtemp|mkstemp|NamedTemporaryFile)", p.read_text())]
    assert offenders == []


def test_tool_env_puts_a_compilers_temporaries_in_the_given_folder(tmp_path, monkeypatch):
    import subprocess
    system = stand_in_system_folder(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "made.log"
    tool = recording_tool(tmp_path / "cc", log)
    subprocess.run([tool], env=tool_env(work), check=True)
    subprocess.run([tool], check=True)     # negative control: the inherited environment
    inside, outside = temporaries_made(log)
    assert inside.parent == work and outside.parent == system


def test_tool_env_extends_its_base_and_needs_an_existing_folder(tmp_path, monkeypatch):
    import os
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(tmp_path)
    env = tool_env("work", {"LC_ALL": "C", "TMPDIR": "/elsewhere", "TEMP": "/elsewhere"})
    assert env == {"LC_ALL": "C", "TMPDIR": str(work), "TMP": str(work), "TEMP": str(work),   # absolute
                   "CCACHE_DISABLE": "1"}
    assert tool_env(work)["PATH"] == os.environ["PATH"]                 # the default base: this process's
    with pytest.raises(ValueError, match=r"^work: .*missing does not exist"):
        tool_env(tmp_path / "missing")      # a compiler would silently fall back to the system's folder
