"""Test helpers for the norm/elementwise/rope/attention emitters: the seed's kernels of the same names,
decoded at test time from ../shared/seed/qwen_emit.rs (never copied into the repo), and a SASS
floating-point-op census that tells whether two kernels round and contract the same way.

The seed's forward kernels are `format!` templates whose pieces (norm bodies, quant epilogues, parameter
fragments) are separate literals; `seed_forward_kernel` finds each piece by its opening text and fills it
for the variant a contract's attrs describe.
"""
from __future__ import annotations

import collections
import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Optional

from emitters.contract import KernelContract
from emitters.cuda_snippets import PRELUDE
from harness.toolchain.rust_literals import fill_format, kernel_sets, string_literals
from reference.shapes import get_shape


# -- seed text ---------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def seed_sets(src: str) -> dict:
    return {ks.name: ks for ks in kernel_sets(src, {"i": 0, "nt": 2})}


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


# -- nvcc ------------------------------------------------------------------------------------------------------
def find_nvcc() -> Optional[str]:
    """The toolchain qconform itself uses (the `toolchain` extra's wheels first, then a CUDA install)."""
    from harness.toolchain.finder import toolchain_or_reason
    tc, _why = toolchain_or_reason()
    return str(tc.nvcc) if tc else None


def compile_cubin(code: str, arch: str = "sm_80") -> Path:
    """The cubin of `code` for `arch`, through qconform's own hash-keyed, xdist-safe compile cache."""
    from harness.toolchain.compile import compile_source
    res = compile_source(code, arch)
    if not res.ok:
        raise AssertionError(f"nvcc -arch={arch} -cubin failed:\n{res.log[-4000:]}")
    return res.cubin


def find_cuobjdump() -> Optional[str]:
    from harness.toolchain.finder import toolchain_or_reason
    tc, _why = toolchain_or_reason()
    return str(tc.cuobjdump) if tc and tc.cuobjdump else None


def sass_tools_or_skip() -> None:
    import pytest
    if not find_nvcc():
        pytest.skip("no nvcc found (install the toolchain extra, or set QCONFORM_NVCC / CUDA_HOME)")
    if not find_cuobjdump():
        pytest.skip("no cuobjdump found (install the toolchain extra)")


# Floating-point arithmetic as the GPU executes it: ptxas may fuse a PTX mul.f32 and add.f32 into FFMA, so
# the census is taken from SASS, where every contraction decision has been made.
_SASS_FLOAT = re.compile(r"^(FFMA|FMUL|FADD|FMNMX|DFMA|DMUL|DADD|DMNMX|MUFU\.\w+)\b")


def float_op_census(code: str, arch: str = "sm_80") -> dict:
    """Per kernel (unmangled name), how many of each floating-point SASS instruction it holds."""
    cubin = compile_cubin(code, arch)
    sass = cubin.with_suffix(".sass")
    if not sass.is_file():
        proc = subprocess.run([find_cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise AssertionError(f"cuobjdump failed: {proc.stderr[-2000:]}")
        part = sass.with_suffix(f".{os.getpid()}.part")
        part.write_text(proc.stdout)
        os.replace(part, sass)
    out, census = {}, None
    for line in sass.read_text().splitlines():
        fn = re.search(r"Function : _Z(\d+)(\w+)", line)
        if fn:
            census = out.setdefault(fn.group(2)[:int(fn.group(1))], collections.Counter())
            continue
        ins = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", line)
        if census is not None and ins:
            hit = _SASS_FLOAT.match(ins.group(1))
            if hit:
                census[hit.group(1)] += 1
    return out


def with_prelude(code: str) -> str:
    return PRELUDE + "\n" + code


# -- generic checks every emitter test runs ----------------------------------------------------------------------
def assert_signatures_follow_contracts(ks) -> None:
    """The text declares exactly the contracts' kernels, in order, with their parameter names and C types."""
    from cudasrc.signatures import kernel_signatures
    sigs = kernel_signatures(ks.code)
    assert [s.name for s in sigs] == [c.name for c in ks.contracts]
    for s, c in zip(sigs, ks.contracts):
        assert s.params == tuple((p.ctype, p.name) for p in c.params), c.name


def assert_instances_evaluate(ks, shape) -> None:
    """At every instance: preconditions hold, geometry is a legal launch, every buffer has elements."""
    from emitters.expr import evaluate
    for c in ks.contracts:
        assert c.instances, c.name
        for label, _ in c.instances:
            dims = c.dims_for(shape, label)
            c.check(dims)
            grid, block, shared = c.geometry(dims)
            assert all(g >= 1 for g in grid) and all(b >= 1 for b in block), (c.name, label, grid, block)
            assert block[0] * block[1] * block[2] <= 1024, (c.name, label, block)
            assert 0 <= shared <= 48 * 1024, (c.name, label, shared)
            counts = c.counts(dims)
            assert all(n >= 1 for n in counts.values()), (c.name, label, counts)
            scalars = c.scalars(dims)
            assert set(scalars) == {p.name for p in c.params if not p.is_pointer}, (c.name, scalars)
            for p in c.params:
                if p.fill:
                    inner = re.match(r"(index|const)\((.*)\)$", p.fill)
                    assert inner, (c.name, p.fill)
                    evaluate(inner.group(2), dims)
