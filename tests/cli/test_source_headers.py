"""A kernel file that includes headers of its own: `check`, `replay`, `mutate` and `racescan` build it with its own
folder and the `-I` folders the user names (and only those: harness.confine). A header from a folder not named is
qconform's refusal, so the cases are `unchecked` (exit 3), never `fail`; a header that does not exist is the
source's fault (`fail`); a changed header is a new build."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from emitters.registry import emit
from harness import landlock
from harness.cli import main
from harness.mutation.engine import NO_COMPILE, NOT_RUN
from reference.shapes import get_shape

needs_landlock = pytest.mark.skipif(landlock.abi() == 0, reason="this kernel has no Landlock")
ROW_BASE = "#define QC_ROW_BASE(tok, E) ((tok) * (E))\n"


def embed_kernel(include: str) -> str:
    """qconform's gk_embed, its row offset taken from a header the file includes (the kernel needs it)."""
    code = emit("embed", None, get_shape("tiny")).code
    assert "wq[tok * E + t]" in code
    return f'#include "{include}"\n' + code.replace("wq[tok * E + t]", "wq[QC_ROW_BASE(tok, E) + t]")


def project(tmp_path: Path, include: str, header_at: str) -> Path:
    """tmp_path/proj/kern/embed.cu including `include`, the header written at proj/`header_at`."""
    root = tmp_path / "proj"
    (root / "kern").mkdir(parents=True)
    header = root / header_at
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(ROW_BASE)
    src = root / "kern" / "embed.cu"
    src.write_text(embed_kernel(include))
    return src


def check(src: Path, out: Path, *extra: str) -> tuple[int, dict]:
    rc = main(["check", "--source", str(src), "--backend", "emu", "--seed", "7", "--out", str(out), *extra])
    return rc, json.loads((out / "report.json").read_text())


def test_a_header_beside_the_source_is_found(tmp_path, capsys):
    src = project(tmp_path, "embed_math.h", "kern/embed_math.h")
    rc, report = check(src, tmp_path / "out")
    assert rc == 0 and report["rows"] and {r["verdict"] for r in report["rows"]} <= {"pass", "tie"}


@needs_landlock
def test_a_sibling_folders_header_is_unchecked_until_named_with_dash_i(tmp_path, capsys, monkeypatch):
    src = project(tmp_path, "../common/embed_math.h", "common/embed_math.h")
    rc, report = check(src, tmp_path / "refused")
    assert rc == 3                                                     # nothing was checked: not the kernel's fault
    assert {r["verdict"] for r in report["rows"]} == {"unchecked"}
    reason = report["rows"][0]["reason"]
    assert "not allowed to read" in reason and "common/embed_math.h" in reason and "-I" in reason
    capsys.readouterr()
    monkeypatch.chdir(tmp_path / "proj")
    rc, report = check(src, tmp_path / "named", "-I", "common")
    assert rc == 0 and {r["verdict"] for r in report["rows"]} <= {"pass", "tie"}
    assert report["meta"]["include_dirs"] == ["common"]
    (header,) = report["meta"]["headers"]                           # the header the build read, and its hash
    assert header["path"].endswith("common/embed_math.h") and len(header["sha256"]) == 64
    replay = report["rows"][0]["replay"]
    assert " -I common " in replay
    capsys.readouterr()
    assert main(shlex.split(replay)[1:]) == 0                         # the replay builds it the same way
    assert "verdict: PASS" in capsys.readouterr().out


def test_a_missing_header_fails_and_an_edited_one_is_a_new_build(tmp_path, capsys):
    src = project(tmp_path, "embed_math.h", "kern/embed_math.h")
    header = src.parent / "embed_math.h"
    header.write_text(ROW_BASE.replace("((tok) * (E))", "((tok) * (E) + 1)"))      # a wrong row: every case fails
    rc, report = check(src, tmp_path / "edited")
    assert rc == 1 and {r["verdict"] for r in report["rows"]} == {"fail"}
    header.unlink()
    rc, report = check(src, tmp_path / "missing")
    assert rc == 1 and "did not build" in report["rows"][0]["reason"]        # the source's own fault


def test_dash_i_is_checked_before_any_work(tmp_path, capsys):
    src = project(tmp_path, "embed_math.h", "kern/embed_math.h")
    assert main(["check", "--source", str(src), "-I", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    assert "-I: no such file" in capsys.readouterr().err
    assert main(["check", "--source", str(src), "-I", str(src), "--out", str(tmp_path / "o")]) == 2
    assert "-I: " in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(["replay", "gk_embed[any,tiny,embed,gauss,seed=1]", "-I", str(src.parent)]) == 2
    assert "give --source too" in capsys.readouterr().err


@needs_landlock
def test_racescan_calls_a_refused_header_unchecked_not_unsupported(tmp_path, capsys):
    src = project(tmp_path, "../common/embed_math.h", "common/embed_math.h")
    argv = ["racescan", str(src), "--kernel", "gk_embed", "--grid", "1", "--block", "64", "--seed", "3", "--args",
            "x:float32[64]!out wq:int8[256] ws:float32[8] d_tok:int32[1]=zeros E:int32=64"]
    assert main(argv) == 3
    out = capsys.readouterr().out
    assert "verdict: UNCHECKED (ConfinementRefused)" in out and "not allowed to read" in out
    assert main([*argv, "-I", str(tmp_path / "proj" / "common")]) == 0
    assert "verdict: CLEAN" in capsys.readouterr().out


def test_mutate_builds_every_mutant_with_the_sources_headers(tmp_path, capsys):
    src = project(tmp_path, "embed_math.h", "kern/embed_math.h")
    argv = ["mutate", "--source", str(src), "--seed", "2", "--sample", "3", "--out", str(tmp_path / "m")]
    assert main(argv) == 0
    result = json.loads((tmp_path / "m" / "mutation.json").read_text())
    statuses = [m["status"] for m in result["mutants"]]
    assert len(statuses) == 3 and not {NO_COMPILE, NOT_RUN} & set(statuses), statuses


def test_a_parameter_type_named_in_a_header_is_the_type_it_stands_for(tmp_path, capsys):
    """`typedef int tok_t;` in the source's own header: check matches `const tok_t* d_tok` to the contract's
    `const int*` and judges the kernel, and racescan passes it an int32 buffer (without the header's typedefs the
    kernel was `unchecked`, its parameter list differing from the contract's, and racescan refused the spec)."""
    src = project(tmp_path, "embed_math.h", "kern/embed_math.h")
    (src.parent / "embed_math.h").write_text(ROW_BASE + "typedef int tok_t;\n")
    src.write_text(src.read_text().replace("const int* d_tok", "const tok_t* d_tok"))
    rc, report = check(src, tmp_path / "typedef")
    assert rc == 0 and report["rows"] and {r["verdict"] for r in report["rows"]} <= {"pass", "tie"}
    assert not report.get("unchecked_kernels")
    capsys.readouterr()
    argv = ["racescan", str(src), "--kernel", "gk_embed", "--grid", "1", "--block", "64", "--seed", "3", "--args",
            "x:float32[64]!out wq:int8[256] ws:float32[8] d_tok:int32[1]=zeros E:int32=64"]
    assert main(argv) == 0 and "verdict: CLEAN" in capsys.readouterr().out


def test_mutate_matches_contracts_in_the_light_of_the_dash_i_headers(tmp_path, capsys):
    """A parameter type that a header in an -I folder names: mutate's contract matching reads that header too (it
    read only the source's own folder, so the kernel was unchecked and no mutant was judged)."""
    src = project(tmp_path, "../common/embed_math.h", "common/embed_math.h")
    (tmp_path / "proj" / "common" / "embed_math.h").write_text(ROW_BASE + "typedef int tok_t;\n")
    src.write_text(src.read_text().replace("const int* d_tok", "const tok_t* d_tok"))
    argv = ["mutate", "--source", str(src), "-I", str(tmp_path / "proj" / "common"), "--seed", "2", "--sample", "2",
            "--out", str(tmp_path / "m")]
    assert main(argv) == 0
    result = json.loads((tmp_path / "m" / "mutation.json").read_text())
    assert not result.get("unchecked_kernels") and len(result["mutants"]) == 2


def test_a_mutation_campaign_resumes_only_with_the_same_headers(tmp_path):
    """The store of judged mutants is keyed by the source and its headers: an edited header starts afresh."""
    from harness.backends.source_build import SourceBuild
    from harness.mutation.engine import MutantStore
    src = project(tmp_path, "embed_math.h", "kern/embed_math.h")
    code = src.read_text()
    first = MutantStore(tmp_path / "store", code, {"case": "pass"}, SourceBuild.of(code, [src])).dir
    assert MutantStore(tmp_path / "store", code, {"case": "pass"}, SourceBuild.of(code, [src])).dir == first
    (src.parent / "embed_math.h").write_text(ROW_BASE + "// edited\n")
    assert MutantStore(tmp_path / "store", code, {"case": "pass"}, SourceBuild.of(code, [src])).dir != first
    assert MutantStore(tmp_path / "store", code, {"case": "pass"}).dir != first       # built without its folder
