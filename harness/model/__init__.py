"""Model-level work on whole qwen3moe models. In: GGUF checkpoints (or the synthetic presets) and the reference
decoder's lanes (reference.decoder); optionally llama.cpp. Out: checkpoints written or opened (make-model,
export-weights, ModelWeights read a layer at a time), token pieces, and generation runs (each lane's token
stream and teacher-forced statistics against the exact lane) for harness.reports.generation to write."""
