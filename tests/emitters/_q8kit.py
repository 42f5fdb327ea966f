"""Helpers the matmul, moe and embed/argmax emitter tests share: seed lookup, signature and contract checks,
nvcc smoke compiles and PTX arithmetic profiles, and a differential run against the seed on the CPU backend."""
from __future__ import annotations

import collections
import functools
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from emitters import matmul
from emitters.contract import KernelContract, KernelSource
from emitters.cuda_snippets import PRELUDE
from harness.cache import cache_dir
from cudasrc.signatures import kernel_signatures
from harness.toolchain.rust_literals import kernel_sets
from reference.modes import Mode
from reference.shapes import SHAPE_SETS
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
    from harness.toolchain.finder import toolchain_or_reason
    tc, _why = toolchain_or_reason()
    return str(tc.nvcc) if tc else None


def need_nvcc() -> str:
    from harness.toolchain.finder import toolchain_or_reason
    tc, why = toolchain_or_reason()
    if tc is None:
        pytest.skip(f"the compile checks need nvcc: {why}")
    return str(tc.nvcc)


def _cached_ptx(code: str) -> str:
    """nvcc -ptx output of `code` for sm_80, cached by (source, nvcc path) hash with an atomic rename
    (harness.toolchain.compile.compile_source makes cubins only)."""
    nvcc = need_nvcc()
    flag = "-ptx"
    key = hashlib.sha256(f"{nvcc}\0{flag}\0{code}".encode()).hexdigest()
    cached = cache_dir("emitters-a") / f"{key}.ptx"
    if cached.is_file():
        return cached.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        cu, outp = Path(tmp) / "k.cu", Path(tmp) / "k.ptx"
        cu.write_text(code)
        run = subprocess.run([nvcc, "-arch=sm_80", flag, str(cu), "-o", str(outp)], capture_output=True, text=True)
        assert run.returncode == 0, f"nvcc {flag} failed:\n{run.stderr[-4000:]}"
        text = outp.read_text(errors="replace")
    fd, part = tempfile.mkstemp(dir=cached.parent, suffix=".part")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(part, cached)
    return text


def smoke_compile(code: str) -> None:
    """Compile `code` to an sm_80 cubin through qconform's own compile cache; fail with nvcc's log."""
    from harness.toolchain.compile import compile_source
    need_nvcc()
    res = compile_source(code, "sm_80")
    assert res.ok, f"nvcc -cubin failed:\n{res.log[-4000:]}"


_NUMERIC_OP = re.compile(r"^(fma|mul|add|sub|div|rcp|sqrt|rsqrt|ex2|lg2|max|min|neg|abs|cvt|dp4a|mma)\b")


def ptx_profile(code: str) -> dict[str, tuple[str, ...]]:
    """Per kernel, the numeric PTX opcodes (with rounding and types) nvcc -O3 leaves, in program order."""
    ptx = _cached_ptx(code)
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
