"""`qconform mutate --source FILE.cu`: how many plausible bugs in the file's kernels the cases catch.

Mutants of each kernel (harness.mutation.operators) run through the kernel's `qconform check` cases with the
unmutated run's seed; the mutation score and every surviving mutant (as a diff) are printed and written to
--out as mutation.json / mutation.md.
"""
from __future__ import annotations

import random
import sys

from harness.cli.options import (add_cluster_option, add_force_option, add_include_option, add_jobs_option, fraction,
                                 include_dirs, path_name, positive_float, positive_int, seed as seed_value)
from reference.modes import Mode
from reference.shapes import parse_shape_list


STORE_SUFFIX = ".judged"


def register(sub) -> None:
    from harness.mutation.operators import OPERATORS
    p = sub.add_parser("mutate", help="mutation analysis: the share of injected kernel bugs the cases catch")
    p.add_argument("--source", type=path_name, required=True, help="CUDA C file whose kernels are mutated")
    add_include_option(p)
    p.add_argument("--kernels", default=None, help="comma-separated kernel names (default: every matched kernel)")
    p.add_argument("--mode", default=None, help="comma-separated modes whose contracts judge the kernels")
    p.add_argument("--shapes", default="tiny", help="comma-separated shape sets (default: tiny)")
    p.add_argument("--seed", type=seed_value, default=None, help="base seed of the cases and the sample (default: random)")
    p.add_argument("--out", type=path_name, default="reports/mutate",
                   help="output folder for mutation.json / mutation.md, replaced as a whole when the run is complete")
    add_force_option(p)
    add_jobs_option(p, "judge mutants")
    add_cluster_option(p, "mutants")
    p.add_argument("--sample", type=positive_int, default=None, help="judge a seeded random sample of N mutants")
    p.add_argument("--time-limit", type=positive_float, default=None,
                   help="seconds; mutants not started by then are reported as not run")
    p.add_argument("--operators", default=None, help=f"comma-separated subset of: {', '.join(OPERATORS)}")
    p.add_argument("--ids", default=None,
                   help="comma-separated mutant ids to judge (e.g. the survivors of an earlier run, after a new case)")
    p.add_argument("--equivalent", type=path_name, default=None,
                   help="JSON ledger of mutants known to be equivalent ({\"equivalent\": [{\"id\", \"reason\"}]})")
    p.add_argument("--min-score", type=fraction, default=None, help="exit 1 when the score (0..1) is below this")
    p.set_defaults(func=run)


def cases_by_kernel(code: str, path: str, shapes, modes, seed: int, kernels=None, includes=()):
    """({kernel: its cases} from check's contract matching, check's unchecked kernels (of `kernels` only, when
    given), the file's build with -I `includes`). A name in `kernels` that is no kernel of the file is a bad
    argument; a kernel no contract matches is unchecked, as in `check`."""
    from harness.judging.matching import check_jobs
    jobs, unchecked = check_jobs(code, path, shapes, modes, seed, includes)
    by: dict = {}
    for case, contract in jobs[0].cases:
        by.setdefault(case.kernel, []).append((case, contract))
    if kernels is not None:
        why = {u["kernel"]: u for u in unchecked}
        absent = [k for k in kernels if k not in by and k not in why]
        if absent:
            raise ValueError(f"--kernels: no kernel {', '.join(absent)} in the file")
        by = {k: by[k] for k in kernels if k in by}
        unchecked = [why[k] for k in kernels if k in why]
    return by, unchecked, jobs[0].build


def run(args) -> int:
    from harness.mutation import summary
    from harness.mutation.engine import MutationRun, run_mutation
    from harness.judging.records import EXIT_FAIL, EXIT_NOTHING_CHECKED
    from harness.cli.lifecycle import RunFolder, check_input
    src = check_input(args.source, "--source")
    if not src.is_file():
        raise ValueError(f"--source: {args.source} is not a file")
    includes = include_dirs(args)
    if args.equivalent:
        check_input(args.equivalent, "--equivalent")
    folder = RunFolder(args.out, "--out", args.force, "mutate")
    code = src.read_text()
    shapes = parse_shape_list(args.shapes)
    modes = [Mode.parse(t) for t in args.mode.split(",") if t.strip()] if args.mode else None
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()] if args.kernels else None
    operators = [o.strip() for o in args.operators.split(",") if o.strip()] if args.operators else None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    ledger = summary.load_ledger(args.equivalent) if args.equivalent else None
    by, unchecked, build = cases_by_kernel(code, str(src), shapes, modes, seed, kernels, includes)
    if not by and not unchecked:
        raise ValueError(f"--source: no __global__ kernel found in {args.source!r}")
    print(f"qconform mutate: {src.name}, seed {seed} (rerun with --seed {seed}); kernels "
          f"{', '.join(by) or 'none that a contract matches'}", file=sys.stderr)
    chosen = None
    if args.ids:
        from harness.mutation.operators import mutants_of
        want = [i.strip() for i in args.ids.split(",") if i.strip()]
        every = {m.id: m for k in by for m in mutants_of(code, k, operators)}
        missing = [i for i in want if i not in every]
        if missing:
            raise ValueError(f"--ids: no mutant {', '.join(missing)} among the kernels' mutants")
        chosen = [every[i] for i in want]
    # every judged mutant is also stored beside --out as it finishes (outside the run folder, which replaces
    # --out only when complete): rerunning the same command after an interrupt resumes from it
    store = folder.final.with_name(folder.final.name + STORE_SUFFIX)
    with folder:
        if by:
            result = run_mutation(code, str(src), by, seed, [s.name for s in shapes], jobs=args.jobs,
                                  sample=args.sample, time_limit_s=args.time_limit, ledger=ledger,
                                  operators=operators, mutants=chosen, cluster=args.cluster, store_dir=store,
                                  build=build)
        else:       # valid input, but no selected kernel matches a contract: a run with nothing judged
            result = MutationRun(str(src), seed, [s.name for s in shapes], [], {})
        result.unchecked_kernels = unchecked
        summary.write(folder.path, result)
        rc = summary.exit_status(result, args.min_score)
        folder.finish(rc, args, seed)
    print(summary.console(result, ()))
    print(folder.wrote_line())
    if rc == EXIT_FAIL:
        print(f"qconform mutate: score {result.score} is below --min-score {args.min_score}", file=sys.stderr)
    elif rc == EXIT_NOTHING_CHECKED:
        print("qconform mutate: nothing was checked (no mutant was judged): exit status 3", file=sys.stderr)
    return rc
