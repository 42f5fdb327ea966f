"""Judging kernels against the reference. In: `Case`s, a backend that runs kernels, the reference. Out: one
`CaseResult` per case with a verdict (pass / tie / fail / unchecked), its comparisons, metrics and derived
budgets. `runner` drives a run over many cases; `core` prepares, launches and compares one case (its
`judge_outputs` is the one hook after a launch, shared with harness.model.blame); the per-family judges (`ops`,
`rows`, `attention`) say what each kernel op must produce and register in `registry`, which also holds the
shared vocabulary (verdicts, Comparison, Ctx); `budgets`, `metrics` and `tokens` give the bounds, the error
figures and the greedy-token rule; `records` turns a result into its report row."""

# The per-family judges register themselves in registry.OPS when imported; the package imports them so that
# any import of a judging module sees every judge.
from . import attention, ops, rows  # noqa: E402,F401
