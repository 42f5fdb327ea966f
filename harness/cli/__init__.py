"""The `qconform` command line. In: the command line. Out: the exit status, and whatever the stage writes. Each
subcommand is its own module here (`report`, `check`, `replay`, `mutate`, `extract`, `golden`, `doctor`,
`make_model`, `export_weights`, `generate`, `replay_launch`; the table COMMANDS): it parses its arguments and
calls into a stage (cases, judging, reports, model, mutation, toolchain); `main` dispatches to them."""
from __future__ import annotations

import argparse
import importlib
import sys

# (subcommand, module). A module exposes `register(subparsers)`, which adds its parser and sets `func`.
COMMANDS = [
    ("report", "harness.cli.report"),
    ("check", "harness.cli.check"),
    ("replay", "harness.cli.replay"),
    ("mutate", "harness.cli.mutate"),
    ("extract", "harness.cli.extract"),
    ("golden", "harness.cli.golden"),
    ("doctor", "harness.cli.doctor"),
    ("make-model", "harness.cli.make_model"),
    ("export-weights", "harness.cli.export_weights"),
    ("generate", "harness.cli.generate"),
    ("replay-launch", "harness.cli.replay_launch"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qconform",
        description="Reference verification and conformance checks for quantized MoE CUDA kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for _name, module in COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue   # a command not built yet
            raise
        mod.register(sub)
    return parser


def main(argv: "list[str] | None" = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ValueError as exc:       # bad input: one clear line, no traceback
        print(f"qconform {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
