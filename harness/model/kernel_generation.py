"""`qconform generate --backend emu|gpu|auto`: the lanes' kernels on a backend, token by token.

Per kernel lane: the program (harness.model.program) is built at the model's dims from qconform's emitters or
the --source files, loaded once on the backend and run by a chain (resident buffers where the backend has them);
the kernels' stream is judged against the reference decoder's same lane (harness.model.kernel_lane); a lane
that leaves its budget is blamed (harness.model.blame). The kernels' streams also join the part-1 comparison
against the exact lane as external streams judged with their lane's derived bound
(harness.model.generation).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from reference.model import ModelWeights

from .blame import blame_step
from .chain import Chain, make_buffers
from .generation import ExternalStream
from .kernel_lane import KernelLaneResult, first_bad_step, judge_lane, run_fed
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
        module = setup.backend.load(program.code)
        chain = Chain(program, module, make_buffers(program, module))
        chain.load_weights(weights)
        out.append(LaneRunner(lane, chain, time.perf_counter() - t0))
    return out


def kernel_lanes(lanes: Sequence[str]) -> list[str]:
    """The lanes that have a kernel program (every lane but exact)."""
    return [l for l in lanes if l in KERNEL_LANES]


class KernelStreams:
    """The `external` hook of harness.model.generation.run_generation: runs every kernel lane when the exact
    lane's fed sequence is known, keeps the kernel-vs-lane results, and returns the kernels' streams."""

    def __init__(self, weights: ModelWeights, runners: list[LaneRunner], n_tokens: int, setup: KernelSetup,
                 backend_name: str, progress: Optional[Callable[[str, int, int], None]] = None):
        self.weights, self.runners, self.n_tokens, self.setup = weights, runners, n_tokens, setup
        self.backend_name = backend_name
        self.progress = progress
        self.results: list[KernelLaneResult] = []

    def __call__(self, prompt: list[int], fed_exact: list[int]) -> list[ExternalStream]:
        streams = []
        total = len(fed_exact) * len(self.runners)
        done = [0]

        def tick(label):
            def f():
                done[0] += 1
                if self.progress:
                    self.progress(label, min(done[0], total), total)
            return f

        for r in self.runners:
            res, free, _ = judge_lane(self.weights, r.chain, r.lane, prompt, self.n_tokens, self.backend_name,
                                      tick(f"{r.lane} kernels"))
            res.notes.append(f"program built and weights loaded in {r.load_s:.1f} s; "
                             f"{type(r.chain.buffers).__name__}")
            if free.fault is None and free.fed == fed_exact:
                on_exact = free
            else:
                on_exact = run_fed(r.chain, fed_exact, len(prompt), reuse=free)
            if on_exact.fault is None and len(on_exact.logits) == len(fed_exact) and len(res.tokens) == self.n_tokens:
                streams.append(ExternalStream(f"{r.lane} kernels ({self.backend_name})", res.tokens,
                                              on_exact.logits, r.lane))
            else:
                res.notes.append("not compared with the exact lane: the kernels faulted ("
                                 + str(on_exact.fault or free.fault) + ")")
            step = first_bad_step(res, free)
            if step is not None and self.setup.blame:
                fed = list(prompt) + res.tokens
                fed = (free.fed if len(free.fed) > step else fed)[:step + 1]
                rep = blame_step(self.weights, r.chain.program, r.chain.module, fed,
                                 replay_args={"model": self.setup.model_arg, "seed": self.setup.seed,
                                              "sources": self.setup.source_paths, "backend": self.backend_name})
                res.blame = rep.as_dict()
            self.results.append(res)
        return streams


def read_sources(paths: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise ValueError(f"--source: no such file {p!r}")
        out.append((path.name, path.read_text()))
    return out


__all__ = ["KernelSetup", "KernelStreams", "LaneRunner", "kernel_lanes", "prepare_lanes", "read_sources"]
