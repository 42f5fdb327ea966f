"""Conformance cases: one kernel, one mode, one shape set, one size instance, one input variant, one seed.

A case's name describes it completely, e.g. ``moe_gate_up_silu[int8act,tiny,experts,gauss,seed=1234]``:
kernel, mode label (``any`` for mode-free families), shape set, the contract's size instance, the input
variant, and the seed its inputs are drawn from. ``qconform replay NAME`` rebuilds the case from the name
alone (plus ``--source`` for kernels from a file), so a failure message only has to print the name.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from emitters.contract import KernelContract
from emitters.registry import mode_label, parse_mode_label
from reference.modes import Mode
from reference.shapes import ShapeSet, get_shape

from . import inputs

_LABEL = re.compile(r"^[A-Za-z0-9_.=+\-]+$")
_NAME = re.compile(r"^(?P<kernel>[A-Za-z_]\w*)\[(?P<mode>[^,\]]+),(?P<shape>[^,\]]+),(?P<instance>[^,\]]+),"
                   r"(?P<variant>[^,\]]+),seed=(?P<seed>\d+)\]$")


@dataclass(frozen=True)
class Case:
    family: str
    kernel: str                   # the contract's kernel name (the kernel judged)
    op: str
    mode: Optional[Mode]
    shape: str                    # shape-set name
    instance: str                 # the contract's size instance label (lm_head, q_proj, experts, ...)
    variant: str                  # input variant (gauss, zero-block, near-tie, len=1, ...)
    seed: int                     # seed of this case's inputs (already derived from the run's base seed)
    dims_override: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    def __post_init__(self):
        for what in ("instance", "variant", "shape"):
            value = getattr(self, what)
            if not _LABEL.match(value):
                raise ValueError(f"{what}: case labels may hold letters, digits and _.=+- only, got {value!r}")

    @property
    def name(self) -> str:
        return (f"{self.kernel}[{mode_label(self.mode)},{self.shape},{self.instance},{self.variant},"
                f"seed={self.seed}]")

    @property
    def shape_set(self) -> ShapeSet:
        return get_shape(self.shape)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class CaseName:
    kernel: str
    mode: Optional[Mode]
    shape: str
    instance: str
    variant: str
    seed: int


def parse_case_name(name: str) -> CaseName:
    """Split a case name into its parts; ValueError names the rule a malformed name breaks."""
    m = _NAME.match(name.strip())
    if not m:
        raise ValueError(f"case name: expected KERNEL[MODE,SHAPE,INSTANCE,VARIANT,seed=N], got {name!r}")
    get_shape(m["shape"])
    return CaseName(m["kernel"], parse_mode_label(m["mode"]), m["shape"], m["instance"], m["variant"],
                    int(m["seed"]))


def derive_seed(base_seed: int, *parts: object) -> int:
    """A per-case seed from the run's base seed and the case's identity: stable across runs and machines,
    different for every case, so cases never share inputs by accident."""
    key = ":".join(str(p) for p in (base_seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "little") & 0x7FFFFFFF


# -- input variants per op --------------------------------------------------------------------------------
_ATTENTION_OPS = ("attention", "attention_partials", "attention_combine")
_TOPK_OPS = ("moe_topk_mask", "moe_topk_idx")


def variants_for(contract: KernelContract, shape: ShapeSet, instance: Optional[str] = None
                 ) -> list[tuple[str, dict[str, int]]]:
    """The input variants a contract is judged on (at one size instance), each with the dims it overrides;
    with a checkpoint given (--inputs-from), also the `model` variant (harness.model.case_inputs)."""
    out = _seeded_variants(contract, shape, instance)
    from harness.cases import model_inputs as case_inputs
    cap = case_inputs.active()
    if cap is not None:
        if contract.op in _ATTENTION_OPS:
            if _allowed(contract, shape, {"L": cap.positions}):
                out.append((case_inputs.MODEL_VARIANT, {"L": cap.positions}))
        else:
            out.append((case_inputs.MODEL_VARIANT, {}))
    return out


def _seeded_variants(contract: KernelContract, shape: ShapeSet, instance: Optional[str] = None
                     ) -> list[tuple[str, dict[str, int]]]:
    op = contract.op
    from . import variants as V
    if op in ("q8_gemv", "q8_gemm_mma") and instance == "lm_head":
        # the top two logits apart by one term below half an int8 step: the mode decides the greedy token;
        # and apart by one, half and zero times the token judge's tie threshold
        return [("gauss", {}), ("near-tie", {})] + [(g, {}) for g in V.LM_HEAD_GAPS]
    if op in _TOPK_OPS:
        # tiny's 32 experts fill one warp, so nothing crosses warps there: once, at tiny, the full-size model's
        # expert count (several warps: their barriers and shared partials) with the dominant expert in the last
        many = [(f"E={V.MANY_EXPERTS}", {"E": V.MANY_EXPERTS})] if shape.name == "tiny" else []
        return [("gauss", {}), ("near-tie", {}), ("exact-tie", {})] + [(v, {}) for v in V.ROUTER_VARIANTS] + many
    if op == "act_quant":
        # tiny's widths give block counts that fill the grid's 8-warp blocks exactly; once per kernel, at tiny, a K
        # whose 37 blocks leave idle warps in the last thread block (they must return before reading past the end)
        first = contract.instances[0][0] if contract.instances else None
        odd = ([(f"K={V.WIDE_EXPERT_K}", {"K": V.WIDE_EXPERT_K})] if shape.name == "tiny" and instance in (None, first)
               else [])
        return ([("outliers", {}), ("zero-block", {}), ("half-ties", {})] + [(v, {}) for v in V.ACT_QUANT_VARIANTS]
                + odd)
    if op == "argmax_advance":
        return [("gauss", {}), ("exact-tie", {})]
    if op in ("q8_gemv", "q8_gemv_qkv", "q8_gemm_mma"):
        # the value-range variants at the kernel's first size instance: the kernel's arithmetic is the same at
        # every instance, only the sizes differ (which the Gaussian case covers at each)
        first = contract.instances[0][0] if contract.instances else None
        # the router's d = 512 at tiny is a multiple of its 128-wide loop, so its 32-wide tail never runs there;
        # once, at tiny, a K that leaves a 96-column tail, and an expert count past the last full 8-row block
        tail = ([(f"K={V.WIDE_EXPERT_K}", {"K": V.WIDE_EXPERT_K}), (f"N={V.WIDE_EXPERT_N}", {"N": V.WIDE_EXPERT_N})]
                if instance == "router" and shape.name == "tiny" else [])
        return [("gauss", {})] + ([(v, {}) for v in V.GEMV_VARIANTS] if instance in (None, first) else []) + tail
    if op in ("moe_gate_up_silu", "moe_down_combine"):
        # the small shape sets' widths (d = 512, 672; dff = 128, 160) run the 512-wide loop of these GEMVs at
        # most once (gate/up) or never (down); a wide Kd runs every loop, the 512-wide one 7 times. Once, at tiny,
        # with fewer output rows. The down projection also once with a dff that is whole 512-chunks (tiny's d =
        # 512 does that for gate/up): a short 128-wide block count must not make the tail recount columns
        wide = [(f"Kd={V.WIDE_EXPERT_K}", {"Kd": V.WIDE_EXPERT_K, "N": V.WIDE_EXPERT_N})] if shape.name == "tiny" else []
        if op == "moe_down_combine" and shape.name == "tiny":
            wide.append((f"Kd={V.WHOLE_CHUNK_K}", {"Kd": V.WHOLE_CHUNK_K, "N": V.WIDE_EXPERT_N}))
        return [("gauss", {}), ("massive", {})] + wide
    if op == "rms_norm":
        return [("gauss", {}), ("massive", {})]
    if op in _ATTENTION_OPS:
        lengths = dict(inputs.kv_lengths(shape.kv_len, shape.attn_split))
        lengths.update(V.long_cache_lengths(lambda n: _allowed(contract, shape, {"L": n}), shape.attn_split,
                                            shape.name))
        out = [(label, {"L": n}) for label, n in lengths.items() if _allowed(contract, shape, {"L": n})]
        if op != "attention_combine":
            out += [(v, {"L": shape.kv_len}) for v in V.ATTENTION_VARIANTS if _allowed(contract, shape, {"L": shape.kv_len})]
        return out
    return [("gauss", {})]


def _allowed(contract: KernelContract, shape: ShapeSet, override: dict) -> bool:
    """Whether a cache length is legal for the kernel: a kernel with the length compiled in (a static
    score array) has a precondition that rules other lengths out, so those lengths are not its cases."""
    if not contract.instances:
        return True
    dims = derived_dims({**contract.dims_for(shape), **override}, override)
    try:
        contract.check(dims)
    except ValueError:
        return False
    return True


def cases_for_contract(contract: KernelContract, shape: "str | ShapeSet", base_seed: int, *,
                       instances: "Sequence[str] | None" = None, variants: "Sequence[str] | None" = None,
                       first_instance_only: bool = False) -> list[Case]:
    """Every case of one contract at one shape set."""
    shape = get_shape(shape)
    labels = [lab for lab, _ in contract.instances] or ["default"]
    if instances is not None:
        unknown = set(instances) - set(labels)
        if unknown:
            raise ValueError(f"instances: kernel {contract.name} has no instance {sorted(unknown)}; has {labels}")
        labels = [lab for lab in labels if lab in instances]
    if first_instance_only:
        labels = labels[:1]
    if variants is not None:
        known = {v for lab in labels for v, _ in variants_for(contract, shape, lab)}
        if set(variants) - known:
            raise ValueError(f"variants: kernel {contract.name} has no input variant "
                             f"{sorted(set(variants) - known)}; has {sorted(known)}")
    out = []
    for lab in labels:
        for var, override in variants_for(contract, shape, lab):
            if variants is not None and var not in variants:
                continue
            seed = derive_seed(base_seed, contract.name, mode_label(contract.mode), shape.name, lab, var)
            out.append(Case(contract.family, contract.name, contract.op, contract.mode, shape.name, lab, var,
                            seed, tuple(sorted(override.items()))))
    return out


def case_from_name(name: str, contracts: Iterable[KernelContract]) -> tuple[Case, KernelContract]:
    """Rebuild a case from its name against a set of contracts (emitted or matched from a file)."""
    parts = parse_case_name(name)
    shape = get_shape(parts.shape)
    for c in contracts:
        if c.name == parts.kernel and c.mode == parts.mode:
            for var, override in variants_for(c, shape, parts.instance):
                if var == parts.variant:
                    labels = [lab for lab, _ in c.instances] or ["default"]
                    if parts.instance not in labels:
                        raise ValueError(f"case name: kernel {c.name} has no instance {parts.instance!r}; "
                                         f"has {', '.join(labels)}")
                    return (Case(c.family, c.name, c.op, c.mode, parts.shape, parts.instance, var, parts.seed,
                                 tuple(sorted(override.items()))), c)
            raise ValueError(f"case name: kernel {c.name} has no input variant {parts.variant!r}; has "
                             f"{', '.join(v for v, _ in variants_for(c, shape, parts.instance))}")
    raise ValueError(f"case name: no kernel {parts.kernel!r} in mode {mode_label(parts.mode)} among the contracts")


def derived_dims(dims: dict, override: dict) -> dict:
    """Dims that follow from an overridden cache length: the position L-1 and a cache at least L long."""
    if "L" in override:
        L = override["L"]
        if "pos" in dims:
            dims["pos"] = L - 1
        if "maxseq" in dims and dims["maxseq"] < L:
            dims["maxseq"] = L
    return dims
