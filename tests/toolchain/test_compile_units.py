"""The pieces of the compile checks: ptxas/SASS parsing, expectations derived from contracts, resource rules,
the nvcc cache, and negative controls (real compiles of kernels that break each rule must be flagged)."""
from __future__ import annotations

import threading

import pytest

from harness.toolchain import compile as cc
from harness.toolchain.compile import KernelResources, SassExpectation
from reference.modes import Mode
from tests.fake_tools import (NVCC_RUN, check_made_in_scratch_folders, recording_tool, stand_in_system_folder,
                              temporaries_made)

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperPf
    8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z8moe_topkPKfPfii' for 'sm_80'
ptxas info    : Function properties for _Z8moe_topkPKfPfii
    2048 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 2048 bytes cumulative stack size, 376 bytes cmem[0]
ptxas info    : Compiling entry function 'plain_c_kernel' for 'sm_80'
ptxas info    : Function properties for plain_c_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 2048 bytes smem, 364 bytes cmem[0]
"""

SASS_TEXT = """\
\tcode for sm_90
\t\tFunction : _Z9gemv_int8PKaS0_Pfi
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
        /*0080*/              @!P0 LDG.E.128.CONSTANT R4, desc[UR4][R4.64] ;  /* 0x0000000404047981 */
        /*00b0*/                   IDP.4A.S8.S8 R0, R4, R5, RZ ;              /* 0x0000000504007226 */
        /*00c0*/                   EXIT ;                                      /* 0x000000000000794d */
\t\tFunction : f64_kernel
        /*0000*/                   DFMA R2, R4, R6, R2 ;                       /* 0x0000000604027228 */
        /*0010*/                   LDG.E R0, desc[UR4][R2.64] ;                /* 0x0000000402007981 */
"""


def test_parse_ptxas_reads_entries_only_and_demangles():
    res = cc.parse_ptxas(PTXAS_LOG)
    assert res == {
        "moe_topk": KernelResources(registers=32, stack_frame=2048, spill_stores=4, spill_loads=8, smem_static=0),
        "plain_c_kernel": KernelResources(registers=12, stack_frame=0, spill_stores=0, spill_loads=0,
                                          smem_static=2048, barriers=1),
    }


@pytest.mark.parametrize("symbol,name", [("_Z8moe_topkPKfPfii", "moe_topk"), ("gk_embed", "gk_embed"),
                                         ("_Z12gk_attn_partPKf", "gk_attn_part")])
def test_demangle_kernel(symbol, name):
    assert cc.demangle_kernel(symbol) == name


def test_parse_sass_and_properties():
    sass = cc.parse_sass(SASS_TEXT)
    assert set(sass) == {"gemv_int8", "f64_kernel"}
    assert cc.opcode(sass["gemv_int8"][1]) == "LDG.E.128.CONSTANT"
    props = cc.sass_properties(sass["gemv_int8"])
    assert props == {"idp4a": ["IDP.4A.S8.S8"], "imma": [], "ldg128": ["LDG.E.128.CONSTANT"], "f64": []}
    props = cc.sass_properties(sass["f64_kernel"])
    assert props["f64"] == ["DFMA"] and props["ldg128"] == []       # a 32-bit LDG.E is not a 128-bit load


@pytest.mark.parametrize("mode,int8_inputs,source,attrs,required,forbidden", [
    (Mode.INT8_ACT, 2, "", {"act": "int8", "tiers": "512+scalar"}, {"idp4a", "ldg128"}, set()),
    (Mode.TWO_PASS_INT8, 3, "", {"act": "int8x2", "tiers": "128+scalar"}, {"idp4a"}, set()),
    (Mode.INT8_ACT, 2, 'asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 ...");', {"act": "int8"},
     {"imma"}, set()),
    (Mode.DEQUANT, 1, "double acc;", {"act": "f32", "accumulate": "f64"}, {"f64"}, {"idp4a", "imma"}),
    (Mode.INT8_ACT, 1, "", {"act": "f32"}, set(), {"idp4a", "imma"}),           # the f32 router of an int8 mode
    (Mode.TWO_PASS_INT8, 3, "", {}, {"idp4a"}, set()),                          # no attrs: mode + signature
    (Mode.DEQUANT, 1, "double a; const int4* w = (const int4*)p;", {}, {"f64", "ldg128"}, {"idp4a", "imma"}),
    (None, 0, "float x = a[i];", {}, set(), set()),
])
def test_sass_expectations_follow_the_contract(mode, int8_inputs, source, attrs, required, forbidden):
    exp = cc.sass_expectations(mode, int8_inputs, source, attrs)
    assert set(exp.required) == required and set(exp.forbidden) == forbidden


def test_sass_problems_name_what_is_missing_and_what_is_forbidden():
    props = {"idp4a": ["IDP.4A.S8.S8"], "imma": [], "ldg128": [], "f64": []}
    exp = SassExpectation({"ldg128": "tiers=512"}, {"idp4a": "act=f32"})
    problems = cc.sass_problems("k", props, exp)
    assert len(problems) == 2
    assert "expected 128-bit global loads" in problems[0] and "tiers=512" in problems[0]
    assert "issues IDP.4A.S8.S8 but act=f32" in problems[1]
    assert cc.sass_problems("k", props, SassExpectation({"idp4a": "int8"}, {})) == []


def test_resource_rules():
    clean = KernelResources(32, 0, 0, 0, 1024)
    assert cc.resource_problems("k", clean) == []
    assert "spills" in cc.resource_problems("k", KernelResources(32, 0, 4, 4, 0))[0]
    assert "not on the allow-list" in cc.resource_problems("k", KernelResources(32, 16, 0, 0, 0))[0]
    assert cc.resource_problems("moe_topk", KernelResources(32, 2048, 0, 0, 0)) == []
    assert "exceeds its allowance" in cc.resource_problems("moe_topk", KernelResources(32, 4096, 0, 0, 0))[0]
    assert "static shared memory" in cc.resource_problems("k", KernelResources(32, 0, 0, 0, 48 * 1024 + 4))[0]
    assert cc.resource_problems("k", KernelResources(32, 0, 0, 0, 48 * 1024)) == []


def test_every_stack_allowance_has_a_reason():
    for name, (limit, why) in cc.STACK_ALLOWANCES.items():
        assert limit > 0 and len(why) > 20, name


def test_reachable_source_follows_device_calls():
    code = ("__device__ int4 load16(const int4* p) { return p[0]; }\n"
            "__device__ float unused(float x) { return x; }\n"
            "__global__ void k(const int4* w, int* y) { int4 v = load16(w); y[0] = v.x; }\n")
    src = cc.reachable_source(code, "k")
    assert "return p[0]" in src and "unused" not in src
    with pytest.raises(ValueError, match="kernel"):
        cc.reachable_source(code, "missing")


@pytest.mark.parametrize("arch", ["sm80", "compute_80", "sm_8"])
def test_bad_arch_is_rejected(arch):
    with pytest.raises(ValueError, match="arch"):
        cc.nvcc_flags(arch)


# ---------------------------------------------------------------------------------------------------------------
# real compiles: results are keyed by source hash, so the shared nvcc cache is safe to use (a warm run compiles
# nothing); the tests about the cache itself use a private one under tmp_path
PRELUDE = "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n"

GOOD_INT8 = PRELUDE + """
__global__ void good_int8(const signed char* __restrict__ xq, const signed char* __restrict__ wq, float* y, int K) {
  const int4* x16 = (const int4*)xq; const int4* w16 = (const int4*)wq; int acc = 0;
  for (int i = threadIdx.x; i < K / 16; i += 32) { int4 a = x16[i], b = w16[i];
    acc = __dp4a(a.x, b.x, acc); acc = __dp4a(a.y, b.y, acc);
    acc = __dp4a(a.z, b.z, acc); acc = __dp4a(a.w, b.w, acc); }
  y[threadIdx.x] = (float)acc;
}
"""
# An "int8" kernel that dequantizes to float instead of using an integer dot: the regression SASS must catch.
FLOAT_DOT = PRELUDE + """
__global__ void float_dot(const signed char* xq, const signed char* wq, float* y, int K) {
  float acc = 0.0f;
  for (int i = threadIdx.x; i < K; i += 32) acc = fmaf((float)xq[i], (float)wq[i], acc);
  y[threadIdx.x] = acc;
}
"""
LOCAL_ARRAY = PRELUDE + """
__global__ void local_array(const float* x, const int* idx, float* y, int n) {
  float p[64]; float s = 0.0f;
  for (int i = 0; i < n && i < 64; ++i) { s += expf(x[i]); p[i] = s; }
  y[0] = p[idx[0] & 63] / s;
}
"""
DEQUANT_WITH_DP4A = PRELUDE + """
__global__ void deq_dp4a(const float* x, const signed char* wq, float* y, int K) {
  const int* w = (const int*)wq; int acc = 0;
  for (int i = 0; i < K / 4; ++i) acc = __dp4a(w[i], (int)x[i], acc);
  y[0] = (float)acc;
}
"""


def _kernel_check(code, name, arch, attrs, mode, tc, extra_flags=()):
    r = cc.compile_source(code, arch, tc, extra_flags)
    assert r.ok, r.log
    src = cc.reachable_source(code, name)
    exp = cc.sass_expectations(mode, cc.kernel_int8_inputs(code)[name], src, attrs)
    props = cc.sass_properties(r.sass(tc)[name])
    return r, cc.sass_problems(name, props, exp) + cc.resource_problems(name, r.resources[name])


def test_good_int8_kernel_passes(sass_toolchain):
    _, problems = _kernel_check(GOOD_INT8, "good_int8", "sm_80", {"act": "int8", "tiers": "512+scalar"},
                                Mode.INT8_ACT, sass_toolchain)
    assert problems == []


def test_negative_control_float_dot_lacks_idp4a_and_wide_loads(sass_toolchain):
    _, problems = _kernel_check(FLOAT_DOT, "float_dot", "sm_90", {"act": "int8", "tiers": "512+scalar"},
                                Mode.INT8_ACT, sass_toolchain)
    assert any("IDP.4A.S8.S8" in p and "none issued" in p for p in problems), problems
    assert any("128-bit global loads" in p for p in problems), problems


def test_negative_control_dp4a_in_a_dequant_kernel(sass_toolchain):
    _, problems = _kernel_check(DEQUANT_WITH_DP4A, "deq_dp4a", "sm_80", {"act": "f32"}, Mode.DEQUANT,
                                sass_toolchain)
    assert any("issues IDP.4A" in p for p in problems), problems


def test_negative_control_local_array_makes_a_stack_frame(sass_toolchain):
    r, problems = _kernel_check(LOCAL_ARRAY, "local_array", "sm_80", {}, None, sass_toolchain)
    assert r.resources["local_array"].stack_frame >= 256
    assert any("not on the allow-list" in p for p in problems), problems


MANY_LIVE = """
__global__ void many_live(const float* x, float* y) {
  float r[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) r[i] = x[i * blockDim.x + threadIdx.x];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) s += r[i] * r[31 - i] + r[(i * 7) & 31];
#pragma unroll
  for (int i = 0; i < 32; ++i) y[i * blockDim.x + threadIdx.x] = r[i] * s;
}
"""


def test_negative_control_register_cap_makes_spills(toolchain):
    # 32 live floats under a 16-register cap: ptxas must spill, and the check must say so
    r = cc.compile_source(MANY_LIVE, "sm_80", toolchain, ["-maxrregcount=16"])
    assert r.ok, r.log
    res = r.resources["many_live"]
    assert res.spill_stores > 0 and res.spill_loads > 0
    assert any("spills" in p for p in cc.resource_problems("many_live", res))
    relaxed = cc.compile_source(MANY_LIVE, "sm_80", toolchain)
    assert cc.resource_problems("many_live", relaxed.resources["many_live"]) == []


def test_compile_error_is_a_result_with_the_log(toolchain):
    r = cc.compile_source(PRELUDE + "__global__ void broken(float* y) { y[0] = undeclared; }\n", "sm_80",
                          toolchain)
    assert not r.ok and "undeclared" in r.log and r.cubin is None
    with pytest.raises(ValueError, match="no SASS"):
        r.sass_text(toolchain)


def test_cache_hits_on_the_second_compile_and_keys_on_flags(toolchain, tmp_path):
    first = cc.compile_source(GOOD_INT8, "sm_80", toolchain, cache=tmp_path)
    second = cc.compile_source(GOOD_INT8, "sm_80", toolchain, cache=tmp_path)
    assert not first.cached and second.cached
    assert second.resources == first.resources and second.key == first.key
    other = cc.compile_source(GOOD_INT8, "sm_90", toolchain, cache=tmp_path)
    assert other.key != first.key and not other.cached
    flags = cc.nvcc_flags("sm_80")
    assert cc.cache_key(GOOD_INT8, flags, "v1") != cc.cache_key(GOOD_INT8, flags, "v2")


def test_nvcc_and_cuobjdump_keep_their_temporaries_in_a_scratch_folder(tmp_path, monkeypatch):
    """Neither in the system's temporary folder (a killed run left tmpxft_* files there) nor in the entry."""
    from harness.toolchain.finder import Toolchain
    system = stand_in_system_folder(tmp_path, monkeypatch)
    log = tmp_path / "made.log"
    nvcc = recording_tool(tmp_path / "nvcc", log, NVCC_RUN)
    cuobjdump = recording_tool(tmp_path / "cuobjdump", log, 'echo "code for sm_80"')
    tc = Toolchain(nvcc=nvcc, ptxas=nvcc, cuobjdump=cuobjdump, nvdisasm=None)
    result = cc.compile_source(GOOD_INT8, "sm_80", tc, cache=tmp_path / "entries")
    assert result.ok and result.sass_text(tc) == "code for sm_80\n"
    made = temporaries_made(log)
    assert len(made) == 2, made                 # nvcc's compile, cuobjdump's listing
    check_made_in_scratch_folders(made, tmp_path / "cache" / "nvcc", system)
    assert sorted(p.name for p in result.entry.iterdir()) == ["kernel.cu", "kernel.cubin", "result.json", "sass.txt"]


def test_parallel_compiles_of_one_source_share_one_entry(toolchain, tmp_path):
    results, errors = [], []

    def work():
        try:
            results.append(cc.compile_source(GOOD_INT8 + "// race\n", "sm_80", toolchain, cache=tmp_path))
        except Exception as exc:   # noqa: BLE001  (collected and asserted below)
            errors.append(exc)
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 3 and all(r.ok for r in results)
    assert len({r.key for r in results}) == 1
    entries = [p for p in tmp_path.iterdir()]
    assert [p.name for p in entries] == [results[0].key], "temp folders left behind or duplicate entries"


def test_golden_update_writes_the_resource_table(toolchain, tmp_path, monkeypatch, capsys):
    """`qconform golden update` compiles every lock for both archs and tabulates ptxas resources per kernel."""
    import json

    from harness.toolchain import golden
    from harness.cli import main
    from tests.toolchain.test_golden_locks import MATRIX, _fake_source

    monkeypatch.setattr(golden, "golden_matrix", lambda shapes=None: list(MATRIX))
    monkeypatch.setattr(golden, "emit", lambda fam, mode, shape: _fake_source(fam, mode, shape))
    assert main(["golden", "update", "--golden-dir", str(tmp_path)]) == 0
    assert "RESOURCES.json: written (3 file(s) x 2 arch(s)" in capsys.readouterr().out
    table = json.loads((tmp_path / golden.RESOURCES).read_text())
    row = table["files"]["fake/dequant/tiny.cu"]
    assert row["sha256"] == golden.sha256_text((tmp_path / "fake/dequant/tiny.cu").read_text())
    for arch in cc.DEFAULT_ARCHS:
        res = row["archs"][arch]["fake_copy_dequant"]
        assert res["registers"] > 0 and res["stack_frame"] == 0 and res["spill_stores"] == 0
    assert table["nvcc"] in toolchain.version
    assert golden.check(tmp_path).warnings == []
    rows = list(golden.iter_resource_rows(golden.load_resources(tmp_path)))
    assert len(rows) == 3 * 2 and {r[1] for r in rows} == set(cc.DEFAULT_ARCHS)
    (tmp_path / golden.RESOURCES).write_text(json.dumps({**table, "files": {}}))
    assert "stale" in golden.check(tmp_path).warnings[0]


def test_nvdisasm_fallback_reads_the_same_properties(sass_toolchain, tmp_path):
    import dataclasses
    if sass_toolchain.cuobjdump is None or sass_toolchain.nvdisasm is None:
        pytest.skip("needs both cuobjdump and nvdisasm to compare them")
    via_cuobjdump = cc.compile_source(GOOD_INT8, "sm_90", sass_toolchain)
    only_nvdisasm = dataclasses.replace(sass_toolchain, cuobjdump=None)
    via_nvdisasm = cc.compile_source(GOOD_INT8, "sm_90", only_nvdisasm, cache=tmp_path / "b")
    a = cc.sass_properties(via_cuobjdump.sass(sass_toolchain)["good_int8"])
    b = cc.sass_properties(via_nvdisasm.sass(only_nvdisasm)["good_int8"])
    assert a == b and a["idp4a"] and a["ldg128"]
