"""Where a run may write and how: every output location is checked before the first case (one line, exit 2,
nothing lost), a user's file is never replaced without --force, a run folder is built under a temporary name
and replaces the old one as a unit with its manifest (run.json; report.json carries "complete": true), and
temporaries that killed runs left are removed. Each probe has its negative control."""
from __future__ import annotations

import json
import os
import signal

import pytest

from harness.cache import temp_sibling
from harness.cli import main
from harness.cli.lifecycle import MANIFEST

from .conftest import qconform, qconform_holding_commit, rust_with_kernels, wait_for

WRITERS = ["report", "check", "generate", "mutate", "extract", "make-model", "export-weights"]


def command_line(cmd: str, tmp_path, out) -> list[str]:
    """A command that would write to `out`, with every other argument valid."""
    src = tmp_path / "mine.cu"
    src.write_text("__global__ void my_kernel(float* y){ y[0] = 0.f; }\n")
    rs = tmp_path / "k.rs"
    rs.write_text(rust_with_kernels("ka"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"not read before the output is checked")
    return {"report": ["report", "--backend", "reference", "--shapes", "tiny", "--no-generation"],
            "check": ["check", "--source", str(src), "--backend", "emu"],
            "generate": ["generate", "--tokens", "1"],
            "mutate": ["mutate", "--source", str(src)],
            "extract": ["extract", str(rs)],
            "make-model": ["make-model", "--preset", "tiny", "--no-progress"],
            "export-weights": ["export-weights", str(model), "--no-progress"]}[cmd] + ["--out", str(out)]


@pytest.mark.parametrize("cmd", WRITERS)
def test_an_output_that_is_an_existing_file_is_refused_before_any_work(cmd, tmp_path, capsys):
    out = tmp_path / "taken"
    out.write_text("a user's file")
    argv = command_line(cmd, tmp_path, out)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--out: {out}" in err and ("existing file" in err or "already exists" in err) and "--force" in err
    assert "Traceback" not in err and "seed" not in err          # no case ran (the seed line comes first)
    assert out.read_text() == "a user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no temporary left either


@pytest.mark.parametrize("cmd", WRITERS)
def test_an_output_in_a_read_only_folder_is_refused_before_any_work(cmd, tmp_path, read_only_parent, capsys):
    assert main(command_line(cmd, tmp_path, read_only_parent)) == 2
    err = capsys.readouterr().err
    assert "--out: cannot" in err and "Traceback" not in err and "seed" not in err


def test_negative_control_a_writable_output_runs(tmp_path, capsys):
    out = tmp_path / "fresh"
    assert main(command_line("check", tmp_path, out)) == 3       # runs: its kernel matches no contract
    assert (out / "report.json").is_file() and (out / MANIFEST).is_file()


def test_make_model_never_overwrites_without_force(tmp_path, capsys):
    keep = tmp_path / "keep.gguf"
    keep.write_text("not even a GGUF")
    assert main(["make-model", "--preset", "tiny", "--out", str(keep), "--no-progress"]) == 2
    assert "already exists; give --force" in capsys.readouterr().err
    assert keep.read_text() == "not even a GGUF"
    assert main(["make-model", "--preset", "tiny", "--out", str(keep), "--no-progress", "--force"]) == 0
    assert keep.read_bytes()[:4] == b"GGUF"


def test_export_weights_replaces_a_folder_only_with_force(tiny_model_file, tmp_path, capsys):
    out = tmp_path / "w"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    assert main(["export-weights", str(tiny_model_file), "--out", str(out), "--no-progress"]) == 2
    assert "holds files that no earlier qconform run there wrote (mine.txt)" in capsys.readouterr().err
    assert main(["export-weights", str(tiny_model_file), "--out", str(out), "--no-progress", "--force"]) == 0
    assert (out / "manifest.json").is_file() and not (out / "mine.txt").exists()
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _extract(tmp_path, out, *names, force=False) -> int:
    rs = tmp_path / f"{'_'.join(names)}.rs"
    rs.write_text(rust_with_kernels(*names))
    return main(["extract", str(rs), "--out", str(out)] + (["--force"] if force else []))


def test_a_rerun_replaces_the_run_folder_as_a_unit(tmp_path, capsys):
    out = tmp_path / "cu"
    assert _extract(tmp_path, out, "ka", "kb") == 0
    first = json.loads((out / MANIFEST).read_text())
    assert first["complete"] is True and first["command"] == "extract" and set(first["files"]) == {"KA.cu", "KB.cu"}
    assert first["arguments"]["out"] == str(out)
    # another command's run folder inside it is kept; the first run's own files are not
    assert main(["check", "--source", str(out / "KA.cu"), "--backend", "emu", "--out", str(out / "chk")]) == 3
    assert _extract(tmp_path, out, "kc") == 0
    assert sorted(p.name for p in out.iterdir()) == ["KC.cu", "chk", MANIFEST]
    assert (out / "chk" / "report.json").is_file()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_users_files_are_kept_and_need_force(tmp_path, capsys):
    out = tmp_path / "cu"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert _extract(tmp_path, out, "ka") == 2
    assert "holds files that no earlier qconform run there wrote (notes.txt)" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert _extract(tmp_path, out, "ka", force=True) == 0
    assert sorted(p.name for p in out.iterdir()) == ["KA.cu", "notes.txt", MANIFEST]
    assert _extract(tmp_path, out, "kb") == 0                     # now a run folder: no --force needed
    assert sorted(p.name for p in out.iterdir()) == ["KB.cu", "notes.txt", MANIFEST]


def test_report_json_carries_complete_seed_and_arguments(tmp_path, capsys):
    out = tmp_path / "chk"
    src = tmp_path / "mine.cu"
    src.write_text("__global__ void my_kernel(float* y){ y[0] = 0.f; }\n")
    assert main(["check", "--source", str(src), "--backend", "emu", "--seed", "11", "--out", str(out)]) == 3
    doc = json.loads((out / "report.json").read_text())
    assert doc["complete"] is True and doc["run"]["seed"] == 11 and doc["run"]["arguments"]["source"] == str(src)
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["exit_status"] == 3 and "report.json" in manifest["files"]
    assert "wrote" in capsys.readouterr().err


def test_the_output_folder_may_not_hold_the_current_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _extract(tmp_path, ".", "ka") == 2
    assert "current folder" in capsys.readouterr().err


def test_stale_temporaries_of_killed_runs_are_removed_and_reported(tmp_path, capsys):
    out = tmp_path / "m.gguf"
    dead = temp_sibling(out).with_name(f".m.gguf.{2**22 + 7}.0123abcd.tmp")      # a pid above pid_max
    dead.write_bytes(b"x" * 1000)
    live = temp_sibling(out)                        # this process's: still being written, kept
    live.write_bytes(b"y")
    assert main(["make-model", "--preset", "tiny", "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"removed {dead}" in err and "interrupted earlier run" in err
    assert not dead.exists() and live.exists()


@pytest.fixture(scope="module")
def tails_model_file(tmp_path_factory):
    """The tails synthetic checkpoint (49 MB): exporting it takes long enough to be interrupted."""
    from harness.model.synthetic import write_synthetic_gguf
    return write_synthetic_gguf("tails", tmp_path_factory.mktemp("tails") / "tails.gguf", progress=False)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["make-model", "export-weights"])
def test_a_signal_while_writing_a_model_cleans_up_quietly(command, signum, tmp_path, request):
    out = tmp_path / "m.gguf"
    if command == "make-model":
        args = ["make-model", "--preset", "tails", "--out", str(out), "--no-progress"]
    else:
        args = ["export-weights", str(request.getfixturevalue("tails_model_file")), "--out", str(out), "--no-progress"]
    proc = qconform_holding_commit(out, *args)
    wait_for(lambda: any(p.name.startswith(".m.gguf.") for p in tmp_path.iterdir()) or proc.poll() is not None,
             60, "the temporary file")
    assert proc.poll() is None, "make-model ended before it could be interrupted"
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum, f"stdout: {out}\nstderr: {err}"
    assert "Traceback" not in err and "interrupted (SIG" in err, err
    assert list(tmp_path.iterdir()) == []           # neither the output nor a temporary


def test_an_interrupted_run_leaves_the_old_folder_as_it_was(tmp_path):
    out = tmp_path / "gen"
    assert main(["generate", "--tokens", "1", "--lanes", "exact,precise", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    proc = qconform("generate", "--tokens", "400", "--lanes", "exact,precise", "--out", str(out))
    wait_for(lambda: any(p.name.startswith(".gen.") for p in tmp_path.iterdir()) or proc.poll() is not None,
             60, "the run's temporary folder")
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen"]


def test_a_source_name_that_is_not_utf8_fails_up_front(tmp_path, capsys):
    src = os.path.join(os.fsencode(tmp_path), b"k\xff.cu")
    with open(src, "w") as fh:
        fh.write("__global__ void my_kernel(float* y){ y[0] = 0.f; }\n")
    assert main(["check", "--source", os.fsdecode(src), "--backend", "emu", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--source" in err and "not valid UTF-8" in err and not (tmp_path / "o").exists()
    ok = tmp_path / "k\u00e9.cu"                      # negative control: a UTF-8 name beyond ASCII works
    ok.write_text("__global__ void my_kernel(float* y){ y[0] = 0.f; }\n")
    assert main(["check", "--source", str(ok), "--backend", "emu", "--out", str(tmp_path / "o")]) == 3
