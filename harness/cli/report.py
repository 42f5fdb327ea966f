"""`qconform report`: the main job. Judges every kernel case on a backend, or (reference backend) the modes
against each other, and writes report.json / report.md (/ report.html) under --out."""
from __future__ import annotations

import random
import sys

from harness.cli.options import add_force_option, add_speed_options, path_name, seed as seed_value
from reference.modes import Mode
from reference.shapes import parse_shape_list


def register(sub) -> None:
    p = sub.add_parser("report", help="run the conformance report (reference modes, or kernels on a backend)")
    p.add_argument("--backend", default="auto", choices=["auto", "emu", "gpu", "reference"],
                   help="where kernels run; 'reference' compares the numeric modes of the reference alone")
    p.add_argument("--shapes", default="tiny,tails", help="comma-separated shape sets (tiny, tails, qwen3-30b-a3b)")
    p.add_argument("--modes", default="dequant,int8act,twopass", help="comma-separated modes")
    p.add_argument("--families", default=None, help="comma-separated kernel families (default: all)")
    p.add_argument("--seed", type=seed_value, default=None, help="base seed (default: random, printed)")
    p.add_argument("--out", type=path_name, default="reports",
                   help="output folder, replaced as a whole when the run is complete (other runs' folders inside "
                        "it are kept)")
    add_force_option(p)
    p.add_argument("--no-generation", action="store_true",
                   help="skip the whole-model section (qconform generate's lanes on the tiny synthetic model)")
    p.add_argument("--sanitize", action="store_true",
                   help="CPU backend: AddressSanitizer build, catching out-of-bounds reads too (slower)")
    add_speed_options(p)
    from harness.cli.inputs_from import add_option
    add_option(p)
    p.set_defaults(func=run)


def parse_modes(text: str) -> list[Mode]:
    modes = [Mode.parse(t) for t in text.split(",") if t.strip()]
    if not modes:
        raise ValueError("--modes: empty mode list")
    return modes


def run(args) -> int:
    shapes = parse_shape_list(args.shapes)
    modes = parse_modes(args.modes)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    if args.backend == "reference":
        if args.sanitize:
            raise ValueError("--sanitize: the reference backend runs no kernels; use --backend emu")
        if args.schedules:
            raise ValueError("--schedules: the reference backend runs no kernels; use --backend emu")
        if args.cluster:
            raise ValueError("--cluster: the reference backend runs no kernels; use --backend emu")
    from harness.cli.inputs_from import check as check_inputs_from
    check_inputs_from(args)
    from harness.cli.lifecycle import RunFolder
    from harness.judging.records import combined_status
    with RunFolder(args.out, "--out", args.force, "report") as folder:
        out = folder.path
        if args.backend == "reference":
            from harness.reports import reference_modes as reference_report
            rc = reference_report.run(shapes=shapes, modes=modes, seed=seed, out_dir=out)
        else:
            from harness.cli.inputs_from import apply as use_inputs_from
            use_inputs_from(args)
            from harness.judging import runner
            from harness.reports.conformance import run_report
            backend = runner.resolve_backend(args.backend, args.sanitize, args.schedules)
            rc = run_report(backend=backend, shapes=shapes, modes=modes, seed=seed, out_dir=out,
                            families=args.families, workers=args.jobs, cluster=args.cluster)
        if not args.no_generation:
            from harness.cli.generate import generation_section
            rc = combined_status(rc, generation_section(out / "generation"))
        folder.finish(rc, args, seed)
    print(folder.wrote_line(), file=sys.stderr)
    return rc
