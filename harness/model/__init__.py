"""Model-level work, built on the per-kernel stages. In: a model config and weights (reference.model: GGUF
checkpoints opened, made or exported here), kernels and a backend. Out: token-level verdicts and reports
(the reference lanes against exact, the generation program's kernels against their lane, blame, locks)."""
