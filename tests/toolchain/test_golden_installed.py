"""`qconform golden check` from a non-editable install: the locks travel in the wheel (golden/ beside the
packages, where golden.default_root looks when the current folder has none). A static check that the
packaging rules name every lock file, the lookup from a folder without golden/, and (when pip can build the
wheel here) the real thing: the wheel unpacked into an empty site folder, `golden check` run from elsewhere."""
from __future__ import annotations

import fnmatch
import glob
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")


def lock_files() -> list[str]:
    return sorted(p.relative_to(REPO / "golden").as_posix() for p in (REPO / "golden").rglob("*")
                  if p.is_file() and p.suffix in (".cu", ".json"))


def test_the_packaging_rules_name_every_lock():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert any(fnmatch.fnmatch("golden", pat) for pat in cfg["packages"]["find"]["include"])
    patterns = cfg["package-data"]["golden"]
    missing = [f for f in lock_files() if not any(fnmatch.fnmatch(f, p) or fnmatch.fnmatch(f, p.replace("**/", ""))
                                                  for p in patterns)]
    assert lock_files() and not missing, missing


def test_the_packaging_rules_name_every_file_of_emus_runtime():
    """Every file an emu build reads from its own folder (runtime, the headers kernels include: cub/, cuda/...) is in
    the wheel, as setuptools globs package data (a `*` does not cross a folder)."""
    from harness.backends.emu.toolchain import RUNTIME_DIR, runtime_files
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packaged = {f for pattern in cfg["package-data"]["harness.backends.emu"]
                for f in glob.glob(pattern, root_dir=RUNTIME_DIR)}
    needed = {p.relative_to(RUNTIME_DIR).as_posix() for p in runtime_files() if p.suffix != ".py"}
    assert "cub/cub.cuh" in needed and not needed - packaged, sorted(needed - packaged)


def test_the_lookup_finds_the_locks_beside_the_packages(tmp_path, monkeypatch):
    from harness.toolchain import golden
    monkeypatch.chdir(tmp_path)                        # no ./golden here
    assert golden.default_root() == REPO / "golden"    # beside harness/, as in site-packages


def test_without_locks_golden_check_says_so(tmp_path, capsys):
    from harness.cli import main
    assert main(["golden", "check", "--golden-dir", str(tmp_path / "none")]) == 2
    assert "no golden lock folder at" in capsys.readouterr().err


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = out / "src"                                  # a copy: setuptools leaves build/ and *.egg-info behind
    for name in ("pyproject.toml", "README.md"):
        src.mkdir(exist_ok=True)
        shutil.copy(REPO / name, src / name)
    for name in ("harness", "reference", "emitters", "cudasrc", "golden"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out)],
                           capture_output=True, text=True, timeout=600)
    wheels = glob.glob(str(out / "*.whl"))
    if build.returncode or not wheels:
        pytest.skip(f"pip could not build the wheel here (its build backend is fetched from the package index): "
                    f"{build.stderr.strip()[-300:]}")
    site = out / "site"
    zipfile.ZipFile(wheels[0]).extractall(site)
    return site


def test_golden_check_from_the_installed_wheel(unpacked_wheel, tmp_path):
    names = {p.relative_to(unpacked_wheel / "golden").as_posix() for p in (unpacked_wheel / "golden").rglob("*")
             if p.is_file()}
    assert set(lock_files()) <= names
    env = dict(os.environ, PYTHONPATH=str(unpacked_wheel))
    run = subprocess.run([sys.executable, "-m", "harness.cli", "golden", "check"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "0 difference(s), all locks match" in run.stdout
    assert str(unpacked_wheel) in subprocess.run(
        [sys.executable, "-c", "import harness; print(harness.__file__)"], cwd=tmp_path, env=env,
        capture_output=True, text=True).stdout          # the wheel's code ran, not the checkout's
