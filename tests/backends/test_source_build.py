"""A source's own headers travel with its work (harness.backends.source_build): a worker that does not have them at
the paths the source was checked with (a remote cluster's machine), or has other texts there, builds the texts that
were read when the work was made, never a missing file (the kernel's `fail`) or another version."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from harness.backends.source_build import SourceBuild
from harness.judging.matching import check_jobs
from harness.judging.runner import run_cases
from reference.shapes import get_shape

from ..cli.test_source_headers import ROW_BASE, project
from ..judging.test_cluster import needs_dask


def jobs_of(tmp_path: Path):
    """check's job for embed.cu, whose row offset comes from proj/common/embed_math.h through -I proj/common."""
    src = project(tmp_path, "../common/embed_math.h", "common/embed_math.h")
    jobs, unchecked = check_jobs(src.read_text(), str(src), [get_shape("tiny")], None, 7,
                                 [str(tmp_path / "proj" / "common")])
    assert not unchecked and jobs[0].cases
    return jobs


def verdicts(jobs, **options) -> set[str]:
    run = run_cases("emu", jobs, progress=False, **options)
    return {r.verdict for r in run.results}


def test_the_headers_are_read_once_under_the_names_the_compiler_uses(tmp_path):
    jobs = jobs_of(tmp_path)
    header = tmp_path / "proj" / "common" / "embed_math.h"
    assert jobs[0].build.headers == ((str(header), ROW_BASE),)          # "../" folded, absolute
    assert jobs[0].build.here() == jobs[0].build.flags                   # found here: the flags as given
    link = tmp_path / "proj" / "kern" / "linked.h"
    link.symlink_to(header)
    build = SourceBuild.of('#include "linked.h"\n', [tmp_path / "proj" / "kern" / "k.cu"], [header.parent])
    assert [p for p, _ in build.headers] == [str(link)]                  # the link's own name, where -I finds it
    # a link out of every folder the compiler may read is not read: the confined compiler is refused it too
    assert SourceBuild.of('#include "linked.h"\n', [tmp_path / "proj" / "kern" / "k.cu"]).headers == ()


def test_a_worker_without_the_headers_builds_from_the_carried_texts(tmp_path):
    jobs = jobs_of(tmp_path)
    os.rename(tmp_path / "proj", tmp_path / "elsewhere")                 # neither the file nor its headers are here
    flags = jobs[0].build.here()
    assert flags != jobs[0].build.flags and all(Path(f[2:]).is_dir() for f in flags)
    assert verdicts(jobs) <= {"pass", "tie"}
    # negative control: the same work without the carried texts blames the kernel for a header it cannot find
    bare = [dataclasses.replace(jobs[0], build=dataclasses.replace(jobs[0].build, headers=()))]
    run = run_cases("emu", bare, progress=False)
    assert {r.verdict for r in run.results} == {"fail"} and "embed_math.h" in run.results[0].reason


def test_a_worker_with_another_version_of_a_header_builds_the_checked_one(tmp_path):
    jobs = jobs_of(tmp_path)
    header = tmp_path / "proj" / "common" / "embed_math.h"
    header.write_text("#define QC_ROW_BASE(tok, E) ((tok) * (E) + 1)\n")     # off by one row element
    assert verdicts(jobs) <= {"pass", "tie"}                              # the text the work was made with
    # negative control: the edited header, read anew, is wrong, so the check can fail on it
    src = tmp_path / "proj" / "kern" / "embed.cu"
    fresh, _ = check_jobs(src.read_text(), str(src), [get_shape("tiny")], None, 7, [str(header.parent)])
    assert "fail" in verdicts(fresh)


@needs_dask
def test_the_headers_travel_to_a_cluster_worker(tmp_path):
    jobs = jobs_of(tmp_path)
    os.rename(tmp_path / "proj", tmp_path / "elsewhere")
    assert verdicts(jobs, cluster="local:1") <= {"pass", "tie"}


def test_each_version_of_the_headers_has_its_own_copy(tmp_path):
    build = jobs_of(tmp_path)[0].build
    os.rename(tmp_path / "proj", tmp_path / "elsewhere")
    (path, text), = build.headers
    other = dataclasses.replace(build, headers=((path, text + "// edited\n"),))
    copies = [Path(build.here()[1][2:]), Path(other.here()[1][2:])]          # -I common, in each copy
    assert copies[0] != copies[1]
    assert [(c / "embed_math.h").read_text() for c in copies] == [text, text + "// edited\n"]
