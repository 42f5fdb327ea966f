"""Conformance reports: kernels judged on a backend (harness.judging.runner), then report.json / report.md /
report.html written. `run_report` judges qconform's own emitted kernels (`qconform report`), `run_check` the
kernels of a .cu file matched to the family's contracts (`qconform check`). In: a backend, shape sets, modes,
a seed, an output folder. Out: the report files and the exit status (1 when a case fails)."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from reference.modes import Mode
from reference.shapes import ShapeSet, get_shape

from cudasrc.signatures import kernel_signatures, source_sha256
from harness.judging.matching import check_jobs
from harness.judging.runner import emitted_jobs, parse_families, resolve_backend, run_cases, summarize

from .writer import write_reports


def run_report(backend, shapes: Sequence[ShapeSet], modes: Sequence[Mode], seed: int, out_dir,
               families: "str | Sequence[str] | None" = None, progress: bool = True, workers: int = 1,
               cluster: Optional[str] = None) -> int:
    """`qconform report` on a kernel backend: exit 0 when every case passes (ties included), 1 otherwise."""
    shapes = [get_shape(s) for s in shapes]
    modes = [Mode.parse(m) for m in modes]
    t0 = time.time()
    print(f"qconform report: seed {seed} (rerun with --seed {seed}); backend {backend if isinstance(backend, str) else backend.name}",
          file=sys.stderr)
    jobs = emitted_jobs(shapes, modes, seed, families)
    run = run_cases(backend, jobs, progress, workers, cluster)
    run.meta.update(command="report", seed=seed, shapes=[s.name for s in shapes],
                    modes=[m.value for m in modes], families=parse_families(families),
                    started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
                    duration_s=round(time.time() - t0, 3))
    write_reports(Path(out_dir), run)
    return summarize(run)


def run_check(backend, src: Path, shapes: Sequence[ShapeSet], modes: Optional[Sequence[Mode]], seed: int,
              out_dir: Path, sanitize: bool = False, schedules: Optional[str] = None, workers: int = 1,
              cluster: Optional[str] = None, include_dirs: Sequence[str] = ()) -> int:
    """`qconform check`: judge the kernels of the file `src` (built with -I its folder and `include_dirs`) that
    match a contract; the others are listed as unchecked with the reason. Exit 0 when every judged case passes
    (ties included), 1 otherwise."""
    code = src.read_text()
    print(f"qconform check: {src.name}, seed {seed} (rerun with --seed {seed})", file=sys.stderr)
    t0 = time.time()
    jobs, unchecked = check_jobs(code, str(src), shapes, modes, seed, include_dirs)
    if not kernel_signatures(code) and not unchecked:
        raise ValueError(f"--source: no __global__ kernel found in {str(src)!r}")
    run = run_cases(resolve_backend(backend, sanitize, schedules), jobs, workers=workers, cluster=cluster)
    run.unchecked = unchecked
    run.meta.update(command="check", source=str(src), source_sha256=source_sha256(code), seed=seed,
                    include_dirs=list(include_dirs), headers=[dict(zip(("path", "sha256"), d.rsplit(":", 1))) for d in jobs[0].build.digests()],
                    shapes=[s.name for s in shapes], modes=[m.value for m in modes] if modes else ["all"],
                    duration_s=round(time.time() - t0, 3))
    write_reports(Path(out_dir), run)
    return summarize(run)
