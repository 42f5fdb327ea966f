"""`qconform replay NAME`: rerun one case from its name and print the full comparison.

The name carries everything needed (kernel, mode, shape set, size instance, input variant, seed): the
kernel is re-emitted by qconform's emitters, or read from --source for a case that `qconform check` ran.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from emitters.registry import available_families, emit, modes_of
from reference.shapes import get_shape

from harness.cases.names import case_from_name, parse_case_name
from harness.cli.options import add_include_option, add_schedules_option, include_dirs, path_name


def register(sub) -> None:
    p = sub.add_parser("replay", help="rerun one case by its name and print the full comparison")
    p.add_argument("name", help="case name, e.g. 'gk_gemv[int8act,tiny,lm_head,gauss,seed=1234]'")
    p.add_argument("--source", type=path_name, default=None, help="the .cu file the case came from (cases of `qconform check`)")
    add_include_option(p)
    p.add_argument("--backend", default="auto", choices=["auto", "emu", "gpu"])
    p.add_argument("--json", action="store_true", help="print the report row as JSON")
    add_schedules_option(p)
    from harness.cli.inputs_from import add_option
    add_option(p)
    p.set_defaults(func=run)


def locate(name: str, source: "str | None" = None, includes: Sequence[str] = ()):
    """(case, contract, code, source label, compile flags) for a case name (`includes`: the source's -I folders)."""
    parts = parse_case_name(name)
    shape = get_shape(parts.shape)
    if source:
        from harness.judging.matching import check_jobs
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"--source: no such file {source!r}")
        code = path.read_text()
        jobs, _ = check_jobs(code, str(path), [shape], None, 0, includes)
        contracts = [c for _, c in jobs[0].cases]
        case, contract = case_from_name(name, contracts)
        return case, contract, code, str(path), jobs[0].build.here()
    for fam in available_families():
        if parts.mode not in modes_of(fam):
            continue
        src = emit(fam, parts.mode, shape)
        if parts.kernel in src.kernel_names:
            case, contract = case_from_name(name, src.contracts)
            return case, contract, src.code, f"emitters.{fam}", ()
    raise ValueError(f"case name: no emitted kernel {parts.kernel!r} in mode {parts.mode} at {parts.shape}; "
                     f"for a kernel from a file give --source FILE.cu")


def run(args) -> int:
    from cudasrc.signatures import source_sha256
    from harness.judging.core import FAIL, judge_case
    from harness.judging.records import result_row
    from harness.cli.inputs_from import apply as use_inputs_from
    use_inputs_from(args)
    case, contract, code, label, flags = locate(args.name, args.source, include_dirs(args))
    from harness.judging.runner import resolve_backend
    be = resolve_backend(args.backend, schedules=args.schedules)
    print(f"replay {case.name}\n  source: {label} (sha256 {source_sha256(code)[:16]}...)\n  backend: {be.name}\n"
          f"  inputs: numpy.random.default_rng({case.seed}), variant {case.variant}, instance {case.instance}")
    module = be.load(code, flags)
    res = judge_case(module, case, contract)
    if res.coverage:
        print(f"  blocks: {res.coverage['summary']}")
    print(f"  dims: {res.dims}\n  launch: {res.launch}\n  verdict: {res.verdict.upper()}"
          + (f"\n  reason: {res.reason}" if res.reason else ""))
    _print_comparisons(res)
    if args.json:
        print(json.dumps(result_row(res, be.name, source_sha256(code), None, args.source, args.include_dirs),
                         indent=1,
                         default=str))
    return 1 if res.verdict == FAIL else 0


def _print_comparisons(res) -> None:
    from rich.console import Console
    from rich.table import Table
    t = Table(title="comparisons", show_lines=False)
    for col in ("output", "vs", "verdict", "max abs", "max rel", "NMSE", "max ULP", "cosine", "worst idx",
                "budget@worst", "usage", "budget"):
        t.add_column(col, overflow="fold")
    f = lambda v: "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))  # noqa: E731
    for c in res.comparisons:
        m = c.metrics
        t.add_row(c.output, c.against, c.verdict, f(m.get("max_abs")), f(m.get("max_rel")), f(m.get("nmse")),
                  f(m.get("max_ulp")), f(m.get("cosine")), f(m.get("worst_index")), f(c.budget_at_worst),
                  f(c.usage), c.budget or "")
    Console(file=sys.stdout, width=200).print(t)
    for c in res.comparisons:
        extra = {k: v for k, v in c.metrics.items() if k not in ("max_abs", "max_rel", "nmse", "max_ulp", "cosine",
                                                                   "worst_index")}
        if extra:
            print(f"  {c.output} vs {c.against}: {extra}")
        if c.reason:
            print(f"  {c.output} vs {c.against}: {c.reason}")
