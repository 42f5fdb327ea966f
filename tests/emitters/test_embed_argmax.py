"""The embed and argmax emitters, and the coverage of the seed kernels emitters_a re-implements."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emitters import argmax, embed, matmul, moe
from emitters.contract import ContractViolation, Role
from reference.shapes import SHAPE_SETS, TINY
from tests.seed import seed_source
from tests.emitters.kit import (seed_sets, check_instances, profile_problems,
                                        seed_signature_problems, signature_problems)

MODULES = {"embed": embed, "argmax": argmax}

# Every seed kernel this part of the project re-implements (k0_ names stand for their k{i}_ pattern).
OWNED = {
    "gk_embed", "gk_quant_act", "gk_gemv", "gk_gemv_kv", "gk_gemv_qkv", "gk_argmax_adv", "gk_gemv_deq",
    "gk_gemv_kv_deq", "gk_moe_gate_up_deq", "gk_moe_down_deq", "gk_marlin_q8", "k0_q8gemv", "k0_qact",
    "k0_q8dp4a", "k0_matmul", "moe_gemv", "moe_silu_had", "moe_zero", "moe_combine", "moe_topk",
    "moe_router_fast", "moe_topk_idx", "moe_qact", "moe_gate_up_silu", "moe_down_combine",
}


@pytest.mark.parametrize("shape", tuple(SHAPE_SETS))
@pytest.mark.parametrize("family", tuple(MODULES))
def test_emit_is_deterministic_and_matches_its_contracts(family, shape):
    mod = MODULES[family]
    assert mod.MODES == (None,)
    a, b = mod.emit(None, SHAPE_SETS[shape]), mod.emit(None, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts and a.mode is None
    assert signature_problems(a) == []
    check_instances(a, SHAPE_SETS[shape])


@pytest.mark.parametrize("family", tuple(MODULES))
def test_seed_signatures(family):
    assert seed_signature_problems(MODULES[family].emit(None, TINY)) == []


def test_numeric_profile_equals_the_seed():
    assert profile_problems([MODULES[f].emit(None, TINY) for f in MODULES]) == []


@pytest.mark.parametrize("family", tuple(MODULES))
def test_a_mode_is_refused(family):
    from reference.modes import Mode
    with pytest.raises(ValueError, match="mode"):
        MODULES[family].emit(Mode.DEQUANT, TINY)


def test_embed_bad_width_raises_naming_kernel_and_parameter():
    with pytest.raises(ContractViolation, match=r"kernel gk_embed: parameter E breaks 'E % 32 == 0"):
        embed.emit(None, dataclasses.replace(TINY, name="bad", d=520))


def test_argmax_empty_vocab_raises_naming_kernel_and_parameter():
    with pytest.raises(ContractViolation, match=r"kernel gk_argmax_adv: parameter vocab breaks"):
        argmax.emit(None, dataclasses.replace(TINY, name="bad", vocab=0))


def test_argmax_roles_and_fills():
    c = argmax.emit(None, TINY).contract("gk_argmax_adv")
    assert c.param("d_pos").role is Role.INOUT and c.param("d_pos").fill == "const(pos)"
    assert c.param("d_tok").role is Role.OUTPUT
    assert c.geometry(c.dims_for(TINY)) == ((1, 1, 1), (argmax.THREADS, 1, 1), 0)


def test_embed_token_is_a_valid_row_index():
    c = embed.emit(None, TINY).contract("gk_embed")
    assert c.param("d_tok").fill == "index(V)" and c.dims_for(TINY)["V"] == TINY.vocab


def _all_emitted():
    out = []
    for mod in (matmul, moe, embed, argmax):
        for mode in mod.MODES:
            out.append(mod.emit(mode, TINY))
    return out


def _coverage_gaps(sources) -> tuple[set, set]:
    """(owned seed kernels no source has a contract for, contracts for kernels not owned)."""
    names = {c.name for src in sources for c in src.contracts}
    return OWNED - names, names - OWNED


def test_emitters_a_cover_every_owned_seed_kernel():
    assert _coverage_gaps(_all_emitted()) == (set(), set())


def test_every_owned_seed_kernel_is_in_the_seed():
    in_seed = {k for ks in seed_sets().values() for k in ks.kernels}
    assert OWNED <= in_seed, OWNED - in_seed


def test_coverage_check_catches_a_missing_kernel():
    stripped = [dataclasses.replace(src, contracts=tuple(c for c in src.contracts if c.name != "gk_gemv_qkv"))
                for src in _all_emitted()]
    assert _coverage_gaps(stripped) == ({"gk_gemv_qkv"}, set())


# ---- the documented tie rule of gk_argmax_adv, checked against a model of its scan + halving tree ----------
def _tree_argmax(logits: np.ndarray, threads: int = argmax.THREADS, keep_upper_on_tie: bool = False) -> int:
    """What the kernel computes: per-thread strided scan (strict '>'), then the halving tree (strict '>')."""
    n = logits.size
    cols = -(-n // threads)
    grid = np.full(cols * threads, -np.inf, dtype=np.float32)
    grid[:n] = logits
    grid = grid.reshape(cols, threads)                    # grid[c, t] = logits[c*threads + t]
    val = np.maximum(grid.max(axis=0), np.float32(-1e30))
    first = np.argmax(grid == grid.max(axis=0), axis=0)   # the first column holding the thread's max
    idx = np.where(grid.max(axis=0) > np.float32(-1e30), first * threads + np.arange(threads), 0)
    h = threads // 2
    while h:
        upper = val[h:2 * h] >= val[:h] if keep_upper_on_tie else val[h:2 * h] > val[:h]
        val[:h] = np.where(upper, val[h:2 * h], val[:h])
        idx[:h] = np.where(upper, idx[h:2 * h], idx[:h])
        h //= 2
    return int(idx[0])


def _documented_argmax(logits: np.ndarray, threads: int = argmax.THREADS) -> int:
    """The contract's tie rule: among the maxima, smallest bit-reversed thread, then the lowest index."""
    bits = threads.bit_length() - 1
    at = np.flatnonzero(logits == logits.max())
    t = at % threads
    rev = sum(((t >> b) & 1) << (bits - 1 - b) for b in range(bits))   # bit-reverse t, vectorized over t
    return int(at[np.lexsort((at, rev))[0]])


@given(seed=st.integers(0, 2**32 - 1), vocab=st.integers(1, 1500), levels=st.integers(1, 4))
def test_argmax_tie_rule_in_the_contract_matches_the_kernel_algorithm(seed, vocab, levels):
    rng = np.random.default_rng(seed)      # replay: seed, vocab and levels are printed by hypothesis
    logits = rng.integers(0, levels, vocab).astype(np.float32)    # few levels: many ties
    assert _tree_argmax(logits) == _documented_argmax(logits), (seed, vocab, levels)


def test_argmax_tie_model_detects_a_tree_that_keeps_the_upper_slot():
    logits = np.zeros(512, dtype=np.float32)
    logits[[1, 2]] = 1.0                   # threads 1 and 2 tie: the kernel keeps thread 2 (bit-reversed 01000000)
    assert _tree_argmax(logits) == _documented_argmax(logits) == 2
    assert _tree_argmax(logits, keep_upper_on_tie=True) != 2


# ---- launch geometry against the seed's own host launch lines ------------------------------------------------
_LAUNCH = re.compile(r"([A-Za-z_]\w*(?:\{i\}_\w+)?)<<<([^>]*)>>>\(([^;]*?)\);")
_NO_SEED_LAUNCH = {"gk_marlin_q8"}   # the seed emits this kernel but never launches it


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses and brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()]


def _seed_expr(text: str) -> str:
    """A seed host expression as a contract expression: {x} -> x, Gg(n) -> (n+7)//8, C '/' on ints -> '//'."""
    text = text.replace("{etopk}", "min({ne}, 1024)").replace("{NB}", "({K} // 32)").replace("total", "({M} * {N})")
    text = re.sub(r"\{(\w+)\}", r"\1", text)
    text = re.sub(r"\bGg\(", "ceil8(", text)
    text = re.sub(r"(?<!/)/(?!/)", "//", text)
    return re.sub(r"ceil8\(([^()]*(?:\([^()]*\))?[^()]*)\)", r"((\1 + 7) // 8)", text)


def seed_launches() -> list[tuple[str, list[str], list[str], int]]:
    """(kernel name with {i} -> 0, geometry parts, argument texts, line) for every seed launch of an owned kernel."""
    from harness.toolchain.rust_literals import string_literals
    out, seen = [], set()
    for lit in string_literals(seed_source()):
        for m in _LAUNCH.finditer(lit.text):
            name = m.group(1).replace("{i}", "0")
            key = (name, m.group(2), m.group(3))
            if name in OWNED and key not in seen:
                seen.add(key)
                out.append((name, _split_top(m.group(2)), _split_top(m.group(3)), lit.line))
    return out


def geometry_problems(contracts: list, launches: list, trials: int = 32, seed: int = 7) -> list[str]:
    """Compare each seed launch's grid/block/shared with the contract's, at random sizes
    that keep the contract's preconditions; the contract's scalars take the launch's argument expressions."""
    from emitters.expr import ExprError, evaluate, names_in
    rng = np.random.default_rng(seed)     # replay: the failing sizes are printed
    problems = []
    for name, geo, args, line in launches:
        cands = [c for c in contracts if c.name == name and len(c.params) == len(args)]
        if not cands:
            problems.append(f"seed line {line}: no contract {name} with {len(args)} parameters")
            continue
        c = cands[0]
        mine = (c.grid[0], c.block[0], c.shared_bytes)
        theirs = [_seed_expr(g) for g in geo[:2]] + [_seed_expr(geo[2]) if len(geo) > 2 else "0"]
        scalar_args = {}
        for p, a in zip(c.params, args):
            if not p.is_pointer:
                try:
                    names_in(_seed_expr(a))
                    scalar_args[p.name] = _seed_expr(a)
                except ExprError:
                    pass           # pointer arithmetic and the like: not a size
        compared = 0
        for _ in range(trials):
            syms = {}
            for text in [*theirs, *scalar_args.values()]:
                for n in sorted(names_in(text)):
                    syms.setdefault(n, int(rng.integers(1, 33)) * int(rng.choice([1, 8, 32])))
            dims = {n: evaluate(e, syms) for n, e in scalar_args.items()}
            if not all(evaluate(r.rule, dims) for r in c.preconditions if names_in(r.rule) <= set(dims)):
                continue
            compared += 1
            got = tuple(int(evaluate(e, dims)) for e in mine)
            want = tuple(int(evaluate(e, syms)) for e in theirs)
            if got != want:
                problems.append(f"seed line {line}: {name}<<<{', '.join(geo)}>>> gives (grid, block, shared) {want} "
                                f"at {syms}, the contract gives {got}")
                break
        if not compared:
            problems.append(f"seed line {line}: {name}: no random size kept the preconditions; nothing compared")
    return problems


def _all_contracts() -> list:
    return [c for src in _all_emitted() for c in src.contracts]


def test_contract_geometry_equals_every_seed_launch_line():
    launches = seed_launches()
    assert {n for n, *_ in launches} == OWNED - _NO_SEED_LAUNCH
    assert len(launches) >= 40
    assert geometry_problems(_all_contracts(), launches) == []


def test_a_wrong_block_size_is_caught_against_the_seed_launches():
    wrong = [dataclasses.replace(c, block=("K * 16", "1", "1")) if c.name == "moe_down_combine" else c
             for c in _all_contracts()]
    problems = geometry_problems(wrong, seed_launches())
    assert problems and all("moe_down_combine" in p for p in problems)
