"""Planted bugs at the model level: negative controls of the chain, of blame and of the lanes' logit bound.

Kernel plants (ModelPlant): each changes one kernel of a lane, as qconform emits it, in one small way a kernel
author gets wrong; the kernels then run as the program runs them. A plant is caught when the lane's token check
fails (or a launch faults) and blame names the planted kernel. Patterns target qconform's emitted text
(harness.cases.planted's Plant does the edit and refuses a pattern that no longer occurs).

Lane plants (LanePlant): a reference decoder lane with one numerical defect (a Decoder subclass overriding one
hook). The planted lane runs as a stream produced elsewhere and is judged with the correct lane's derived bound
(harness.model.generation's external streams); it is caught when its verdict is ``fail``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from reference.decoder import Decoder, generate, teacher_forced
from reference.model import ModelConfig, ModelWeights
from reference.norm import rms_norm
from reference.quant import QuantizedActivation

from harness.cases.planted import Plant

from .program import Program, build_program
from .reference_lanes import ExternalStream


@dataclass(frozen=True)
class ModelPlant:
    name: str
    lane: str
    kernel: str
    bug: str
    pattern: str
    replacement: str
    occurrence: int = 1
    min_positions: int = 1        # cached positions (prompt + generated) before the bug can show

    def apply(self, code: str) -> str:
        return Plant(self.name, "model", None, self.kernel, "model", self.bug, self.pattern, self.replacement,
                     self.occurrence).apply(code)

    def program(self, config: ModelConfig, maxseq: int, sources=None) -> Program:
        clean = build_program(config, self.lane, maxseq=maxseq, sources=sources)
        return build_program(config, self.lane, maxseq=maxseq,
                             sources=[(f"planted:{self.name}", self.apply(clean.code))])


MODEL_PLANTS: tuple[ModelPlant, ...] = (
    ModelPlant("qkv-scale-index", "fast", "gk_gemv_qkv",
               "wrong scale index in the fast lane's fused QKV GEMV: block b reads the weight scale of block b^1",
               r"srow\[blk\]", "srow[blk ^ 1]"),
    ModelPlant("dropped-residual", "precise", "gk_add",
               "dropped residual add after the MoE block: x = moe_out instead of x += moe_out",
               r"x\[i\] \+= y\[i\]", "x[i] = y[i]"),
    ModelPlant("kv-row-behind", "precise", "gk_gemv_kv_deq",
               "KV cache written one row behind (position pos-1 for pos > 0): row pos is never written",
               r"\(\*d_pos\) \* KD", "(*d_pos > 0 ? *d_pos - 1 : 0) * KD"),
    ModelPlant("attn-32-keys", "fast", "gk_attn",
               "the weighted V sum stops after 32 keys (a warp-sized key tile never advanced): shows only once "
               "33 or more positions are cached",
               r"for \(int j = 0; j < L; \+\+j\) acc \+=", "for (int j = 0; j < L && j < 32; ++j) acc +=",
               min_positions=33),
)


def model_plant(name: str) -> ModelPlant:
    for p in MODEL_PLANTS:
        if p.name == name:
            return p
    raise ValueError(f"plant: unknown model plant {name!r}; expected one of {', '.join(p.name for p in MODEL_PLANTS)}")


# ------------------------------------------------------------------------------------------------ lane plants
ACT_SCALE_ERROR = 1.01       # the act-scale plant's factor on one quantizer's scales
WRONG_RMS_EPS = 1e-2         # the rms-eps plant's epsilon (the models' is 1e-6)


class _ActScale(Decoder):
    """Layer 0's attention-output quantizer (aqQ) stores scales 1% too large: the O projection reads
    q * 1.01 s."""

    factor = ACT_SCALE_ERROR

    def _quant(self, v, rule, layer, site):
        act = super()._quant(v, rule, layer, site)
        if act is None or (layer, site) != (0, "aqQ"):
            return act
        return QuantizedActivation(act.hi, (act.scales * np.float32(self.factor)).astype(np.float32), act.lo)


class _RmsEps(Decoder):
    """Every RMSNorm of the block adds a wrong epsilon (WRONG_RMS_EPS instead of the model's)."""

    eps = WRONG_RMS_EPS

    def _norm(self, x, w):
        return self._r(rms_norm(x, w, self.eps))


class _ExpertRow(Decoder):
    """Layer 0's first routed expert reads the rows of the next expert not routed at that step (its row offset
    one expert too far; skipping the routed ones keeps the K experts distinct, as the routing requires)."""

    def _experts(self, layer, x2n, moe, routing):
        if layer == 0:
            logits, idx, w = routing
            wrong = next(e % moe.n_expert for e in range(int(idx[0]) + 1, int(idx[0]) + moe.n_expert)
                         if e % moe.n_expert not in idx)
            idx = idx.copy()
            idx[0] = wrong
            routing = (logits, idx, w)
        return super()._experts(layer, x2n, moe, routing)


@dataclass(frozen=True)
class LanePlant:
    name: str
    lane: str
    bug: str
    decoder_type: type

    def stream(self, weights: ModelWeights, prompt: list[int], fed: list[int], n_tokens: int):
        """The planted lane as an external stream (harness.model.reference_lanes.ExternalStream): its free-running
        tokens and its teacher-forced logits over `fed`, judged with the bound of the correct `lane`."""
        free = generate(weights, self.lane, prompt, n_tokens, decoder_type=self.decoder_type)
        forced = teacher_forced(weights, self.lane, fed, decoder_type=self.decoder_type)
        return ExternalStream(f"{self.lane}+{self.name}", [r.token for r in free[len(prompt) - 1:]],
                              [r.logits for r in forced], self.lane)


_ACT_SCALE = ("act-scale", f"{100 * (ACT_SCALE_ERROR - 1):.0f}% scale error in layer 0's attention-output "
                          "activation quantization", _ActScale)
_RMS_EPS = ("rms-eps", f"RMSNorm epsilon {WRONG_RMS_EPS:g} instead of the model's", _RmsEps)
_EXPERT_ROW = ("expert-row", "layer 0's first routed expert reads the next expert's rows", _ExpertRow)
# Each defect in the lanes whose derived bound is tight enough to catch it (docs/NUMERICS.md, section 16: a 1%
# scale error or the 1e-2 epsilon moves the fast lanes' logits by less than their own int8 noise does).
LANE_PLANTS: tuple[LanePlant, ...] = tuple(
    LanePlant(name, lane, bug, cls) for (name, bug, cls), lanes in (
        (_ACT_SCALE, ("twopass",)), (_RMS_EPS, ("precise", "twopass")),
        (_EXPERT_ROW, ("precise", "fast", "flash", "twopass"))) for lane in lanes)


def planted_streams(weights: ModelWeights, plants: list[LanePlant], n_tokens: int
                    ) -> Callable[[list[int], list[int]], list]:
    """The `external` argument of harness.model.generation.run_generation that adds every planted lane."""
    return lambda prompt, fed: [p.stream(weights, prompt, fed, n_tokens) for p in plants]


__all__ = ["LANE_PLANTS", "LanePlant", "MODEL_PLANTS", "ModelPlant", "model_plant", "planted_streams"]
