"""The GPU backend's pure-numpy parts: source preparation, argument checks, guard bands, poison bookkeeping."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends.base import POISON_BYTES, check_flags
from harness.backends.args import BufferArg, ScalarArg, plan_args
from harness.backends.gpu import (
    ResidentArg, TimingPlan, check_timing, device_index_for_worker, prepare_source, runs_disagree,
    timing_note, timing_summary, unwritten_report,
)
from harness.backends.base import Buffer
from cudasrc.signatures import kernel_signatures

SRC = """
__global__ void scale(const float* __restrict__ x, float* y, const signed char* q, int n, float s) { }
__global__ void vec4(const int4* a, float4* b, __half h) { }
"""
SIG = {s.name: s for s in kernel_signatures(SRC)}


# -- source preparation ---------------------------------------------------------------------------------
def test_prepare_gives_each_kernel_c_linkage_on_its_own_line():
    text = prepare_source(SRC)
    assert text.count('extern "C" __global__') == 2
    # Line numbers are kept: the kernel lines sit where they were, after the fp16 prelude's #line 1.
    body = text.split("#line 1\n", 1)[1]
    assert [i for i, ln in enumerate(body.splitlines()) if "__global__" in ln] == \
           [i for i, ln in enumerate(SRC.splitlines()) if "__global__" in ln]


def test_prepare_leaves_template_kernels_without_c_linkage_whatever_stands_between():
    src = ("template <int N> __launch_bounds__(N) __global__ void a(float* y) {}\n"
           "template <int N>\n__block_size__((N, 1, 1))\n__global__ void b(float* y) {}\n"
           "template __global__ void a<4>(float*);\n__global__ void c(float* y) {}\n"
           "template <int N>\n#if !defined(GGML_USE_HIP)\n__launch_bounds__(N, 1)\n#endif // GGML_USE_HIP\n"
           "static __global__ void d(float* y) {}\n")
    text = prepare_source(src)
    assert text.count('extern "C"') == 1 and 'extern "C" __global__ void c' in text


def test_prepare_adds_fp16_header_only_when_half_is_used_and_not_included():
    assert prepare_source(SRC).startswith("#include <cuda_fp16.h>\n#line 1\n")
    plain = "__global__ void k(float* y) { y[0] = 1.f; }"
    assert "#include" not in prepare_source(plain)
    included = "#include <cuda_fp16.h>\n__global__ void k(__half* y) { }"
    assert prepare_source(included).count("cuda_fp16.h") == 1


def test_prepare_leaves_existing_c_linkage_and_templates_alone():
    src = 'extern "C" __global__ void a() {}\ntemplate <int N>\n__global__ void b() {}\n'
    text = prepare_source(src)
    assert text.count('extern "C"') == 1 and "template <int N>\n__global__" in text


def test_prepare_after_an_include_line_is_not_mistaken_for_a_template():
    text = prepare_source("#include <cuda_fp16.h>\n__global__ void k(__half* y) { }\n")
    assert 'extern "C" __global__ void k' in text


def test_flags_must_be_strings_each_with_its_value():
    # one validator for both backends (harness.backends.base.check_flags)
    assert check_flags(["-O3", "-lineinfo", "-Iinclude"]) == ("-O3", "-lineinfo", "-Iinclude")
    for bad in ("-O3", [3], [""], ["include"]):
        with pytest.raises(ValueError, match="flags"):
            check_flags(bad)
    # `-I`, `DIR` as two strings: the headers there would be compiled but not be part of the build's key
    with pytest.raises(ValueError, match=r"flags: '-I' needs its value in the same string"):
        check_flags(["-I", "include"])


# -- arguments ------------------------------------------------------------------------------------------
def _scale_args(n=8):
    return [np.ones(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.int8), np.int32(n), np.float32(2)]


def test_plan_classifies_buffers_and_scalars():
    plan = plan_args(SIG["scale"], _scale_args(), outputs=(1,))
    assert [type(p) for p in plan] == [BufferArg, BufferArg, BufferArg, ScalarArg, ScalarArg]
    assert [p.is_output for p in plan[:3]] == [False, True, False]
    assert plan[3].value.dtype == np.int32


@pytest.mark.parametrize("index, bad, rule", [
    (3, 8, "numpy scalar of dtype int32"),                       # Python int instead of np.int32
    (3, np.int64(8), "numpy scalar of dtype int32"),              # wrong width
    (4, np.float64(2), "numpy scalar of dtype float32"),
    (0, np.ones(8, np.float64), "dtype float32"),                 # pointee mismatch
    (2, np.zeros(8, np.uint8), "dtype int8"),
    (1, np.zeros((8, 2), np.float32)[:, 0], "C-contiguous"),
    (0, np.float32(1), "pass a numpy array"),
])
def test_plan_rejects_mismatched_arguments_naming_them(index, bad, rule):
    args = _scale_args()
    args[index] = bad
    with pytest.raises(ValueError, match=rf"args\[{index}\].*{rule}"):
        plan_args(SIG["scale"], args, outputs=(1,))


def test_plan_rejects_bad_outputs_and_counts():
    with pytest.raises(ValueError, match="takes 5 parameters"):
        plan_args(SIG["scale"], _scale_args()[:4], outputs=())
    with pytest.raises(ValueError, match="const pointer"):
        plan_args(SIG["scale"], _scale_args(), outputs=(0,))
    with pytest.raises(ValueError, match="passed by value"):
        plan_args(SIG["scale"], _scale_args(), outputs=(3,))
    with pytest.raises(ValueError, match="not an argument index"):
        plan_args(SIG["scale"], _scale_args(), outputs=(5,))
    with pytest.raises(ValueError, match="listed twice"):
        plan_args(SIG["scale"], _scale_args(), outputs=(1, 1))
    frozen = _scale_args()
    frozen[1].flags.writeable = False
    with pytest.raises(ValueError, match=r"args\[1\].*writeable"):
        plan_args(SIG["scale"], frozen, outputs=(1,))


def test_vector_pointees_need_whole_vectors():
    ok = [np.zeros(8, np.int32), np.zeros(8, np.float32), np.float16(1)]
    assert len(plan_args(SIG["vec4"], ok, outputs=(1,))) == 3
    with pytest.raises(ValueError, match=r"args\[0\].*multiple"):
        plan_args(SIG["vec4"], [np.zeros(6, np.int32), *ok[1:]], outputs=(1,))


# -- guard bands and poison -----------------------------------------------------------------------------
def _buf(arr):
    return BufferArg(1, "y", "float*", arr, True)


def test_unwritten_needs_poison_in_every_run():
    arr = np.zeros((3, 4), np.float32)
    a, b = np.zeros(arr.nbytes, np.uint8), np.zeros(arr.nbytes, np.uint8)
    a[4 * 6:4 * 7] = POISON_BYTES[0]    # element 6 = (1, 2) unwritten in both runs
    b[4 * 6:4 * 7] = POISON_BYTES[1]
    a[4 * 9:4 * 10] = POISON_BYTES[0]   # element 9 holds pattern A only in run A: it was written in run B
    msg = unwritten_report(_buf(arr), [a, b])
    assert "1 of 12" in msg and "(1, 2)" in msg
    b[4 * 6:4 * 7] = 0                  # negative control: written in run B, so not unwritten
    assert unwritten_report(_buf(arr), [a, b]) is None


def test_runs_disagree_flags_values_that_depend_on_prior_contents():
    arr = np.zeros(4, np.float32)
    a = np.zeros(16, np.uint8)
    b = a.copy()
    assert runs_disagree(_buf(arr), [a, b]) is None
    b[8] = 1
    assert "flat index 2" in runs_disagree(_buf(arr), [a, b])


def test_timing_validation():
    assert check_timing(None, 75.0) is None
    assert check_timing((2, 5), 75.0) == TimingPlan(batches=2, launches=5, warmup_ms=75.0)
    for bad in ((1,), (-1, 3), (0, 5), (3, 0), (1.5, 2), "3", (True, 2)):
        with pytest.raises(ValueError, match="timing"):
            check_timing(bad, 75.0)


def test_timing_summary_is_the_per_launch_median_and_spread():
    plan = TimingPlan(batches=5, launches=10, warmup_ms=50.0)
    s = timing_summary([10.0, 12.0, 11.0, 30.0, 9.0], plan, 51.2, 40)
    assert s["per_launch_ms"] == pytest.approx(1.1) and s["min_ms"] == pytest.approx(0.9)
    assert s["max_ms"] == pytest.approx(3.0) and s["spread"] == pytest.approx(2.1 / 1.1)
    assert s["warmup_launches"] == 40 and s["batches"] == 5 and s["launches_per_batch"] == 10
    assert "median of 5 batches of 10" in timing_note(s) and "spread 190.9%" in timing_note(s)
    assert timing_note({"skipped": "timing skipped: busy"}) == "timing skipped: busy"


def test_resident_buffers_are_planned_in_place_with_their_dtype_checked():
    y = Buffer("y", (8,), np.dtype(np.float32), 7)
    args = _scale_args()
    args[1] = y
    with pytest.raises(ValueError, match=r"args\[1\].*pass a numpy array, got Buffer"):
        plan_args(SIG["scale"], args, outputs=(1,))          # a backend without resident buffers
    plan = plan_args(SIG["scale"], args, outputs=(1,), resident_ok=True)
    assert isinstance(plan[1], ResidentArg) and plan[1].is_output and plan[1].nbytes == 32
    assert "resident buffer 'y'" in plan[1].what
    args[1] = Buffer("y", (8,), np.dtype(np.int32), 8)
    with pytest.raises(ValueError, match=r"args\[1\].*float32"):
        plan_args(SIG["scale"], args, outputs=(1,), resident_ok=True)
    args = _scale_args()
    args[0] = Buffer("x", (8,), np.dtype(np.float32), 9)
    with pytest.raises(ValueError, match="const pointer"):
        plan_args(SIG["scale"], args, outputs=(0,), resident_ok=True)
    args[1] = args[0]
    with pytest.raises(ValueError, match="args\\[0\\] and args\\[1\\] are the same resident buffer 'x'"):
        plan_args(SIG["scale"], args, outputs=(), resident_ok=True)


# -- device choice --------------------------------------------------------------------------------------
def test_device_per_xdist_worker_and_override():
    assert device_index_for_worker(4, {}) == 0
    assert device_index_for_worker(4, {"PYTEST_XDIST_WORKER": "gw6"}) == 2
    assert device_index_for_worker(4, {"PYTEST_XDIST_WORKER": "gw6", "QCONFORM_GPU": "1"}) == 1
    for bad in ("4", "x", "-1"):
        with pytest.raises(ValueError, match="QCONFORM_GPU"):
            device_index_for_worker(4, {"QCONFORM_GPU": bad})


def test_prepare_gives_c_linkage_where_cpp_allows_it_and_nowhere_else():
    """`static` kernels (`static extern "C"` is no C++, and nvcc mangles a static kernel's symbol whatever its
    linkage) and overloads keep C++ linkage (the module finds their mangled symbols: tests/toolchain/test_cubin.py);
    `extern "C"` goes before the declaration's specifiers, on its line."""
    from harness.backends.gpu import c_linkage
    src = ("static __global__ void a(int* x) { }\n__global__ static void b(int* x) { }\nvoid __global__ c(int* x) { }\n"
           "__global__ void o(int* x) { }\n__global__ void o(float* x) { }\n}\n__global__ void d(int* x) { }\n"
           'extern "C" __global__ void e(int* x) { }\n')
    text = prepare_source(src)
    assert text.splitlines() == ["static __global__ void a(int* x) { }", "__global__ static void b(int* x) { }",
                                 'extern "C" void __global__ c(int* x) { }', "__global__ void o(int* x) { }",
                                 "__global__ void o(float* x) { }", "}", 'extern "C" __global__ void d(int* x) { }',
                                 'extern "C" __global__ void e(int* x) { }']
    assert sorted(c_linkage(src)) == [3, 7, 8]
