"""Phase 1 of a generation run: decode the reference once, into typed records that phase 2 judges against.

1. the exact lane generates: the prompt is prefilled through the decode step, then N tokens are decoded
   greedily (len(prompt) + N - 1 steps); its token sequence S = prompt + generated[:-1] is the teacher's;
2. every other lane is fed S (teacher forcing: one record per step, whatever it would have chosen); at its
   first step whose greedy token differs from exact's, the decoder is forked and the fork continues on its
   own tokens -- the free-running stream, identical to a separate free run (same steps before the fork). A
   lane therefore yields both its records on S and its records along its own free stream, from one decode;
3. optionally the exact lane again on S with the checkpoint's float router (the F32-router effect).

Nothing here judges; harness.model.generation (against exact) and harness.model.kernel_lane (the kernels
against their lane) read these records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from reference.decoder import LANES, Decoder, StepRecord, generate, logit_bound_parts, teacher_forced
from reference.model import ModelWeights

Tick = Callable[[], None]


@dataclass
class LaneDecode:
    """One reference lane, decoded once."""

    lane: str
    on_exact: list[StepRecord]       # teacher-forced on the exact lane's fed sequence S
    free_tokens: list[int]           # its own greedy generated tokens
    free_records: list[StepRecord]   # its records along its own free stream (fed: prompt + free_tokens[:-1])
    bound_parts: list                # per step of S: (head, drift) of its logit bound against exact

    def records_for(self, fed: Sequence[int], exact_fed: Sequence[int]) -> Optional[list[StepRecord]]:
        """The records of a fed sequence this decode already has (a prefix of its free stream or of S)."""
        fed = [int(t) for t in fed]
        for seq, recs in ((self.free_fed, self.free_records), (list(exact_fed), self.on_exact)):
            if len(fed) <= len(seq) and seq[:len(fed)] == fed:
                return recs[:len(fed)]
        return None

    @property
    def free_fed(self) -> list[int]:
        return [r.input_token for r in self.free_records]


@dataclass
class RouterEffect:
    available: bool
    reason: str = ""
    flips_per_layer: list[int] = field(default_factory=list)   # steps whose expert set differs, per layer
    steps: int = 0
    max_logit_diff: float = 0.0
    top1_agreement: float = 1.0
    tokens_float: list[int] = field(default_factory=list)


@dataclass
class ExternalStream:
    """A token stream computed elsewhere (llama.cpp, the kernels on a backend): free-running tokens and
    teacher-forced logits per step of the exact lane's fed sequence; judged with the derived bound of the
    reference lane `bound_lane`. `unchecked`: the tool could not compute it (a crash of the library), said as
    the stream's verdict, never a failure."""

    name: str
    tokens: list[int]
    logits: list[np.ndarray]
    bound_lane: str
    unchecked: Optional[str] = None     # why the stream could not be computed (then tokens and logits are empty)


@dataclass
class ReferenceDecode:
    """Everything phase 1 decoded."""

    prompt: list[int]
    n_tokens: int
    exact: list[StepRecord]
    lanes: dict[str, LaneDecode]
    router: RouterEffect

    @property
    def n_prompt(self) -> int:
        return len(self.prompt)

    @property
    def exact_tokens(self) -> list[int]:
        return [r.token for r in self.exact[self.n_prompt - 1:]]

    @property
    def fed(self) -> list[int]:
        """S: the exact lane's fed sequence (the teacher's)."""
        return list(self.prompt) + self.exact_tokens[:-1]

    def lane(self, name: str) -> LaneDecode:
        if name not in self.lanes:
            raise ValueError(f"lane {name!r} was not decoded (decoded: {', '.join(self.lanes) or 'none'})")
        return self.lanes[name]


def reference_steps(n_prompt: int, n_tokens: int, n_lanes: int, router_check: bool) -> int:
    """Decode steps phase 1 runs at most: exact, every lane on S, its free steps after a fork, the float router."""
    n_steps = n_prompt + n_tokens - 1
    return n_steps * (1 + n_lanes + (1 if router_check else 0)) + (n_tokens - 1) * n_lanes


def decode_lane(weights: ModelWeights, lane: str, exact: list[StepRecord], fed: list[int], n_prompt: int,
                n_tokens: int, tick: Tick) -> LaneDecode:
    """The lane teacher-forced on `fed`, forked at its first divergence from exact (module docstring)."""
    exact_tokens = [r.token for r in exact[n_prompt - 1:]]
    dec = Decoder(weights, lane, max_positions=len(fed), keep_hidden=True)
    records: list[StepRecord] = []
    free, free_records, fork = None, None, None
    for step, tok in enumerate(fed):
        rec = dec.step(tok)
        records.append(rec)
        tick()
        i = step - (n_prompt - 1)
        if i < 0 or free is not None:
            continue
        if rec.token != exact_tokens[i]:
            free, free_records = exact_tokens[:i] + [rec.token], list(records)
            fork = dec.fork()
    if free is None:
        free, free_records = list(exact_tokens), list(records)
    while len(free) < n_tokens:
        rec = fork.step(free[-1])
        free_records.append(rec)
        free.append(rec.token)
        tick()
    parts = [logit_bound_parts(r, lane, e) for r, e in zip(records, exact)]
    return LaneDecode(lane, records, free, free_records, parts)


def router_effect(weights: ModelWeights, fed: list[int], exact: list[StepRecord], tick: Tick) -> RouterEffect:
    c = weights.config
    missing = [i for i in range(c.n_layer) if weights.layer(i).router_float is None]
    if missing:
        return RouterEffect(available=False,
                            reason=f"the model stores ffn_gate_inp in Q8_0 only (no float router in layer "
                                   f"{missing[0]}{' and others' if len(missing) > 1 else ''}); nothing to compare")
    recs = teacher_forced(weights, "exact", fed, router="float", on_step=lambda r: tick())
    flips = np.zeros(c.n_layer, dtype=int)
    for a, b in zip(exact, recs):
        for li in range(c.n_layer):
            flips[li] += int(set(a.experts[li].tolist()) != set(b.experts[li].tolist()))
    diff = max(float(np.abs(a.logits - b.logits).max()) for a, b in zip(exact, recs))
    agree = sum(a.token == b.token for a, b in zip(exact, recs)) / len(recs)
    return RouterEffect(available=True, flips_per_layer=flips.tolist(), steps=len(recs), max_logit_diff=diff,
                        top1_agreement=agree, tokens_float=[r.token for r in recs])


def _no_tick() -> None:
    pass


def decode_reference(weights: ModelWeights, prompt: list[int], n_tokens: int, lanes: Sequence[str],
                     router_check: bool = False, tick: Tick = _no_tick) -> ReferenceDecode:
    """Phase 1 (module docstring) for the exact lane and every lane in `lanes` (exact itself excluded)."""
    for lane in lanes:
        if lane not in LANES:
            raise ValueError(f"lanes: unknown lane {lane!r}; expected some of {', '.join(LANES)}")
    if not prompt:
        raise ValueError("prompt: expected at least one token id")
    exact = generate(weights, "exact", prompt, n_tokens, keep_hidden=True, on_step=lambda r: tick())
    ref = ReferenceDecode(list(prompt), n_tokens, exact, {}, RouterEffect(available=False, reason="not requested"))
    fed = ref.fed
    for lane in lanes:
        if lane != "exact":
            ref.lanes[lane] = decode_lane(weights, lane, exact, fed, len(prompt), n_tokens, tick)
    if router_check:
        ref.router = router_effect(weights, fed, exact, tick)
    return ref


__all__ = ["ExternalStream", "LaneDecode", "ReferenceDecode", "RouterEffect", "decode_lane", "decode_reference",
           "reference_steps", "router_effect"]
