"""harness.confine: a compiler run on an untrusted source reads only the system's, the toolchain's and the
source's own folders, and writes only its scratch folder (SECURITY.md). Each attack reads a planted secret
through the compiler; each is refused and its text never reaches a message, while the same compile with
confinement off (the negative control) prints the secret."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cudasrc.host_code import Program
from harness import confine, landlock
from harness.backends.base import BuildError, ConfinementRefused, build_error
from harness.backends.emu import gate

needs_landlock = pytest.mark.skipif(landlock.abi() == 0, reason="this kernel has no Landlock")
SECRET = "ghp_planted_token_4242"


def secret_file(folder: Path, name: str = "secret.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"{SECRET}\n")
    return path


def quoting(include: str) -> str:
    """A source that makes the compiler quote what `include` holds (an undefined identifier is named)."""
    return f'int v =\n#include "{include}"\n;\nint main() {{ return v; }}\n'


def preprocess(tmp_path: Path, source: str, src_folder: Path, confined: bool = True, flags=()) -> str:
    """g++ -fsyntax-only on `source` written into `src_folder`, confined with a scratch folder; its messages."""
    src = src_folder / "k.cpp"
    src.write_text(source)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    cmd = ["g++", "-fsyntax-only", *flags, f"-I{src_folder}", str(src)]
    if not confined:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stderr
    with confine.confined(cmd, writable=[work], cwd=work) as preexec:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=work, preexec_fn=preexec,
                           env=dict(os.environ, TMPDIR=str(work)))
    return r.stderr


# ---- which folders: pure path rules -----------------------------------------------------------------------
def test_the_paths_a_command_names(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "k.cu").write_text("")
    (tmp_path / "pre.h").write_text("")
    cmd = ["g++", "-O2", f"-I{tmp_path / 'inc'}", "-include", str(tmp_path / "pre.h"), "k.cu", "-o", "out.o",
           f"--sysroot={tmp_path}", "-I/no/such/folder", "-Xptxas", "-v"]
    assert confine.named_paths(cmd, tmp_path) == [tmp_path / "inc", tmp_path / "pre.h", tmp_path / "k.cu",
                                                    tmp_path]


def test_a_source_root_is_the_named_folder_never_widened_never_home_or_root(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "kernels" / "sub").mkdir(parents=True)
    (repo / "kernels" / "k.cu").write_text("")
    assert confine.source_root(repo / "kernels" / "sub") == repo / "kernels" / "sub"     # not the checkout's top
    assert confine.source_root(repo / "kernels" / "k.cu") == repo / "kernels"           # a file: its folder
    monkeypatch.setattr(confine, "_home", lambda: tmp_path)
    assert confine.source_root(tmp_path) is None                                        # never the home folder
    assert confine.source_root(tmp_path / "x.cu") is None
    assert confine.source_root("/") is None


def test_a_compilers_installation_is_the_folder_above_its_bin_never_home(tmp_path, monkeypatch):
    for folder in ("cuda/bin", "bin"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "nvcc").write_text("")
    assert confine.tool_home(str(tmp_path / "cuda" / "bin" / "nvcc")) == tmp_path / "cuda"
    monkeypatch.setattr(confine, "_home", lambda: tmp_path)
    assert confine.tool_home(str(tmp_path / "bin" / "nvcc")) == tmp_path / "bin"      # a wrapper in ~/bin


def test_may_read_leaves_out_a_roots_dot_entries_and_what_lies_outside(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "inc").mkdir()
    for name in (".git/config", ".env", "a.h", "inc/.hidden.h"):
        (repo / name).write_text("")
    (tmp_path / "b.h").write_text("")
    (repo / "link.h").symlink_to(tmp_path / "b.h")
    roots = [repo]
    assert confine.may_read(repo / "a.h", roots)
    assert confine.may_read(repo / "inc" / ".hidden.h", roots)          # only the entries at a root's top
    assert not confine.may_read(repo / ".git" / "config", roots)
    assert not confine.may_read(repo / ".env", roots)
    assert not confine.may_read(tmp_path / "b.h", roots)
    assert not confine.may_read(repo / "link.h", roots)                 # resolved: the link's target counts


@needs_landlock
@pytest.mark.parametrize("message", [
    "k.cpp:2:10: fatal error: {path}: Permission denied",           # an #include
    "cc1plus: fatal error: {path}: Permission denied",              # a file the command line names (-include)
    'k.cu(2): catastrophic error: cannot open source file "{path}"',
])
def test_a_refusal_is_explained_with_where_the_path_leads(tmp_path, message):
    secret = secret_file(tmp_path)
    (tmp_path / "link.h").symlink_to(secret)
    assert f"not allowed to read {secret}: " in confine.explain(message.format(path=secret))
    assert f"(a link to {secret})" in confine.explain(message.format(path=tmp_path / "link.h"))
    assert confine.explain(message.format(path=tmp_path / "missing.h")) == ""     # absent: not confinement's doing


# ---- the compiler, confined -------------------------------------------------------------------------------
@needs_landlock
def test_an_absolute_include_outside_the_tree_is_refused_and_its_text_never_printed(tmp_path):
    secret = secret_file(tmp_path / "elsewhere")
    src = tmp_path / "src"
    src.mkdir()
    out = preprocess(tmp_path, quoting(str(secret)), src)
    assert "Permission denied" in out and SECRET not in out
    assert "not allowed to read" in confine.explain(out) and str(secret) in confine.explain(out)
    assert SECRET in preprocess(tmp_path, quoting(str(secret)), src, confined=False)     # negative control


@needs_landlock
def test_a_header_that_is_a_link_to_a_secret_is_refused(tmp_path):
    secret = secret_file(tmp_path / "elsewhere")
    src = tmp_path / "src"
    src.mkdir()
    (src / "evil.h").symlink_to(secret)
    out = preprocess(tmp_path, quoting("evil.h"), src)
    assert "Permission denied" in out and SECRET not in out
    assert SECRET in preprocess(tmp_path, quoting("evil.h"), src, confined=False)


@needs_landlock
def test_the_environment_and_other_processes_are_not_readable(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_TEST_TOKEN", SECRET)
    src = tmp_path / "src"
    src.mkdir()
    for path in ("/proc/self/environ", "/proc/1/environ", "/etc/passwd"):
        out = preprocess(tmp_path, quoting(path), src)
        assert "Permission denied" in out and SECRET not in out and "root:" not in out, path


@needs_landlock
def test_a_checkouts_dot_entries_stay_unread_and_a_sibling_folder_needs_its_i_flag(tmp_path):
    repo = tmp_path / "repo"
    secret_file(repo / ".git", "config")
    secret_file(repo, ".env")
    common = repo / "common"
    common.mkdir()
    (common / "value.h").write_text("#define VALUE 7\n")
    src = repo / "kernels"
    src.mkdir()
    for leak in ("../.git/config", "../.env"):
        out = preprocess(tmp_path, quoting(leak), src, flags=[f"-I{repo}"])      # even with the top as -I
        assert "Permission denied" in out and SECRET not in out, leak
    sibling = '#include "../common/value.h"\nint main() { return VALUE; }\n'
    assert "Permission denied" in preprocess(tmp_path, sibling, src)            # not widened to the checkout
    assert preprocess(tmp_path, sibling, src, flags=[f"-I{common}"]) == ""      # named with -I: it builds


@needs_landlock
def test_the_compiler_writes_only_in_its_scratch_folder(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.cpp").write_text("int main() { return 0; }\n")
    work = tmp_path / "work"
    work.mkdir()
    for target in (work / "k.o", src / "k.o"):
        cmd = ["g++", "-c", str(src / "k.cpp"), "-o", str(target)]
        with confine.confined(cmd, writable=[work], cwd=work) as preexec:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=work, preexec_fn=preexec,
                               env=dict(os.environ, TMPDIR=str(work)))
        assert (r.returncode == 0) == (target.parent == work) == target.exists(), r.stderr


def test_switched_off_or_without_landlock_the_compiler_is_not_confined_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(confine.OFF_ENV, "off")
    assert confine.available() == 0 and "off" in confine.describe()
    monkeypatch.delenv(confine.OFF_ENV)
    monkeypatch.setattr(landlock, "abi", lambda: 0)
    monkeypatch.setattr(confine, "_warned", [])
    marker = []
    with confine.confined(["g++"], writable=[tmp_path], then=lambda: marker.append(1)) as preexec:
        preexec()
    assert marker == [1]
    with confine.confined(["g++"], writable=[tmp_path]) as preexec:
        assert preexec is None
    err = capsys.readouterr().err
    assert err.count("compilers run unconfined") == 1 and "no Landlock" in err          # said once


# ---- every compiler qconform runs on a source -------------------------------------------------------------
KERNEL = '__device__ int v =\n#include "{include}"\n;\n__global__ void k(int* y) {{ y[threadIdx.x] = v; }}\n'


@needs_landlock
@pytest.mark.parametrize("with_gate", [True, False], ids=["nvcc gate", "host compiler alone"])
def test_an_emu_build_cannot_read_outside_the_sources_tree(tmp_path, monkeypatch, with_gate):
    from harness.backends.emu import toolchain as tc
    from harness.backends.emu.build import build
    if with_gate and gate.nvcc_gate()[0] is None:
        pytest.skip("no nvcc: the device-side gate is skipped")
    if not with_gate:
        monkeypatch.setattr(gate, "start_device_compile", lambda *a, **k: None)
        monkeypatch.setattr(gate, "cache_part", lambda: "gate:off-for-tests")
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    secret = secret_file(tmp_path / "elsewhere")
    src = tmp_path / "src"
    src.mkdir()
    (src / "evil.h").symlink_to(secret)
    toolchain = tc.toolchain()
    for include in (str(secret), "evil.h"):
        with pytest.raises(ConfinementRefused) as info:
            build(KERNEL.format(include=include), [f"-I{src}"], toolchain=toolchain, name="k.cu")
        assert SECRET not in str(info.value) and str(info.value).startswith(confine.REFUSAL), str(info.value)
    # qconform's own walk of the headers (it copies them without host code) leaves both unread too
    (src / "fine.h").write_text("#define FINE 1\n")
    walked = confine.own_headers(f'#include "{secret}"\n#include "evil.h"\n#include "fine.h"\n', [f"-I{src}"])
    assert list(walked) == [src / "fine.h"]


@needs_landlock
def test_the_gpu_compile_cannot_read_outside_its_entry(tmp_path):
    from harness.toolchain import compile as cc
    from harness.toolchain.finder import toolchain_or_reason
    toolchain, why = toolchain_or_reason()
    if toolchain is None:
        pytest.skip(f"no nvcc: {why}")
    secret = secret_file(tmp_path / "elsewhere")
    result = cc.compile_source(KERNEL.format(include=secret), "sm_90", toolchain, cache=tmp_path / "entries")
    assert not result.ok and SECRET not in result.log and "not allowed to read" in result.log, result.log


@needs_landlock
def test_the_gpu_backends_compile_is_the_same_confined_nvcc(tmp_path, monkeypatch):
    """GpuBackend compiles through cubin_of (PyCUDA only loads the cubin): checked here without a GPU."""
    from harness.toolchain import compile as cc
    from harness.toolchain.finder import toolchain_or_reason
    toolchain, why = toolchain_or_reason()
    if toolchain is None:
        pytest.skip(f"no nvcc: {why}")
    monkeypatch.setenv("QCONFORM_CACHE", str(tmp_path / "cache"))
    good, log = cc.cubin_of("__global__ void k(int* y) { y[threadIdx.x] = 1; }", str(toolchain.nvcc),
                            ["-arch", "sm_90"])
    assert good is not None and good[:4] == b"\x7fELF", log
    secret = secret_file(tmp_path / "elsewhere")
    bad, log = cc.cubin_of(KERNEL.format(include=secret), str(toolchain.nvcc), ["-arch", "sm_90"])
    assert bad is None and SECRET not in log and "not allowed to read" in log
    from harness.backends import gpu
    monkeypatch.delenv(gpu.DRIVER_ENV, raising=False)
    backend = gpu.GpuBackend.__new__(gpu.GpuBackend)             # no device: only the compile step is used
    backend.nvcc = str(toolchain.nvcc)
    backend.device = type("Sm90", (), {"compute_capability": lambda self: (9, 0)})()
    with pytest.raises(ConfinementRefused) as info:
        backend._cached_cubin("leak-test", KERNEL.format(include=secret), (), {}, Program())
    assert SECRET not in str(info.value) and str(info.value).startswith(confine.REFUSAL)


@needs_landlock
def test_a_refused_header_is_a_confinement_refusal_and_any_other_failure_a_build_error(tmp_path):
    """build_error tells qconform's refusal (the kernel is not at fault: its cases are unchecked) from a source
    that does not compile (its fault): the same compile, with the header readable or not."""
    elsewhere = secret_file(tmp_path / "elsewhere", "h.h")
    (tmp_path / "src").mkdir()
    log = preprocess(tmp_path, quoting(str(elsewhere)), tmp_path / "src")
    refused = build_error("emu: the host compiler rejected k.cpp:", log.strip(), log)
    assert type(refused) is ConfinementRefused
    first, *rest = str(refused).splitlines()
    assert first.startswith(confine.REFUSAL) and str(elsewhere) in first and rest      # the why first, then g++
    assert "rejected" not in str(refused)          # not "the compiler rejected it": it was not let read it
    broken = "int v = ;\n"
    log = preprocess(tmp_path, broken, tmp_path / "src")
    failed = build_error("emu: the host compiler rejected k.cpp:", log.strip(), log)
    assert type(failed) is BuildError and str(failed).startswith("emu: the host compiler rejected k.cpp:")
