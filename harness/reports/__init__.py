"""Reports of a run. In: the `CaseResult`s of a kernel run (`writer`), or the reference's numeric modes compared
with each other (`reference_modes`). Out: report.json, report.md and report.html, written atomically, plus the
console summary."""
