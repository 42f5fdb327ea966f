"""The kernel to blame: rerun one decode step launch by launch, each launch fed the reference's inputs.

When a lane's kernels leave their budget at a step (a logit beyond budget, a failed token, a fault), the chain
cannot say which launch went wrong: every launch after the first bad one reads bad inputs. Blame reruns that
step with the buffer state the reference decoder's same lane has at each launch: the weights, the KV cache
rows of the earlier positions (the reference's), this step's token and position, and every buffer the earlier
launches of the step wrote, as the reference computed it (reference.decoder capture, keyed by the seed's
buffer names). Each launch runs once on those inputs and its outputs are judged by the conformance judge of its
op through harness.judging.core.judge_outputs, the hook the conformance runner uses too (the op's `extras`
read from the launch's own arguments, then the mode-faithful reference of those inputs, under that kernel's
per-case budget). The first launch whose own output is out of budget (or that faults) is named: kernel, layer, step,
output, worst element, and the `qconform replay-launch` command that reruns that one launch on those inputs.

When every launch is within its budget and the chain still leaves it, the report says so: the per-kernel
budgets compose worse than they claim, a finding about the bounds, not a kernel.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from emitters.contract import Role
from harness.backends.base import KernelFault
from harness.cases.names import Case
from harness.judging.core import FAIL, PASS, UNCHECKED, Ctx, judge_outputs, verdict_for_fault
from reference.decoder import Decoder
from reference.model import ModelWeights

from .chain import initial, weight_arrays
from .program import Launch, Program, RowRef

JUDGED_AGAINST = ("mode", "exact")    # the launch's own arithmetic; "dequant" also charges the mode's choice


@dataclass
class LaunchVerdict:
    index: int
    kernel: str
    layer: int
    where: str
    verdict: str
    output: str = ""
    usage: Optional[float] = None
    worst_index: Optional[object] = None      # flat index into the output (the reason gives both values there)
    budget: Optional[float] = None
    reason: str = ""
    fault: Optional[str] = None

    def as_dict(self) -> dict:
        return dict(vars(self))


@dataclass
class BlameReport:
    lane: str
    step: int                          # the decode step (= position) rerun
    fed: list[int]                     # the tokens fed up to and including that step
    launches: list[LaunchVerdict]
    blamed: Optional[LaunchVerdict]
    replay: Optional[str]              # the command that reruns the blamed launch on the same inputs
    finding: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"lane": self.lane, "step": self.step, "fed": self.fed, "finding": self.finding, "replay": self.replay,
                "blamed": self.blamed.as_dict() if self.blamed else None, "notes": self.notes,
                "launches": [l.as_dict() for l in self.launches]}


# -- the reference's buffer contents --------------------------------------------------------------------------------
def _capture_key(launch: Launch, program: Program, buffer: str) -> "tuple[int, str] | None":
    """The decoder's capture key of what `launch` leaves in `buffer`."""
    l, k = launch.layer, launch.kernel
    base = buffer.split("[")[0]
    if base in ("d_tok", "d_pos"):
        return None
    if base == "x":
        return (l, "x_attn") if k in ("gk_add_rmsnorm", "gk_add_rmsnorm_q8") else (l, "x")
    if base == "kc":
        return (l, "kc_row") if k.startswith("gk_qk_norm_rope") else (l, "kc_row_raw")
    if base == "vc":
        return (l, "vc_row")
    if base == "qbuf" and k == "gk_qk_norm_rope2":
        return (l, "qbuf_rope")
    if base in ("aqE", "asE", "aqE_lo"):
        if k == "gk_rmsnorm_q8":
            return (0, base)
        if k == "gk_add_rmsnorm_q8a":
            return (l + 1 if l + 1 < program.config.n_layer else -1, base)
    return (l, base)


def _put_row(state: dict, buffer: str, pos: int, value: np.ndarray) -> None:
    flat = state[buffer].reshape(-1)
    row = np.asarray(value).reshape(-1)
    flat[pos * row.size:(pos + 1) * row.size] = row.astype(flat.dtype)


def reference_step(weights: ModelWeights, lane: str, fed: Sequence[int]) -> list:
    """The reference lane's records of every step of `fed`, with capture."""
    dec = Decoder(weights, lane, max_positions=len(fed), capture=True)
    return [dec.step(int(t)) for t in fed]


def initial_state(program: Program, weights: ModelWeights, records: list, fed: Sequence[int]) -> dict:
    """Every buffer as the reference leaves it before the step len(fed) - 1 starts."""
    step = len(fed) - 1
    state = {n: initial(d).copy() for n, d in program.buffers.items()}
    for name, arr in weight_arrays(weights):
        if name in state:
            state[name] = np.ascontiguousarray(np.asarray(arr).astype(program.buffers[name].dtype)).reshape(
                program.buffers[name].shape)
    for l in range(program.config.n_layer):
        for pos in range(step):
            b = records[pos].buffers
            _put_row(state, f"kc[{l}]", pos, b[(l, "kc_row")])
            _put_row(state, f"vc[{l}]", pos, b[(l, "vc_row")])
    state["d_pos"][...] = step
    state["d_tok"][...] = int(fed[step])
    return state


def _apply_reference(state: dict, launch: Launch, program: Program, capture: dict, pos: int, notes: list) -> None:
    """After a launch: the buffers it writes take the reference's values (what the next launch reads)."""
    for p in launch.contract.params:
        if not p.is_pointer or p.role not in (Role.OUTPUT, Role.INOUT):
            continue
        binding = dict(launch.bindings)[p.name]
        buffer = binding.buffer if isinstance(binding, RowRef) else binding
        key = _capture_key(launch, program, buffer)
        if key is None:
            continue
        if key not in capture:
            notes.append(f"{launch.where()}: the reference captured no {key[1]} at layer {key[0]}; buffer {buffer} "
                         "keeps the kernel's output for the later launches")
            continue
        value = np.asarray(capture[key])
        if buffer.startswith(("kc[", "vc[")):
            _put_row(state, buffer, pos, value)
        else:
            d = program.buffers[buffer]
            if value.size != d.size:
                notes.append(f"{launch.where()}: reference {key[1]} has {value.size} elements, buffer {buffer} "
                             f"{d.size}; kept the kernel's output")
                continue
            state[buffer] = np.ascontiguousarray(value.astype(d.dtype).reshape(d.shape))


# -- judging one launch -------------------------------------------------------------------------------------------------
def _case(launch: Launch, lane: str, pos: int) -> Case:
    c = launch.contract
    return Case(c.family, launch.kernel, c.op, c.mode, "model", launch.instance, f"chain-{lane}-pos{pos}", 0)


def judge_launch(module, launch: Launch, state: dict, lane: str, pos: int) -> LaunchVerdict:
    """Run `launch` once on copies of `state` and judge its outputs with its op's per-case budget."""
    c = launch.contract
    ctx = Ctx(_case(launch, lane, pos), c, launch.dims_at(pos))
    args = []
    for p, v in launch.bindings:
        if isinstance(v, RowRef):
            arr = state[v.buffer].reshape(-1)[pos * v.length:(pos + 1) * v.length].copy()
        elif isinstance(v, str):
            arr = state[v].reshape(-1).copy()
        else:
            arr = v
        ctx.args[p] = arr
        args.append(arr)
    for p in c.params:
        if p.role is Role.INOUT:
            ctx.before[p.name] = np.array(ctx.args[p.name], copy=True)
    lv = LaunchVerdict(launch.index, launch.kernel, launch.layer, launch.where(), PASS)
    try:
        module.launch(launch.kernel, launch.grid, launch.block, launch.shared_bytes, args,
                      outputs=launch.output_indices)
    except KernelFault as exc:
        lv.verdict, lv.fault, lv.reason = verdict_for_fault(exc), type(exc).__name__, str(exc)
        return lv
    judged = judge_outputs(ctx, JUDGED_AGAINST)     # the op's extras from this launch's own arguments
    lv.verdict, lv.reason = judged.verdict, judged.reason
    comps = judged.comparisons
    scored = [x for x in comps if x.usage is not None]
    if scored:
        worst = max(scored, key=lambda x: x.usage)
        lv.output, lv.usage, lv.worst_index = worst.output, worst.usage, worst.metrics.get("worst_index")
        lv.budget = worst.budget_at_worst
    fails = [x for x in comps if x.verdict == FAIL]
    if fails:
        lv.output = fails[0].output
        lv.usage = fails[0].usage
        lv.worst_index = fails[0].metrics.get("worst_index", lv.worst_index)
        lv.budget = fails[0].budget_at_worst
    return lv


def blame_step(weights: ModelWeights, program: Program, module, fed: Sequence[int], *,
               replay: Optional[ReplayTarget] = None, only: Optional[int] = None) -> BlameReport:
    """Rerun the step len(fed) - 1 launch by launch on the reference's inputs (module docstring). `only`: run
    and judge only that launch index (the replay of one launch). `replay`: what the blamed launch's
    `qconform replay-launch` command names (no command without it)."""
    fed = [int(t) for t in fed]
    pos = len(fed) - 1
    records = reference_step(weights, program.lane, fed)
    capture = records[-1].buffers
    state = initial_state(program, weights, records, fed)
    notes: list[str] = []
    verdicts: list[LaunchVerdict] = []
    blamed = None
    for launch in (*program.launches, program.advance):
        if only is None or launch.index == only:
            lv = judge_launch(module, launch, state, program.lane, pos)
            verdicts.append(lv)
            if blamed is None and lv.verdict == FAIL:
                blamed = lv
            if only is not None:
                break
        _apply_reference(state, launch, program, capture, pos, notes)
    if only is not None and not verdicts:
        raise ValueError(f"launch: no launch {only} in lane {program.lane} (0..{program.advance.index})")
    command = replay.command(program.lane, fed, blamed.index) if blamed and replay is not None else None
    if blamed is not None:
        if blamed.fault is not None:
            detail = f"{blamed.fault}"
        elif blamed.usage is not None and blamed.usage != float("inf"):
            detail = (f"output {blamed.output}, largest error at element {blamed.worst_index}, "
                      f"{blamed.usage:.3g}x budget")
        else:
            detail = (blamed.reason or "").split("; ")[0]
        finding = f"step {pos}: {blamed.where} is out of its own budget on the reference's inputs ({detail})"
    elif any(v.verdict == UNCHECKED for v in verdicts):
        finding = (f"step {pos}: no launch is out of budget, but some could not be judged: "
                   + "; ".join(f"{v.where}: {v.reason.splitlines()[0]}" for v in verdicts if v.verdict == UNCHECKED))
    else:
        finding = (f"step {pos}: every launch is within its own budget on the reference's inputs, yet the chain "
                   "left the lane's budget: the per-kernel budgets compose worse than they claim (a finding about "
                   "the bounds, not a kernel)")
    return BlameReport(program.lane, pos, fed, verdicts, blamed, command, finding, notes)


@dataclass(frozen=True)
class ReplayTarget:
    """Where a blamed launch came from: the model (--model as given, or the synthetic model's seed), the kernel
    source files and the backend, as `qconform replay-launch` takes them."""

    model: Optional[str] = None
    seed: int = 0
    sources: tuple[str, ...] = ()
    backend: Optional[str] = None
    include_dirs: tuple[str, ...] = ()

    def command(self, lane: str, fed: Sequence[int], index: int) -> str:
        parts = ["qconform", "replay-launch", "--lane", lane, "--fed", ",".join(map(str, fed)), "--launch",
                 str(index)]
        if self.model:
            parts += ["--model", str(self.model)]
        if self.seed:
            parts += ["--seed", str(self.seed)]
        for s in self.sources:
            parts += ["--source", str(s)]
        for d in self.include_dirs:
            parts += ["-I", str(d)]
        if self.backend:
            parts += ["--backend", str(self.backend)]
        return " ".join(shlex.quote(p) for p in parts)


__all__ = ["BlameReport", "LaunchVerdict", "ReplayTarget", "blame_step", "judge_launch"]
