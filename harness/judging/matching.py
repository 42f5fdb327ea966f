"""Kernels of someone else's source matched to the kernel family's contracts, and the cases to judge them with
(`qconform check`, and `qconform replay --source`).

In: CUDA source text, shape sets, modes, a seed. Out: runner Jobs for every kernel whose name (exact, or a
contract's name pattern such as k\\d+_q8dp4a) AND parameter list (C types, in order) match a contract, and the
unchecked kernels with the reason: no contract of that name, a different parameter list, or an ambiguous
pattern match. An unchecked kernel is never counted as passing."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from cudasrc.signatures import kernel_signatures, template_kernels
from emitters.contract import KernelContract
from emitters.registry import all_contracts, mode_label
from reference.modes import Mode
from reference.shapes import ShapeSet

from harness.backends.source_build import SourceBuild
from harness.cases.names import cases_for_contract

from .runner import Job


@dataclass
class Match:
    kernel: str
    contracts: list[KernelContract]     # contracts to judge it with (several modes may share one signature)
    reason: str = ""                    # why unchecked (empty when contracts were found)


def _semantics(c: KernelContract) -> str:
    return json.dumps({"op": c.op, "attrs": c.describe()["attrs"], "params": [p.name for p in c.params]},
                      sort_keys=True, default=str)


def match_kernels(code: str, contracts: Sequence[KernelContract], modes: Optional[Sequence[Mode]] = None,
                  context: str = "") -> list[Match]:
    """Match every kernel of `code` to the contracts: exact name first, then name patterns; the parameter
    list must be identical (typedefs of the source and of its headers' text `context` spelled out). Several modes
    sharing one contract (same op, attributes and parameters) are judged once, in the first selected mode."""
    out = []
    sigs = kernel_signatures(code, context=context)
    made = {sig.name.split("<", 1)[0] for sig in sigs}
    for name in template_kernels(code):
        if name not in made:        # only the host code's launches instantiate it, and no contract names those
            out.append(Match(name, [], "a template kernel that only the file's host code instantiates; the kernel "
                                       "family's contracts name plain kernels (`qconform racescan FILE --kernel "
                                       f"'{name}<...>'` runs one instantiation under the race detector)"))
    for sig in sigs:
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
               seed: int, include_dirs: Sequence[str] = ()):
    """(jobs, unchecked kernels) for a source file. A kernel no contract matches, or one whose match is
    ambiguous, is among the unchecked kernels ({"kernel", "reason"}), never judged. The source is built with -I its
    own folder (path's, when given) and each of `include_dirs`."""
    pairs, unchecked, seen_unchecked = [], [], set()
    build = SourceBuild.of(code, [path] if path else [], include_dirs)
    context = build.context()
    for shape in shapes:
        for m in match_kernels(code, all_contracts(shape.name), modes, context):
            if not m.contracts:
                if m.kernel not in seen_unchecked:
                    seen_unchecked.add(m.kernel)
                    unchecked.append({"kernel": m.kernel, "reason": m.reason})
                continue
            for c in m.contracts:
                c = _rename(c, m.kernel)
                pairs += [(case, c) for case in cases_for_contract(c, shape, seed)]
    return [Job(Path(path).name if path else "source", code, pairs, path=path, include_dirs=tuple(include_dirs),
                build=build)], unchecked
