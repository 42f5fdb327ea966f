"""Reports of a run. In: the `CaseResult`s and report rows of a kernel run (`writer`; `conformance` runs
qconform's own kernels through harness.judging and writes their report), or the reference's numeric modes
compared with each other (`reference_modes`). Out: report.json, report.md and report.html, written atomically,
plus the console summary and the exit status."""
