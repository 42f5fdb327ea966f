"""Model-level work. In: a qwen3moe GGUF checkpoint (or an export-weights folder), or a synthetic model's
preset and seed; the reference decoder's lanes (reference.decoder) and optionally llama.cpp. Out: the
reference's ModelWeights (reference.model) with the config the file states and its token pieces; synthetic
GGUF files (make-model); the seed generation program's raw weight files (export-weights); generation runs
(each lane's token stream and teacher-forced statistics against the exact lane) for harness.reports.generation."""
