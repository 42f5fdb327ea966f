"""Mutation analysis: how many small, plausible bugs in a kernel file the conformance cases catch. In: a CUDA C
file, the kernels' matched contracts and cases (harness.judging.matching), a seed. Out: every mutant's status
(killed, survived, equivalent, no-compile, not run) with its diff and the case that killed it, the mutation
score, mutation.json and mutation.md. `operators` makes the mutants of each kernel (source text edits),
`engine` runs the kernel's cases on each with the unmutated run's seed and classifies it, `summary` writes
the files and the console summary.
"""
