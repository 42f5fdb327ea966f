"""`python -m harness.cli`: the same as the `qconform` command."""
from harness.cli import run

run()
