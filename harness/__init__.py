"""The qconform harness: qconform's kernels, or anyone's, run and judged against the reference. In: CUDA source
(emitted by `emitters`, or a .cu file), shape sets, modes and a seed. Out: verdicts per case, report files and
golden locks. Packages by stage, imports pointing one way: `cli` -> the stages `cases`, `judging`, `reports`,
`model` -> `backends` (where kernels run) and `toolchain` (nvcc, golden locks) -> emitters -> cudasrc, reference;
`cache` is the one cache mechanism they share."""
