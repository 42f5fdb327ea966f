"""Model-level work, built on the per-kernel stages. In: a qwen3moe GGUF checkpoint (or an export-weights
folder) or a synthetic model's preset and seed; the reference decoder's lanes (reference.decoder), optionally
llama.cpp; kernels and a backend. Out: the reference's ModelWeights (reference.model) with the config the file
states and its token pieces; synthetic GGUF files (make-model); the seed generation program's raw weight files
(export-weights); a generation run in two phases (the reference lanes decoded once, then every stream judged
against those records: each lane's tokens and teacher-forced statistics against exact, the generation
program's kernels against their lane, blame, token locks) as one typed GenerationRun, for harness.reports."""
