"""`qconform check --source FILE.cu`: judge kernel source someone else emitted.

Every `__global__` kernel in the file whose name (exact, or a contract's name pattern such as k\\d+_q8dp4a)
AND parameter list (C types, in order) match a contract of qconform's kernel family runs through that
contract's cases on the backend. A kernel with no contract of its name, or whose parameter list differs from
every contract of its name, is listed as unchecked with the reason; it is never counted as passing.
"""
from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from emitters.contract import KernelContract
from emitters.registry import all_contracts, mode_label
from reference.modes import Mode
from reference.shapes import ShapeSet, parse_shape_list

from harness.cases import cases_for_contract
from harness.cuda_source import kernel_signatures, source_sha256


def register(sub) -> None:
    p = sub.add_parser("check", help="judge the kernels of a .cu file against the family's contracts")
    p.add_argument("--source", required=True, help="CUDA C file (e.g. one written by `qconform extract`)")
    p.add_argument("--backend", default="auto", choices=["auto", "emu", "gpu"], help="where kernels run")
    p.add_argument("--mode", default=None,
                   help="comma-separated modes to judge (default: every mode whose contract matches)")
    p.add_argument("--shapes", default="tiny", help="comma-separated shape sets (default: tiny)")
    p.add_argument("--seed", type=int, default=None, help="base seed (default: random, printed)")
    p.add_argument("--out", default="reports/check", help="output directory for report.json/md/html")
    p.add_argument("--sanitize", action="store_true",
                   help="CPU backend: AddressSanitizer build, catching out-of-bounds reads too (slower)")
    from harness.model.inputs_option import add_option
    add_option(p)
    p.set_defaults(func=run)


@dataclass
class Match:
    kernel: str
    contracts: list[KernelContract]     # contracts to judge it with (several modes may share one signature)
    reason: str = ""                    # why unchecked (empty when contracts were found)


def _semantics(c: KernelContract) -> str:
    return json.dumps({"op": c.op, "attrs": c.describe()["attrs"], "params": [p.name for p in c.params]},
                      sort_keys=True, default=str)


def match_kernels(code: str, contracts: Sequence[KernelContract], modes: Optional[Sequence[Mode]] = None) -> list[Match]:
    """Match every kernel of `code` to the contracts: exact name first, then name patterns; the parameter
    list must be identical. Several modes sharing one contract (same op, attributes and parameters) are
    judged once, in the first selected mode."""
    out = []
    for sig in kernel_signatures(code):
        exact = [c for c in contracts if c.name == sig.name]
        pattern = [c for c in contracts if c.name != sig.name and c.matches_name(sig.name)]
        if not exact and not pattern:
            out.append(Match(sig.name, [], "no contract of the kernel family has this name"))
            continue
        # the exact name wins; a name pattern (k\d+_row, ...) is the fallback when no exact-name contract
        # has this parameter list
        same = [c for c in exact if c.signature() == sig.ctypes] or \
               [c for c in pattern if c.signature() == sig.ctypes]
        named = exact + pattern
        if modes is not None:
            picked = [c for c in same if c.mode is None or c.mode in modes]
            if same and not picked:
                out.append(Match(sig.name, [], f"its contract is in mode(s) "
                                 f"{', '.join(sorted({mode_label(c.mode) for c in same}))}, not selected by --mode"))
                continue
            same = picked
        if not same:
            want = "; ".join(sorted({f"({', '.join(c.signature())})" for c in named}))
            out.append(Match(sig.name, [], f"parameter list ({', '.join(sig.ctypes)}) differs from the contract's "
                                           f"{want}"))
            continue
        seen, uniq = set(), []
        for c in same:
            key = _semantics(c)
            if key not in seen:
                seen.add(key)
                uniq.append(c)
        if len(uniq) > 1 and sig.name not in {c.name for c in uniq}:
            # a name matched only by pattern, with one signature but several meanings (k5_elem: add? mul?):
            # which computation the file means cannot be known, so it is not judged
            kinds = "; ".join(f"{c.name}: {c.op} {c.describe()['attrs']}" for c in uniq)
            out.append(Match(sig.name, [], f"ambiguous: its name pattern and parameter list match contracts with "
                                           f"different semantics ({kinds}); give it one of those exact names"))
            continue
        out.append(Match(sig.name, uniq))
    return out


def _rename(c: KernelContract, name: str) -> KernelContract:
    """The contract under the file's kernel name (a name-pattern match launches the file's own name)."""
    from dataclasses import replace
    return c if c.name == name else replace(c, name=name)


def check_jobs(code: str, path: Optional[str], shapes: Sequence[ShapeSet], modes: Optional[Sequence[Mode]],
               seed: int):
    """(jobs, unchecked kernels) for a source file. A kernel no contract matches, or one whose match is
    ambiguous, is among the unchecked kernels ({"kernel", "reason"}), never judged."""
    from harness.runner import Job
    pairs, unchecked, seen_unchecked = [], [], set()
    for shape in shapes:
        for m in match_kernels(code, all_contracts(shape.name), modes):
            if not m.contracts:
                if m.kernel not in seen_unchecked:
                    seen_unchecked.add(m.kernel)
                    unchecked.append({"kernel": m.kernel, "reason": m.reason})
                continue
            for c in m.contracts:
                c = _rename(c, m.kernel)
                pairs += [(case, c) for case in cases_for_contract(c, shape, seed)]
    return [Job(Path(path).name if path else "source", code, pairs, path=path)], unchecked


def run(args) -> int:
    from harness.report_writer import write_reports
    from harness.runner import resolve_backend, run_cases, summarize
    src = Path(args.source)
    if not src.is_file():
        raise ValueError(f"--source: no such file {args.source!r}")
    code = src.read_text()
    shapes = parse_shape_list(args.shapes)
    modes = [Mode.parse(t) for t in args.mode.split(",") if t.strip()] if args.mode else None
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    print(f"qconform check: {src.name}, seed {seed} (rerun with --seed {seed})", file=sys.stderr)
    from harness.model.inputs_option import apply as use_inputs_from
    use_inputs_from(args)
    t0 = time.time()
    jobs, unchecked = check_jobs(code, str(src), shapes, modes, seed)
    if not kernel_signatures(code):
        raise ValueError(f"--source: no __global__ kernel found in {args.source!r}")
    run_ = run_cases(resolve_backend(args.backend, args.sanitize), jobs)
    run_.unchecked = unchecked
    run_.meta.update(command="check", source=str(src), source_sha256=source_sha256(code), seed=seed,
                     shapes=[s.name for s in shapes], modes=[m.value for m in modes] if modes else ["all"],
                     duration_s=round(time.time() - t0, 3))
    paths = write_reports(Path(args.out), run_)
    return summarize(run_, paths)
