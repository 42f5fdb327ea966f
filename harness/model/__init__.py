"""Model-level work. In: a qwen3moe GGUF checkpoint (or an export-weights folder), or a synthetic model's
preset and seed. Out: the reference's ModelWeights (reference.model) with the config the file states and its
token pieces; synthetic GGUF files (make-model); the seed generation program's raw weight files
(export-weights)."""
