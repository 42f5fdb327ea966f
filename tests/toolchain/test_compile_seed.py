"""The same compile, resource and SASS checks on the seed's own kernel strings, decoded at test time from
../shared/seed/qwen_emit.rs (never copied into the repository). Findings are written up in
docs/KERNELS.md, section 4."""
from __future__ import annotations

import pytest

from harness.toolchain import compile as cc
from cudasrc.signatures import kernel_signatures
from harness.toolchain.rust_literals import CUDA_PRELUDE, kernel_sets
from reference.modes import Mode
from tests.seed import SEED_RS, seed_source

# The seed has no contracts, so each kernel set's numeric mode is stated here, from what the set is in the
# seed: the dense Dequant MoE path, the single-pass (int8act) and two-pass fused MoE sets, the forward-path
# GEMV templates (#1 two-pass, #2 int8act, #3 dequant), the int8 tensor-core GEMM. The generation-lane set
# mixes modes, so its kernels are named one by one; kernels not named have no mode-specific promise.
SEED_SET_MODES = {
    "MOE_KERNELS": Mode.DEQUANT, "emit_moe_forward": Mode.DEQUANT, "emit_forward#3": Mode.DEQUANT,
    "MOE_SINGLE_PASS_KERNELS": Mode.INT8_ACT, "emit_forward#2": Mode.INT8_ACT,
    "emit_marlin_q8_gemm": Mode.INT8_ACT,
    "MOE_TWO_PASS_KERNELS": Mode.TWO_PASS_INT8, "emit_forward#1": Mode.TWO_PASS_INT8,
}
GEN_LANE_MODES = {"gk_gemv": Mode.INT8_ACT, "gk_gemv_kv": Mode.INT8_ACT, "gk_gemv_qkv": Mode.INT8_ACT,
                  "gk_gemv_deq": Mode.DEQUANT, "gk_gemv_kv_deq": Mode.DEQUANT,
                  "gk_moe_gate_up_deq": Mode.DEQUANT, "gk_moe_down_deq": Mode.DEQUANT}
# Kernels whose quantized operand is only the int8 *activation* quantizer output or that take no int8 input at
# all (qact, router) are judged by the same rules and simply have no int8-dot promise.


def _seed_sets():
    if not SEED_RS.is_file():
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"the seed specification ../shared/seed/qwen_emit.rs is not beside this checkout ({SEED_RS})"))]
    return [pytest.param(ks.name, id=ks.name) for ks in kernel_sets(SEED_RS.read_text(), {"i": 0, "nt": 2})
            if ks.complete]


def _seed_code(name: str) -> str:
    sets = {ks.name: ks for ks in kernel_sets(seed_source(), {"i": 0, "nt": 2})}
    return CUDA_PRELUDE + sets[name].code


def _promises(name: str, code: str) -> list[cc.KernelPromise]:
    out = []
    for sig in kernel_signatures(code):
        mode = GEN_LANE_MODES.get(sig.name) if name == "GEN_DEVICE_KERNELS" else SEED_SET_MODES.get(name)
        out.append(cc.KernelPromise(sig.name, mode, cc.int8_input_count(sig.ctypes)))
    return out


@pytest.mark.parametrize("arch", cc.DEFAULT_ARCHS)
@pytest.mark.parametrize("name", _seed_sets())
def test_seed_kernel_set_compiles_within_its_resources(name, arch, toolchain):
    code = _seed_code(name)
    result = cc.compile_source(code, arch, toolchain)
    promises = _promises(name, code)
    assert {p.name for p in promises} == set(result.resources), result.log
    problems = cc.check_compiled(code, result, promises, toolchain, read_sass=False)
    assert not problems, f"seed {name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("arch", cc.DEFAULT_ARCHS)
@pytest.mark.parametrize("name", _seed_sets())
def test_seed_kernel_set_sass_keeps_its_promises(name, arch, sass_toolchain):
    code = _seed_code(name)
    result = cc.compile_source(code, arch, sass_toolchain)
    problems = cc.check_compiled(code, result, _promises(name, code), sass_toolchain)
    assert not problems, f"seed {name}:\n" + "\n".join(problems)


def test_seed_int8_paths_issue_the_integer_dot(sass_toolchain):
    """The seed's int8 GEMVs issue IDP.4A.S8.S8, its tensor-core GEMM IMMA.16832.S8.S8, and its 512-wide tiers
    128-bit loads; its dense Dequant GEMV accumulates in double."""
    want = {("MOE_SINGLE_PASS_KERNELS", "moe_gate_up_silu"): {"idp4a", "ldg128"},
            ("MOE_TWO_PASS_KERNELS", "moe_down_combine"): {"idp4a"},
            ("emit_forward#2", "k0_q8dp4a"): {"idp4a", "ldg128"},
            ("GEN_DEVICE_KERNELS", "gk_gemv_qkv"): {"idp4a", "ldg128"},
            ("emit_marlin_q8_gemm", "gk_marlin_q8"): {"imma"},
            ("MOE_KERNELS", "moe_gemv"): {"f64"}}
    for (set_name, kernel), props in want.items():
        r = cc.compile_source(_seed_code(set_name), "sm_90", sass_toolchain)
        got = {k for k, ops in cc.sass_properties(r.sass(sass_toolchain)[kernel]).items() if ops}
        assert props <= got, f"{set_name}/{kernel}: SASS shows {sorted(got)}, expected at least {sorted(props)}"


def test_seed_moe_topk_stack_frame_is_its_local_arrays(toolchain):
    """Negative control of the allow-list: moe_topk's 2 KiB frame (float p[256], pm[256]) passes only because it
    is listed; without the listing the same row fails."""
    r = cc.compile_source(_seed_code("MOE_KERNELS"), "sm_80", toolchain)
    res = r.resources["moe_topk"]
    assert res.stack_frame == 2 * 256 * 4
    assert cc.resource_problems("moe_topk", res) == []
    assert "not on the allow-list" in cc.resource_problems("moe_topk", res, stack_allowed={})[0]
