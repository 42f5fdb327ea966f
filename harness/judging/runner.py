"""The conformance run: every kernel of every family, in every mode and shape set, on a backend, judged
against the reference, one report row per case (harness.reports writes the files).

``emitted_jobs`` lists qconform's own emitted kernels; ``run_cases`` is the engine shared with
``qconform report``, ``qconform check`` (kernels from a file, matched to contracts), the planted bugs
(``run_plant``) and the pytest matrix.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from emitters.contract import KernelContract
from emitters.registry import available_families, emit, mode_label, modes_of
from reference.modes import Mode
from reference.shapes import ShapeSet

from cudasrc.signatures import source_sha256
from harness.cases.names import Case, cases_for_contract
from harness.backends.source_build import SourceBuild
from harness.cases.planted import Plant, planted_source

from .core import FAIL, UNCHECKED, CaseResult, judge_case, verdict_for_fault
from .records import EXIT_NOTHING_CHECKED, counts, exit_status, grouped_reasons, result_row

# GPU timing: (batches, back-to-back launches per batch), after the backend's fixed warm-up; the per-launch
# median over the batches is reported, with the spread (harness.backends.gpu.TimingPlan).
GPU_TIMING = (5, 20)
STICKY_FAULTS = ("KernelCrash", "KernelTimeout", "SandboxViolation")


@dataclass
class Job:
    """One source to load and the (case, contract) pairs to run on it."""
    label: str                           # "moe/int8act/tiny" or a file name
    code: str
    cases: list[tuple[Case, KernelContract]]
    sha256: str = ""
    path: Optional[str] = None           # the file the source came from (qconform check), for replay commands
    include_dirs: tuple[str, ...] = ()   # its -I folders as the user gave them (replay commands)
    build: SourceBuild = SourceBuild()   # its compile flags and its own headers' texts (built so on any worker)

    def __post_init__(self):
        self.sha256 = self.sha256 or source_sha256(self.code)


@dataclass
class RunResult:
    rows: list[dict]
    results: list[CaseResult]
    unchecked: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if r.verdict == FAIL]


def resolve_backend(backend, sanitize: bool = False, schedules: "str | None" = None):
    """A Backend from a name (emu, gpu, auto) or a Backend given as is; an unusable one is a ValueError
    that names the reason (no GPU, no PyCUDA, no host compiler). `sanitize` asks for the CPU backend's
    AddressSanitizer build (out-of-bounds reads as well as writes), which only the CPU backend has;
    `schedules` ('all', 'sampled[:N]') is the CPU backend's block sampling of the extra schedules."""
    from harness.backends import get_backend, gpu_unavailable_reason
    if not isinstance(backend, str):
        return backend
    backend_options: dict = {}
    for flag, value, option, what in (
            ("--sanitize", sanitize, "sanitize", "the AddressSanitizer build is a CPU-backend check"),
            ("--schedules", schedules, "block_sampling", "block sampling of the schedules is a CPU-backend option")):
        if not value:
            continue
        if backend == "gpu" or (backend == "auto" and gpu_unavailable_reason() is None):
            raise ValueError(f"{flag}: {what}; use --backend emu")
        backend_options[option] = value
        backend = "emu"
    try:
        return get_backend(backend, **backend_options)
    except (RuntimeError, OSError) as exc:
        raise ValueError(f"backend: {backend} cannot be used here: {exc}") from None


def parse_families(families: "str | Sequence[str] | None") -> list[str]:
    have = list(available_families())
    if families is None:
        return have
    names = [f.strip() for f in (families.split(",") if isinstance(families, str) else families) if f.strip()]
    if not names:
        raise ValueError("families: empty family list")
    for f in names:
        if f not in have:
            raise ValueError(f"families: unknown or not yet emitted family {f!r}; have {', '.join(have)}")
    return names


def emitted_jobs(shapes: Sequence[ShapeSet], modes: Sequence[Mode], seed: int,
                 families: "str | Sequence[str] | None" = None, first_instance_only: bool = False) -> list[Job]:
    """One job per (family, mode, shape) of qconform's emitters; mode-free families run once per shape."""
    jobs = []
    for fam in parse_families(families):
        for mode in modes_of(fam):
            if mode is not None and mode not in modes:
                continue
            for shape in shapes:
                src = emit(fam, mode, shape)
                pairs = []
                for c in src.contracts:
                    pairs += [(case, c) for case in
                              cases_for_contract(c, shape, seed, first_instance_only=first_instance_only)]
                jobs.append(Job(f"{fam}/{mode_label(mode)}/{shape.name}", src.code, pairs))
    return jobs


def judge_in_job(be, modules: dict, jobs: Sequence[Job], j: int, k: int) -> CaseResult:
    """Judge case k of job j; `modules` caches each job's loaded module (or why it did not build)."""
    from harness.backends.base import BuildError, KernelFault
    job = jobs[j]
    if j not in modules:
        try:
            modules[j] = (be.load(job.code, job.build.here()), None)
        except (BuildError, KernelFault, ValueError) as exc:
            modules[j] = (None, _load_failure(be, exc, f"the source did not build on {be.name}"))
    module, failed = modules[j]
    case, contract = job.cases[k]
    if module is None:
        verdict, reason, fault = failed
        return CaseResult(case, verdict, reason, [], {}, fault=fault)
    res = judge_case(module, case, contract, GPU_TIMING if getattr(be, "name", "") == "gpu" else None)
    if res.fault in STICKY_FAULTS:
        # a crashed or hung launch may leave the context unusable (a sticky CUDA error): the next case gets
        # a freshly loaded module
        try:
            modules[j] = (be.load(job.code, job.build.here()), None)
        except (BuildError, KernelFault, ValueError) as exc:
            modules[j] = (None, _load_failure(be, exc, f"reloading after {res.fault} failed"))
    return res


def _load_failure(be, exc: Exception, what: str) -> tuple[str, str, Optional[str]]:
    """(verdict, reason, fault) of every case of a source that did not load (`what` happened): `fail`, unless the
    backend cannot run it (an UnsupportedConstruct, or another of the tool's limits), which is `unchecked`, as is
    a source whose compiler confinement refused a header (qconform's rule, not the kernel's fault)."""
    from harness.backends.base import ConfinementRefused, KernelFault
    if isinstance(exc, ConfinementRefused):
        return UNCHECKED, f"the source was not built: {exc}", type(exc).__name__
    if isinstance(exc, KernelFault) and verdict_for_fault(exc) == UNCHECKED:
        return UNCHECKED, f"the source cannot be run on {be.name} (its limit, not a verdict on the kernel): {exc}", \
            type(exc).__name__
    return FAIL, f"{what}: {exc}", None


class _CaseWorker:
    """One worker's backend and the modules it loaded (job index -> module); closes the backend it owns."""

    def __init__(self, be, owned: bool):
        self.be, self.modules, self.owned = be, {}, owned

    def close(self) -> None:
        if self.owned:
            self.be.close()


@dataclass(frozen=True)
class _RebuildBackend:
    """Builds a worker's own backend from the parent's configuration (for emu: its own fiber worker)."""
    config: tuple

    def __call__(self) -> _CaseWorker:
        from harness.backends import get_backend
        name, options = self.config
        return _CaseWorker(get_backend(name, **options), owned=True)


def _judge_unit(worker: _CaseWorker, jobs: Sequence[Job], unit: tuple[int, int]) -> CaseResult:
    return judge_in_job(worker.be, worker.modules, jobs, *unit)


def spawn_config(backend) -> Optional[tuple[str, dict]]:
    """(backend name, options) that rebuild `backend` in another process, or None where it cannot be."""
    get = getattr(backend, "spawn_config", None)
    return get() if callable(get) else None


def run_cases(backend, jobs: Sequence[Job], progress: bool = True, workers: int = 1,
              cluster: Optional[str] = None) -> RunResult:
    """Load each job's source once, judge its cases, and return the report rows. `workers` > 1 judges cases
    in that many processes, `cluster` ('local:N', 'tcp://...') on a Dask cluster (backends that can be rebuilt
    there, i.e. emu); the rows keep the serial order. A case whose worker (judge process, cluster worker) died twice is unchecked."""
    from .executors import InProcess, Lost, Work, make_executor
    from .progress import Progress
    units = [(j, k) for j, job in enumerate(jobs) for k in range(len(job.cases))]
    total = len(units)
    executor = make_executor(workers, cluster)
    be = resolve_backend(backend)
    timing = GPU_TIMING if getattr(be, "name", "") == "gpu" else None
    copy_bw, copy_note = None, None
    if timing and hasattr(be, "copy_bandwidth_gbps"):
        try:
            copy_bw = float(be.copy_bandwidth_gbps())
        except Exception as exc:  # a missing figure must not stop the run; say why it is missing
            copy_note = f"device copy bandwidth not measured: {exc}"
            print(f"qconform: {copy_note}", file=sys.stderr)
    config = spawn_config(be) if not isinstance(executor, InProcess) else None
    if config is None and cluster is not None:
        raise ValueError(f"--cluster: the {be.name} backend runs in this process only; use --backend emu")
    if config is None and workers > 1:
        print(f"qconform: -j {workers}: the {be.name} backend runs in this process only; judging serially",
              file=sys.stderr)
    if config is None or (total <= 1 and cluster is None):
        executor, work = InProcess(), Work(lambda: _CaseWorker(be, owned=False), _judge_unit, jobs)
    else:
        if cluster is None:
            executor = make_executor(min(workers, total))
        work = Work(_RebuildBackend(config), _judge_unit, jobs)
    results: list[Optional[CaseResult]] = [None] * total
    shown = 0                  # the progress follows case order (units may finish out of order)
    with executor.open(work) as session, Progress(total, progress, heartbeat=True) as bar:
        for i, res in session.results(units):
            j, k = units[i]
            if isinstance(res, Lost):
                res = CaseResult(jobs[j].cases[k][0], UNCHECKED, f"not judged: {res.reason}", [], {})
            results[i] = res
            while shown < total and results[shown] is not None:
                j, k = units[shown]
                bar.case(jobs[j].label, jobs[j].cases[k][0].name)
                bar.retried = session.retried
                bar.advance()
                shown += 1
        retried = session.retried
    # rows in case order, whatever order the units finished in
    rows = [result_row(res, be.name, job.sha256, copy_bw, job.path, job.include_dirs)
            for res, job in zip(results, [job for job in jobs for _ in job.cases])]
    return RunResult(rows, results, meta={"backend": be.name, "backend_info": _describe(be),
                                          "copy_bandwidth_gbps": copy_bw, "copy_bandwidth_note": copy_note,
                                          "processes": executor.workers or 1, "executor": executor.description,
                                          "retried": retried})


def _describe(be) -> dict:
    try:
        return dict(be.describe())
    except Exception as exc:
        return {"backend": getattr(be, "name", "?"), "describe_error": str(exc)}


def summarize(run: RunResult, paths: Iterable[Path] = ()) -> int:
    """The console summary: the counts, every failure with its replay command, and the unchecked cases grouped
    by reason (one line per kind with the count and an example; every case is in the report files). Returns
    the run's exit status (records.exit_status)."""
    c = counts(run.rows)
    print(f"qconform: {c['pass']} pass, {c['tie']} tie, {c['fail']} fail, {c['unchecked']} unchecked "
          f"cases; {len(run.unchecked)} kernels unchecked", file=sys.stderr)
    for r in run.rows:
        if r["verdict"] == FAIL:
            print(f"  FAIL {r['case']}: {r['reason'][:300]}\n       replay: {r['replay']}", file=sys.stderr)
    for reason, n, example in grouped_reasons(run.rows, UNCHECKED):
        print(f"  UNCHECKED {n} case{'s' if n > 1 else ''}: {reason[:200]} (e.g. {example})", file=sys.stderr)
    for u in run.unchecked:
        print(f"  UNCHECKED kernel {u['kernel']}: {u['reason']}", file=sys.stderr)
    for p in paths:
        print(f"wrote {p}", file=sys.stderr)
    status = exit_status(run.rows)
    if status == EXIT_NOTHING_CHECKED:
        print("qconform: nothing was checked (no case could be judged): exit status 3", file=sys.stderr)
    return status


def run_plant(backend, plant: Plant, seed: int = 1):
    """Run the planted kernel's cases through the runner; returns the CaseResults (the plant is caught if any
    FAILS; a planted source that does not build fails every case)."""
    code, contract = planted_source(plant)
    cases = cases_for_contract(contract, plant.shape, seed,
                               instances=[plant.instance] if plant.instance else None,
                               first_instance_only=plant.instance is None)
    job = Job(f"plant/{plant.name}", code, [(c, contract) for c in cases])
    return run_cases(backend, [job], progress=False).results
