"""The matmul emitter, and the checks every emitter of emitters_a (matmul, moe, embed, argmax) shares.

The shared checks are plain functions here (imported by test_moe.py and test_embed_argmax.py):
  * the emitted text lists exactly the contracts' kernels, names and C types in order;
  * every contract's signature equals the seed kernel's of the same name (pattern), decoded from the
    seed at test time: the interchangeability guarantee;
  * every contract's geometry, counts and scalars evaluate at each instance of each shape set;
  * the PTX numeric profile of each kernel (its fma / mul / add / div / cvt / dp4a / mma ... opcodes with
    their types and rounding, in program order) equals the seed kernel's: a kernel that rounds
    differently (an fma split into mul + add, an extra division, a missing tier, a reordered sum)
    changes the profile;
  * every kernel and the seed kernel it stands for give bit-identical buffers on the CPU backend
    (differential_problems, at the tails shape set).
test_embed_argmax.py adds the coverage of the owned seed kernels and the check of every contract's geometry
against the seed's host launch lines.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emitters import matmul
from emitters.contract import ContractViolation, KernelContract, KernelSource
from emitters.cuda_snippets import PRELUDE
from harness.cache import cache_dir
from harness.cuda_source import kernel_signatures
from harness.rust_literals import kernel_sets
from reference.modes import Mode
from reference.shapes import SHAPE_SETS, TINY
from tests.seed import seed_source

SHAPES = tuple(SHAPE_SETS)
SEED_VALUES = {"i": 0, "nt": 2, "ty": "float"}   # k{i}_ index, marlin subtiles, k{i}_matmul element type


# ---- seed access -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def seed_sets() -> dict:
    return {ks.name: ks for ks in kernel_sets(seed_source(), SEED_VALUES)}


def _forward_set(kernel: str, two_pass: "bool | None" = None) -> str:
    """The emit_forward#n literal holding `kernel` (k0_qact: two_pass picks the hi+lo form)."""
    for ks in seed_sets().values():
        if ks.name.startswith("emit_forward") and kernel in ks.kernels:
            if two_pass is None or (("aql" in ks.code) == two_pass):
                return ks.name
    raise AssertionError(f"the seed has no emit_forward literal with {kernel} (two_pass={two_pass})")


def seed_set_names(family: str, mode) -> list[str]:
    """The seed literals holding the kernels a (family, mode) of emitters_a re-implements."""
    if family == "matmul":
        if mode is Mode.DEQUANT:
            return [_forward_set("k0_q8gemv"), _forward_set("k0_matmul"), "GEN_DEVICE_KERNELS"]
        if mode is Mode.INT8_ACT:
            return [_forward_set("k0_qact", False), "GEN_DEVICE_KERNELS", "emit_marlin_q8_gemm"]
        return [_forward_set("k0_qact", True)]
    if family == "moe":
        return {Mode.DEQUANT: ["MOE_KERNELS", "MOE_ROUTER_TOPK_KERNELS", "GEN_DEVICE_KERNELS"],
                Mode.INT8_ACT: ["MOE_ROUTER_TOPK_KERNELS", "MOE_SINGLE_PASS_KERNELS"],
                Mode.TWO_PASS_INT8: ["MOE_ROUTER_TOPK_KERNELS", "MOE_TWO_PASS_KERNELS"]}[mode]
    return ["GEN_DEVICE_KERNELS"]


def seed_match(contract: KernelContract, set_names: list[str]):
    """(set name, KernelSignature) of the one seed kernel the contract stands for."""
    hits = [(n, sig) for n in set_names for sig in kernel_signatures(seed_sets()[n].code)
            if contract.matches_name(sig.name)]
    assert len(hits) == 1, f"{contract.name}: expected one seed kernel in {set_names}, found {hits}"
    return hits[0]


# ---- generic checks ------------------------------------------------------------------------------------------
def signature_problems(src: KernelSource) -> list[str]:
    """Differences between the emitted text's kernels and the contracts (names, C types, order)."""
    sigs = kernel_signatures(src.code)
    problems = []
    if [s.name for s in sigs] != [c.name for c in src.contracts]:
        problems.append(f"kernels in text {[s.name for s in sigs]} != contracts {list(src.kernel_names)}")
    for sig, c in zip(sigs, src.contracts):
        if sig.ctypes != c.signature():
            problems.append(f"{c.name}: text {sig.ctypes} != contract {c.signature()}")
        if tuple(n for _, n in sig.params) != tuple(p.name for p in c.params):
            problems.append(f"{c.name}: parameter names differ from the contract")
    return problems


def seed_signature_problems(src: KernelSource) -> list[str]:
    names = seed_set_names(src.family, src.mode)
    problems = []
    for c in src.contracts:
        set_name, sig = seed_match(c, names)
        if sig.ctypes != c.signature():
            problems.append(f"{c.name}: contract {c.signature()} != seed {set_name} {sig.ctypes}")
    return problems


def check_instances(src: KernelSource, shape) -> None:
    for c in src.contracts:
        assert c.instances, f"{c.name} lists no instances"
        for label, _ in c.instances:
            dims = c.dims_for(shape, label)
            c.check(dims)
            grid, block, shared = c.geometry(dims)
            where = f"{c.name} instance {label} at {shape.name}: dims {dims}"
            assert all(g >= 1 for g in grid), where
            assert 1 <= block[0] * block[1] * block[2] <= 1024, where
            assert 0 <= shared <= 48 * 1024, where
            counts = c.counts(dims)
            assert set(counts) == {p.name for p in c.params if p.is_pointer}, where
            assert all(n >= 1 for n in counts.values()), f"{where}: counts {counts}"
            assert set(c.scalars(dims)) == {p.name for p in c.params if not p.is_pointer}, where


# ---- compiler-backed checks ----------------------------------------------------------------------------------
def find_nvcc() -> "str | None":
    """The toolchain qconform itself uses (the `toolchain` extra's wheels first, then a CUDA install)."""
    from harness.toolchain import toolchain_or_reason
    tc, _why = toolchain_or_reason()
    return str(tc.nvcc) if tc else None


def need_nvcc() -> str:
    from harness.toolchain import toolchain_or_reason
    tc, why = toolchain_or_reason()
    if tc is None:
        pytest.skip(f"the compile checks need nvcc: {why}")
    return str(tc.nvcc)


def _cached_nvcc(code: str, flag: str, suffix: str) -> str:
    """nvcc `flag` output of `code` for sm_80, cached by (source, flag, nvcc path) hash with an atomic rename."""
    nvcc = need_nvcc()
    key = hashlib.sha256(f"{nvcc}\0{flag}\0{code}".encode()).hexdigest()
    cached = cache_dir("emitters-a") / f"{key}{suffix}"
    if cached.is_file():
        return cached.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        cu, outp = Path(tmp) / "k.cu", Path(tmp) / f"k{suffix}"
        cu.write_text(code)
        run = subprocess.run([nvcc, "-arch=sm_80", flag, str(cu), "-o", str(outp)], capture_output=True, text=True)
        assert run.returncode == 0, f"nvcc {flag} failed:\n{run.stderr[-4000:]}"
        text = outp.read_text(errors="replace") if suffix == ".ptx" else "compiled\n"
    fd, part = tempfile.mkstemp(dir=cached.parent, suffix=".part")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(part, cached)
    return text


def smoke_compile(code: str) -> None:
    _cached_nvcc(code, "-cubin", ".cubin")


_NUMERIC_OP = re.compile(r"^(fma|mul|add|sub|div|rcp|sqrt|rsqrt|ex2|lg2|max|min|neg|abs|cvt|dp4a|mma)\b")


def ptx_profile(code: str) -> dict[str, tuple[str, ...]]:
    """Per kernel, the numeric PTX opcodes (with rounding and types) nvcc -O3 leaves, in program order."""
    ptx = _cached_nvcc(code, "-ptx", ".ptx")
    out = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\n\}", ptx, re.S):
        mangled = re.match(r"_Z(\d+)", m.group(1))
        name = m.group(1)[mangled.end():mangled.end() + int(mangled.group(1))] if mangled else m.group(1)
        ops = []
        for line in m.group(2).splitlines():
            tok = line.split()
            if tok and tok[0].startswith("@"):
                tok = tok[1:]
            if tok and _NUMERIC_OP.match(tok[0]) and (tok[0].startswith(("dp4a", "mma"))
                                                      or re.search(r"\.f(16|32|64)\b", tok[0])):
                ops.append(tok[0])
        out[name] = tuple(ops)
    return out


def profile_problems(sources: "KernelSource | list[KernelSource]") -> list[str]:
    """Kernels whose PTX numeric profile differs from their seed kernel's. The sources are compiled together
    (kernels renamed q<i>_name), and so are all the seed literals (s<j>_name): two nvcc runs, both cached."""
    sources = [sources] if isinstance(sources, KernelSource) else list(sources)
    mine = ptx_profile(PRELUDE + "".join(_renamed(s.code[len(PRELUDE):], f"q{i}_") for i, s in enumerate(sources)))
    seed = ptx_profile(PRELUDE + "".join(_renamed(seed_sets()[n].code, f"s{j}_") for j, n in enumerate(ALL_SEED_SETS)))
    problems = []
    for i, src in enumerate(sources):
        for c in src.contracts:
            set_name, sig = seed_match(c, seed_set_names(src.family, src.mode))
            ours, theirs = mine[f"q{i}_{c.name}"], seed[f"s{ALL_SEED_SETS.index(set_name)}_{sig.name}"]
            if ours != theirs:
                ours_n, seed_n = collections.Counter(ours), collections.Counter(theirs)
                diff = {k: (ours_n[k], seed_n[k]) for k in set(ours_n) | set(seed_n) if ours_n[k] != seed_n[k]}
                where = f"{c.name} ({src.mode}) vs seed {set_name}:{sig.name}"
                problems.append(f"{where}: op counts (ours, seed) {diff}" if diff
                                else f"{where}: same ops in a different order")
    return problems


def _renamed(code: str, prefix: str) -> str:
    """The source with every kernel renamed prefix+name (so several kernel sets can share one build)."""
    return re.sub(r"(__global__\s+void\s+)([A-Za-z_]\w*)", lambda m: m.group(1) + prefix + m.group(2), code)


# Every seed literal emitters_a re-implements, in one fixed order: one build serves every comparison.
ALL_SEED_SETS = ("emit_forward#1", "emit_forward#2", "emit_forward#3", "emit_forward#4", "emit_marlin_q8_gemm",
                 "GEN_DEVICE_KERNELS", "MOE_KERNELS", "MOE_ROUTER_TOPK_KERNELS", "MOE_SINGLE_PASS_KERNELS",
                 "MOE_TWO_PASS_KERNELS")


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


def test_numeric_ptx_profile_equals_the_seed():
    assert profile_problems([matmul.emit(mode, TINY) for mode in matmul.MODES]) == []


def test_a_rounding_change_shows_in_the_ptx_profile():
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


# ---- the lane -> element mapping of the tiers, checked as a partition ------------------------------------------
def tier_reads(k: int, tiers: str, block512=lambda b, lane: b * 16 + lane // 2) -> tuple[np.ndarray, np.ndarray]:
    """(element index, 32-block the lane formula assigns) for every byte a warp reads, per the tier formulas."""
    lane = np.arange(32)
    elems, blocks = [], []
    n512 = k // 512 if "512" in tiers else 0
    b = np.arange(n512)[:, None, None]
    e = b * 512 + lane[None, :, None] * 16 + np.arange(16)[None, None, :]
    elems.append(e.ravel()); blocks.append(np.broadcast_to(block512(b, lane[None, :, None]), e.shape).ravel())
    start = n512 * 512
    if "128" in tiers:
        n128 = k // 128
        b = np.arange(n512 * 4, n128)[:, None, None]
        e = b * 128 + lane[None, :, None] * 4 + np.arange(4)[None, None, :]
        elems.append(e.ravel()); blocks.append(np.broadcast_to(b * 4 + lane[None, :, None] // 8, e.shape).ravel())
        start = n128 * 128
    t = np.arange(start, k)
    elems.append(t); blocks.append(t // 32)
    return np.concatenate(elems), np.concatenate(blocks)


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


# ---- differential execution: every kernel against the seed's, bit for bit, on the CPU backend -----------------
def _q8_like_inputs(contract: KernelContract, dims: dict, rng: np.random.Generator) -> tuple[list, list[int]]:
    """Arguments for one launch: int8 quants, small positive scales, N(0,1) activations, fills as the contract says."""
    from emitters.contract import Role
    from emitters.expr import evaluate
    args, outputs = [], []
    scalars, counts = contract.scalars(dims), contract.counts(dims)
    for i, p in enumerate(contract.params):
        if not p.is_pointer:
            args.append(np.int32(scalars[p.name]) if p.ctype == "int" else np.float32(scalars[p.name]))
            continue
        n, dt = counts[p.name], np.dtype(p.dtype)
        if p.role is Role.OUTPUT:
            a = np.zeros(n, dt)
            outputs.append(i)
        elif p.fill and p.fill.startswith("index("):
            a = rng.choice(int(evaluate(p.fill[6:-1], dims)), n, replace=False).astype(dt)
        elif p.fill and p.fill.startswith("const("):
            a = np.full(n, evaluate(p.fill[6:-1], dims), dt)
        elif dt == np.int8:
            a = rng.integers(-127, 128, n).astype(dt)
        elif dt == np.float16 or p.name.endswith(("s", "s_")) and p.name not in ("logits",):
            a = (rng.random(n) * 0.02 + 0.001).astype(dt)          # Q8_0-like block scales
        else:
            a = rng.standard_normal(n).astype(dt)
        args.append(a)
    return args, outputs


@functools.lru_cache(maxsize=1)
def _emu_backend():
    from harness.backends import get_backend
    try:
        # one schedule: the comparison is of values, not of races; a generous time limit for a loaded machine
        return get_backend("emu", schedules=1, timeout_s=600)
    except FileNotFoundError as exc:
        pytest.skip(f"the CPU backend needs a host C++ compiler: {exc}")


def differential_problems(sources: list, shape, seed: int = 20251202) -> list[str]:
    """Run every contract of `sources` (ours) and the seed kernel it stands for on identical inputs (the first
    instance at `shape`); report every buffer that is not bit-identical afterwards."""
    ours = "".join(_renamed(s.code[len(PRELUDE):], f"q{i}_") for i, s in enumerate(sources))
    theirs = "".join(_renamed(seed_sets()[n].code, f"s{j}_") for j, n in enumerate(ALL_SEED_SETS))
    mine, seeds = _emu_backend().load(PRELUDE + ours), _emu_backend().load(PRELUDE + theirs)
    problems = []
    for i, src in enumerate(sources):
        for c in src.contracts:
            set_name, sig = seed_match(c, seed_set_names(src.family, src.mode))
            for label, _ in c.instances[:1]:
                dims = c.dims_for(shape, label)
                grid, block, shared = c.geometry(dims)
                a, outputs = _q8_like_inputs(c, dims, np.random.default_rng(seed))
                b = [x.copy() if isinstance(x, np.ndarray) else x for x in a]
                mine.launch(f"q{i}_{c.name}", grid, block, shared, a, outputs)
                seeds.launch(f"s{ALL_SEED_SETS.index(set_name)}_{sig.name}", grid, block, shared, b, outputs)
                for p, x, y in zip(c.params, a, b):
                    if isinstance(x, np.ndarray) and not np.array_equal(x.view(np.uint8), y.view(np.uint8)):
                        bad = int(np.count_nonzero(x != y))
                        problems.append(f"{c.name} ({src.mode}) instance {label} at {shape.name}: {p.name} differs "
                                        f"in {bad} of {x.size} elements [input seed {seed}]")
    return problems


def _emitters_a_sources(shape) -> list:
    from emitters import argmax, embed, moe
    return [mod.emit(mode, shape) for mod in (matmul, moe, embed, argmax) for mode in mod.MODES]


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
