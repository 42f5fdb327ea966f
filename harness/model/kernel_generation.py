"""`qconform generate --backend emu|gpu|auto`: the lanes' kernels on a backend, token by token.

Phase 2 of a generation run. Per kernel lane: the program (harness.model.program) is built at the model's dims
from qconform's emitters or the --source files, loaded once on the backend and run by a chain (resident buffers
where the backend has them); the kernels' stream is judged against the reference decoder's same lane as phase 1
decoded it (harness.model.kernel_lane); a lane that leaves its budget is blamed (harness.model.blame). The
kernels' streams fed the exact lane's tokens are returned, to join the comparison against the exact lane as
external streams judged with their lane's derived bound (harness.model.generation).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from reference.model import ModelWeights

from .blame import ReplayTarget, blame_step
from .chain import Chain, make_buffers
from .kernel_lane import KernelLaneResult, first_bad_step, judge_lane, run_fed
from .reference_lanes import ExternalStream, ReferenceDecode
from .program import LANES as KERNEL_LANES
from .program import build_program


@dataclass
class KernelSetup:
    backend: object                          # a harness.backends Backend
    sources: list[tuple[str, str]] = field(default_factory=list)   # (label, CUDA C) from --source files
    source_paths: list[str] = field(default_factory=list)
    model_arg: Optional[str] = None          # what --model was (for the replay command)
    seed: int = 0                            # --seed of the default synthetic model (for the replay command)
    blame: bool = True
    include_dirs: tuple[str, ...] = ()       # -I folders as given (for the replay command)
    flags: tuple[str, ...] = ()              # compile flags of the sources (-I their folders and include_dirs)


@dataclass
class LaneRunner:
    lane: str
    chain: Chain
    load_s: float


def prepare_lanes(weights: ModelWeights, lanes: Sequence[str], maxseq: int, setup: KernelSetup) -> list[LaneRunner]:
    out = []
    for lane in lanes:
        t0 = time.perf_counter()
        program = build_program(weights.config, lane, maxseq=maxseq, sources=setup.sources or None)
        module = setup.backend.load(program.code, setup.flags)
        chain = Chain(program, module, make_buffers(program, module))
        chain.load_weights(weights)
        out.append(LaneRunner(lane, chain, time.perf_counter() - t0))
    return out


def kernel_lanes(lanes: Sequence[str]) -> list[str]:
    """The lanes that have a kernel program (every lane but exact)."""
    return [l for l in lanes if l in KERNEL_LANES]


def kernel_steps(n_steps: int, n_lanes: int) -> int:
    """Decode steps phase 2 runs at most per run: per lane its free run, the run fed the lane's free stream and
    the run fed the exact lane's (each skipped where an earlier run of the same tokens serves)."""
    return 3 * n_steps * n_lanes


def judge_kernel_lanes(weights: ModelWeights, ref: ReferenceDecode, runners: Sequence[LaneRunner],
                       setup: KernelSetup, backend_name: str, tick: Callable[[], None]
                       ) -> tuple[list[KernelLaneResult], list[ExternalStream]]:
    """Phase 2: every kernel lane against its reference lane's decode (harness.model.reference_lanes), blamed
    where it leaves its budget; returns the results and the kernels' streams fed the exact lane's tokens, which
    join the comparison against exact."""
    prompt, fed_exact = ref.prompt, ref.fed
    results, streams = [], []
    for r in runners:
        res, free, _ = judge_lane(weights, r.chain, ref, backend_name, tick)
        res.notes.append(f"program built and weights loaded in {r.load_s:.1f} s; "
                         f"{type(r.chain.buffers).__name__}")
        if free.fault is None and free.fed == fed_exact:
            on_exact = free
        else:
            on_exact = run_fed(r.chain, fed_exact, len(prompt), tick, reuse=free)
        if on_exact.fault is None and len(on_exact.logits) == len(fed_exact) and len(res.tokens) == ref.n_tokens:
            streams.append(ExternalStream(f"{r.lane} kernels ({backend_name})", res.tokens, on_exact.logits, r.lane))
        else:
            res.notes.append("not compared with the exact lane: the kernels faulted ("
                             + str(on_exact.fault or free.fault) + ")")
        step = first_bad_step(res, free)
        if step is not None and setup.blame:
            fed = list(prompt) + res.tokens
            fed = (free.fed if len(free.fed) > step else fed)[:step + 1]
            res.blame = blame_step(weights, r.chain.program, r.chain.module, fed,
                                   replay=ReplayTarget(setup.model_arg, setup.seed, tuple(setup.source_paths),
                                                       backend_name, setup.include_dirs))
        results.append(res)
    return results, streams


def read_sources(paths: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise ValueError(f"--source: no such file {p!r}")
        out.append((path.name, path.read_text()))
    return out


__all__ = ["KernelSetup", "LaneRunner", "judge_kernel_lanes", "kernel_lanes", "kernel_steps", "prepare_lanes",
           "read_sources"]
