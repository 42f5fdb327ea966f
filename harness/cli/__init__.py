"""The `qconform` command line. In: the command line. Out: the exit status, and whatever the stage writes. Each
subcommand is its own module here (`report`, `check`, `replay`, `mutate`, `extract`, `golden`, `doctor`,
`make_model`, `export_weights`, `generate`, `replay_launch`, `racescan`; the table COMMANDS): it parses its arguments and
calls into a stage (cases, judging, reports, model, mutation, toolchain); `main` dispatches to them."""
from __future__ import annotations

import argparse
import importlib
import os
import signal
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
    ("racescan", "harness.cli.racescan"),
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
# error (nothing was run), 3 nothing was checked (every case unchecked, no kernel matched a contract, no mutant judged),
# 128 + N ended by signal N (130 SIGINT, 143 SIGTERM), its temporaries removed.
EXIT_USAGE = 2


def main(argv: "list[str] | None" = None) -> int:
    from harness.interrupts import install_signal_handlers, interrupts_blocked, received_signal
    install_signal_handlers()
    command = "qconform"
    try:
        with interrupts_blocked():          # threads that libraries start as they load leave signals to main
            parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:   # argparse's usage errors (2, message printed) and --help (0)
            return int(exc.code or 0)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        command = f"qconform {args.command}"
        rc = int(args.func(args) or 0)
    except BaseException as exc:
        return _ended_by(command, exc)
    signum = received_signal()
    if signum is not None:          # a library call swallowed the interrupt and the command went on to the end
        print(f"{command}: interrupted ({signal.Signals(signum).name}) inside a library call that went on; the "
              f"command finished and its output is complete", file=sys.stderr)
        return 128 + signum
    return rc


def run() -> None:
    """The `qconform` command (console script and `python -m harness.cli`): `main`, then exit with its status.
    A run ended by SIGINT/SIGTERM has already removed its temporaries on the way out (every `finally`); it then
    leaves at once (os._exit after flushing its output) rather than through the interpreter's shutdown, which
    joins every non-daemon thread. A signal that lands inside a ThreadPoolExecutor's submit, after it started a
    worker thread and before it registered it, leaves a worker that concurrent.futures never tells to stop, and
    that join waits forever (seen: the reference decoder's pool, interrupted at its first submit). Before it
    leaves, it kills what is left of the processes the run started, its orphaned grandchildren included (a
    compiler's cc1plus whose judge process was killed: harness.lifetimes)."""
    from harness.interrupts import received_signal
    from harness.lifetimes import adopt_orphans, end_descendants
    adopt_orphans()
    rc = main()
    if received_signal() is not None:
        end_descendants()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(rc)
    sys.exit(rc)


def _ended_by(command: str, exc: BaseException) -> int:
    """The exit status (and one line) for a command ended by `exc`; anything else keeps its traceback."""
    from harness.interrupts import received_signal
    signum = received_signal()
    if signum is not None and not isinstance(exc, SystemExit):
        # the signal's exception, or what a library made of it (numpy's tofile turns it into a TypeError)
        print(f"{command}: interrupted ({signal.Signals(signum).name}); nothing half-written was left",
              file=sys.stderr)
        return 128 + signum
    if isinstance(exc, ValueError):     # bad input: one clear line, no traceback
        print(f"{command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(exc, OSError):        # the file system refused (a permission, a full disk): one line too
        name = f" {exc.filename}" if exc.filename else ""
        print(f"{command}: error:{name}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    from harness.backends.base import BuildError, ConfinementRefused
    from harness.judging.records import EXIT_FAIL, EXIT_NOTHING_CHECKED
    if isinstance(exc, ConfinementRefused):     # qconform's rule, not the kernel's: nothing was checked
        print(f"{command}: the source was not built, so nothing was checked: {exc}", file=sys.stderr)
        return EXIT_NOTHING_CHECKED
    if isinstance(exc, BuildError):     # the kernels a command needed do not compile: their fault
        print(f"{command}: fail: the source does not build: {exc}", file=sys.stderr)
        return EXIT_FAIL
    raise exc


if __name__ == "__main__":
    run()
