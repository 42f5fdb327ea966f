"""Reports of a run. In: the `CaseResult`s and report rows of a kernel run (`writer`; `conformance` runs
qconform's own kernels through harness.judging and writes their report), the reference's numeric modes
compared with each other (`reference_modes`), or a generation run (harness.model.generation.GenerationRun:
`generation`, its kernels' part in `kernel_generation`). Out: report.json, report.md and report.html, written
atomically, plus the console summary and the exit status. Each table has one row builder; `document` renders
the blocks of a report as Markdown, HTML and console text, with the one number format; `charts` draws the SVG."""
