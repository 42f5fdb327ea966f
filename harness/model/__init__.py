"""Model-level work: GGUF checkpoints (open, make, export) and what reports need from them (token pieces). In: a
checkpoint file or a synthetic preset. Out: ModelWeights (reference.model), token pieces, generation reports."""
