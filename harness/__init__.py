"""The qconform harness: cases, backends, comparison, budgets, reports, golden locks and the CLI."""
