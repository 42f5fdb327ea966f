"""Planted bugs in the generation program's kernels: negative controls of the chain and of blame.

Each plant changes one kernel of a lane, as qconform emits it, in one small way a kernel author gets wrong;
the kernels then run as the program runs them. A plant is caught when the lane's token check fails (or a
launch faults) and blame names the planted kernel. Patterns target qconform's emitted text (harness.cases.planted's
Plant does the edit and refuses a pattern that no longer occurs).
"""
from __future__ import annotations

from dataclasses import dataclass

from reference.model import ModelConfig

from harness.cases.planted import Plant

from .program import Program, build_program


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


__all__ = ["MODEL_PLANTS", "ModelPlant", "model_plant"]
