"""Device functions that a verifier's test declares and never defines (GPUVerify's `nondet()`, faial's `get()`):
the verifier takes each call's result as arbitrary, and the adapters give them bodies (gpuverify.arbitrary_results)
so that such files run. Two calls return different values, so a race that needs them to differ is found, and its
twin with one call is clean; `while (nondet())` ends; a function returning a pointer stays the adapter's limit."""
from __future__ import annotations

import pytest

from ci.race_suites import gpuverify


HEAD = "//pass\n//--blockDim=64 --gridDim=2\n\n"
OFFSETS = HEAD + r"""
__device__ unsigned int get(int);

__global__ void shift(float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  %s
}
"""
CASES = {
    "two_calls": OFFSETS % "int a = get(i), b = get(i);\n  y[i + a] = y[i + b] + 1.0f;",
    "one_call": OFFSETS % "int a = get(i);\n  y[i + a] = y[i + a] + 1.0f;",
    "loops": HEAD + "__device__ char nondet();\n__device__ void touch(int);\n"
                    "__global__ void spin(int* out) {\n  int n = 0;\n  while (nondet()) { while (nondet()) ++n; touch(n); }\n"
                    "  out[blockIdx.x * blockDim.x + threadIdx.x] = n;\n}\n",
    "pointer": HEAD + "__device__ int* where();\n__global__ void k() { *where() = 1; }\n",
    # CUDA's own __saturatef declared again (boxFilter), and a declaration with an attribute and a default argument
    "declared_again": HEAD + "__device__ float __saturatef(float);\n"
                             "__device__ static __attribute__((always_inline)) unsigned sad(unsigned a, unsigned c=0);\n"
                             "__global__ void k(float* y) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "  y[i] = __saturatef(2.0f) + sad(1u);\n}\n",
    # simpleVoteIntrinsics: GPUVerify's header declared the pre-Volta votes, which CUDA's headers still have
    "votes": HEAD + "__device__ unsigned int all(unsigned int);\n__device__ unsigned int any(unsigned int);\n"
                    "__global__ void k(bool* info, int w) {\n  int tx = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "  info[tx * 2] = any(tx >= w);\n  if (all(tx >= w)) info[tx * 2 + 1] = true;\n}\n",
    # bindlessTexture's mipmap: a body-less overload returning a CUDA vector type
    "vector": HEAD + "__device__ float4 fminf(float4, float4);\n"
                     "__global__ void k(float4* y) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                     "  y[i] = fminf(y[i], make_float4(1.0f, 2.0f, 3.0f, 4.0f));\n}\n",
}



def test_two_calls_differ_so_the_race_they_make_is_found(verdicts):
    racy, twin = verdicts["two_calls"], verdicts["one_call"]
    assert racy["verdict"] == "race" and racy["fault"] == "DataRace", racy
    assert "'y'" in racy["kernels"]["shift"]["detail"]
    assert twin["verdict"] == "clean", twin       # the negative control: one offset for every thread


def test_a_loop_on_an_arbitrary_condition_ends_and_void_functions_do_nothing(verdicts):
    assert verdicts["loops"]["verdict"] == "clean", verdicts["loops"]


def test_a_function_returning_a_pointer_is_the_adapters_limit(verdicts):
    rec = verdicts["pointer"]
    assert rec["verdict"] == "unsupported" and "where() is declared, never defined, and returns 'int*'" in rec["detail"]


def test_every_threads_kth_call_gets_one_seeded_value():
    code = CASES["two_calls"]
    assert gpuverify.undefined_device_functions(code) == [("unsigned int", "get", "int")]
    a = gpuverify.arbitrary_results(code, {"block": (64, 1, 1), "grid": (2, 1, 1)}, 0)
    assert "__qconform_gv_calls[128]" in a and "unsigned int get(int) { return (unsigned int)" in a
    assert a == gpuverify.arbitrary_results(code, {"block": (64, 1, 1), "grid": (2, 1, 1)}, 0)
    assert a != gpuverify.arbitrary_results(code, {"block": (64, 1, 1), "grid": (2, 1, 1)}, 1)
    assert gpuverify.arbitrary_results(HEAD + "__global__ void k() {}\n", {"block": (1, 1, 1), "grid": (1, 1, 1)}, 0) == ""


def test_void_functions_need_no_call_counter_and_huge_grids_are_refused_by_name():
    void_only = HEAD + "__device__ void touch(int);\n__global__ void k() { touch(1); }\n"
    assert gpuverify.arbitrary_results(void_only, {"block": (1024, 1, 1), "grid": (65535, 65535, 1)}, 0) == \
        "\n__device__ void touch(int) {}\n"
    huge = gpuverify.read_header("//pass\n//--blockDim=1024 --gridDim=[65535,65535]\n")
    why = gpuverify.unrunnable(huge, CASES["two_calls"])
    assert "get() is declared, never defined, and called by 4397912294400 threads" in why
    with pytest.raises(LookupError, match="at most 16777216 threads"):
        gpuverify.arbitrary_results(CASES["two_calls"], huge, 0)


def test_cudas_own_function_declared_again_keeps_its_body_and_a_default_argument_stays_declared(verdicts):
    assert verdicts["declared_again"]["verdict"] == "clean", verdicts["declared_again"]
    code = CASES["declared_again"]
    assert gpuverify.undefined_device_functions(code) == [("unsigned", "sad", "unsigned a, unsigned c")]
    # a name only a class of emu's headers has (cooperative groups' any()) is not CUDA's function
    assert gpuverify.undefined_device_functions("__device__ int any(int);\n") == [("int", "any", "int")]



def test_a_function_returning_a_vector_gets_a_value_in_each_component(verdicts):
    rec = verdicts["vector"]
    assert rec["verdict"] == "clean", rec
    body = gpuverify.arbitrary_results("__device__ float4 fminf(float4, float4);\n__global__ void k() {}",
                                       {"block": (1, 1, 1), "grid": (1, 1, 1)}, 0)
    assert "float4 fminf(float4, float4) { float4 r;" in body and "c[i] = (E)" in body


def test_the_files_own_legacy_votes_are_called_not_cudas(verdicts):
    """With a bool argument nvcc picked CUDA's pre-Volta `any`/`all` over the file's, and ptxas refused the `vote`
    without `.sync` for sm_70 and later: the file's own get the adapters' prefix (and arbitrary results)."""
    assert verdicts["votes"]["verdict"] == "clean", verdicts["votes"]
    code = gpuverify.own_legacy_votes("__device__ unsigned int any(unsigned int);\n"
                                      "__global__ void k(bool* b) { b[0] = any(true); b[1] = many(1); }\n")
    assert f"{gpuverify.SYMBOL_PREFIX}any(unsigned int);" in code and f"= {gpuverify.SYMBOL_PREFIX}any(true)" in code
    assert "many(1)" in code
    assert gpuverify.own_legacy_votes("__device__ bool any(bool b) { return b; }\n") == \
        "__device__ bool any(bool b) { return b; }\n"          # a file's own definition stays as it is
