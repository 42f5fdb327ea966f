"""Run mutants through `qconform check`'s cases and classify them.

The unmutated file runs first: every case of every selected kernel, with the run's seed. Each mutant then
runs the cases of the kernel it changed (the other kernels are blanked out of its source, so they neither
slow its build nor change their verdicts), with the same seed, cheapest case first, and stops at the first
case whose verdict is worse than the unmutated run's (pass < tie < fail): the mutant is killed. A mutant
whose source does not build is counted apart ("no-compile"), never as killed. A mutant that hangs is stopped
by the backend's launch timeout (a multiple of the slowest unmutated launch) and counts as killed, with the
timeout named. A mutant that survives every schedule is judged once more on the CPU backend's
AddressSanitizer build (one schedule, against the unmutated kernel's verdicts on that build), which catches
the out-of-bounds reads no output shows (a loop bound one past the end, an index -1 into shared memory).
A survivor listed in the equivalence ledger (its id and the reason it cannot change any
output) is "equivalent"; every other survivor is a gap in the cases.
"""
from __future__ import annotations

import json
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from emitters.contract import KernelContract
from harness.backends.source_build import SourceBuild
from harness.cases.names import Case
from harness.judging.core import judge_case
from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED

from .operators import Mutant, isolate_kernel, mutant_diff, mutants_of

RANK = {PASS: 0, TIE: 1, FAIL: 2}
KILLED, SURVIVED, EQUIVALENT, NO_COMPILE, NOT_RUN = "killed", "survived", "equivalent", "no-compile", "not-run"
STATUSES = (KILLED, SURVIVED, EQUIVALENT, NO_COMPILE, NOT_RUN)
# A mutant's launch may run this many times longer than the slowest unmutated launch before it counts as a hang
# (a loop bound mutant can loop for ever); at least MIN_TIMEOUT_S so a loaded machine does not fake a kill.
TIMEOUT_FACTOR, MIN_TIMEOUT_S = 8.0, 10.0
# First pass: the CPU backend's first two schedules only (forward order under both poison patterns: wrong values,
# unwritten outputs, reads before writes). A verdict worse there is worse under every schedule, since the full
# run repeats those two and only adds checks; a mutant that survives them is run again with every schedule
# (reverse, warp-greedy and random orders catch races), so no survivor is declared on the shortened run.
QUICK_SCHEDULES = 2
SANITIZE_SLOWDOWN = 4.0         # an AddressSanitizer build runs launches several times slower: its timeout scales
# Part of a stored result's key: raise it when the rules that classify a mutant change, so that an earlier
# run's results are not resumed under new rules.
RULES_VERSION = 3


@dataclass
class MutantResult:
    mutant: Mutant
    status: str
    case: str = ""            # the killing case (killed), or the cases run (survived)
    detail: str = ""          # the killing verdict's reason, the build error, or the equivalence reason
    cases_run: int = 0
    wall_s: float = 0.0
    diff: str = ""


@dataclass
class MutationRun:
    source: str
    seed: int
    shapes: list[str]
    kernels: list[str]
    baseline: dict[str, str]                 # case name -> verdict of the unmutated file
    results: list[MutantResult] = field(default_factory=list)
    unchecked_kernels: list[dict] = field(default_factory=list)
    stale_ledger: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    timeout_s: float = 0.0
    time_limit_s: Optional[float] = None
    resumed: int = 0                         # mutants taken from the store of an earlier, interrupted run
    store: Optional[str] = None
    retried: int = 0                         # mutants resubmitted after their worker died
    executor: str = ""

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def score(self) -> Optional[float]:
        """killed / (killed + survived): equivalent, non-compiling and unrun mutants are not in it."""
        k, s = self.count(KILLED), self.count(SURVIVED)
        return k / (k + s) if k + s else None


def _rank(verdict: str) -> Optional[int]:
    return RANK.get(verdict)


def worse(baseline: str, now: str) -> bool:
    """Whether a verdict is worse than the unmutated run's. `unchecked` is the tool's own limit, not a
    kernel's verdict, so it never kills a mutant (and a case unchecked in the unmutated run cannot)."""
    a, b = _rank(baseline), _rank(now)
    return a is not None and b is not None and b > a


def kills(baseline: str, res) -> bool:
    """Whether a mutant's case result kills it: a verdict worse than the unmutated run's, or a hang (the launch
    ran past the mutation run's timeout, a multiple of the slowest unmutated launch) of a case the unmutated
    kernel finished. The backend reports that hang as its own limit (`unchecked`), but here the unmutated
    kernel is the control: it ran the same case well within the limit."""
    return worse(baseline, res.verdict) or (res.fault == "KernelTimeout" and _rank(baseline) is not None)


@dataclass
class KernelCases:
    kernel: str
    isolated: str                                       # the file with the other kernels blanked
    cases: list[tuple[Case, KernelContract]]            # cheapest first (by the unmutated run's wall time)
    build: SourceBuild = SourceBuild()                  # the file's compile flags and its own headers


def _judge_all(module, cases, baseline: Optional[dict], reload: Callable[[], object]):
    """Judge cases in order; with a baseline, stop at the first worse verdict. Returns (results, module)."""
    from harness.judging.runner import STICKY_FAULTS
    out = []
    for case, contract in cases:
        res = judge_case(module, case, contract)
        out.append(res)
        if baseline is not None and kills(baseline.get(case.name, UNCHECKED), res):
            break
        if res.fault in STICKY_FAULTS:
            module = reload()
    return out, module


class _Backends:
    """One CPU backend per worker thread (each owns a worker process), closed together at the end. A worker
    process keeps every module it loaded mapped, and each mutant is a new module: after RECYCLE_LOADS loads
    the thread's backend is closed and a fresh one started, so a long run does not exhaust the worker's
    address space."""

    RECYCLE_LOADS = 16

    def __init__(self, factory: Callable[[], object]):
        self.factory, self.local, self.all, self.lock = factory, threading.local(), [], threading.Lock()

    def get(self):
        be = getattr(self.local, "be", None)
        if be is not None and self.local.loads >= self.RECYCLE_LOADS:
            self.drop()
            be = None
        if be is None:
            be = self.local.be = self.factory()
            self.local.loads = 0
            with self.lock:
                self.all.append(be)
        self.local.loads += 1
        return be

    def drop(self) -> None:
        """Close this thread's backend (after a tool failure, or to recycle it); the next get starts anew."""
        be = getattr(self.local, "be", None)
        self.local.be = None
        if be is not None:
            try:
                be.close()
            except Exception:
                pass

    def close(self) -> None:
        for be in self.all:
            try:
                be.close()
            except Exception:
                pass


def select_mutants(code: str, kernels: Sequence[str], sample: Optional[int], seed: int,
                   operators: "Sequence[str] | None" = None) -> list[Mutant]:
    """Every mutant of the kernels, or a seeded random sample of `sample` of them (in source order)."""
    allm = [m for k in kernels for m in mutants_of(code, k, operators)]
    if sample is not None:
        if sample < 1:
            raise ValueError(f"--sample: expected a positive number of mutants, got {sample}")
        if sample < len(allm):
            picked = set(random.Random(seed).sample(range(len(allm)), sample))
            allm = [m for i, m in enumerate(allm) if i in picked]
    return allm


@dataclass(frozen=True)
class EmuFactory:
    """The default backend of a mutation run: the CPU backend with a launch timeout (and a schedule count)."""

    def __call__(self, timeout_s: float, schedules: Optional[int] = None, sanitize: bool = False):
        from harness.backends.emu.backend import EmuBackend
        return EmuBackend(timeout_s=timeout_s, schedules=schedules, sanitize=sanitize)


@dataclass
class _Plan:
    """What every mutant's judging needs, shipped once to each worker."""
    prepared: dict[str, KernelCases]
    baseline: dict[str, str]
    timeout_s: float
    deadline: Optional[float]            # time.time() after which a mutant is not started (wall clock: a
                                         # cluster worker's monotonic clock is not this process's)


class _MutantWorker:
    """One worker's backends: a quick one (the first schedules), a full one and an AddressSanitizer one (with the
    unmutated kernels' verdicts on it, judged when a survivor of that kernel first needs them)."""

    def __init__(self, factory: Callable[..., object], timeout_s: float):
        self.quick = _Backends(lambda: factory(timeout_s, QUICK_SCHEDULES))
        self.full = _Backends(lambda: factory(timeout_s, None))
        self.sanitized = _Backends(lambda: factory(SANITIZE_SLOWDOWN * timeout_s, 1, sanitize=True))
        self.sanitized_baseline: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()

    def drop(self) -> None:
        self.quick.drop()
        self.full.drop()
        self.sanitized.drop()

    def close(self) -> None:
        self.quick.close()
        self.full.close()
        self.sanitized.close()


@dataclass(frozen=True)
class _MutantWorkerSetup:
    factory: Callable[..., object]
    timeout_s: float

    def __call__(self) -> _MutantWorker:
        return _MutantWorker(self.factory, self.timeout_s)


def _judge_unit(worker: _MutantWorker, plan: _Plan, m: Mutant) -> MutantResult:
    """One mutant. A failure of the tool itself (the CPU backend's worker, not the kernel) is retried once on
    fresh backends; a second one leaves the mutant not run, with the reason, never killed or survived."""
    for attempt in (1, 2):
        try:
            return _judge_mutant(worker, plan, m)
        except (RuntimeError, OSError) as exc:
            worker.drop()
            if attempt == 2:
                return MutantResult(m, NOT_RUN, detail=f"the tool failed twice on this mutant: "
                                    f"{str(exc).strip().splitlines()[-1][:300]}")
    raise AssertionError("unreachable")


def _judge_mutant(worker: _MutantWorker, plan: _Plan, m: Mutant) -> MutantResult:
    from harness.backends.base import BuildError, KernelFault
    if plan.deadline is not None and time.time() > plan.deadline:
        return MutantResult(m, NOT_RUN, detail="the time limit was reached before this mutant ran")
    t = time.monotonic()
    kc = plan.prepared[m.kernel]
    baseline = plan.baseline
    mcode = m.apply(kc.isolated)
    ran = 0
    results: list = []
    for pool in (worker.quick, worker.full):
        be = pool.get()
        try:
            module = be.load(mcode, kc.build.here())
        except (BuildError, KernelFault, ValueError) as exc:
            return MutantResult(m, NO_COMPILE, detail=str(exc).strip().splitlines()[-1][:300] if str(exc).strip()
                                else type(exc).__name__, wall_s=time.monotonic() - t)
        results, _ = _judge_all(module, kc.cases, baseline, lambda: be.load(mcode, kc.build.here()))
        ran += len(results)
        last = results[-1] if results else None
        if last is not None and kills(baseline.get(last.case.name, UNCHECKED), last):
            now = (f"hang (timeout: a launch ran past {plan.timeout_s:g} s)" if last.fault == "KernelTimeout"
                   else last.verdict)
            return MutantResult(m, KILLED, last.case.name, f"{baseline[last.case.name]} -> {now}: "
                                f"{last.reason[:400]}", ran, time.monotonic() - t)
    lost = next((r for r in results if r.verdict == UNCHECKED and _rank(baseline.get(r.case.name, UNCHECKED))
                 is not None), None)
    if lost is not None:     # a case the tool judged on the unmutated kernel and cannot judge on the mutant
        return MutantResult(m, NOT_RUN, lost.case.name, f"the tool could not judge this case on the mutant "
                            f"({lost.reason[:300]})", ran, time.monotonic() - t)
    detail = f"every one of {len(results)} case(s) kept its verdict under every schedule"
    on_asan = _sanitized_pass(worker, m, kc, mcode)
    if isinstance(on_asan, MutantResult):
        on_asan.cases_run += ran
        on_asan.wall_s = time.monotonic() - t
        return on_asan
    return MutantResult(m, SURVIVED, "", detail + on_asan, len(results), time.monotonic() - t)


def _sanitized_pass(worker: _MutantWorker, m: Mutant, kc: "KernelCases", mcode: str) -> "MutantResult | str":
    """A survivor on the AddressSanitizer build: a killed MutantResult when a case's verdict there is worse than
    the unmutated kernel's on the same build, else a note for the survivor's detail."""
    from harness.backends.base import BuildError, KernelFault
    be = worker.sanitized.get()
    with worker.lock:
        if kc.kernel not in worker.sanitized_baseline:
            try:
                base, _ = _judge_all(be.load(kc.isolated, kc.build.here()), kc.cases, None,
                                     lambda: be.load(kc.isolated, kc.build.here()))
            except (BuildError, KernelFault, ValueError) as exc:
                worker.sanitized_baseline[kc.kernel] = {"": f"not available ({type(exc).__name__})"}
            else:
                worker.sanitized_baseline[kc.kernel] = {r.case.name: r.verdict for r in base}
    base = worker.sanitized_baseline[kc.kernel]
    if "" in base:
        return f"; the AddressSanitizer build is {base['']}"
    try:
        module = be.load(mcode, kc.build.here())
    except (BuildError, KernelFault, ValueError) as exc:
        return f"; its AddressSanitizer build failed ({type(exc).__name__})"
    results, _ = _judge_all(module, kc.cases, base, lambda: be.load(mcode, kc.build.here()))
    last = results[-1] if results else None
    if last is not None and kills(base.get(last.case.name, UNCHECKED), last):
        return MutantResult(m, KILLED, last.case.name, f"{base[last.case.name]} -> {last.verdict} on the "
                            f"AddressSanitizer build: {last.reason[:400]}")
    return ", and on the AddressSanitizer build"


def run_mutation(code: str, source_name: str, cases_by_kernel: dict[str, list[tuple[Case, KernelContract]]],
                 seed: int, shapes: Sequence[str], *, jobs: int = 1, sample: Optional[int] = None,
                 time_limit_s: Optional[float] = None, ledger: Optional[dict[str, str]] = None,
                 operators: "Sequence[str] | None" = None, backend_factory: Optional[Callable[..., object]] = None,
                 progress: bool = True, mutants: "Sequence[Mutant] | None" = None, cluster: Optional[str] = None,
                 store_dir: "str | Path | None" = None, build: SourceBuild = SourceBuild()) -> MutationRun:
    """The whole analysis: unmutated run, mutants, classification. `cases_by_kernel` maps each kernel to
    judge to its cases (from check's contract matching); `mutants` replaces the operators' mutants with a
    given list (edits of the same file, e.g. hand-written ones). `jobs` > 1 judges mutants in that many
    processes, `cluster` ('local:N', 'tcp://...') on a Dask cluster. With `store_dir`, every judged mutant is
    stored there as it finishes (keyed by the source's and the unmutated run's hash, and the mutant id), and
    a rerun judges only the mutants not stored yet. `build`: the source's compile flags and own headers (built
    from the headers' texts read when it was made, on every worker)."""
    from harness.backends.base import BuildError, KernelFault
    from harness.judging.executors import InProcess, Lost, Work, make_executor
    from harness.judging.progress import Progress
    if jobs < 1:
        raise ValueError(f"-j: expected at least one parallel job, got {jobs}")
    executor = make_executor(jobs, cluster)
    if backend_factory is None:
        backend_factory = EmuFactory()
    ledger = dict(ledger or {})
    t0 = time.monotonic()
    kernels = list(cases_by_kernel)
    base_be = backend_factory(120.0, None)
    baseline: dict[str, str] = {}
    walls: dict[str, float] = {}
    prepared: dict[str, KernelCases] = {}
    try:
        for k in kernels:
            iso = isolate_kernel(code, k)
            try:
                module = base_be.load(iso, build.here())
            except (BuildError, KernelFault, ValueError) as exc:
                raise ValueError(f"--source: the unmutated kernel {k} does not build, so no mutant can be judged: "
                                 f"{exc}") from None
            results, _ = _judge_all(module, cases_by_kernel[k], None, lambda: base_be.load(iso, build.here()))
            for r in results:
                baseline[r.case.name] = r.verdict
                walls[r.case.name] = r.wall_s
            ordered = sorted(cases_by_kernel[k], key=lambda p: walls.get(p[0].name, 0.0))
            prepared[k] = KernelCases(k, iso, ordered, build)
    finally:
        base_be.close()
    timeout_s = max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * max(walls.values(), default=1.0))
    if mutants is None:
        mutants = select_mutants(code, kernels, sample, seed, operators)
    else:
        mutants = list(mutants)
        stray = sorted({m.kernel for m in mutants} - set(kernels))
        if stray:
            raise ValueError(f"mutants: kernels {stray} have no cases in this run")
    run = MutationRun(source_name, seed, list(shapes), kernels, baseline, timeout_s=timeout_s,
                      time_limit_s=time_limit_s)
    ids = {m.id for m in mutants}
    all_ids = ids if sample is None else {m.id for k in kernels for m in mutants_of(code, k, operators)}
    run.stale_ledger = sorted(i for i in ledger if i not in all_ids)
    store = MutantStore(Path(store_dir), code, baseline, build) if store_dir is not None else None
    results: dict[int, MutantResult] = {}
    if store is not None:
        done = store.load(mutants)
        results = {i: done[m.id] for i, m in enumerate(mutants) if m.id in done}
        run.resumed, run.store = len(results), str(store.dir)
        if results and progress:
            print(f"qconform mutate: resuming: {len(results)} of {len(mutants)} mutants already judged "
                  f"({store.dir})", file=sys.stderr)
    # mutants run in a shuffled order so a time limit leaves an unbiased sample, reported in source order
    order = [i for i in range(len(mutants)) if i not in results]
    random.Random(seed).shuffle(order)
    plan = _Plan(prepared, baseline, timeout_s, None if time_limit_s is None else time.time() + time_limit_s)
    if len(order) <= 1 and cluster is None:
        executor = InProcess()
    work = Work(_MutantWorkerSetup(backend_factory, timeout_s), _judge_unit, plan)
    tally = {st: 0 for st in STATUSES}

    def advance(bar, r: MutantResult) -> None:
        tally[r.status] += 1
        bar.advance(1, ", ".join(f"{v} {k}" for k, v in tally.items() if v))

    with executor.open(work) as session, Progress(len(mutants), progress, title="qconform mutate", unit="mutants",
                                                  heartbeat=True) as bar:
        for r in results.values():
            advance(bar, r)
        for n, r in session.results([mutants[i] for i in order]):
            i = order[n]
            if isinstance(r, Lost):
                r = MutantResult(mutants[i], NOT_RUN, detail=f"unchecked: {r.reason}")
            elif store is not None:
                store.put(r)
            results[i] = r
            bar.retried = session.retried
            advance(bar, r)
        run.retried = session.retried
    run.executor = executor.description
    for i in range(len(mutants)):
        r = results[i]
        if r.status == SURVIVED and r.mutant.id in ledger:
            r.status, r.detail = EQUIVALENT, ledger[r.mutant.id]
        if r.status in (SURVIVED, EQUIVALENT, KILLED):
            r.diff = mutant_diff(prepared[r.mutant.kernel].isolated, r.mutant)
        if r.status == KILLED and r.mutant.id in ledger:
            r.detail = f"listed as equivalent in the ledger, but killed: {r.detail}"
        run.results.append(r)
    run.wall_s = time.monotonic() - t0
    return run


class MutantStore:
    """The judged mutants of one campaign, one JSON file each, written as each finishes (write, then rename):
    DIR/<source sha256[:16]>-<unmutated run's sha256[:12]>/<mutant id>.json. The unmutated run's hash covers
    every case name (kernel, mode, shape, seed) and its verdict, so a stored result is reused only where the
    same mutant of the same file meets the same cases; the source's hash also covers its headers (their paths and
    contents). Mutants not run (time limit, tool failure) are not stored: a rerun judges them."""

    STORED = (KILLED, SURVIVED, NO_COMPILE)

    def __init__(self, root: Path, code: str, baseline: dict[str, str], build: SourceBuild = SourceBuild()):
        import hashlib
        from cudasrc.signatures import source_sha256
        cases = hashlib.sha256(json.dumps([RULES_VERSION, sorted(baseline.items())]).encode()).hexdigest()
        headers = build.digests()
        source = source_sha256(code) if not headers else hashlib.sha256(
            json.dumps([source_sha256(code), headers]).encode()).hexdigest()
        self.dir = Path(root) / f"{source[:16]}-{cases[:12]}"

    def load(self, mutants: Sequence[Mutant]) -> dict[str, MutantResult]:
        by_id = {m.id: m for m in mutants}
        out: dict[str, MutantResult] = {}
        if not self.dir.is_dir():
            return out
        for p in sorted(self.dir.glob("*.json")):
            try:
                d = json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                continue                      # never half-written (renamed into place); unreadable: rejudge
            m = by_id.get(d.get("id"))
            if m is None or d.get("edit") != [m.start, m.end, m.replacement] or d.get("status") not in self.STORED:
                continue
            out[m.id] = MutantResult(m, d["status"], d.get("case", ""), d.get("detail", ""),
                                     int(d.get("cases_run", 0)), float(d.get("wall_s", 0.0)))
        return out

    def put(self, r: MutantResult) -> None:
        if r.status not in self.STORED:
            return
        from harness.cache import atomic_write
        m = r.mutant
        atomic_write(self.dir / f"{m.id}.json", json.dumps(
            {"id": m.id, "kernel": m.kernel, "edit": [m.start, m.end, m.replacement], "status": r.status,
             "case": r.case, "detail": r.detail, "cases_run": r.cases_run, "wall_s": r.wall_s}) + "\n")
