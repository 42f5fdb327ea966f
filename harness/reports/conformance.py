"""The conformance report of qconform's own kernels (`qconform report` on a kernel backend): every emitted
kernel judged on the backend (harness.judging.runner), then report.json / report.md / report.html written.
In: backend, shape sets, modes, seed, families, output folder. Out: the report files and the exit status."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Sequence

from reference.modes import Mode
from reference.shapes import ShapeSet, get_shape

from harness.judging.runner import emitted_jobs, parse_families, run_cases, summarize

from .writer import write_reports


def run_report(backend, shapes: Sequence[ShapeSet], modes: Sequence[Mode], seed: int, out_dir,
               families: "str | Sequence[str] | None" = None, progress: bool = True) -> int:
    """`qconform report` on a kernel backend: exit 0 when every case passes (ties included), 1 otherwise."""
    shapes = [get_shape(s) for s in shapes]
    modes = [Mode.parse(m) for m in modes]
    t0 = time.time()
    print(f"qconform report: seed {seed} (rerun with --seed {seed}); backend {backend if isinstance(backend, str) else backend.name}",
          file=sys.stderr)
    jobs = emitted_jobs(shapes, modes, seed, families)
    run = run_cases(backend, jobs, progress)
    run.meta.update(command="report", seed=seed, shapes=[s.name for s in shapes],
                    modes=[m.value for m in modes], families=parse_families(families),
                    started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
                    duration_s=round(time.time() - t0, 3))
    paths = write_reports(Path(out_dir), run)
    return summarize(run, paths)
