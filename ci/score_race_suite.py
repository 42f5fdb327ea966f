#!/usr/bin/env python3
"""Score the CPU backend's race verdicts on public labelled suites of CUDA kernels written by others: the Indigo
suites (graph codes; Indigo 1 as HiRace's artifact generated it), GPUVerify's CUDA test suite and benchmarks,
faial's labelled examples, ScoR's scoped race microbenchmarks and applications, GKLEE's test suite, and the races
that projects fixed in their CUDA kernels (ci/race_suites/race_fixes.py's PROJECTS: ggml, llm.c, Kaldi, arrayfire...;
a clone's history: each fix's parent racy, the fix race-free).

    python ci/score_race_suite.py SUITE [--per-label N] [--seed S] [--race-check on|off] [--out results.json]

One script, one adapter per suite (where the files are, how a file is labelled, launched and given inputs);
nothing of the suites is copied into this repository: the script reads them where they lie. A file counts as
reported when any of its kernels' verdict is a race (harness.racescan.classify, with the detector: its DataRace); a file that does not build
or a kernel that hits the tool's limits cannot be scored, and the reason is kept. Prints progress to stderr and
a summary table (could-not-run and not-scored reasons included); --out writes every verdict as JSON.

The adapters, each with its labelling rule: ci/race_suites/indigo.py, ci/race_suites/indigo1.py,
ci/race_suites/gpuverify.py, ci/race_suites/faial.py, ci/race_suites/scor.py, ci/race_suites/scor_apps.py,
ci/race_suites/gklee.py, ci/race_suites/race_fixes.py.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ci.race_suites import faial, gklee, gpuverify, indigo, indigo1, race_fixes, scor, scor_apps  # noqa: E402
from ci.race_suites.run import RAN  # noqa: E402
from harness.cache import atomic_write  # noqa: E402
from harness.racescan import reading  # noqa: E402

READINGS = reading.BY_NAME
READING_NOTES = {
    reading.GPUVERIFY.name: "GPUVerify: same-value stores benign, and stores of the value a racing read saw",
    reading.GPUVERIFY_WARP_SYNC.name: "with --warp-sync also races within one warp",
    reading.GPUVERIFY_INTRA_GROUP.name: "with --only-intra-group also races across blocks",
    reading.GPUVERIFY_WARP_SYNC_INTRA_GROUP.name: "with both, also races within one warp and across blocks",
    reading.FAIAL_BLOCK.name: "faial: same-value stores benign, races across blocks outside its block-level claim",
    reading.FAIAL_GRID.name: "with --grid-level only races across blocks",
    reading.FAIAL_ALL_LEVELS.name: "with --all-levels every scope",
    reading.MEMORY_MODEL.name: "ScoR (ScoRD): the scoped memory model's, every scope, any values",
    reading.GKLEE.name: "GKLEE: every scope, same-value and kept-value races benign"}

RESTART_EVERY = 8


def select(files: list[Path], per_label: int, seed: int, label=indigo.label_of, group=lambda f: f.parent.name) -> list[Path]:
    """Up to `per_label` racy and race-free files, spread evenly over the groups (Indigo: algorithms; seeded)."""
    rng = np.random.default_rng(seed)
    labels = {f: label(f) for f in files}
    chosen = []
    for wanted in ("racy", "race-free"):
        by_alg = defaultdict(list)
        for f in files:
            if labels[f] == wanted:
                by_alg[group(f)].append(f)
        pools = {a: [fs[i] for i in rng.permutation(len(fs))] for a, fs in sorted(by_alg.items())}
        picked = []
        while len(picked) < per_label and any(pools.values()):
            for a in sorted(pools):
                if pools[a] and len(picked) < per_label:
                    picked.append(pools[a].pop())
        chosen.extend(picked)
    return chosen


class Suite(NamedTuple):
    """One adapter per suite: where its files are, how a file is labelled, named and scored."""
    name: str
    files: list
    label: Callable[[Path], "str | None"]
    group: Callable[[Path], str]            # spread of a sample (Indigo: the algorithm)
    key: Callable[[Path], str]              # the record's file name
    score: Callable[[object, Path, int], dict]
    per_label: "int | None"                 # default sample size per label; None: every file, unscored ones too


def open_suite(root: Path, graph: "str | None" = None) -> "Suite | None":
    """The suite at root, or None; `graph`: Indigo 1's input graph (a file of its indigo/input)."""
    for codes, headers in indigo.LAYOUTS:
        gen, lib = root / codes, root / headers
        if gen.is_dir() and lib.is_dir():
            return Suite("Indigo", sorted(gen.glob("*/*.cu")), indigo.label_of, lambda f: f.parent.name, lambda f: f.name,
                         lambda backend, f, seed: indigo.score_file(backend, f, lib, seed), 60)
    files = indigo1.suite_files(root)
    if files:
        graph = graph or indigo1.INPUT_GRAPH
        return Suite(f"Indigo 1 (graph {graph})", files, indigo1.label_of, lambda f: f.parent.name, lambda f: f.name,
                     lambda backend, f, seed: indigo1.score_file(backend, f, root, seed, graph), None)
    found = gpuverify.suite_files(root)
    if found:
        gv, files = found
        return Suite("GPUVerify", files, lambda f: gpuverify.read_header(f.read_text(errors="replace"))["label"],
                     lambda f: gpuverify.record_name(f, gv).split("/")[0], lambda f: gpuverify.record_name(f, gv),
                     lambda backend, f, seed: gpuverify.score_file(backend, f, gv, seed), None)
    cases = faial.suite_cases(root)
    if cases:
        return Suite("faial", cases, lambda c: c.label, lambda c: faial.FAIAL_EXAMPLES, lambda c: c.name,
                     lambda backend, c, seed: faial.score_case(backend, c, root, seed), None)
    files = scor.suite_files(root)
    if files:
        return Suite("ScoR", files, scor.label_of, scor.scope_of, lambda f: f.name, scor.score_file, None)
    files = scor_apps.suite_files(root)
    if files:
        return Suite("ScoR applications", files, scor_apps.label_of, lambda f: f.parent.name, scor_apps.record_name,
                     scor_apps.score_file, None)
    files = gklee.suite_files(root)
    if files:
        return Suite("GKLEE", files, gklee.label_of, lambda f: f.parent.name, gklee.record_name, gklee.score_file,
                     None)
    sides = race_fixes.suite_files(root)
    if sides:
        return Suite(race_fixes.suite_name(sides), sides, race_fixes.label_of, race_fixes.group_of,
                     race_fixes.record_name,
                     lambda backend, side, seed: race_fixes.score_case(backend, side, root, seed), None)
    return None


def _fault_label(rec: dict) -> str:
    """The fault class, with the number of distinct races where the detector reported several: 'DataRace x3'."""
    races = rec.get("races", 0)
    return f"{rec['fault'] or '-'}" + (f" x{races}" if races > 1 else "")


def _counted_by_its_reading(rec: dict) -> bool:
    """Whether the suite's own notion of a race (rec["reading"], set by the adapter: GPUVerify's or faial's)
    counts any race the detector reported (harness.racescan.reading)."""
    if "read_as_race" in rec:        # the sweeps went on past the races the reading does not count
        return rec["read_as_race"]
    return READINGS[rec["reading"]].counts(tuple(k) for k in rec.get("kinds", ()))     # records of earlier trees


def summarize(records: list[dict]) -> str:
    lines = []
    detector = [r for r in records if r.get("data_race")]
    if detector:      # the happens-before detector was on: its verdicts alone, then the backend's
        for label in ("racy", "race-free"):
            recs = [r for r in records if r["label"] == label and r["verdict"] in RAN]
            hits = [r for r in recs if r in detector]
            share = f"{len(hits) / len(recs):.1%}" if recs else "n/a"
            same = sum(1 for r in hits if r.get("same_value"))
            warp = sum(1 for r in hits if r.get("warp_scope"))
            lines.append(f"DataRace only, {label}: {len(hits)} of {len(recs)} that ran ({share})"
                         + (f"; {same} of them only same-value stores" if same else "")
                         + (f"; {warp} only within one warp" if warp else ""))
        readings = sorted({r["reading"] for r in records if r.get("reading")})
        if readings:        # a verifier's labels: what its own notion of a race gives
            parts = []
            for label in ("racy", "race-free"):
                recs = [r for r in records if r["label"] == label and r["verdict"] in RAN]
                hits = [r for r in recs if r in detector and _counted_by_its_reading(r)]
                parts.append(f"{label} {len(hits)} of {len(recs)}" + (f" ({len(hits) / len(recs):.1%})" if recs else ""))
            lines.append(f"DataRace read as the suite's verifier reads a race ({'; '.join(READING_NOTES[n] for n in readings)}): "
                         + ", ".join(parts))
        benign = [r for r in records if r.get("benign_races_expected") and r["verdict"] in RAN]
        if benign:          # GKLEE: race-free by its labels, racy by the memory model (its races are benign ones)
            hits = [r for r in benign if r in detector]
            parts = []
            for label in ("racy", "race-free"):
                recs = [r for r in records if r["verdict"] in RAN and
                        (label == "racy") == (r["label"] == "racy" or bool(r.get("benign_races_expected")))]
                n = sum(1 for r in recs if r in detector)
                parts.append(f"{label} {n} of {len(recs)}" + (f" ({n / len(recs):.1%})" if recs else ""))
            lines.append(f"race-free files expecting only benign races (racy by the memory model): DataRace on "
                         f"{len(hits)} of {len(benign)} that ran; labels read by the memory model (those racy): "
                         + ", ".join(parts))
    for label in ("racy", "race-free"):
        recs = [r for r in records if r["label"] == label]
        ran = [r for r in recs if r["verdict"] in RAN]
        reported = [r for r in ran if r["verdict"] == "race"]
        other = [r for r in ran if r["verdict"] in ("fault", "order-dependent")]
        cannot = Counter(r["verdict"] for r in recs if r not in ran)
        what = "recall" if label == "racy" else "false alarms"
        share = f"{len(reported) / len(ran):.1%}" if ran else "n/a"
        lines.append(f"{label}: {len(recs)} selected, {len(ran)} ran, race reported on {len(reported)} "
                     f"({what} {share}), other faults {len(other)}, could not run: "
                     f"{dict(cannot) or 0}")
        for r in reported + other if label == "race-free" else [r for r in ran if r["verdict"] != "race"]:
            flags = " ".join(f for f in r.get("flags", ()) if f.startswith("--warp-sync"))
            lines.append(f"  {r['verdict']:6s} {_fault_label(r):18s} {r['file']}{' [' + flags + ']' if flags else ''}: "
                         f"{r['detail'][:160]}")
    reasons = Counter(re.sub(r"\(line \d+\)|line \d+|\d+", "N", r["detail"])[:120] for r in records
                      if r["verdict"] in ("unsupported", "unchecked"))
    for reason, n in reasons.most_common():
        lines.append(f"  cannot run x{n}: {reason}")
    unscored = Counter(r["detail"] for r in records if r["verdict"] == "not scored")
    if unscored:
        lines.append(f"not scored: {sum(unscored.values())}")
        for reason, n in unscored.most_common():
            lines.append(f"  not scored x{n}: {reason}")
    return "\n".join(lines)


def main(argv: "list[str] | None" = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", type=Path, help="Indigo3Suite checkout with generatedCodes/CUDA generated, "
                    "Indigo2Suite checkout, HiRace-Artifact-SC24 checkout (Indigo 1), GPUVerify checkout "
                    "(testsuite/CUDA), GPUVerifyBenchmarks checkout, faial "
                    "checkout (examples/drf/test.ml), ScoR checkout (microbenchmarks/src), GkleeTests checkout "
                    "(NAME/expected.txt beside NAME/*.cu), or a clone with its history (bare or not) of "
                    + ", ".join(p.name for p in race_fixes.PROJECTS))
    ap.add_argument("--per-label", type=int, default=None,
                    help="files per label (racy, race-free); default 60 for Indigo 2 and 3, every file for Indigo 1, "
                         "GPUVerify, "
                         "faial, ScoR and GKLEE")
    ap.add_argument("--seed", type=int, default=0, help="seed of the selection and of every input (default 0)")
    ap.add_argument("--race-check", choices=("on", "off", "default"), default="default",
                    help="the emu happens-before detector, where the backend has one")
    ap.add_argument("--timeout", type=float, default=30.0, help="emu time limit per block, seconds")
    ap.add_argument("--block-sampling", default="all",
                    help="emu block sampling (default all: these kernels' blocks cooperate through atomics on "
                         "shared elements, so a run on a block sample legitimately differs from the full run)")
    ap.add_argument("--graph", default=None,
                    help=f"Indigo 1: the input graph, a file of its {indigo1.INPUTS} (default {indigo1.INPUT_GRAPH})")
    ap.add_argument("--warp-order", choices=("collectives", "syncwarp"), default=None,
                    help="what orders a warp's lanes for the detector (default: the backend's, collectives unless "
                         "$QCONFORM_EMU_WARP_ORDER says: every warp collective naming both; syncwarp: __syncwarp "
                         "alone, as racecheck has it)")
    ap.add_argument("--acquire", choices=("fence", "atomic"), default="fence",
                    help="the detector's acquire rule (default fence, PTX's); atomic: an atomic that reads a "
                         "release acquires it by itself (the writer-side __threadfence() idiom, as ScoRD reads it)")
    ap.add_argument("--accesses", choices=("compiled", "source"), default=None,   # emu's toolchain.ACCESS_FLAGS
                    help="emu's build of device code: source (default with g++: every access the source makes) or "
                         "compiled (optimised: a load whose value nothing uses is dropped, as on a GPU)")
    ap.add_argument("--out", type=Path, help="write every verdict here as JSON (refuses to overwrite)")
    args = ap.parse_args(argv)
    suite = open_suite(args.suite, args.graph)
    if suite is None:
        ap.error(f"suite: {args.suite} has neither generatedCodes/CUDA + lib/ (Indigo3: run generate_all_codes.py "
                 f"cuda first) nor codes/cuda + include/ (Indigo2) nor {indigo1.CODES} (HiRace's Indigo 1) nor "
                 f"{gpuverify.GV_CODES} (GPUVerify) nor "
                 f"{', '.join(gpuverify.BENCHMARK_FOLDERS)} (GPUVerifyBenchmarks) nor {faial.FAIAL_EXAMPLES}/test.ml (faial) "
                 f"nor {scor.SCOR_CODES}/race_*.cu, norace_*.cu (ScoR) nor ScoR's benchmarks folder "
                 f"({', '.join(f'{a}/{s.kernel_file}' for a, s in scor_apps.APPS.items())}) "
                 f"nor */{gklee.EXPECTED} beside *.cu (GKLEE) nor a clone of "
                 f"{' or '.join(p.name for p in race_fixes.PROJECTS)} with the commits of its race fixes")
    if args.graph is not None:
        if not suite.name.startswith("Indigo 1"):
            ap.error(f"--graph: only Indigo 1 takes an input graph; {args.suite} is {suite.name}")
        if Path(args.graph).name != args.graph or not (args.suite / indigo1.INPUTS / args.graph).is_file():
            ap.error(f"--graph: {args.graph} is not a file name in {args.suite / indigo1.INPUTS}")
    if args.out and args.out.exists():
        ap.error(f"--out: {args.out} exists; choose another path")
    if args.per_label is not None and args.per_label < 1:
        ap.error("--per-label: expected a positive integer")
    from harness.backends.emu.backend import EmuBackend
    options = {"timeout_s": args.timeout, "block_sampling": args.block_sampling, "acquire": args.acquire,
               "accesses": args.accesses, "warp_order": args.warp_order}        # accesses None: the backend's default
    if args.race_check != "default":
        options["race_check"] = args.race_check == "on"
    files = suite.files
    per_label = args.per_label or suite.per_label
    chosen = files if per_label is None else select(files, per_label, args.seed, suite.label, suite.group)
    records, t0 = [], time.time()
    backend = None
    try:
        for n, path in enumerate(chosen, 1):
            # The worker process keeps every module it loaded: a fresh one every few files bounds its memory.
            if backend is None or n % RESTART_EVERY == 1:
                if backend is not None:
                    backend.close()
                backend = EmuBackend(**options)
            try:
                rec = suite.score(backend, path, args.seed)
            except Exception as exc:     # the harness's or the adapter's own failure: not a verdict on the kernel
                rec = {"file": suite.key(path), "algorithm": suite.group(path), "label": suite.label(path),
                       "kernels": {}, "verdict": "unchecked", "fault": "HarnessError",
                       "detail": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[-1][:300]}"}
                backend.close()
                backend = EmuBackend(**options)
            records.append(rec)
            print(f"[{n}/{len(chosen)} {time.time() - t0:.0f}s] {rec['label'] or '-':9s} {rec['verdict']:11s} "
                  f"{_fault_label(rec):18s} {suite.key(path)}", file=sys.stderr, flush=True)
    finally:
        if backend is not None:
            backend.close()
    print(f"backend: {backend.describe()}; seed {args.seed}; {len(files)} files in the {suite.name} suite; "
          f"{time.time() - t0:.0f} s")
    print(summarize(records))
    if args.out:
        atomic_write(args.out, json.dumps({"seed": args.seed, "suite": suite.name, "backend": backend.describe(),
                                           "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
