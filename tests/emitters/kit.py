"""The emitter tests' one kit: the seed's kernels of the same names, decoded at test time from
../shared/seed/qwen_emit.rs (never copied into the repo); signature and contract checks; compiles through
qconform's own nvcc cache (harness.toolchain.compile: cubin and SASS); one numeric profile per kernel (the
arithmetic SASS instructions, read once per source) that tells whether two kernels compute, round and contract
the same way; and a differential run of each kernel against the seed's on the CPU backend.

The seed's forward kernels are `format!` templates whose pieces (norm bodies, quant epilogues, parameter
fragments) are separate literals; `seed_forward_kernel` finds each piece by its opening text and fills it
for the variant a contract's attrs describe.
"""
from __future__ import annotations

import collections
import functools
import re
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from cudasrc.signatures import kernel_signatures
from emitters import matmul
from emitters.contract import KernelContract, KernelSource
from emitters.cuda_snippets import PRELUDE
from harness.toolchain.rust_literals import fill_format, kernel_sets, string_literals
from reference.modes import Mode
from reference.shapes import SHAPE_SETS, get_shape
from tests.seed import seed_source

SHAPES = tuple(SHAPE_SETS)

SEED_VALUES = {"i": 0, "nt": 2, "ty": "float"}   # k{i}_ index, marlin subtiles, k{i}_matmul element type


# -- seed text ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def seed_sets(src: Optional[str] = None) -> dict:
    """The seed's kernel sets by name (`src`: the seed's text, read from its usual place when not given)."""
    return {ks.name: ks for ks in kernel_sets(seed_source() if src is None else src, SEED_VALUES)}


@functools.lru_cache(maxsize=4)
def _literal_texts(src: str) -> tuple:
    return tuple(l.text for l in string_literals(src))


def seed_literal(src: str, opening: str, containing: str = "") -> str:
    """The one string literal of the seed that starts with `opening` (and contains `containing`)."""
    # The same piece may be spelled twice in the seed (e.g. one quant epilogue for two kernels): one text.
    hits = sorted({t for t in _literal_texts(src) if t.startswith(opening) and containing in t})
    if len(hits) != 1:
        raise AssertionError(f"seed: expected one literal opening {opening!r} containing {containing!r}, "
                             f"found {len(hits)}")
    return hits[0]


def _fill(template: str, values: dict) -> str:
    text, _, unfilled = fill_format(template, values)
    if unfilled:
        raise AssertionError(f"seed template left unfilled: {unfilled}")
    return text


def cut_kernel(code: str, name: str) -> str:
    """One kernel's text out of a source, cut at the `__global__` boundaries."""
    starts = [m.start() for m in re.finditer(r"__global__\s+void\s+", code)] + [len(code)]
    for a, b in zip(starts, starts[1:]):
        if re.match(rf"__global__\s+void\s+{name}\s*\(", code[a:]):
            return code[a:b]
    raise KeyError(f"no kernel {name} in the source")


def gen_kernel(src: str, name: str) -> str:
    """One kernel of GEN_DEVICE_KERNELS."""
    return cut_kernel(seed_sets(src)["GEN_DEVICE_KERNELS"].code, name)


def seed_counterparts(src: str, ks) -> str:
    """The seed's kernels of the same names and variants as a KernelSource's, as one translation unit."""
    return with_prelude("\n".join(gen_kernel(src, c.name) if c.name.startswith("gk_") else
                                  seed_forward_kernel(src, c, c.dims_for(get_shape(ks.shape))) for c in ks.contracts))


def mutant(code: str, name: str, old: str, new: str) -> str:
    """Kernel `name` of `code` with `old` replaced by `new`, renamed `<name>_mutant` (a negative control)."""
    text = cut_kernel(code, name)
    if old not in text:
        raise AssertionError(f"mutant: {old!r} is not in {name}")
    return text.replace(old, new).replace(f"void {name}(", f"void {name}_mutant(", 1)


def _row_quant_epilogue(src: str, cols: int) -> str:
    return _fill(seed_literal(src, "\x20 __syncthreads(); {{ int qlane", "qnb={cols}/32"), {"cols": cols})


def seed_forward_kernel(src: str, contract: KernelContract, dims: dict) -> str:
    """The seed's k{i}_* kernel for the variant `contract` describes, with its stage number."""
    stage = int(re.match(r"k(\d+)_", contract.name).group(1))
    names = {p.name for p in contract.params}
    a = contract.attrs
    kind = contract.name.split("_", 1)[1]
    eps = repr(float(dims.get("eps", 0.0)))
    if kind == "row":
        cols = int(dims["cols"])
        v = "((double)xr[i]+(double)rr[i])" if "res" in names else "(double)xr[i]"
        if a["variant"] == "rms":
            body_t = seed_literal(src, "  double sc=0;", "*w[i]" if "w" in names else "(float)({v}*scale);")
            body = _fill(body_t, {"cols": cols, "eps": eps, "v": v})
        elif a["variant"] == "softmax":
            body = _fill(seed_literal(src, "  double m=-1e30;"), {"cols": cols})
        else:
            body = _fill(seed_literal(src, "  double sm=0;"), {
                "cols": cols, "eps": eps, "wmul": "*(double)w[i]" if "w" in names else "",
                "badd": "+(double)bias[i]" if "bias" in names else ""})
        wparam = "".join(f", const float* {p}" for p in ("w", "res", "bias") if p in names)
        return _fill(seed_literal(src, "__global__ void k{i}_row("), {
            "i": stage, "wparam": wparam, "qparam": ", signed char* yq, float* ys" if "yq" in names else "",
            "cols": cols, "rrow": f" const float* rr = res + (long)row*{cols};" if "res" in names else "",
            "body": body, "qepilogue": _row_quant_epilogue(src, cols) if "yq" in names else ""})
    if kind == "add_row":
        cols = int(dims["cols"])
        return _fill(seed_literal(src, "__global__ void k{i}_add_row("), {
            "i": stage, "wparam": ", const float* w" if "w" in names else "",
            "qparam": ", signed char* yq, float* ys" if "yq" in names else "", "cols": cols, "eps": eps,
            "ymul": "*w[i]" if "w" in names else "",
            "qepilogue": _row_quant_epilogue(src, cols) if "yq" in names else ""})
    if kind == "attn":
        quant = "yq" in names
        # The attention epilogue is a plain literal spliced into the format! text, so its braces stay doubled
        # (a nested C block) exactly as the seed emits them.
        epi = seed_literal(src, "\x20 __syncthreads(); {{ int qlane", "int base=head*HD") if quant else ""
        return _fill(seed_literal(src, "__global__ void k{i}_attn("), {
            "i": stage, "qparam": ", signed char* yq, float* ys" if quant else "", "L": int(dims["L"]),
            "qepilogue": epi})
    if kind == "elem":
        return _fill(seed_literal(src, "__global__ void k{i}_elem("), {"i": stage, "ty": "float",
                                                                         "op": _C_OPS[a["ops"][0]]})
    if kind == "fused":
        return _seed_chain(src, stage, a["ops"])
    if kind == "region":
        return _seed_region(src, stage, a["members"], a["stores"], sum(1 for p in names if p.startswith("i")))
    if kind in ("silu", "transpose"):
        return _fill(seed_literal(src, f"__global__ void k{{i}}_{kind}("), {"i": stage, "ty": "float"})
    if kind == "rope":
        return _fill(seed_literal(src, "__global__ void k{i}_rope("), {"i": stage})
    raise KeyError(f"no seed template for {contract.name}")


_C_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _seed_chain(src: str, stage: int, ops: list) -> str:
    """Fill the seed's chain template as its emitter does: a product is __fmul_rn only when an add follows."""
    def apply(op, x, y, nxt):
        return f"__fmul_rn({x}, {y})" if op == "mul" and nxt == "add" else f"{x} {_C_OPS[op]} {y}"
    steps = list(ops) + [None]
    params = "const float* i0, const float* i1"
    body = f"float t = {apply(ops[0], 'i0[idx]', 'i1[idx]', steps[1])};"
    pk = 2
    for k, op in enumerate(ops[1:], start=1):
        if op == "silu":
            body += " t = t/(1.0f+expf(-t));"
        else:
            params += f", const float* i{pk}"
            body += f" t = {apply(op, 't', f'i{pk}[idx]', steps[k + 1])};"
            pk += 1
    return _fill(seed_literal(src, "__global__ void k{i}_fused("), {"i": stage, "params": params, "ty": "float",
                                                                      "body": body})


def _seed_region(src: str, stage: int, members: list, stores: list, n_in: int) -> str:
    def ref(x):
        return f"i{x[1:]}[idx]" if x[0] == "i" else x
    lines = []
    for k, (op, *args) in enumerate(members):
        if op == "silu":
            lines.append(f"float t{k}; {{ float v=(float){ref(args[0])}; t{k} = v/(1.0f+expf(-v)); }}")
        elif op == "mul":
            lines.append(f"float t{k} = __fmul_rn({ref(args[0])}, {ref(args[1])});")
        else:
            lines.append(f"float t{k} = {ref(args[0])} {_C_OPS[op]} {ref(args[1])};")
    params = [f"const float* i{p}" for p in range(n_in)] + [f"float* o{q}" for q in range(len(stores))]
    store_text = "".join(f" o{q}[idx] = t{s};" for q, s in enumerate(stores))
    mark = "\x00POS\x00"
    text = _fill(seed_literal(src, "__global__ void k{i}_region("), {"i": stage, "stores": store_text,
                                                                       "<positional>": mark})
    text = text.replace(mark, ", ".join(params), 1)
    return text.replace(mark, " ".join(lines), 1)


# -- nvcc: one toolchain, one compile cache, one numeric profile ------------------------------------------------
def _toolchain():
    from harness.toolchain.finder import toolchain_or_reason
    return toolchain_or_reason()


def find_nvcc() -> Optional[str]:
    """The toolchain qconform itself uses (the `toolchain` extra's wheels first, then a CUDA install)."""
    tc, _why = _toolchain()
    return str(tc.nvcc) if tc else None


def find_cuobjdump() -> Optional[str]:
    tc, _why = _toolchain()
    return str(tc.cuobjdump) if tc and tc.cuobjdump else None


def sass_tools_or_skip() -> None:
    """Skip, saying why, where nvcc or a SASS reader is missing."""
    tc, why = _toolchain()
    if tc is None:
        pytest.skip(f"the compile checks need nvcc: {why}")
    if not tc.can_read_sass:
        pytest.skip("no cuobjdump or nvdisasm found (install the toolchain extra)")


def _compiled(code: str, arch: str):
    from harness.toolchain.compile import compile_source
    res = compile_source(code, arch)
    if not res.ok:
        raise AssertionError(f"nvcc -arch={arch} -cubin failed:\n{res.log[-4000:]}")
    return res


def compile_cubin(code: str, arch: str = "sm_80") -> Path:
    """The cubin of `code` for `arch`, through qconform's own hash-keyed, xdist-safe compile cache."""
    return _compiled(code, arch).cubin


def smoke_compile(code: str) -> None:
    """Compile `code` to an sm_80 cubin (skips where there is no nvcc); fail with nvcc's log."""
    tc, why = _toolchain()
    if tc is None:
        pytest.skip(f"the compile checks need nvcc: {why}")
    compile_cubin(code)


# The arithmetic as the GPU executes it, read from SASS, where every contraction (ptxas may fuse a mul and an
# add into FFMA), rounding mode (F2I.NTZ vs F2I) and integer dot (IDP.4A, IMMA) decision has been made.
_SASS_NUMERIC = re.compile(r"^(FFMA|FMUL|FADD|FMNMX|FRND|DFMA|DMUL|DADD|DMNMX|MUFU|F2I|I2F|F2F|IDP|IMMA|HMMA|"
                           r"HFMA2|HADD2|HMUL2)\b")
_SASS_FLOAT = re.compile(r"^(FFMA|FMUL|FADD|FMNMX|DFMA|DMUL|DADD|DMNMX|MUFU\.\w+)\b")


# ptxas materialises constants and moves registers with HFMA2.MMA (on the tensor pipe, to balance the load):
# a move, not arithmetic, and placed differently in twins that compute the same.
_SASS_MOVES = {"HFMA2.MMA"}


def numeric_profile(code: str, arch: str = "sm_80") -> dict[str, tuple[str, ...]]:
    """Per kernel (source name), its arithmetic SASS opcodes with their modifiers, in program order."""
    from harness.toolchain.compile import opcode
    sass = _compiled(code, arch).sass()
    return {k: tuple(op for op in map(opcode, ins) if _SASS_NUMERIC.match(op) and op not in _SASS_MOVES)
            for k, ins in sass.items()}


def float_op_census(code: str, arch: str = "sm_80") -> dict:
    """Per kernel, how many of each floating-point SASS instruction it holds (modifiers dropped, MUFU kept by
    function): the profile's floating-point part, counted."""
    out = {}
    for kernel, ops in numeric_profile(code, arch).items():
        out[kernel] = collections.Counter(m.group(1) for m in map(_SASS_FLOAT.match, ops) if m)
    return out


def with_prelude(code: str) -> str:
    return PRELUDE + "\n" + code


# -- the seed kernels the Q8 emitters (matmul, moe, embed, argmax) re-implement ---------------------------
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


# -- checks every emitter test runs ---------------------------------------------------------------------
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
    """At every instance: preconditions hold, the geometry is a legal launch, every buffer has elements, every
    scalar a value and every fill expression evaluates."""
    from emitters.expr import evaluate
    for c in src.contracts:
        assert c.instances, f"{c.name} lists no instances"
        for label, _ in c.instances:
            dims = c.dims_for(shape, label)
            c.check(dims)
            grid, block, shared = c.geometry(dims)
            where = f"{c.name} instance {label} at {shape.name}: dims {dims}"
            assert all(g >= 1 for g in grid) and all(b >= 1 for b in block), where
            assert block[0] * block[1] * block[2] <= 1024, where
            assert 0 <= shared <= 48 * 1024, where
            counts = c.counts(dims)
            assert set(counts) == {p.name for p in c.params if p.is_pointer}, where
            assert all(n >= 1 for n in counts.values()), f"{where}: counts {counts}"
            assert set(c.scalars(dims)) == {p.name for p in c.params if not p.is_pointer}, where
            for p in c.params:
                if p.fill:
                    inner = re.match(r"(index|const)\((.*)\)$", p.fill)
                    assert inner, (c.name, p.fill)
                    evaluate(inner.group(2), dims)


def profile_problems(sources: "KernelSource | list[KernelSource]") -> list[str]:
    """Kernels whose numeric profile differs from their seed kernel's. The sources are compiled together
    (kernels renamed q<i>_name), and so are all the seed literals (s<j>_name): two nvcc runs, both cached."""
    sass_tools_or_skip()
    sources = [sources] if isinstance(sources, KernelSource) else list(sources)
    mine = numeric_profile(PRELUDE + "".join(_renamed(s.code[len(PRELUDE):], f"q{i}_")
                                             for i, s in enumerate(sources)))
    seed = numeric_profile(PRELUDE + "".join(_renamed(seed_sets()[n].code, f"s{j}_")
                                             for j, n in enumerate(ALL_SEED_SETS)))
    problems = []
    for i, src in enumerate(sources):
        for c in src.contracts:
            set_name, sig = seed_match(c, seed_set_names(src.family, src.mode))
            ours, theirs = mine[f"q{i}_{c.name}"], seed[f"s{ALL_SEED_SETS.index(set_name)}_{sig.name}"]
            # counts, not order: ptxas schedules independent instructions freely
            ours_n, seed_n = collections.Counter(ours), collections.Counter(theirs)
            if ours_n != seed_n:
                diff = {k: (ours_n[k], seed_n[k]) for k in set(ours_n) | set(seed_n) if ours_n[k] != seed_n[k]}
                problems.append(f"{c.name} ({src.mode}) vs seed {set_name}:{sig.name}: op counts (ours, seed) {diff}")
    return problems


def _renamed(code: str, prefix: str) -> str:
    """The source with every kernel renamed prefix+name (so several kernel sets can share one build)."""
    return re.sub(r"(__global__\s+void\s+)([A-Za-z_]\w*)", lambda m: m.group(1) + prefix + m.group(2), code)


# Every seed literal emitters_a re-implements, in one fixed order: one build serves every comparison.
ALL_SEED_SETS = ("emit_forward#1", "emit_forward#2", "emit_forward#3", "emit_forward#4", "emit_marlin_q8_gemm",
                 "GEN_DEVICE_KERNELS", "MOE_KERNELS", "MOE_ROUTER_TOPK_KERNELS", "MOE_SINGLE_PASS_KERNELS",
                 "MOE_TWO_PASS_KERNELS")


# -- the lane -> element mapping of the tiers, checked as a partition ---------------------------------------
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


# -- differential execution: every kernel against the seed's, bit for bit, on the CPU backend --------------
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
        # one schedule and no race detector: the comparison is of values, not of races (the seed's known
        # `red[0]` races are checked in tests/backends/emu/test_race_detector.py); a generous time limit
        return get_backend("emu", schedules=1, timeout_s=600, race_check=False)
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
