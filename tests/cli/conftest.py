"""Helpers for the run-lifecycle tests: the qconform command line in a child process (for signals), a source
file whose kernels match no contract (a `check` that judges nothing and so ends at once), a small Rust file
for `extract`, and a read-only folder."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

NO_CONTRACT_CU = "__global__ void my_kernel(float* y, int n){ int i = threadIdx.x; if (i < n) y[i] = 0.f; }\n"


def rust_with_kernels(*names: str) -> str:
    """A Rust file whose string constants each hold one __global__ kernel (what `extract` decodes)."""
    return "\n".join(f'const {n.upper()}: &str = "__global__ void {n}(float* y) {{ y[0] = 1.f; }}\\n";'
                     for n in names) + "\n"


@pytest.fixture
def no_contract_cu(tmp_path) -> Path:
    p = tmp_path / "mine.cu"
    p.write_text(NO_CONTRACT_CU)
    return p


@pytest.fixture
def read_only_parent(tmp_path) -> Path:
    """A path whose parent folder cannot be written: a 0555 folder, or (as root, whom modes do not stop) a
    folder on the read-only sysfs."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        yield ro / "out"
        ro.chmod(0o755)
        return
    sysfs = Path("/sys")
    try:
        (sysfs / "qconform-probe").mkdir()
    except OSError:
        yield sysfs / "qconform-test" / "out"
        return
    (sysfs / "qconform-probe").rmdir()
    pytest.skip("running as root with no read-only file system to write into (a 0555 folder does not stop root)")


def qconform(*args: str, **kw) -> subprocess.Popen:
    """`qconform ARGS` as a child process of its own session (so a signal reaches it alone), in the checkout."""
    env = dict(os.environ, PYTHONPATH=str(REPO), **kw.pop("env", {}))
    return subprocess.Popen([sys.executable, "-m", "harness.cli", *args], cwd=kw.pop("cwd", REPO), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


_HOLD_COMMIT = """
import os, runpy, sys, time
out = os.path.abspath(sys.argv[1])
for name in ("replace", "rename"):
    real = getattr(os, name)
    def held(src, dst, *a, _real=real, **k):
        if os.path.abspath(dst) == out:
            time.sleep(120)
        return _real(src, dst, *a, **k)
    setattr(os, name, held)
sys.argv = ["qconform", *sys.argv[2:]]
runpy.run_module("harness.cli", run_name="__main__", alter_sys=True)
"""


def qconform_holding_commit(out: Path, *args: str) -> subprocess.Popen:
    """`qconform ARGS` as `qconform` does, except that the final rename onto `out` waits two minutes first: a
    signal sent once the temporary exists then always lands before the output is committed, however fast the
    machine writes (on a fast one a 49 MB model is renamed into place before a poll can see its temporary)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-c", _HOLD_COMMIT, str(out), *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(predicate, timeout_s: float, what: str) -> None:
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def descendants_alive(marker: str) -> list[int]:
    """Processes whose environment carries `marker` (a run's children and grandchildren inherit it)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            stat = (d / "stat").read_text()
        except OSError:
            continue
        if marker.encode() in env and ") Z" not in stat:
            found.append(int(d.name))
    return found


@pytest.fixture(scope="session")
def tiny_model_file(tmp_path_factory) -> Path:
    """A one-block tiny synthetic checkpoint (8 MB)."""
    from harness.model.synthetic import write_synthetic_gguf
    return write_synthetic_gguf("tiny", tmp_path_factory.mktemp("model") / "tiny1.gguf", layers=1, seed=5,
                                progress=False)
