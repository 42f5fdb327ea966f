"""Model-level work: GGUF checkpoints (open, make, export) and what reports need from them (token pieces)."""
