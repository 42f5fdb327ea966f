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


# Exit statuses (README, "Exit status"): 0 every case passed or tied, 1 a case failed, 2 a usage or input
# error (nothing was run), 3 nothing was checked (every case unchecked, or no kernel matched a contract),
# 128 + N ended by signal N (130 SIGINT, 143 SIGTERM), its temporaries removed.
EXIT_USAGE = 2


def main(argv: "list[str] | None" = None) -> int:
    from harness.cli.lifecycle import Interrupted, install_signal_handlers
    install_signal_handlers()
    command = "qconform"
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:   # argparse's usage errors (2, message printed) and --help (0)
            return int(exc.code or 0)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        command = f"qconform {args.command}"
        return int(args.func(args) or 0)
    except ValueError as exc:       # bad input: one clear line, no traceback
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:          # the file system refused (a permission, a full disk): one line too
        name = f" {exc.filename}" if exc.filename else ""
        print(f"{command}: error:{name}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as exc:
        print(f"{command}: interrupted ({exc}); nothing half-written was left", file=sys.stderr)
        return exc.exit_status


if __name__ == "__main__":
    sys.exit(main())
