"""ci/race_suites/race_fixes.py on a miniature ggml history (a git repository made here, in ggml's layout, with a
kernel written here): a fix commit that adds the missing __syncthreads(), its parent racy and itself race-free as
the detector judges them; the suite found by ci/score_race_suite.py from a clone's history, the trees read from
git at each commit, the records replayable as the command lines they keep."""
from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from ci import score_race_suite
from ci.race_suites import race_fixes

# A block reduction that reuses its buffer for a second sum (the shape of ggml's block_reduce races).
KERNEL = r"""#include "common.cuh"

static __global__ void two_sums(const float * x, float * dst) {
    __shared__ float buf[WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    float v = x[threadIdx.x];
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    float s = 0.0f;
    for (int w = 0; w < WARPS; ++w) s += buf[w];
BARRIER
    if (lane == 0) buf[warp] = v * v;
    __syncthreads();
    float q = 0.0f;
    for (int w = 0; w < WARPS; ++w) q += buf[w];
    dst[threadIdx.x] = s + q;
}
"""
COMMON = "#pragma once\n#define WARPS 4\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, str]:
    """A repository whose last commit adds the barrier; returns it and the fix's commit."""
    repo = tmp_path_factory.mktemp("ggml")
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "test@example.invalid")
    _git(repo, "config", "user.name", "test")
    cuda = repo / "src" / "ggml-cuda"
    cuda.mkdir(parents=True)
    (repo / "include").mkdir()
    (repo / "include" / "ggml.h").write_text("#pragma once\n")
    (cuda / "common.cuh").write_text(COMMON)
    for text, message in ((KERNEL.replace("BARRIER\n", ""), "two sums"),
                          (KERNEL.replace("BARRIER", "    __syncthreads();"), "CUDA: fix data race in two_sums")):
        (cuda / "sums.cu").write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", message)
    return repo, _git(repo, "rev-parse", "--short=8", "HEAD")


@pytest.fixture
def one_fix(monkeypatch, history):
    repo, commit = history
    case = race_fixes.Case("two_sums", "src/ggml-cuda/sums.cu", "two_sums", "1", "128",
                           "x:float32[128]=random(-1,1) dst:float32[128]!out")
    fixes = (race_fixes.Fix(commit, "CUDA: fix data race in two_sums", (case,)),)
    absent = (race_fixes.Fix("0123abcd", "absent", ()),)
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("other", ("src",), absent),
                                                 race_fixes.Project("ggml", ("src", "include"), fixes)))
    return repo


def test_a_fix_is_found_from_history_and_its_sides_labelled(one_fix, tmp_path):
    assert race_fixes.suite_files(tmp_path) is None           # no repository there
    sides = race_fixes.suite_files(one_fix)                   # the project whose fixes the history has
    assert [(s.project.name, s.case.name, race_fixes.label_of(s)) for s in sides] == [
        ("ggml", "two_sums", "racy"), ("ggml", "two_sums", "race-free")]
    suite = score_race_suite.open_suite(one_fix)
    assert suite is not None and suite.name == "ggml's race fixes"


def test_a_fix_unknown_to_the_repository_is_no_suite(monkeypatch, one_fix):
    ggml = race_fixes.PROJECTS[0]
    partly = race_fixes.Project("ggml", ggml.parts, ggml.fixes + (race_fixes.Fix("0123abcd", "absent", ()),))
    monkeypatch.setattr(race_fixes, "PROJECTS", (partly,))
    assert race_fixes.suite_files(one_fix) is None


def test_the_parent_races_the_fix_is_clean_and_a_record_replays(one_fix, tmp_path, capsys):
    """The racy side is reported by the detector (the buffer's second use against the first sum's reads); the fix's
    side runs clean (the negative control); the record keeps the command line that gives its verdict again."""
    out = tmp_path / "fixes.json"
    assert score_race_suite.main([str(one_fix), "--seed", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "recall 100.0%" in printed and "false alarms 0.0%" in printed
    records = {r["label"]: r for r in json.loads(out.read_text())["records"]}
    racy, fixed = records["racy"], records["race-free"]
    assert racy["verdict"] == "race" and racy["data_race"] and "__shared__ 'buf'" in racy["detail"]
    assert fixed["verdict"] == "clean" and not fixed["data_race"]
    assert racy["commit"] != fixed["commit"] and "--seed 3" in racy["replay"]
    from harness.cli import main            # the trees stay until the process exits: the records replay meanwhile
    assert main(shlex.split(racy["replay"])[1:]) == 1 and main(shlex.split(fixed["replay"])[1:]) == 0


def test_the_build_of_every_access_reaches_each_case_and_its_replay(one_fix, tmp_path, capsys):
    out = tmp_path / "fixes.json"
    assert score_race_suite.main([str(one_fix), "--seed", "3", "--accesses", "source", "--out", str(out)]) == 0
    assert "'accesses': 'source'" in capsys.readouterr().out
    saved = json.loads(out.read_text())
    records = {r["label"]: r for r in saved["records"]}
    assert saved["backend"]["accesses"] == "source"
    assert all("--accesses source" in r["replay"] for r in records.values())
    assert records["racy"]["verdict"] == "race" and records["race-free"]["verdict"] == "clean"


def test_a_race_reported_after_the_history_is_one_racy_side_at_its_commit(monkeypatch, history, tmp_path):
    """HeCBench's users reported races that were fixed after the newest commit a clone may have: such a report is
    the racy side alone, read at the reported commit itself (not its parent). Here the report names the fix's own
    parent, the racy tree; a report at the fix (race-free) would be scored as a miss."""
    repo, commit = history
    parent = _git(repo, "rev-parse", "--short=8", f"{commit}^")
    case = race_fixes.Case("two_sums", "src/ggml-cuda/sums.cu", "two_sums", "1", "128",
                           "x:float32[128]=random(-1,1) dst:float32[128]!out")
    report = race_fixes.Fix(parent, "two_sums reuses its buffer", (case,), reported="example/issue#1")
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("ggml", ("src", "include"), (report,)),))
    sides = race_fixes.suite_files(repo)
    assert [(s.name, race_fixes.label_of(s), race_fixes.group_of(s)) for s in sides] == [
        (f"{parent} two_sums (reported racy)", "racy", "example/issue#1")]
    out = tmp_path / "reported.json"
    assert score_race_suite.main([str(repo), "--out", str(out)]) == 0
    (record,) = json.loads(out.read_text())["records"]
    assert record["verdict"] == "race" and record["commit"] == parent and record["reported"] == "example/issue#1"
    at_fix = race_fixes.Fix(commit, "the same report at the fixed commit", (case,), reported="example/issue#1")
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("ggml", ("src", "include"), (at_fix,)),))
    assert score_race_suite.main([str(repo), "--out", str(tmp_path / "at_fix.json")]) == 0
    (record,) = json.loads((tmp_path / "at_fix.json").read_text())["records"]
    assert record["verdict"] == "clean" and record["commit"] != parent          # read where the report points


def test_a_fix_that_keeps_a_race_is_scored_on_its_parent_alone(monkeypatch, history, tmp_path):
    """cuFHE's fix of its NTTs' race keeps another (each transform's output written over what other warps still
    read): its side is no race-free label. Only the parent is scored, read at the fix's parent."""
    repo, commit = history
    case = race_fixes.Case("two_sums", "src/ggml-cuda/sums.cu", "two_sums", "1", "128",
                           "x:float32[128]=random(-1,1) dst:float32[128]!out")
    keeps = race_fixes.Fix(commit, "a fix that keeps a race", (case,), kept="somewhere else")
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("ggml", ("src", "include"), (keeps,)),))
    sides = race_fixes.suite_files(repo)
    assert [(s.name, race_fixes.label_of(s), s.rev) for s in sides] == [
        (f"{commit} two_sums (before the fix)", "racy", f"{commit}^")]
    out = tmp_path / "kept.json"
    assert score_race_suite.main([str(repo), "--out", str(out)]) == 0
    (record,) = json.loads(out.read_text())["records"]
    assert record["verdict"] == "race" and record["kept"] == "somewhere else"
    assert record["commit"] == _git(repo, "rev-parse", "--short=8", f"{commit}^")


def test_a_racy_side_may_be_read_before_an_earlier_wrong_fix(monkeypatch, history):
    """arrayfire's reduction was first fixed with a barrier inside a branch (a divergence), then redone the next day:
    the pair is the first fix's parent and the redone fix, `racy_at` naming the racy side's commit."""
    repo, commit = history
    case = race_fixes.Case("two_sums", "src/ggml-cuda/sums.cu", "two_sums", "1", "128",
                           "x:float32[128]=random(-1,1) dst:float32[128]!out")
    base = _git(repo, "rev-list", "--max-parents=0", "HEAD")
    redone = race_fixes.Fix(commit, "redone", (case,), racy_at=f"{base}")
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("ggml", ("src", "include"), (redone,)),))
    sides = race_fixes.suite_files(repo)
    assert [(race_fixes.label_of(s), s.rev) for s in sides] == [("racy", base), ("race-free", commit)]


# OpenMM compiles a module at run time: its defines and typedefs, its platform's common.cu (the marker macros), then
# the kernel file, which alone does not build.
COMMON_CU = '#define KERNEL extern "C" __global__\n#define LOCAL __shared__\n#define SYNC_THREADS __syncthreads();\n'
PORTABLE = """KERNEL void two_sums(const real* x, real* dst) {
    LOCAL real buf[4];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    real v = x[threadIdx.x];
    if (lane == 0) buf[warp] = v;
    SYNC_THREADS
    real s = buf[0] + buf[1] + buf[2] + buf[3];
BARRIER
    if (lane == 0) buf[warp] = v * v;
    SYNC_THREADS
    dst[threadIdx.x] = s + buf[0] + buf[1] + buf[2] + buf[3];
}
"""


def test_a_runtime_compiled_module_is_built_from_its_prelude_and_files(monkeypatch, tmp_path):
    """A case with a `module` and a `prelude` reads the text the project's compiler would build, written beside the
    tree's files: the parent races on the macro-marked shared buffer, the fix is clean, and the record's replay
    names the composed file."""
    repo = tmp_path / "openmm"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "test@example.invalid")
    _git(repo, "config", "user.name", "test")
    kernels = repo / "platforms" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "common.cu").write_text(COMMON_CU)
    for barrier in ("", "    SYNC_THREADS"):
        (kernels / "sums.cc").write_text(PORTABLE.replace("BARRIER", barrier))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "Fixed race condition" if barrier else "sums")
    commit = _git(repo, "rev-parse", "--short=8", "HEAD")
    case = race_fixes.Case("two_sums", "platforms/kernels/sums.cc", "two_sums", "1", "128",
                           "x:float32[128]=random(-1,1) dst:float32[128]!out", includes=(), relaxations=(),
                           module=("platforms/kernels/common.cu",), prelude="typedef float real;\n")
    fixes = (race_fixes.Fix(commit, "Fixed race condition", (case,)),)
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("OpenMM", ("platforms/kernels",), fixes),))
    out = tmp_path / "module.json"
    assert score_race_suite.main([str(repo), "--seed", "2", "--out", str(out)]) == 0
    records = {r["label"]: r for r in json.loads(out.read_text())["records"]}
    assert records["racy"]["verdict"] == "race" and "__shared__ 'buf'" in records["racy"]["detail"]
    assert records["race-free"]["verdict"] == "clean"
    composed = Path(shlex.split(records["racy"]["replay"])[2])
    assert composed.name == "two_sums-sums.cc.cu" and composed.read_text().startswith("typedef float real;\n\n" + COMMON_CU)


def _repo_of(tmp_path: Path, name: str, files_by_commit: list) -> tuple[Path, str]:
    """A repository with one commit per {path: text} of `files_by_commit`; returns it and the last commit."""
    repo = tmp_path / name
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "test@example.invalid")
    _git(repo, "config", "user.name", "test")
    for i, files in enumerate(files_by_commit):
        for path, text in files.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"commit {i}")
    return repo, _git(repo, "rev-parse", "--short=8", "HEAD")


def test_stand_in_headers_are_searched_first(monkeypatch, tmp_path):
    """Megatron's layer norm takes at::Half and WARP_SHFL from PyTorch's headers, which no build here has: a case's
    `headers` are written beside the tree's files and searched first. Here the kernel includes a framework's
    `fw/warps.h` that the tree lacks; without the stand-in the build fails (the negative control)."""
    kernel = KERNEL.replace('#include "common.cuh"', '#include "fw/warps.h"')
    repo, commit = _repo_of(tmp_path, "framework", [{"src/sums.cu": kernel.replace("BARRIER\n", "")},
                                                    {"src/sums.cu": kernel.replace("BARRIER", "    __syncthreads();")}])
    args = ("two_sums", "src/sums.cu", "two_sums", "1", "128", "x:float32[128]=random(-1,1) dst:float32[128]!out")

    def scored(case) -> dict:
        fix = race_fixes.Fix(commit, "fix", (case,))
        monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("framework", ("src",), (fix,)),))
        out = tmp_path / f"{len(case.headers)}.json"
        assert score_race_suite.main([str(repo), "--out", str(out)]) == 0
        return {r["label"]: r["verdict"] for r in json.loads(out.read_text())["records"]}

    assert scored(race_fixes.Case(*args, includes=(), headers=(("fw/warps.h", COMMON),))) == {
        "racy": "race", "race-free": "clean"}
    assert scored(race_fixes.Case(*args, includes=())) == {"racy": "unsupported", "race-free": "unsupported"}


def test_every_case_reads_a_file_its_tree_holds():
    """A case's source must lie in the folders `git archive` extracts for it (its own parts, else its project's;
    none: the whole tree), or be one of the files it extracts, or racescan finds no file. Kaldi's cases read
    src/cudamatrix only; sssp's name its files (its folder's input archive is not a source)."""
    for project in race_fixes.PROJECTS:
        for fix in project.fixes:
            for case in fix.cases:
                parts = case.parts or project.parts
                for source in (case.source, *case.module):
                    assert not parts or any(source == p or source.startswith(p.rstrip("/") + "/") for p in parts), \
                        (project.name, fix.commit, case.name, source, parts)
    assert any(p.name == "Kaldi" for p in race_fixes.PROJECTS)


def test_a_tree_git_cannot_give_is_a_case_that_could_not_run_with_gits_reason(monkeypatch, history, tmp_path):
    """A snapshot of a history may lack a large file of a case's folder (HeCBench's lsqt keeps an archive of examples
    beside its sources): the record says what git said, not a bare exit status."""
    repo, commit = history
    case = race_fixes.Case("two_sums", "src/ggml-cuda/sums.cu", "two_sums", "1", "128",
                           "x:float32[128]=random(-1,1) dst:float32[128]!out", parts=("src/ggml-cuda/absent.cu",))
    monkeypatch.setattr(race_fixes, "PROJECTS", (race_fixes.Project("ggml", ("src", "include"),
                                                                    (race_fixes.Fix(commit, "fix", (case,)),)),))
    with pytest.raises(race_fixes.GitError, match=r"git archive --format=tar \w+ src/ggml-cuda/absent.cu failed "
                                                  r"\(exit \d+\): .*absent.cu"):
        race_fixes._tree(repo / ".git", commit, case.parts)
