"""A run's lifecycle, the same for every command: where it may write (checked before any work), how it writes
(a run folder is built under a temporary name and replaces the old folder as a unit, with a manifest written
last), and how it ends on SIGINT / SIGTERM (quietly, temporaries removed, exit status 128 + signal).

- `check_output(path, option, kind, force)`: the one output-location check. A file output must not exist
  (unless --force) and must not be a folder; a folder output must not be a file (unless --force), must not hold
  the current folder, and must be either new, empty, or an earlier qconform run folder (unless --force). The
  parent must be writable: the check creates and removes a probe there, which also catches read-only mounts.
  Temporaries that killed runs left beside the output are removed, and said so.
- `RunFolder`: the run writes into a temporary sibling folder. `finish()` writes `run.json` (the manifest:
  "complete": true, the command, its arguments, the seed, the exit status, and every file with its size and
  SHA-256) and, when the run wrote a report.json, the same "complete"/"run" keys into it, then swaps the new
  folder in. Of the old folder only what its own manifest does not list is kept: other commands' run folders
  inside it (reports/check in reports) and, with --force, a user's files. An interrupted run never touches the
  old folder.
- How a run ends on SIGINT / SIGTERM (`Interrupted`, the handlers, the commit checkpoint) is
  `harness/interrupts.py`; `main` prints one line and exits 130 / 143.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Optional

from harness.cache import atomic_write, remove_stale_temporaries, temp_sibling
from harness.interrupts import interrupts_blocked, raise_if_interrupted

MANIFEST = "run.json"
MANIFEST_VERSION = 1


# ---------------------------------------------------------------------------------------------------- checks
def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _probe_writable(folder: Path, option: str) -> None:
    """Create and remove a probe in `folder`: os.access says nothing about read-only mounts or ACLs."""
    probe = temp_sibling(folder / "probe")
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise ValueError(f"{option}: cannot write in {folder} ({_why(exc)})") from None


def _check_parent(path: Path, option: str) -> None:
    """`path` can be created: its nearest existing ancestor is a writable folder (the folders between are made
    when the run writes, so a refused run leaves none behind)."""
    for up in path.absolute().parents:
        if up.exists():
            if not up.is_dir():
                raise ValueError(f"{option}: {up} is a file, so {path} cannot be created")
            _probe_writable(up, option)
            return


def _report_stale(path: Path) -> None:
    for entry, size in remove_stale_temporaries(path):
        print(f"qconform: removed {entry} ({size / 1e6:.1f} MB), left by an interrupted earlier run",
              file=sys.stderr)


def read_manifest(folder: Path) -> Optional[dict]:
    """The run manifest of `folder`, or None when it is not a complete qconform run folder."""
    try:
        doc = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("complete") is True else None


# What report, check and generate wrote before run folders had a manifest: recognised by their report.json
LEGACY_REPORT_FILES = {"report.json", "report.md", "report.html", "generation"}


def _owned(folder: Path) -> set[str]:
    """Top-level names that the run which wrote `folder` owns (its manifest lists them)."""
    manifest = read_manifest(folder)
    if manifest:
        return {MANIFEST} | {str(rel).split("/", 1)[0] for rel in manifest.get("files", {})}
    try:
        legacy = json.loads((folder / "report.json").read_text())
    except (OSError, ValueError):
        return set()
    return LEGACY_REPORT_FILES if isinstance(legacy, dict) and {"version", "meta"} <= set(legacy) else set()


def _foreign(folder: Path) -> list[Path]:
    """Entries of an existing output folder that is no run folder, other than run folders of their own: a
    user's files. (In a run folder, what the run did not write was carried over by an earlier --force.)"""
    if read_manifest(folder) is not None:
        return []
    owned = _owned(folder)
    return sorted(e for e in folder.iterdir() if e.name not in owned
                  and not (e.is_dir() and read_manifest(e) is not None))


def check_output(text: str, option: str, kind: str, force: bool = False) -> Path:
    """Check an output location before any work (see the module's docstring); returns it as a Path.
    kind: "file", "folder", or "update" (an existing folder whose files the command rewrites on purpose, such
    as golden update's locks)."""
    path = Path(text)
    if kind == "update":
        if path.exists() and not path.is_dir():
            raise ValueError(f"{option}: {text} is a file, not a folder")
        _probe_writable(path, option) if path.exists() else _check_parent(path, option)
        return path
    if kind == "folder":
        here = Path.cwd().resolve()
        target = path.resolve()
        if target == here or target in here.parents:
            raise ValueError(f"{option}: {text} is the current folder or holds it; the run replaces its output "
                             f"folder as a unit, so give a sub-folder (e.g. {Path(text) / 'reports'})")
    if path.is_symlink() and not path.exists():
        raise ValueError(f"{option}: {text} is a dangling symbolic link")
    if path.exists():
        if kind == "file":
            if path.is_dir():
                raise ValueError(f"{option}: {text} is a folder; give a file name")
            if not path.is_file():
                raise ValueError(f"{option}: {text} exists and is not a regular file")
            if not force:
                raise ValueError(f"{option}: {text} already exists; give --force to replace it")
        elif not path.is_dir():
            if not force:
                raise ValueError(f"{option}: {text} is an existing file, not a folder; give --force to replace it")
        else:
            try:
                foreign = _foreign(path)
            except OSError as exc:
                raise ValueError(f"{option}: cannot read the folder {text} ({_why(exc)})") from None
            if foreign and not force:
                shown = ", ".join(e.name for e in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
                raise ValueError(f"{option}: {text} holds files that no earlier qconform run there wrote ({shown}); "
                                 f"give a new or empty folder, or --force to write into it (files of the same "
                                 f"name are replaced, the others kept)")
            _probe_writable(path, option)
    _check_parent(path, option)
    _report_stale(path)
    return path


def check_input(text: str, option: str) -> Path:
    """An input file or folder that must exist and be readable, checked before any work."""
    path = Path(text)
    if not path.exists():
        raise ValueError(f"{option}: no such file {text!r}")
    if not os.access(path, os.R_OK) or (path.is_dir() and not os.access(path, os.X_OK)):
        raise ValueError(f"{option}: {text} is not readable (permission denied)")
    return path


# ---------------------------------------------------------------------------------------------------- run folder
def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _file_entry(path: Path) -> dict:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": h.hexdigest()}


def arguments_of(args) -> dict:
    """The parsed arguments as JSON values (what reruns the command)."""
    out = {}
    for k, v in sorted(vars(args).items()):
        if k == "func" or callable(v):
            continue
        out[k] = v if isinstance(v, (str, int, float, bool, type(None))) else (
            [str(x) for x in v] if isinstance(v, (list, tuple)) else str(v))
    return out


class RunFolder:
    """`with RunFolder(args.out, "--out", args.force, "report") as run: ...write under run.path...;
    run.finish(status, seed, args)`. Checked when constructed; leaving the block without finish() (an error,
    an interrupt) removes the temporary folder and leaves the old one as it was."""

    def __init__(self, text: str, option: str, force: bool, command: str):
        self.final = check_output(text, option, "folder", force)
        self.option, self.command = option, command
        self.path = temp_sibling(self.final)
        self.started = time.time()
        self.finished = False

    def __enter__(self) -> "RunFolder":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.path.mkdir()
        except BaseException:               # an interrupt right after the mkdir: __exit__ will not run
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if not self.finished:
            shutil.rmtree(self.path, ignore_errors=True)

    def finish(self, status: int, args=None, seed: Optional[int] = None) -> Path:
        """Write the manifest and swap the run folder into place; returns the final folder."""
        run = {"command": self.command, "arguments": arguments_of(args) if args is not None else {},
               "argv": sys.argv[1:], "seed": seed, "exit_status": status,
               "started_utc": _utc(self.started), "finished_utc": _utc(time.time())}
        report = self.path / "report.json"
        if report.is_file():
            doc = json.loads(report.read_text())
            if isinstance(doc, dict):
                doc = {"complete": True, "run": run, **{k: v for k, v in doc.items() if k not in ("complete", "run")}}
                atomic_write(report, json.dumps(doc, indent=1) + "\n")
        self.names = sorted(e.name + ("/" if e.is_dir() else "") for e in self.path.iterdir())
        files = {p.relative_to(self.path).as_posix(): _file_entry(p)
                 for p in sorted(self.path.rglob("*")) if p.is_file() and not p.is_symlink()}
        manifest = {"qconform_run": MANIFEST_VERSION, "complete": True, **run, "files": files}
        atomic_write(self.path / MANIFEST, json.dumps(manifest, indent=1) + "\n")
        raise_if_interrupted()
        with interrupts_blocked():      # the renames happen together; a signal is answered after
            self._swap()
        self.finished = True
        return self.final

    def _swap(self) -> None:
        final = self.final
        if final.exists() and not final.is_dir():
            final.unlink()                  # a file, replaced under --force (checked before the run)
        if not final.exists():
            os.rename(self.path, final)
            return
        owned = _owned(final)
        carried = []
        try:
            for entry in sorted(final.iterdir()):
                if entry.name in owned or (self.path / entry.name).exists():
                    continue                # the earlier run's own files, or replaced by this run's
                os.rename(entry, self.path / entry.name)
                carried.append(entry.name)
        except OSError:
            for name in carried:            # put back what was moved, then report the error
                os.rename(self.path / name, final / name)
            raise
        aside = temp_sibling(final)
        os.rename(final, aside)
        os.rename(self.path, final)
        shutil.rmtree(aside, ignore_errors=True)

    def wrote_line(self) -> str:
        """One line for the console: the finished folder and what the run wrote there."""
        return f"wrote {self.final}/ ({', '.join(self.names)}; {MANIFEST} lists every file with its SHA-256)"

    def shown(self, path: "str | Path") -> Path:
        """Where a file written under the temporary folder is once the run is finished."""
        return self.final / Path(path).relative_to(self.path)
