"""Run mutants through `qconform check`'s cases and classify them.

The unmutated file runs first: every case of every selected kernel, with the run's seed. Each mutant then
runs the cases of the kernel it changed (the other kernels are blanked out of its source, so they neither
slow its build nor change their verdicts), with the same seed, cheapest case first, and stops at the first
case whose verdict is worse than the unmutated run's (pass < tie < fail): the mutant is killed. A mutant
whose source does not build is counted apart ("no-compile"), never as killed. A mutant that hangs is stopped
by the backend's launch timeout (a multiple of the slowest unmutated launch) and counts as killed, with the
timeout named. A mutant that survives every schedule is judged once more on the AddressSanitizer build of
the CPU backend (one schedule), which catches the out-of-bounds reads no output shows (a loop bound one past
the end, an index -1 into shared memory). A survivor listed in the equivalence ledger (its id and the reason it cannot change any
output) is "equivalent"; every other survivor is a gap in the cases.
"""
from __future__ import annotations

import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from emitters.contract import KernelContract
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
SANITIZE_SLOWDOWN = 4.0


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

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def score(self) -> Optional[float]:
        """killed / (killed + survived): equivalent, non-compiling and unrun mutants are not in it."""
        k, s = self.count(KILLED), self.count(SURVIVED)
        return k / (k + s) if k + s else None


def _rank(verdict: str) -> Optional[int]:
    return RANK.get(verdict)


def kills(baseline: dict, res) -> bool:
    """Whether a case result kills the mutant: a verdict worse than the unmutated run's, or a launch stopped by
    the mutation timeout (a hang: TIMEOUT_FACTOR times the slowest unmutated launch), which the CPU backend
    leaves unchecked as its own limit in an ordinary run, where no unmutated launch tells slow from hung."""
    before = baseline.get(res.case.name, UNCHECKED)
    return worse(before, res.verdict) or (res.fault == "KernelTimeout" and _rank(before) is not None)


def worse(baseline: str, now: str) -> bool:
    """Whether a verdict is worse than the unmutated run's. `unchecked` is the tool's own limit, not a
    kernel's verdict, so it never kills a mutant (and a case unchecked in the unmutated run cannot)."""
    a, b = _rank(baseline), _rank(now)
    return a is not None and b is not None and b > a


@dataclass
class KernelCases:
    kernel: str
    isolated: str                                       # the file with the other kernels blanked
    cases: list[tuple[Case, KernelContract]]            # cheapest first (by the unmutated run's wall time)


def _judge_all(module, cases, baseline: Optional[dict], reload: Callable[[], object]):
    """Judge cases in order; with a baseline, stop at the first worse verdict. Returns (results, module)."""
    from harness.judging.runner import STICKY_FAULTS
    out = []
    for case, contract in cases:
        res = judge_case(module, case, contract)
        out.append(res)
        if baseline is not None and kills(baseline, res):
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


def run_mutation(code: str, source_name: str, cases_by_kernel: dict[str, list[tuple[Case, KernelContract]]],
                 seed: int, shapes: Sequence[str], *, jobs: int = 1, sample: Optional[int] = None,
                 time_limit_s: Optional[float] = None, ledger: Optional[dict[str, str]] = None,
                 operators: "Sequence[str] | None" = None, backend_factory: Optional[Callable[..., object]] = None,
                 progress: bool = True, mutants: "Sequence[Mutant] | None" = None) -> MutationRun:
    """The whole analysis: unmutated run, mutants, classification. `cases_by_kernel` maps each kernel to
    judge to its cases (from check's contract matching); `mutants` replaces the operators' mutants with a
    given list (edits of the same file, e.g. hand-written ones)."""
    from harness.backends.base import BuildError, KernelFault
    if jobs < 1:
        raise ValueError(f"-j: expected at least one parallel job, got {jobs}")
    if backend_factory is None:
        def backend_factory(timeout_s: float, schedules: Optional[int] = None, sanitize: bool = False):
            from harness.backends.emu.backend import EmuBackend
            return EmuBackend(timeout_s=timeout_s, schedules=schedules, sanitize=sanitize)
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
                module = base_be.load(iso)
            except (BuildError, KernelFault, ValueError) as exc:
                raise ValueError(f"--source: the unmutated kernel {k} does not build, so no mutant can be judged: "
                                 f"{exc}") from None
            results, _ = _judge_all(module, cases_by_kernel[k], None, lambda: base_be.load(iso))
            for r in results:
                baseline[r.case.name] = r.verdict
                walls[r.case.name] = r.wall_s
            ordered = sorted(cases_by_kernel[k], key=lambda p: walls.get(p[0].name, 0.0))
            prepared[k] = KernelCases(k, iso, ordered)
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
    deadline = None if time_limit_s is None else t0 + time_limit_s
    quick = _Backends(lambda: backend_factory(timeout_s, QUICK_SCHEDULES))
    full = _Backends(lambda: backend_factory(timeout_s, None))
    # ASan makes a launch several times slower: its timeout scales with it
    sanitized = _Backends(lambda: backend_factory(SANITIZE_SLOWDOWN * timeout_s, 1, sanitize=True))

    def one(m: Mutant) -> MutantResult:
        # a failure of the tool itself (the CPU backend's worker, not the kernel) is retried once on fresh
        # backends; a second one leaves the mutant not run, with the reason, never killed or survived
        for attempt in (1, 2):
            try:
                return judge_mutant(m)
            except (RuntimeError, OSError) as exc:
                quick.drop()
                full.drop()
                sanitized.drop()
                if attempt == 2:
                    return MutantResult(m, NOT_RUN, detail=f"the tool failed twice on this mutant: "
                                        f"{str(exc).strip().splitlines()[-1][:300]}")
        raise AssertionError("unreachable")

    def judge_mutant(m: Mutant) -> MutantResult:
        if deadline is not None and time.monotonic() > deadline:
            return MutantResult(m, NOT_RUN, detail="the time limit was reached before this mutant ran")
        t = time.monotonic()
        kc = prepared[m.kernel]
        mcode = m.apply(kc.isolated)
        ran = 0
        for pool in (quick, full):
            be = pool.get()
            try:
                module = be.load(mcode)
            except (BuildError, KernelFault, ValueError) as exc:
                return MutantResult(m, NO_COMPILE, detail=str(exc).strip().splitlines()[-1][:300] if str(exc).strip()
                                    else type(exc).__name__, wall_s=time.monotonic() - t)
            results, _ = _judge_all(module, kc.cases, baseline, lambda: be.load(mcode))
            ran += len(results)
            last = results[-1] if results else None
            if last is not None and kills(baseline, last):
                how = f" (timeout: a launch ran past {timeout_s:g} s)" if last.fault == "KernelTimeout" else ""
                return MutantResult(m, KILLED, last.case.name, f"{baseline[last.case.name]} -> {last.verdict}{how}: "
                                    f"{last.reason[:400]}", ran, time.monotonic() - t)
        status, detail = SURVIVED, f"every one of {len(results)} case(s) kept its verdict under every schedule"
        killed = sanitized_pass(m, kc, mcode)
        if isinstance(killed, MutantResult):
            killed.cases_run += ran
            killed.wall_s = time.monotonic() - t
            return killed
        detail += killed
        if m.id in ledger:
            status, detail = EQUIVALENT, ledger[m.id]
        return MutantResult(m, status, "", detail, len(results), time.monotonic() - t)

    sanitized_baseline: dict[str, dict[str, str]] = {}
    baseline_lock = threading.Lock()

    def sanitized_pass(m: Mutant, kc: KernelCases, mcode: str) -> "MutantResult | str":
        """The survivor on the AddressSanitizer build: a MutantResult when a case's verdict is worse there than
        the unmutated kernel's on the same build, else a note for the survivor's detail."""
        be = sanitized.get()
        with baseline_lock:
            if kc.kernel not in sanitized_baseline:
                try:
                    base, _ = _judge_all(be.load(kc.isolated), kc.cases, None, lambda: be.load(kc.isolated))
                except (BuildError, KernelFault, ValueError) as exc:
                    sanitized_baseline[kc.kernel] = {"": f"not available ({type(exc).__name__})"}
                else:
                    sanitized_baseline[kc.kernel] = {r.case.name: r.verdict for r in base}
        base = sanitized_baseline[kc.kernel]
        if "" in base:
            return f"; the AddressSanitizer build is {base['']}"
        try:
            module = be.load(mcode)
        except (BuildError, KernelFault, ValueError) as exc:
            return f"; its AddressSanitizer build failed ({type(exc).__name__})"
        results, _ = _judge_all(module, kc.cases, base, lambda: be.load(mcode))
        last = results[-1] if results else None
        if last is not None and kills(base, last):
            return MutantResult(m, KILLED, last.case.name, f"{base[last.case.name]} -> {last.verdict} on the "
                                f"AddressSanitizer build: {last.reason[:400]}")
        return ", and on the AddressSanitizer build"

    # mutants run in a shuffled order so a time limit leaves an unbiased sample, reported in source order
    order = list(range(len(mutants)))
    random.Random(seed).shuffle(order)
    results: dict[int, MutantResult] = {}
    try:
        with _Progress(len(mutants), progress) as bar, ThreadPoolExecutor(max_workers=jobs) as pool:
            futs = {pool.submit(one, mutants[i]): i for i in order}
            for f in as_completed(futs):
                r = f.result()
                results[futs[f]] = r
                bar.advance(r)
    finally:
        quick.close()
        full.close()
        sanitized.close()
    for i in range(len(mutants)):
        r = results[i]
        if r.status in (SURVIVED, EQUIVALENT, KILLED):
            r.diff = mutant_diff(prepared[r.mutant.kernel].isolated, r.mutant)
        if r.status == KILLED and r.mutant.id in ledger:
            r.detail = f"listed as equivalent in the ledger, but killed: {r.detail}"
        run.results.append(r)
    run.wall_s = time.monotonic() - t0
    return run


class _Progress:
    """A rich progress bar on a terminal; plain lines every 10% otherwise."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled, self.counts = total, 0, enabled, {s: 0 for s in STATUSES}
        self.tty = enabled and sys.stderr.isatty()
        self.bar = None
        self.next_line = 0.1

    def __enter__(self):
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("[bold]mutants"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.fields[tally]}"), transient=False)
            self.bar.__enter__()
            self.task = self.bar.add_task("mutants", total=self.total, tally="")
        return self

    def advance(self, r: MutantResult) -> None:
        self.done += 1
        self.counts[r.status] += 1
        tally = ", ".join(f"{v} {k}" for k, v in self.counts.items() if v)
        if self.bar is not None:
            self.bar.update(self.task, advance=1, tally=tally)
        elif self.enabled and self.total and self.done / self.total >= self.next_line:
            print(f"qconform mutate: {self.done}/{self.total} mutants ({tally})", file=sys.stderr, flush=True)
            self.next_line += 0.1

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False
