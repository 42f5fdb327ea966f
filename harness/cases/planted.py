"""Negative controls: planted bugs that the runner must catch.

Each plant takes one kernel of a family as qconform emits it and changes its source text in one small way a
real kernel author gets wrong: a wrong scale index, a dropped tail loop, an off-by-one lane mapping, a
missing barrier, a dropped last element. The changed kernel runs through its ordinary case; the plant is
caught when the case FAILS (a mismatch beyond budget or a fault such as a race or an unwritten output). A
plant whose pattern no longer occurs in the emitted text raises PlantError, so a changed emitter cannot
silently turn a negative control into a no-op.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from emitters.registry import emit
from reference.modes import Mode


class PlantError(ValueError):
    """The plant's pattern does not occur in the kernel it targets."""


@dataclass(frozen=True)
class Plant:
    name: str                 # short id, e.g. "gemv-scale-index"
    family: str
    mode: Optional[Mode]
    kernel: str
    shape: str                # the shape set whose case exposes it (tails for tail loops)
    bug: str                  # what was planted, in words
    pattern: str              # regex, applied to the kernel's body only
    replacement: str
    occurrence: int = 1       # which match to change (1-based)
    instance: Optional[str] = None   # the contract instance to run (default: the first)

    def apply(self, code: str) -> str:
        start, end = kernel_span(code, self.kernel)
        body = code[start:end]
        matches = list(re.finditer(self.pattern, body))
        if len(matches) < self.occurrence:
            raise PlantError(f"plant {self.name}: pattern {self.pattern!r} occurs {len(matches)} time(s) in kernel "
                             f"{self.kernel}, needed occurrence {self.occurrence}; update the plant")
        m = matches[self.occurrence - 1]
        new_body = body[:m.start()] + m.expand(self.replacement) + body[m.end():]
        return code[:start] + new_body + code[end:]


def kernel_span(code: str, name: str) -> tuple[int, int]:
    """(start, end) of the body of `__global__ ... name(...) { ... }` (braces matched)."""
    m = re.search(r"__global__[^{;]*?\b" + re.escape(name) + r"\s*\(", code)
    if not m:
        raise PlantError(f"kernel {name} not found in the source")
    open_at = code.index("{", m.end())
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "{":
            depth += 1
        elif code[i] == "}":
            depth -= 1
            if depth == 0:
                return open_at, i + 1
    raise PlantError(f"kernel {name}: unbalanced braces")


# At least one plant per family; patterns target qconform's emitted text.
PLANTS: tuple[Plant, ...] = (
    Plant("gemv-scale-index", "matmul", Mode.INT8_ACT, "gk_gemv", "tiny",
          "wrong scale index: block b reads the scale of block b^1", r"\[\s*blk\s*\]", "[(blk ^ 1)]"),
    Plant("gemv-dropped-tail", "matmul", Mode.INT8_ACT, "gk_gemv", "tails",
          "dropped tail loop: the K % 512 columns are never accumulated",
          r"for\s*\(\s*int\s+\w+\s*=\s*\w+\s*\*\s*512\s*\+\s*lane\s*;", r"if (0) \g<0>"),
    Plant("q8dp4a-half-scale", "matmul", Mode.TWO_PASS_INT8, "k0_q8dp4a", "tiny",
          "wrong scale index in the two-pass dp4a GEMV", r"\[\s*blk\s*\]", "[(blk ^ 1)]"),
    Plant("qact-round-half-away", "matmul", Mode.INT8_ACT, "k0_qact", "tiny",
          "subtle: round-half-away (roundf) instead of round-half-to-even (rintf) in the activation quantizer",
          r"rintf\(", "roundf("),
    Plant("twopass-lo-scale", "matmul", Mode.TWO_PASS_INT8, "k0_q8dp4a", "tiny",
          "subtle: the lo residual byte scaled by 1/127 instead of 1/128 (a 0.8% error on a term ~1/256 "
          "of the activation)", r"0\.0078125f", "0.0078740157f"),
    Plant("moe-down-lane", "moe", Mode.INT8_ACT, "moe_down_combine", "tiny",
          "off-by-one lane mapping: the activation word is read from the neighbouring lane",
          r"(\(\(const int\*\)\w+\)\[b \* 32 \+ )lane\]", r"\1((lane + 1) & 31)]"),
    Plant("moe-topk-order", "moe", Mode.INT8_ACT, "moe_topk_idx", "tiny",
          "top-K keeps the smallest probabilities (comparison reversed)", r">\s*best", "< best"),
    Plant("rmsnorm-barrier", "norm", Mode.DEQUANT, "gk_rmsnorm", "tiny",
          "missing barrier: the tree reduction starts before every partial sum is in shared memory",
          r"__syncthreads\(\);", ""),
    Plant("elem-dropped-last", "elementwise", None, "k0_elem", "tiny",
          "dropped tail: the last element is never written", r"idx\s*<\s*N\b", "idx < N - 1"),
    Plant("rope-pair-offset", "rope", None, "k0_rope", "tiny",
          "off-by-one pairing: element i rotates with i + HALF - 1", r"i \+ HALF\]", "i + HALF - 1]"),
    Plant("embed-scale-index", "embed", None, "gk_embed", "tiny",
          "wrong scale index: element t uses the scale of the neighbouring block", r"t\s*/\s*32", "((t / 32) ^ 1)"),
    Plant("argmax-barrier", "argmax", None, "gk_argmax_adv", "tiny",
          "missing barrier in the argmax tree reduction", r"__syncthreads\(\);", "", occurrence=2),
    Plant("attn-barrier", "attention", Mode.DEQUANT, "gk_attn", "tiny",
          "missing barrier between the scores and the softmax", r"__syncthreads\(\);", ""),
)


def plants_for(families=None) -> list[Plant]:
    from emitters.registry import available_families
    have = set(available_families())
    return [p for p in PLANTS if p.family in have and (families is None or p.family in families)]


def planted_source(plant: Plant) -> tuple[str, object]:
    """(changed source, the contract of the planted kernel) at the plant's shape."""
    src = emit(plant.family, plant.mode, plant.shape)
    return plant.apply(src.code), src.contract(plant.kernel)
