"""Stand-in compilers for the tests of where a compiler's own temporaries go (harness.cache.tool_env): each run
makes a temporary file with mktemp, which, like nvcc and g++, uses $TMPDIR and else the system's temporary
folder, and records its path in a log; then it does what `then` says (a shell command). And the check that such a
compiler dies with the process that started it."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

NVCC_VERSION = "Cuda compilation tools, release 0.0, V0.0.0 (a stand-in)"
# What a stand-in nvcc does after recording: answer --version, and write the file named after -o.
NVCC_RUN = ('while [ $# -gt 0 ]; do if [ "$1" = -o ]; then : > "$2"; fi; shift; done\n'
            "exit 0")


def recording_tool(path: Path, log: Path, then: str = "exit 0") -> Path:
    """An executable shell script at `path` that appends the temporary file it made to `log`, then runs `then`.
    `--version` is answered like nvcc's, without a temporary."""
    path.write_text("#!/bin/sh\n"
                    f'if [ "$1" = --version ]; then echo "{NVCC_VERSION}"; exit 0; fi\n'
                    f'mktemp >> "{log}" || exit 3\n'
                    f"{then}\n")
    path.chmod(0o755)
    return path


def temporaries_made(log: Path) -> list[Path]:
    """The temporary files the recording tools made, in order (none when the log is absent)."""
    return [Path(line) for line in log.read_text().splitlines()] if log.exists() else []


def stand_in_system_folder(tmp_path: Path, monkeypatch) -> Path:
    """A folder under `tmp_path` that stands for the system's temporary folder ($TMPDIR), with a fresh cache
    ($QCONFORM_CACHE = tmp_path/cache) beside it."""
    system = tmp_path / "system"
    system.mkdir()
    monkeypatch.setenv("TMPDIR", str(system))
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    # the recording tools append to a log outside the build's scratch folder, which confinement refuses
    monkeypatch.setenv("QCONFORM_COMPILER_CONFINE", "off")
    return system


def check_made_in_scratch_folders(made: list[Path], cache_folder: Path, system: Path) -> None:
    """Each temporary in `made` was made in a scratch folder of `cache_folder` (named like every temporary, so
    the sweep finds it), which is removed now; none is in the stand-in system folder."""
    from harness.cache import _TEMP_NAME
    for temporary in made:
        assert temporary.parent.parent == cache_folder and _TEMP_NAME.match(temporary.parent.name), temporary
        assert not temporary.parent.exists(), f"{temporary.parent} was not removed"
    assert list(system.iterdir()) == []


def running(pid: int) -> bool:
    try:
        return ") Z" not in Path(f"/proc/{pid}/stat").read_text()     # a zombie has ended
    except OSError:
        return False


def kill_and_check_the_compiler_dies(starter: subprocess.Popen) -> None:
    """Kill `starter`, which has printed its compiler's pid, and check that the compiler ends too."""
    compiler = int(starter.stdout.readline())
    try:
        assert running(compiler)
        starter.kill()                      # as the -j pool kills a judge process
        starter.wait()
        deadline = time.monotonic() + 30    # the kernel signals at once; the margin is for a loaded machine
        while running(compiler) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(compiler), "the compiler outlived the process that started it"
    finally:
        if running(compiler):
            os.kill(compiler, signal.SIGKILL)
        starter.stdout.close()
