"""ci/score_race_suite.py and its adapters (ci/race_suites) on a miniature suite laid out like Indigo3 (written here, not copied from it): labels
from file names, device code extracted from a whole program (host functions and includes), inputs from a
seeded CSR graph, and the summary's counts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci.race_suites import gpuverify, indigo
from ci.race_suites.run import inline_includes


HEADER = r"""
#include <stdio.h>
typedef struct ECLgraph { int nodes; int edges; int* nindex; int* nlist; int* eweight; } ECLgraph;
static int host_helper(int x) { return printf("%d", x); }
int main(int argc, char* argv[]) { cudaMalloc(0, 0); kernel<<<1, 1>>>(); return host_helper(argc); }
"""

KERNEL = r"""
typedef int data_type;
static const int ThreadsPerBlock = 64;
#include "toy_cuda.h"
static __global__ void relax(const ECLgraph g, data_type* const dist, const int iter)
{
  const int v = threadIdx.x + blockIdx.x * ThreadsPerBlock;
  if (v < g.nodes) {
    for (int e = g.nindex[v]; e < g.nindex[v + 1]; e++) {
      const int n = g.nlist[e];
      %s
    }
  }
}
static double host_driver(const ECLgraph g) { relax<<<1, ThreadsPerBlock>>>(g, 0, 1); return 0.0; }
"""
RACY = "dist[n] = dist[n] + 1;      // plain read-modify-write of a neighbour's counter: lost updates on a GPU"
ATOMIC = "atomicAdd(&dist[n], 1);"


@pytest.fixture()
def suite(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "toy_cuda.h").write_text(HEADER)
    d = tmp_path / "generatedCodes" / "CUDA" / "TOY-CUDA"
    d.mkdir(parents=True)
    (d / "TOY_CUDA_V_RaceBug_NoBoundsBug.cu").write_text(KERNEL % RACY)
    (d / "TOY_CUDA_V_NoRaceBug_NoBoundsBug.cu").write_text(KERNEL % ATOMIC)
    (d / "TOY_CUDA_V_RaceBug_BoundsBug.cu").write_text(KERNEL % RACY)     # another bug: not scored
    return tmp_path


def test_labels_and_device_code(suite):
    assert indigo.label_of(Path("A_RaceBug_NoSyncBug.cu")) == "racy"
    assert indigo.label_of(Path("A_NoRaceBug_SyncBug.cu")) == "racy"
    assert indigo.label_of(Path("A_NoRaceBug_NoSyncBug.cu")) == "race-free"
    assert indigo.label_of(Path("A_RaceBug_BoundsBug.cu")) is None
    path = next((suite / "generatedCodes" / "CUDA" / "TOY-CUDA").glob("*_RaceBug_NoBoundsBug.cu"))
    full = inline_includes(path, (suite / "lib",))
    dev = indigo.device_code(full)
    assert "host_helper" in full and "int main" in full
    assert "printf" not in dev and "cudaMalloc" not in dev and "<<<" not in dev and "host_driver" not in dev
    assert "__global__ void relax" in dev and "typedef struct ECLgraph" in dev
    assert dev.count("\n") == full.count("\n")       # line numbers of the kernels stay true


def test_scores_the_miniature_suite(scorer, suite, tmp_path, capsys):
    out = tmp_path / "verdicts.json"
    assert scorer.main([str(suite), "--per-label", "5", "--out", str(out), "--timeout", "60"]) == 0
    records = {r["file"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"TOY_CUDA_V_RaceBug_NoBoundsBug.cu", "TOY_CUDA_V_NoRaceBug_NoBoundsBug.cu"}
    # Fibers never preempt, so no schedule loses an update: only the happens-before detector sees this race.
    assert records["TOY_CUDA_V_RaceBug_NoBoundsBug.cu"]["verdict"] == "race"
    assert records["TOY_CUDA_V_RaceBug_NoBoundsBug.cu"]["fault"] == "DataRace"
    assert records["TOY_CUDA_V_NoRaceBug_NoBoundsBug.cu"]["verdict"] == "clean"
    summary = capsys.readouterr().out
    assert "racy: 1 selected, 1 ran, race reported on 1 (recall 100.0%)" in summary
    assert "race-free: 1 selected, 1 ran, race reported on 0 (false alarms 0.0%)" in summary
    with pytest.raises(SystemExit):          # never overwrites a result file
        scorer.main([str(suite), "--out", str(out)])


# ---- GPUVerify's layout (testsuite/CUDA/<test>/kernel.cu): example files written here -------------------------
GV_RACE_FREE = """//pass
//--blockDim=[8,4] --gridDim=2 -DSTRIDE=3 --no-inline

__global__ void scale(float* out, int n) {
  __requires(n == 32);
  int i = blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  for (int k = 0; __invariant(k >= 0), __invariant(__implies(__enabled(), k <= STRIDE)), k < STRIDE; k++) {
    if (i < 2 * n) out[i * STRIDE + k] = 2.0f * k;
  }
  __assert(i >= 0);
}
"""
GV_RACY = """//xfail:NOT_ALL_VERIFIED
//--blockDim=16 --gridDim=1
//kernel.cu:6:3: error: possible write-write race on last
//Write by thread [\\d]+

__global__ void keep_last(int* last, const int* x) {
  last[0] = x[threadIdx.x];      // every thread, different values: the kind GPUVerify reports
}
"""


GV_STRIDED = """//pass
//--blockDim=32 --gridDim=1

__global__ void spread(float* a, int n) {
  __requires(n == %d);
  a[threadIdx.x * (n / 32)] = 1.0f;       // the host program allocates n elements; the script does not know
}
"""
GV_ONE_VALUE = """//xfail:NOT_ALL_VERIFIED
//--blockDim=64 --gridDim=1
//kernel.cu:9:23: error: possible write-write race on y
//Write by thread [\\d]+

__global__ void stamp(int* y, int at) {
  __requires(at >= 1);
  __requires(at < 200);
  if (threadIdx.x == 63) y[63] = 63;    // meets thread 0's header stamp at one value of `at` only
  if (threadIdx.x == 0) y[at] = -1;
}
"""


def test_gpuverify_headers():
    h = gpuverify.read_header(GV_RACE_FREE)
    assert h["label"] == "race-free" and h["reason"] is None
    assert h["block"] == (8, 4, 1) and h["grid"] == (2, 1, 1)
    assert h["defines"] == {"STRIDE": "3"} and h["flags"] == ["--no-inline"] and h["expected"] == []
    r = gpuverify.read_header(GV_RACY)
    assert r["label"] == "racy" and r["block"] == (16, 1, 1) and len(r["expected"]) == 2
    # the comment before the code counts too (GPUVerify's tester stops its expected lines at a blank line)
    note = "//XFAIL:NOT_ALL_VERIFIED\n//--gridDim=1 --blockDim=2\n\n//This kernel is racy.\n__global__ void k() {}\n"
    assert gpuverify.read_header(note)["label"] == "racy"
    cases = {  # header -> (label, words of the reason)
        "//xfail:NOT_ALL_VERIFIED\n//--blockDim=4 --gridDim=1\n//error: possible null pointer access\n":
            (None, "another error than a race"),
        "//xfail:NOT_ALL_VERIFIED\n//--blockDim=4 --gridDim=1\n//\n": (None, "no expected text"),
        "//xfail:NOT_ALL_VERIFIED\n//--blockDim=4 --gridDim=1\n\n// memset here is not-racy\n": (None, "another"),
        "//xfail:BUGLE_ERROR\n//--blockDim=4 --gridDim=1\n//This kernel is racy.\n": (None, "tool chain"),
        "//pass\n//--gridDim=1 --blockDim=2 --only-divergence\n": (None, "--only-divergence"),
        "//PASS\n//--gridDim=[1,2,3] --blockDim=2 --warp-sync=32\n": ("race-free", None),
    }
    for text, (label, words) in cases.items():
        got = gpuverify.read_header(text)
        assert got["label"] == label, text
        assert words is None and got["reason"] is None or words in got["reason"], (text, got["reason"])
    assert gpuverify.read_header("//pass\n//--gridDim=[1,2,3] --blockDim=2\n")["grid"] == (1, 2, 3)
    for bad, match in [("//verified\n//--blockDim=1 --gridDim=1\n", "neither //pass"),
                       ("//pass\n//--blockDim=2\n", "no --gridDim"), ("//pass\n", "line 2"),
                       ("//pass\n//--blockDim=[1,2,3,4] --gridDim=1\n", "--blockDim")]:
        with pytest.raises(ValueError, match=match):
            gpuverify.read_header(bad)


def test_gpuverify_annotations_and_preconditions():
    import numpy as np
    from cudasrc.signatures import kernel_signatures
    code = gpuverify.device_source(GV_RACE_FREE)
    assert "__invariant" not in code and "__requires" not in code and "__assert" not in code
    assert code.count("\n") == GV_RACE_FREE.count("\n") and "k < STRIDE; k++" in code
    sig, = kernel_signatures(code)
    values, ignored, _ = gpuverify.scalar_values(sig, GV_RACE_FREE, (8, 4, 1), np.random.default_rng(0))
    assert values == {"n": 32} and ignored == []
    src = """typedef int (*op_t)(int);
__device__ int twice(int v) { return 2 * v; }
__global__ void k(int* a, op_t f, unsigned m, int lo, int sz) {
  __requires(f == twice | f == 0);
  __requires(__implies(__enabled(), m < 5));
  __requires(lo >= 100);
  __requires(lo <= 103);
  __requires(sz == blockDim.y);
  __requires(__other_int(m) == m);
}"""
    sig, = kernel_signatures(src)
    values, ignored, domains = gpuverify.scalar_values(sig, src, (2, 7, 1), np.random.default_rng(1))
    assert values["f"] == "twice" and 1 <= values["m"] <= 4 and 100 <= values["lo"] <= 103 and values["sz"] == 7
    assert domains == {"lo": range(100, 104)}      # bounded on both sides: swept; `m < 5` alone is not
    assert ignored == ["__other_int(m) == m"]
    src = """__global__ void k(float* a, int n, unsigned w, int q) {
  __requires(n == blockDim.x*2);
  __requires(__is_pow2(n));
  __requires(w == 32*8);
  __requires(q == gridDim.x * blockDim.y);
  __requires(__is_pow2(q));
}"""
    arith, = kernel_signatures(src)
    chosen, unhonoured, _ = gpuverify.scalar_values(arith, src, (32, 2, 1), np.random.default_rng(2), (3, 1, 1))
    assert chosen == {"n": 64, "w": 256, "q": 6} and unhonoured == ["__is_pow2(q)"]   # 6 is not a power of two
    assert "__device__ op_t __qconform_gv_k_f = twice;" in gpuverify.function_pointer_symbols(sig, values)
    # a power of two drawn as one, an order between two scalars made to hold; the template's body is found past
    # its prototype and its explicit instantiation (a precondition read from another function's body would not)
    src = """template <int D> __global__ void k(unsigned* d, unsigned stride, unsigned N);
template __global__ void k<1>(unsigned* d, unsigned stride, unsigned N);
__device__ unsigned other(unsigned x) { return x; }
template <int D> __global__ void k(unsigned* d, unsigned stride, unsigned N) {
  __requires((stride & (stride - 1)) == 0);
  __requires(stride < N);
  __requires(stride > 1);
}"""
    inst, = kernel_signatures(src)
    for seed in range(20):
        got, unhonoured, swept = gpuverify.scalar_values(inst, src, (32, 1, 1), np.random.default_rng(seed))
        s, n = got["stride"], got["N"]
        assert s > 1 and s & (s - 1) == 0 and s < n and unhonoured == [] and swept == {}, got
    opaque, = kernel_signatures(src.replace("unsigned stride", "opaque_t stride"))  # an unknown type: no value to order
    assert "stride < N" in gpuverify.scalar_values(opaque, src, (32, 1, 1), np.random.default_rng(0))[1]
    why = gpuverify.unrunnable(gpuverify.read_header("//pass\n//--blockDim=2048 --gridDim=1\n"), "")
    assert "2048 threads per block" in why
    header = gpuverify.read_header("//pass\n//--blockDim=2 --gridDim=1\n")
    assert "__axiom" in gpuverify.unrunnable(header, "__axiom(blockIdx.x == 1);\n__global__ void k() {}")
    assert gpuverify.unrunnable(     # an arbitrary result gets a body (arbitrary_results); a struct result does not
        header, "__device__ int nondet(void);\n__global__ void k(int* a) { while (nondet()) { a[0] = 1; } }") is None
    assert "declared, never defined, and returns 'struct S'" in gpuverify.unrunnable(
        header, "struct S { int a; };\n__device__ struct S pick(void);\n__global__ void k() { pick(); }")
    assert gpuverify.unrunnable(header, "__device__ int one(void);\n__device__ int one(void) { return 1; }") \
        is None
    assert "MTGP32" in gpuverify.unrunnable(header, "__global__ void k(curandStateMtgp32_t* s) {}")
    assert gpuverify.unrunnable(header, "__global__ void k(curandState* s) {}") is None


def test_gpuverify_implicit_includes():
    """GPUVerify's front end declares cooperative groups and cuRAND: a file using them gets the includes in place
    of its leading (comment) lines, so its line numbers stay."""
    code = "\n\n__global__ void k(curandState* s, float* a) { a[0] = curand_uniform(s); " \
           "cooperative_groups::this_thread_block().sync(); }\n"
    lines = gpuverify.implicit_includes(code).split("\n")
    assert lines[:2] == ["#include <cooperative_groups.h>", "#include <curand_kernel.h>"] and lines[2:] == \
        code.split("\n")[2:]
    assert gpuverify.implicit_includes("#include <curand_kernel.h>\ncurand(s);") == \
        "#include <curand_kernel.h>\ncurand(s);"                    # already included: unchanged
    with pytest.raises(ValueError, match="line 1 is not empty"):
        gpuverify.implicit_includes("int x; curand(s);")


def test_scores_a_miniature_gpuverify_suite(scorer, tmp_path, capsys):
    root = tmp_path / "testsuite" / "CUDA"
    files = {"scale": GV_RACE_FREE, "keep_last": GV_RACY,
             "fixed": GV_RACY.replace("last[0] = x[threadIdx.x];", "if (threadIdx.x == 0) last[0] = x[0];"),
             "same": GV_RACY.replace("last[0] = x[threadIdx.x];", "last[0] = 7;"),
             "lock_step": "//pass\n//--blockDim=32 --gridDim=1 --warp-sync=32\n\n"
                          "__global__ void rotate(int* a) { a[threadIdx.x] = a[(threadIdx.x + 1) % 32]; }\n",
             "dynamic": "//pass\n//--blockDim=32 --gridDim=1\n\n__global__ void rotate(float* a) {\n"
                        "  extern __shared__ float s[];\n  s[threadIdx.x] = a[threadIdx.x];\n  __syncthreads();\n"
                        "  a[threadIdx.x] = s[(threadIdx.x + 1) % 32];\n}\n",
             "strided": GV_STRIDED % 300_000, "too_far": GV_STRIDED % 20_000_000,
             "one_value": GV_ONE_VALUE, "one_value_fixed": GV_ONE_VALUE.replace("y[63] = 63;", "y[255] = 63;"),
             "nullptr": "//xfail:NOT_ALL_VERIFIED\n//--blockDim=4 --gridDim=1\n//null pointer access\n\n"
                        "__global__ void k(int* a) { a[0] = 0; }\n",
             "host_call": "//pass\n//--blockDim=4 --gridDim=1\n\n#include <stdlib.h>\n"
                          "__global__ void k(int* a) { a[0] = system(\"true\"); }\n"}
    for name, text in files.items():
        (root / name).mkdir(parents=True)
        (root / name / "kernel.cu").write_text(text)
    out = tmp_path / "verdicts.json"
    assert scorer.main([str(tmp_path), "--race-check", "on", "--out", str(out), "--timeout", "60"]) == 0
    records = {r["file"]: r for r in json.loads(out.read_text())["records"]}
    assert records["keep_last"]["verdict"] == "race" and records["keep_last"]["fault"] == "DataRace"
    assert not records["keep_last"]["same_value"] and records["same"]["same_value"]    # GPUVerify's "benign" kind
    assert records["fixed"]["label"] == "racy" and records["fixed"]["verdict"] == "clean"   # negative control
    swept = records["one_value"]["kernels"]["stamp"]       # the precondition's domain [1, 200) swept: found at 63
    assert records["one_value"]["verdict"] == "race" and swept["at"] == {"at": 63} and swept["points"] == 1 + 63
    fixed = records["one_value_fixed"]["kernels"]["stamp"]     # the twin's slot 255 lies outside the domain
    assert records["one_value_fixed"]["verdict"] == "clean" and fixed["points"] == 1 + 199 and fixed["at"] == {}
    assert records["scale"]["verdict"] == "clean" and records["scale"]["kernels"]["scale"]["block"] == [8, 4, 1]
    assert records["nullptr"]["verdict"] == "not scored"
    assert records["host_call"]["verdict"] == "unsupported" and records["host_call"]["fault"] == "BuildError"
    summary = capsys.readouterr().out
    assert "racy: 5 selected, 5 ran, race reported on 3 (recall 60.0%)" in summary
    assert "DataRace only, racy: 3 of 5 that ran (60.0%); 1 of them only same-value stores" in summary
    assert ("(GPUVerify: same-value stores benign, and stores of the value a racing read saw; with --warp-sync also "
            "races within one warp): racy 2 of 5 (40.0%), "
            "race-free 0 of 5 (0.0%)" in summary)
    assert records["lock_step"]["verdict"] == "race" and records["lock_step"]["warp_scope"]   # lanes of one warp
    assert not records["one_value"]["warp_scope"]             # thread 63 is in warp 1
    # buffers grown to cover the element reached (2^19 >= 31 * 9375 + 1), then clean; past 2^24 the fault stands
    assert records["strided"]["verdict"] == "clean" and records["strided"]["buffers_grown_to"] == 1 << 19
    # far past the end: a crash beyond the guard pages grows the buffer it is nearest to as well, up to 2^24
    # elements; thread 27's element lies past that, and the OutOfBounds stands
    assert records["too_far"]["verdict"] == "fault" and records["too_far"]["fault"] == "OutOfBounds"
    assert records["too_far"]["buffers_grown_to"] == 1 << 24
    beyond = {"kernels": {"k": {"fault": "KernelCrash", "detail": "SIGSEGV (write at address 0x7f00, outside every "
                                "device buffer of the launch; the nearest is 'a' (arg 0, 131072 x float32), 3000000 "
                                "bytes after it)"}}}
    assert gpuverify.grown_size(beyond, 1 << 17) == 1 << 20          # element 881072: 6.7 x, rounded up to 8 x
    past = {"kernels": {"k": {"fault": "OutOfBounds", "detail": "read of 'a' (arg 0, 131072 x float32) 4 byte(s) "
                                                                  "past its end (element 300000 of 131072)"}}}
    assert gpuverify.grown_size(past, 1 << 17) == 1 << 19             # 3 x the buffer: rounded up to 4 x
    assert gpuverify.grown_size(past, 1 << 23) is None                  # 2^25 would pass GV_MAX_ELEMENTS
    past["kernels"]["k"]["fault"] = "DataRace"
    assert gpuverify.grown_size(past, 1 << 17) is None
    # extern __shared__: the launch gets 48 KiB of it (without, the first store is past the end of the area)
    assert records["dynamic"]["verdict"] == "clean" and records["dynamic"]["kernels"]["rotate"]["shared_bytes"] == 49152
    assert "race-free: 6 selected, 5 ran, race reported on 1 (false alarms 20.0%)" in summary
    assert "not scored x1: xfail:NOT_ALL_VERIFIED for another error than a race" in summary


def test_a_gpuverify_benchmarks_layout_and_an_adapter_failure(scorer, tmp_path, capsys):
    """GPUVerifyBenchmarks keeps several labelled .cu files per folder (named by their path without .cu) and
    unlabelled ones beside them (not scored); an apostrophe in a comment does not derail the adapter, and a file
    the adapter itself cannot read (unbalanced braces) is `unchecked` (HarnessError) while the run goes on."""
    sdk = tmp_path / "CUDA50" / "0_Simple" / "demo"
    sdk.mkdir(parents=True)
    (sdk / "copy.cu").write_text("//pass\n//--blockDim=[32,1] --gridDim=[2,1]\n\n// don't trip on quotes\n"
                                 "__global__ void copy(float* y, const float* x) {\n"
                                 "  int i = blockIdx.x * blockDim.x + threadIdx.x; y[i] = x[i];\n}\n")
    (sdk / "broken.cu").write_text("//pass\n//--blockDim=[32,1] --gridDim=[1,1]\n\n"
                                   "__global__ void broken(float* y) {\n  y[0] = 1;\n")          # no closing brace
    (sdk / "helper.cu").write_text("__global__ void unlabelled(float* y) { y[0] = 1; }\n")
    out = tmp_path / "verdicts.json"
    assert scorer.main([str(tmp_path), "--race-check", "on", "--out", str(out), "--timeout", "60"]) == 0
    records = {r["file"]: r for r in json.loads(out.read_text())["records"]}
    assert sorted(records) == ["CUDA50/0_Simple/demo/broken", "CUDA50/0_Simple/demo/copy"]
    assert records["CUDA50/0_Simple/demo/copy"]["verdict"] == "clean"
    broken = records["CUDA50/0_Simple/demo/broken"]
    assert broken["verdict"] == "unchecked" and broken["fault"] == "HarnessError", broken


FAIAL_FILES = {     # written here in the form of faial's examples/drf (its test.ml labels each entry)
    "racy.cu": "__global__ void saxpy(float a, float *x, float *y) {\n"
               "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  y[i] = a * x[i] + y[i + 1];\n}\n",
    "drf.cu": "__global__ void saxpy(float a, float *x, float *y) {\n"
              "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  y[i] = a * x[i] + y[i];\n}\n",
    "same.cu": "__global__ void saxpy(float *x, float *y) {\n  int i = threadIdx.x;\n  y[0] = 0;\n"
               "  y[i + 1] = x[i];\n}\n",
    "blocks.cu": "//pass\n//--blockDim=32 --gridDim=2\n__global__ void saxpy(float *x, float *y) {\n"
                 "  y[threadIdx.x] = x[threadIdx.x] + blockIdx.x;\n}\n",
    "param.cu": "__global__ void saxpy(int n, float *y) {\n  int i = threadIdx.x;\n"
                "  if (i < n) y[i] = y[i + 1];\n}\n",
    "enum.cu": "enum Mode { NEAR = 0, FAR };\n__global__ void saxpy(float *y, Mode mode) {\n  int i = threadIdx.x;\n"
               "  if (i % 4 == 0) y[i + mode] = 2 * y[i];\n}\n",
    "assumed.cu": "__global__ void saxpy(int n, float *y) {\n  int i = threadIdx.x;\n  assert(i < n);\n"
                  "  y[i] = 2 * y[i];\n}\n",
    "todo.cu": "__global__ void saxpy(float *y) { y[0] = threadIdx.x; }\n",
}
FAIAL_TEST_ML = """open Stage0
let tests = [
  "racy.cu", [], 1;
  "racy.cu", ["--tid1"; "0"; "--tid2"; "1"], 1;   (* steers the search only: the same case *)
  "drf.cu", [], 0;
  "same.cu", [], 0;
  "blocks.cu", [], 0;
  "blocks.cu", ["--grid-level"], 1;
  "param.cu", [], 1;
  "param.cu", ["-p"; "n=1"], 0;
  "enum.cu", [], 0;
  "assumed.cu", [], 0;
  "drf.cu", ["-DUNUSED"], 2;
]

let unsupported : Fpath.t list =
  [
    (* not checked yet *)
    "todo.cu";
  ] |> List.map (fun x -> Fpath.(v "." / x))
"""


def test_scores_a_miniature_faial_suite(scorer, tmp_path, capsys):
    from ci.race_suites import faial
    drf = tmp_path / "examples" / "drf"
    drf.mkdir(parents=True)
    for name, text in FAIAL_FILES.items():
        (drf / name).write_text(text)
    (drf / "test.ml").write_text(FAIAL_TEST_ML)
    cases = faial.suite_cases(tmp_path)
    assert [c.name for c in cases] == ["racy.cu", "drf.cu", "same.cu", "blocks.cu", "blocks.cu --grid-level",
                                       "param.cu", "param.cu -p n=1", "enum.cu", "assumed.cu", "drf.cu -DUNUSED",
                                       "todo.cu"]
    assert faial.run_options(("-p", "n=0", "--index=[0]", "--gridDim=[2,2]", "--all-levels")) == \
        ("", {"grid": (2, 2, 1)}, {}, {"n": 0}, "all")
    assert faial.run_options(("--unknown-flag",))[0] == "--unknown-flag"
    out = tmp_path / "verdicts.json"
    assert scorer.main([str(tmp_path), "--race-check", "on", "--out", str(out), "--timeout", "60"]) == 0
    records = {r["file"]: r for r in json.loads(out.read_text())["records"]}
    assert records["racy.cu"]["verdict"] == "race" and records["racy.cu"]["block"] == [1024, 1, 1]   # faial's default
    assert records["drf.cu"]["verdict"] == "clean"                                       # negative control
    assert records["same.cu"]["verdict"] == "race" and records["same.cu"]["kinds"] == [["block", "same"]]
    assert records["blocks.cu"]["kinds"] == records["blocks.cu --grid-level"]["kinds"] == [["grid", "differ"]]
    assert records["blocks.cu"]["reading"] == "faial" and records["blocks.cu --grid-level"]["reading"] == "faial --grid-level"
    swept = records["param.cu"]["kernels"]["saxpy"]          # n swept over 1..64 after the draw: a race needs n >= 2
    at = swept["at"].get("n", records["param.cu"]["scalars"]["saxpy"]["n"])      # the sweep's point, or the draw
    assert records["param.cu"]["verdict"] == "race" and at >= 2
    fixed = records["param.cu -p n=1"]           # -p fixes n: one launch, no sweep
    assert fixed["verdict"] == "clean" and fixed["scalars"]["saxpy"]["n"] == 1 and "points" not in fixed["kernels"]["saxpy"]
    assert records["enum.cu"]["verdict"] == "clean" and records["enum.cu"]["kernels"]["saxpy"]["points"] == 3
    assert records["assumed.cu"]["verdict"] == "clean"      # the assert is faial's assumption: dropped, not run
    assert records["drf.cu -DUNUSED"]["verdict"] == records["todo.cu"]["verdict"] == "not scored"
    summary = capsys.readouterr().out
    assert "DataRace only, race-free: 2 of 6 that ran (33.3%); 1 of them only same-value stores" in summary
    assert "racy 3 of 3 (100.0%), race-free 0 of 6 (0.0%)" in summary        # as faial reads a race
    assert "not scored x1: in test.ml's `unsupported` list" in summary
