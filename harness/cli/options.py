"""The command line's argument rules: one validator per kind of argument, shared by every command, so the same
value is accepted or refused everywhere with the same message (argparse names the option). Also the options
that several commands share (--schedules, -j, --force)."""
from __future__ import annotations

import argparse
import os
import sys

SEED_LIMIT = 2**32            # numpy's SeedSequence takes any non-negative int; case names and replay use 32 bits


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    n = _int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def non_negative_int(text: str) -> int:
    n = _int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {n}")
    return n


def _float(text: str, ok, rule: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = None
    if x is None or not ok(x):
        raise argparse.ArgumentTypeError(f"expected {rule}, got {text!r}")
    return x


def positive_float(text: str) -> float:
    return _float(text, lambda x: 0 < x < float("inf"), "a positive finite number")


def fraction(text: str) -> float:
    return _float(text, lambda x: 0 <= x <= 1, "a fraction in [0, 1]")


def seed(text: str) -> int:
    """A seed: an integer in [0, 2**32), the same rule on every command."""
    n = _int(text)
    if not 0 <= n < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {n}")
    return n


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def jobs(text: str) -> int:
    """-j N: a positive number of processes, capped (with a warning) at the cores this process may use: more
    processes than cores only share the same cores and multiply the memory."""
    n = positive_int(text)
    cores = usable_cores()
    if n > cores:
        print(f"qconform: warning: -j {n}: this machine gives the run {cores} core(s); using -j {cores}",
              file=sys.stderr)
        return cores
    return n


def token_list(text: str) -> list[int]:
    """Comma-separated token ids, every entry a non-negative integer (an empty entry such as '1,,2' is an
    error, not skipped). The vocabulary bound is the model's: `check_tokens` after the model is open."""
    parts = text.split(",")
    out = []
    for i, part in enumerate(parts, 1):
        part = part.strip()
        if not part:
            raise argparse.ArgumentTypeError(f"entry {i} of {text!r} is empty; expected token ids such as 1,2,3")
        try:
            tok = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"entry {i} of {text!r}: {part!r} is not an integer token id") from None
        if tok < 0:
            raise argparse.ArgumentTypeError(f"entry {i} of {text!r}: token ids are >= 0, got {tok}")
        out.append(tok)
    return out


def check_tokens(tokens: list[int], vocab: int, option: str) -> list[int]:
    """Token ids of `option` against the model's vocabulary."""
    for tok in tokens:
        if not 0 <= tok < vocab:
            raise ValueError(f"{option}: token {tok} outside the model's vocabulary [0, {vocab})")
    return tokens


def check_context(metadata: dict, positions: int, option: str, what: str) -> None:
    """`positions` decode positions must fit the checkpoint's trained context (its GGUF context_length)."""
    limit = next((v for k, v in metadata.items() if k.endswith(".context_length") and isinstance(v, int)), None)
    if limit is not None and positions > limit:
        raise ValueError(f"{option}: {what} need {positions} positions, past the model's context of {limit}")


def path_name(text: str) -> str:
    """A file or folder name that the reports can name: valid UTF-8 (a name that is not is refused now, before
    any work, rather than after every case ran)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(text)
        raise argparse.ArgumentTypeError(f"the name {shown!r} is not valid UTF-8; rename it (or link to it under "
                                         f"a UTF-8 name)") from None
    if not text:
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return text


def add_force_option(p) -> None:
    p.add_argument("--force", action="store_true",
                   help="replace an existing output that is not an earlier qconform run's (a user's file or folder)")


def add_schedules_option(p) -> None:
    p.add_argument("--schedules", default=None, metavar="sampled[:N]|all",
                   help="CPU backend: the first schedule (both poison runs) runs every block; the extra "
                        "schedules (reverse, warp-greedy, random) run the first, last and N more coordinates of "
                        "each grid dimension (default sampled:2), or every block with 'all'")


def add_jobs_option(p, what: str) -> None:
    p.add_argument("-j", "--jobs", type=jobs, default=1,
                   help=f"{what} in this many processes (at most the number of cores)")


def cluster_address(text: str) -> str:
    """--cluster: local:N (N >= 1) or a scheduler address (scheme://...)."""
    from harness.judging.executors import parse_cluster
    try:
        parse_cluster(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--cluster: ")) from None
    return text.strip()


def add_cluster_option(p, unit: str) -> None:
    p.add_argument("--cluster", type=cluster_address, default=None, metavar="local:N|tcp://HOST:PORT",
                   help=f"judge {unit} on a Dask cluster (the `cluster` extra) instead of -j: local:N starts N "
                        "workers here and stops them at the end; an address joins a running scheduler")


def add_speed_options(p) -> None:
    add_schedules_option(p)
    add_jobs_option(p, "judge cases (CPU backend); the report is the serial one,")
    add_cluster_option(p, "cases")


def add_include_option(p) -> None:
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR", type=path_name,
                   help="a folder of headers the source includes (repeatable; the source's own folder is searched "
                        "first). Its compilers may read only these folders (SECURITY.md)")


def include_dirs(args) -> list[str]:
    """The -I folders of `args`, each checked (it exists, is a readable folder) before any work; headers belong to
    source files, so -I needs a --source."""
    from harness.cli.lifecycle import check_input
    if args.include_dirs and not getattr(args, "source", None):
        raise ValueError("-I: headers belong to --source files; give --source too")
    for d in args.include_dirs:
        if not check_input(d, "-I").is_dir():
            raise ValueError(f"-I: {d} is not a folder")
    return list(args.include_dirs)


def add_verify_weights_option(p) -> None:
    p.add_argument("--verify-weights", default="sampled", choices=("sampled", "full"),
                   help="an export-weights folder is checked against its manifest: every file's size and a "
                        "sampled SHA-256 (default), or every byte (full)")
