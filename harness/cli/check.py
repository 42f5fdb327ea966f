"""`qconform check --source FILE.cu`: judge kernel source someone else emitted.

Every `__global__` kernel in the file whose name (exact, or a contract's name pattern such as k\\d+_q8dp4a)
AND parameter list (C types, in order) match a contract of qconform's kernel family runs through that
contract's cases on the backend. A kernel with no contract of its name, or whose parameter list differs from
every contract of its name, is listed as unchecked with the reason; it is never counted as passing.
"""
from __future__ import annotations

import random
import sys

from harness.cli.options import (add_force_option, add_include_option, add_speed_options, include_dirs, path_name,
                                 seed as seed_value)
from reference.modes import Mode
from reference.shapes import parse_shape_list


def register(sub) -> None:
    p = sub.add_parser("check", help="judge the kernels of a .cu file against the family's contracts")
    p.add_argument("--source", type=path_name, required=True, help="CUDA C file (e.g. one written by `qconform extract`)")
    add_include_option(p)
    p.add_argument("--backend", default="auto", choices=["auto", "emu", "gpu"], help="where kernels run")
    p.add_argument("--mode", default=None,
                   help="comma-separated modes to judge (default: every mode whose contract matches)")
    p.add_argument("--shapes", default="tiny", help="comma-separated shape sets (default: tiny)")
    p.add_argument("--seed", type=seed_value, default=None, help="base seed (default: random, printed)")
    p.add_argument("--out", type=path_name, default="reports/check",
                   help="output folder for report.json/md/html, replaced as a whole when the run is complete")
    add_force_option(p)
    p.add_argument("--sanitize", action="store_true",
                   help="CPU backend: AddressSanitizer build, catching out-of-bounds reads too (slower)")
    add_speed_options(p)
    from harness.cli.inputs_from import add_option
    add_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from harness.cli.inputs_from import apply as use_inputs_from, check as check_inputs_from
    from harness.cli.lifecycle import RunFolder, check_input
    from harness.reports.conformance import run_check
    src = check_input(args.source, "--source")
    if not src.is_file():
        raise ValueError(f"--source: {args.source} is not a file")
    includes = include_dirs(args)
    shapes = parse_shape_list(args.shapes)
    modes = [Mode.parse(t) for t in args.mode.split(",") if t.strip()] if args.mode else None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    check_inputs_from(args)
    with RunFolder(args.out, "--out", args.force, "check") as folder:
        use_inputs_from(args)
        rc = run_check(args.backend, src, shapes, modes, seed, folder.path, sanitize=args.sanitize,
                       schedules=args.schedules, workers=args.jobs, cluster=args.cluster, include_dirs=includes)
        folder.finish(rc, args, seed)
    print(folder.wrote_line(), file=sys.stderr)
    return rc
