"""The matmul emitter, and the checks every emitter of emitters_a (matmul, moe, embed, argmax) shares.

The shared checks live in tests/emitters/kit.py, the one kit of every emitter test:
  * the emitted text lists exactly the contracts' kernels, names and C types in order;
  * every contract's signature equals the seed kernel's of the same name (pattern), decoded from the
    seed at test time: the interchangeability guarantee;
  * every contract's geometry, counts and scalars evaluate at each instance of each shape set;
  * the numeric profile of each kernel (its FFMA / FMUL / FADD / MUFU / F2I / I2F / IDP.4A / IMMA ... SASS
    opcodes with their modifiers, counted) equals the seed kernel's: a kernel that rounds or contracts
    differently (an fma split into mul + add, an extra division, a missing tier, another rounding mode)
    changes the profile;
  * every kernel and the seed kernel it stands for give bit-identical buffers on the CPU backend
    (differential_problems, at the tails shape set).
test_embed_argmax.py adds the coverage of the owned seed kernels and the check of every contract's geometry
against the seed's host launch lines.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emitters import matmul
from emitters.contract import ContractViolation
from emitters.cuda_snippets import PRELUDE
from reference.modes import Mode
from reference.shapes import SHAPE_SETS, TINY
from tests.emitters.kit import (
    SHAPES,
    signature_problems,
    seed_signature_problems,
    check_instances,
    smoke_compile,
    profile_problems,
    tier_reads,
    differential_problems,
    _emitters_a_sources,
)


# ---- the matmul family -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", matmul.MODES, ids=lambda m: m.value)
def test_emit_is_deterministic_and_matches_its_contracts(mode, shape):
    a, b = matmul.emit(mode, SHAPE_SETS[shape]), matmul.emit(mode, SHAPE_SETS[shape])
    assert a.code == b.code and a.contracts == b.contracts
    assert signature_problems(a) == []
    check_instances(a, SHAPE_SETS[shape])
    assert all(c.family == "matmul" and c.mode is mode for c in a.contracts)


@pytest.mark.parametrize("mode", matmul.MODES, ids=lambda m: m.value)
def test_contract_signatures_equal_the_seed_kernels(mode):
    assert seed_signature_problems(matmul.emit(mode, TINY)) == []


def test_a_wrong_contract_type_is_caught_against_the_seed():
    src = matmul.emit(Mode.INT8_ACT, TINY)
    c = src.contract("k0_q8dp4a")
    wrong_ws = tuple(dataclasses.replace(p, ctype="const float*") if p.name == "ws" else p for p in c.params)
    bad = dataclasses.replace(src, contracts=tuple(dataclasses.replace(x, params=wrong_ws) if x is c else x
                                                    for x in src.contracts))
    assert any("k0_q8dp4a" in p for p in seed_signature_problems(bad))
    assert any("k0_q8dp4a" in p for p in signature_problems(bad))


def test_text_that_drifts_from_its_contract_is_caught():
    src = matmul.emit(Mode.DEQUANT, TINY)
    bad = dataclasses.replace(src, code=src.code.replace("float* y, const signed char* wq", "double* y, const signed char* wq"))
    assert bad.code != src.code
    assert signature_problems(bad)


def test_numeric_profile_equals_the_seed():
    assert profile_problems([matmul.emit(mode, TINY) for mode in matmul.MODES]) == []


def test_a_rounding_change_shows_in_the_numeric_profile():
    src = matmul.emit(Mode.DEQUANT, TINY)
    line = "acc += srow[blk] * part0;"
    assert line in src.code
    bad = dataclasses.replace(src, code=src.code.replace(line, "acc = __fadd_rn(acc, __fmul_rn(srow[blk], part0));"))
    problems = profile_problems(bad)
    assert problems and all("gk_gemv" in p for p in problems)


def test_smoke_compile_one_representative_per_family_at_tiny():
    # matmul int8act (dp4a + mma), moe twopass, embed, argmax: kernel names are distinct, so one nvcc run
    from emitters import argmax, embed, moe
    reps = [matmul.emit(Mode.INT8_ACT, TINY), moe.emit(Mode.TWO_PASS_INT8, TINY), embed.emit(None, TINY),
            argmax.emit(None, TINY)]
    names = [c.name for src in reps for c in src.contracts]
    assert len(names) == len(set(names))
    smoke_compile(PRELUDE + "".join(src.code[len(PRELUDE):] for src in reps))


def test_emit_is_byte_identical_in_a_fresh_interpreter():
    code = ("import hashlib, sys; from emitters import matmul; from reference.modes import Mode; "
            "from reference.shapes import TAILS; "
            "print(*(hashlib.sha256(matmul.emit(m, TAILS).code.encode()).hexdigest() for m in matmul.MODES))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    here = [hashlib.sha256(matmul.emit(m, SHAPE_SETS["tails"]).code.encode()).hexdigest() for m in matmul.MODES]
    assert run.stdout.split() == here


@pytest.mark.parametrize("mode", matmul.MODES, ids=lambda m: m.value)
def test_a_bad_shape_raises_naming_kernel_and_parameter(mode):
    shape = dataclasses.replace(TINY, name="bad", d=520)     # 520 is not whole 32-blocks
    with pytest.raises(ContractViolation) as err:
        matmul.emit(mode, shape)
    first = matmul.emit(mode, TINY).contracts[0].name
    assert f"kernel {first}: parameter K breaks 'K % 32 == 0" in str(err.value)
    assert "'bad'" in str(err.value)


def test_a_marlin_tile_that_does_not_divide_n_raises():
    with pytest.raises(ContractViolation, match=r"kernel gk_marlin_q8: parameter N breaks 'N % 24 == 0"):
        matmul.emit(Mode.INT8_ACT, TINY, nt=3)        # q_dim 256 is not a multiple of 24 columns


def test_marlin_launch_covers_every_tile_exactly():
    c = matmul.emit(Mode.INT8_ACT, TINY).contract("gk_marlin_q8")
    for shape in SHAPE_SETS.values():
        for label, _ in c.instances:
            dims = c.dims_for(shape, label)
            grid, block, _ = c.geometry(dims)
            warps = grid[0] * block[0] // 32
            assert warps == (dims["B"] // 16) * (dims["N"] // (8 * c.attrs["nt"])), (shape.name, label)


def test_marlin_subtile_count_is_validated():
    with pytest.raises(ValueError, match="nt"):
        matmul.emit(Mode.INT8_ACT, TINY, nt=0)
    assert "const int NT = 4;" in matmul.emit(Mode.INT8_ACT, TINY, nt=4).code


def test_warp_row_launches_cover_every_row():
    from emitters.expr import evaluate
    checked = 0
    for mode in matmul.MODES:
        for c in matmul.emit(mode, TINY).contracts:
            m = re.fullmatch(r"\((.+) \+ 7\) // 8", c.grid[0])
            if not m:
                continue
            for shape in SHAPE_SETS.values():
                for label, _ in c.instances:
                    dims = c.dims_for(shape, label)
                    grid, block, _ = c.geometry(dims)
                    assert block[0] % 32 == 0 and grid[0] * block[0] // 32 >= evaluate(m.group(1), dims), \
                        (c.name, shape.name, label)
                    checked += 1
    assert checked >= 20


@given(nblk=st.integers(1, 200), tiers=st.sampled_from(["512+128+scalar", "512+scalar", "128+scalar"]))
def test_tiers_read_each_element_once_with_its_own_block_scale(nblk, tiers):
    k = nblk * 32
    elems, blocks = tier_reads(k, tiers)
    assert np.array_equal(np.sort(elems), np.arange(k)), f"K={k} tiers={tiers}"
    assert np.array_equal(blocks, elems // 32), f"K={k} tiers={tiers}"


def test_tier_check_catches_a_wrong_lane_mapping():
    # an int4 lane's block taken as b*16 + lane/4 (the int path's divisor confused) must fail the check
    elems, blocks = tier_reads(1024, "512+scalar", block512=lambda b, lane: b * 16 + lane // 4)
    assert not np.array_equal(blocks, elems // 32)


def test_every_tier_in_the_contracts_appears_in_the_code():
    for mode in matmul.MODES:
        src = matmul.emit(mode, TINY)
        for c in src.contracts:
            tiers = c.attrs.get("tiers")
            if not tiers:
                continue
            body = src.code.split(f"void {c.name}(", 1)[1].split("\n}\n", 1)[0]
            assert ("b * 16 + lane / 2" in body) == ("512" in tiers), c.name
            assert ("b * 4 + lane / 8" in body) == ("128" in tiers), c.name
            assert "t / 32" in body, c.name


def test_every_kernel_is_bit_identical_to_the_seed_on_the_cpu_backend():
    # tails: K = 672 / 160 run every tier and tail; one build of ours, one of the seed's sets, all kernels
    assert differential_problems(_emitters_a_sources(SHAPE_SETS["tails"]), SHAPE_SETS["tails"]) == []


def test_the_differential_run_catches_a_dropped_tier():
    from emitters import moe
    src = moe.emit(Mode.INT8_ACT, SHAPE_SETS["tails"])
    bad = dataclasses.replace(src, code=src.code.replace("for (int b = n512 * 4; b < n128; ++b)",
                                                         "for (int b = n128; b < n128; ++b)"))
    problems = differential_problems([bad], SHAPE_SETS["tails"])
    assert problems and {p.split(" ")[0] for p in problems} == {"moe_gate_up_silu", "moe_down_combine"}
