"""Command-line options shared by the commands that run kernel cases (report, check, replay)."""
from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {n}")
    return n


def add_schedules_option(p) -> None:
    p.add_argument("--schedules", default=None, metavar="sampled[:N]|all",
                   help="CPU backend: the first schedule (both poison runs) runs every block; the extra "
                        "schedules (reverse, warp-greedy, random) run the first, last and N more coordinates of "
                        "each grid dimension (default sampled:2), or every block with 'all'")


def add_cluster_option(p, unit: str) -> None:
    p.add_argument("--cluster", default=None, metavar="local:N|tcp://HOST:PORT",
                   help=f"judge {unit} on a Dask cluster (the `cluster` extra): local:N starts N workers here and "
                        "stops them at the end; an address joins a running scheduler")


def add_speed_options(p) -> None:
    add_schedules_option(p)
    p.add_argument("-j", "--jobs", type=positive_int, default=1,
                   help="judge cases in this many processes (CPU backend); the report is the serial one")
    add_cluster_option(p, "cases")
