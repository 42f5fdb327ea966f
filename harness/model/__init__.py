"""Model-level checks (a decoder step and beyond), built on the per-kernel stages. In: a model config and
weights (reference.model), kernels and a backend. Out: model-level verdicts and reports. Empty until the
model-level work lands here."""
