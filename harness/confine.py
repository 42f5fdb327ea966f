"""What a compiler run on an untrusted source may touch. A kernel source can make the compiler read any file
(`#include "/proc/self/environ"`, a header that is a symlink to a key) and print what it read in its error
messages, which end up in reports. So every compiler run on such a source (emu's g++ build and nvcc gate, the
GPU backend's nvcc, the SASS listing) is confined with Landlock to:
  * read and run: the system's program and library folders (SYSTEM), the compiler's own installation, and the
    folders of the paths its command names (the source's, the -I folders, the objects'), each without the
    entries at its top whose names begin with a dot (`.git`, where a CI checkout keeps its token; `.env`);
  * write: the scratch folders its caller names, and /dev/null.
Everything else is refused by the kernel, whatever the system call, also to the programs the compiler starts.
Where the kernel has no Landlock the compilers run as before, and qconform says so once (`warn_unconfined`)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from cudasrc.includes import local_headers
from harness import landlock

OFF_ENV = "QCONFORM_COMPILER_CONFINE"       # "off": compilers read what the user can (trusted sources only)
SYSTEM = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
          "/etc/ld.so.conf.d", "/etc/ld.so.preload", "/etc/localtime")
DEVICES = ("/dev/null",)
_VALUE_PREFIXES = ("-isystem", "-iquote", "-idirafter", "-include", "-imacros", "-I", "-L", "-B")
_warned: list[bool] = []


def disabled_by_user() -> bool:
    return os.environ.get(OFF_ENV, "").strip().lower() in ("off", "0", "no", "false")


def available() -> int:
    """The Landlock ABI the compilers are confined with, 0 when they are not (no Landlock, or switched off)."""
    return 0 if disabled_by_user() else landlock.abi()


def cache_part() -> str:
    """What a cached compiler log depends on: whether the compiler that wrote it was confined."""
    return f"compiler-confined:{available() > 0}"


def describe() -> str:
    version = available()
    if version:
        return (f"Landlock ABI {version}: reads limited to the system's and the toolchain's folders, the source's "
                "folder and the -I folders (without their dot entries); writes to the build's scratch folder")
    if disabled_by_user():
        return f"off: ${OFF_ENV}=off (trusted sources only; a source's #include can read any file you can)"
    return "not confined: this kernel has no Landlock; a source's #include can read any file you can"


def warn_unconfined() -> None:
    """Say once per process that compilers run unconfined where the kernel has no Landlock."""
    if not _warned and not disabled_by_user() and landlock.abi() == 0:
        _warned.append(True)
        print(f"qconform: warning: compilers run unconfined ({describe()}; SECURITY.md)", file=sys.stderr)


def _home() -> Optional[Path]:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError):
        return None


def too_wide(folder: "str | Path") -> bool:
    """Whether `folder` (resolved) is the home folder or `/`: never a folder any rule gives whole."""
    p = Path(folder).resolve()
    return p in (Path(p.anchor), _home())


def source_root(path: "str | Path") -> Optional[Path]:
    """The folder beneath which a compile that names `path` may read: the folder itself, or a file's folder.
    Not widened (to a checkout's top, say): a CI job may leave credentials anywhere in its checkout, and a
    folder outside these is named with -I. Never the home folder or `/` as a whole: None then."""
    p = Path(path).resolve()
    folder = p if p.is_dir() else p.parent
    return None if too_wide(folder) else folder


def source_roots(paths: Sequence["str | Path"]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        root = source_root(p) if os.path.exists(p) else None
        if root is not None and root not in out:
            out.append(root)
    return out


def may_read(path: "str | Path", roots: Sequence[Path]) -> bool:
    """Whether a compile confined to `roots` reads `path` (resolved): beneath a root, and not under one of its
    dot entries."""
    p = Path(path).resolve()
    return any(root in p.parents and not p.relative_to(root).parts[0].startswith(".") for root in roots)


def own_headers(source: str, flags: Sequence[str]) -> dict[Path, str]:
    """The headers of `source` found in the -I folders of a build's `flags` (cudasrc.includes.local_headers) that a
    confined compile may read: qconform reads no file for a source that the source's compiler may not."""
    dirs = include_dirs(flags)
    roots = source_roots(dirs)
    return local_headers(source, dirs, readable=lambda path: may_read(path, roots))


def include_dirs(flags: Sequence[str]) -> list[Path]:
    """The folders of a compile's -IDIR flags."""
    return [Path(f[2:]) for f in flags if f.startswith("-I") and len(f) > 2]


def header_digests(headers: dict[Path, str]) -> list[str]:
    """`path:SHA-256` of each of own_headers' headers, for a build's cache key (a changed header is a new build)."""
    return [f"{path}:{hashlib.sha256(text.encode('latin-1')).hexdigest()}" for path, text in headers.items()]


def named_paths(cmd: Sequence[str], cwd: "str | Path | None" = None) -> list[Path]:
    """The existing files and folders a compiler command names: plain arguments, the values of -I, -isystem,
    -include, -L and the like, and of --option=value (relative ones against `cwd`)."""
    base = Path(cwd or os.getcwd())
    out: list[Path] = []
    for arg in cmd[1:]:
        value = arg
        if arg.startswith("-"):
            prefix = next((p for p in _VALUE_PREFIXES if arg.startswith(p) and len(arg) > len(p)), None)
            value = arg[len(prefix):] if prefix else arg.partition("=")[2]
        if value and (base / value).exists():
            out.append((base / value).resolve())
    return out


def tool_home(exe: str) -> Path:
    """The installation a compiler belongs to: the folder above its bin/ (it reads its headers and libraries
    from there, and starts its helpers from there); its own folder where that would be the home folder or `/`
    (a wrapper in ~/bin)."""
    folder = Path(shutil.which(exe) or exe).resolve().parent
    return folder if too_wide(folder.parent) else folder.parent


def _rules(cmd: Sequence[str], cwd, writable: Sequence["str | Path"], reads: Sequence["str | Path"],
           version: int) -> landlock.Ruleset:
    rules = landlock.Ruleset(version, landlock.fs_rights(version))
    try:
        for p in (*SYSTEM, *reads):
            rules.allow(p, landlock.READ)
        rules.allow(tool_home(cmd[0]), landlock.READ)
        for root in source_roots([*named_paths(cmd, cwd), *([cwd] if cwd else [])]):
            allow_tree(rules, root)
        for p in writable:
            rules.allow(p, landlock.fs_rights(version))
        for p in DEVICES:
            rules.allow(p, landlock.READ_FILE | landlock.WRITE_FILE | landlock.TRUNCATE | landlock.IOCTL_DEV)
    except BaseException:
        rules.close()
        raise
    return rules


def allow_tree(rules: landlock.Ruleset, root: "str | Path", rights: int = landlock.READ) -> None:
    """`rights` (reading) beneath the folder `root`, the entries at its top whose names begin with a dot left out:
    then a rule for each other entry (Landlock gives rights back, it cannot take a sub-folder out of a rule; an
    entry made later at the top is not covered), and listing the root."""
    entries = list(os.scandir(root))
    if not any(e.name.startswith(".") for e in entries):
        rules.allow(root, rights)
        return
    rules.allow(root, landlock.READ_DIR)
    for entry in entries:
        if not entry.name.startswith("."):
            rules.allow(entry.path, rights)


@contextlib.contextmanager
def confined(cmd: Sequence[str], *, writable: Sequence["str | Path"], cwd: "str | Path | None" = None,
             reads: Sequence["str | Path"] = (), then: Optional[Callable[[], None]] = None
             ) -> Iterator[Optional[Callable[[], None]]]:
    """A preexec_fn that confines `cmd` (see the module's text), then runs `then` (another preexec_fn); for the
    subprocess started inside the block. `reads`: more folders of the toolchain's that it may read (another
    compiler's headers). Without Landlock: `then` alone, after a warning."""
    version = available()
    if version == 0:
        warn_unconfined()
        yield then
        return
    rules = _rules(cmd, cwd, writable, reads, version)

    def enter() -> None:
        rules.restrict_self()
        if then is not None:
            then()
    try:
        yield enter
    finally:
        rules.close()


REFUSAL = "qconform: the compiler was not allowed to read"      # explain's line begins so (backends.base.build_error)
_REFUSED = (re.compile(r"^(?:[^\n]*?: )?fatal error: (?P<path>[^\n:]+): Permission denied$", re.M),   # g++, nvcc
            re.compile(r'(?:could|can)not open source file "(?P<path>[^"\n]+)"'))


def explain(log: str) -> str:
    """A line to add to a compiler's log where confinement refused a file that exists (empty otherwise)."""
    if not available():
        return ""
    for pattern in _REFUSED:
        for m in pattern.finditer(log):
            path = m.group("path")
            if os.path.exists(path):
                target = os.path.realpath(path)
                where = ("" if target == path else f" (a link to {target})" if target != os.path.abspath(path)
                         else f" (that is {target})")
                return (f"{REFUSAL} {path}{where}: a source may include "
                        "files only from its own folder and the -I folders (not their dot entries, such as .git) "
                        "and the system's and the toolchain's folders; name a folder of yours with -I (SECURITY.md)")
    return ""
