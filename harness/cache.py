"""Where compiled artefacts are cached, and the one way they are stored: a folder per purpose (`cache_dir`),
entries named by the hash of everything that determines them (`content_key`), built once and renamed into
place atomically (`cache_entry`); working folders (`scratch_folder`) and the environment that keeps a
compiler's own temporaries in one (`tool_env`); plus `atomic_write` for any file the project writes, and for
large outputs streamed in place of being held whole, `temp_sibling` (the temporary name to rename) and
`check_free_space`."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import uuid
from pathlib import Path
from typing import Callable, Iterator, Mapping

_SWEPT: set[Path] = set()


CACHE_ENV = "QCONFORM_CACHE"


def cache_root() -> Path:
    """Where every cache folder lives: $QCONFORM_CACHE, default ~/.cache/qconform (not created here); absolute (a
    relative $QCONFORM_CACHE against the folder this process started in: its workers run elsewhere)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "qconform").absolute()


def cache_dir(kind: str) -> Path:
    """A per-purpose cache folder: $QCONFORM_CACHE/<kind>, default ~/.cache/qconform/<kind>. The first use in a
    process removes what killed processes of this machine left there (`stale_temporaries_in`)."""
    path = cache_root() / kind
    path.mkdir(parents=True, exist_ok=True)
    if path not in _SWEPT:
        _SWEPT.add(path)
        for entry in stale_temporaries_in(path):
            _remove(entry)
    return path


@contextlib.contextmanager
def scratch_folder(kind: str) -> Iterator[Path]:
    """A private working folder inside cache_dir(kind), removed on exit. It is named like every temporary
    (`temp_sibling`), so what a killed process leaves is found and removed by the next run's `cache_dir`,
    never piling up in the system's temporary folder."""
    work = temp_sibling(cache_dir(kind) / "scratch")
    work.mkdir()
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Where compilers put their own temporaries (nvcc's tmpxft_*, g++'s cc*.s and cc*.res): POSIX tools read TMPDIR,
# some toolchains TMP or TEMP.
TEMP_FOLDER_VARIABLES = ("TMPDIR", "TMP", "TEMP")


def tool_env(work: "str | Path", base: "Mapping[str, str] | None" = None) -> dict[str, str]:
    """The environment for a compiler run: `base` (default os.environ) with ccache off and its temporary folder
    set to `work`, a `scratch_folder` (or a folder inside one). A compiler killed mid-run cannot remove its
    temporaries; in `work` they go with the folder or with the next run's sweep, never piling up in the
    system's temporary folder. `work` must exist: a compiler silently falls back to the system's folder
    otherwise."""
    folder = os.path.abspath(work)            # the compiler may run in another working folder
    if not os.path.isdir(folder):
        raise ValueError(f"work: the compiler's temporary folder {folder} does not exist (a compiler would "
                         "silently use the system's temporary folder instead)")
    env = dict(os.environ if base is None else base)
    env.update(dict.fromkeys(TEMP_FOLDER_VARIABLES, folder))
    # a ccache in front of the compiler (Debian's /usr/lib/ccache on PATH) writes its own cache outside `work`,
    # which a confined compile may not (harness.confine); qconform caches what it builds itself
    env["CCACHE_DISABLE"] = "1"
    return env


# The machine is part of a temporary's name: on a cache shared by several machines (a network file system), a
# process id says whether its owner still runs only on the machine that started it.
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def temp_sibling(path: "str | Path") -> Path:
    """A unique hidden temporary name beside `path` (the same folder, so os.replace onto `path` is atomic)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}@{_HOST}.{uuid.uuid4().hex[:8]}.tmp")


_TEMP_NAME = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)(?:@(?P<host>[0-9a-f]{8}))?\.[0-9a-f]{8}\.tmp$")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True          # another user's process
    return True


def _is_stale(m: "re.Match[str]") -> bool:
    """A temporary whose process no longer runs; one made on another machine is never judged from here (a name
    without a machine is from before names carried it, and counts as this machine's)."""
    return m["host"] in (None, _HOST) and not _pid_alive(int(m["pid"]))


def stale_temporaries_in(folder: "str | Path") -> list[Path]:
    """Every temporary in `folder` that `temp_sibling` named for a process of this machine that no longer runs:
    what a killed run (SIGKILL, a power cut) left there. A temporary of a live process is not stale."""
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return []
    return sorted(e for e in entries if (m := _TEMP_NAME.match(e.name)) and _is_stale(m))


def stale_temporaries(path: "str | Path") -> list[Path]:
    """The stale temporaries that `temp_sibling(path)` named: those beside `path` for `path` itself."""
    path = Path(path)
    return [e for e in stale_temporaries_in(path.parent) if _TEMP_NAME.match(e.name)["name"] == path.name]


def _remove(entry: Path) -> int:
    """Remove a file or folder (never following a link); returns its size in bytes (what could be measured:
    another process may be removing it at the same time)."""
    size = 0
    try:
        if entry.is_dir() and not entry.is_symlink():
            size = sum(f.lstat().st_size for f in entry.rglob("*") if f.is_file() and not f.is_symlink())
            shutil.rmtree(entry, ignore_errors=True)
        else:
            size = entry.lstat().st_size
            entry.unlink(missing_ok=True)
    except OSError:
        pass
    return size


def remove_stale_temporaries(path: "str | Path") -> list[tuple[Path, int]]:
    """Remove `stale_temporaries(path)`; returns each one removed with its size in bytes."""
    removed = []
    for entry in stale_temporaries(path):
        size = _remove(entry)
        if not entry.exists():
            removed.append((entry, size))
    return removed


def check_free_space(folder: "str | Path", need: int, what: str) -> None:
    """Refuse before writing anything when `folder`'s file system cannot hold `need` more bytes."""
    free = shutil.disk_usage(folder).free
    if free < need:
        raise ValueError(f"{what}: {need / 1e9:.2f} GB to write but {free / 1e9:.2f} GB free in {folder}")


def atomic_write(path: "str | Path", data: "str | bytes") -> None:
    """Write `data` to `path` all at once: a uniquely named temporary file in the same folder, then os.replace,
    so a reader sees the old file or the new one, never a part, and parallel writers never clash. Text is
    written as given (no newline translation); the file gets the usual permissions (umask, unlike mkstemp's
    0600). The folder is created if needed; the temporary file is removed if anything fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        if isinstance(data, bytes):
            with open(tmp, "xb") as fh:
                fh.write(data)
        else:
            with open(tmp, "x", newline="") as fh:
                fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def content_key(*parts: "str | bytes") -> str:
    """The sha256 (hex) of `parts`, each followed by a separator, so that ("ab", "c") and ("a", "bc") differ.
    Every compiled artefact is cached under the key of everything that determines it."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\x00\x01")
    return h.hexdigest()


def cache_entry(path: "str | Path", make: Callable[[Path], None]) -> tuple[Path, bool]:
    """The cached file or folder at `path`, made once: when it is absent, `make(tmp)` builds it at a unique
    temporary path beside it (a file, or a folder it creates), which is then renamed into place. Readers see
    the whole entry or none, and parallel makers never clash: the first rename wins and a later maker's
    identical work is dropped. Returns (path, True when made by this call). If `make` raises, nothing is
    stored and its temporary is removed."""
    path = Path(path)
    if path.exists():
        return path, False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    try:
        make(tmp)
        if not tmp.exists():
            raise RuntimeError(f"cache: building {path.name} produced nothing")
        if tmp.is_dir():
            try:
                os.rename(tmp, path)      # refuses to replace a folder another maker stored first
            except OSError:
                if not path.is_dir():
                    raise
                return path, False
        else:
            os.replace(tmp, path)
        return path, True
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
