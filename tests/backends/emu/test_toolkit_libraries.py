"""A kernel that includes a header of the CUDA toolkit that emu does not provide (Thrust, CUB and libcu++ beyond emu's
own copies): a CUDA build accepts it, so emu's missing header is emu's limit, `UnsupportedConstruct` (`unchecked` in
check, never `fail`), naming the header and where the toolkit has it. A header that no toolkit has stays the
source's own fault, a BuildError."""
from __future__ import annotations

import pytest

from harness.backends import BuildError, UnsupportedConstruct
from harness.backends.emu import gate, toolkit_headers
from tests.marks import needs_nvcc

KERNEL = "__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }\n"


@needs_nvcc
def test_thrust_is_a_toolkit_header_that_emu_lacks(emu):
    with pytest.raises(UnsupportedConstruct) as err:
        emu.load("#include <thrust/sort.h>\n" + KERNEL)
    assert "#include <thrust/sort.h>" in str(err.value) and "include/cccl/thrust/sort.h" in str(err.value) \
        and "--backend gpu" in str(err.value)
    with pytest.raises(UnsupportedConstruct, match="cub/device/device_reduce.cuh"):    # CUB beyond emu's subset
        emu.load("#include <cub/device/device_reduce.cuh>\n" + KERNEL)


def test_a_header_no_toolkit_has_is_the_sources_fault(emu):
    with pytest.raises(BuildError) as err:            # negative control: not excused as emu's limit
        emu.load("#include <qc_no_such_library/x.h>\n" + KERNEL)
    assert not isinstance(err.value, UnsupportedConstruct) and "qc_no_such_library/x.h" in str(err.value)


def test_without_nvcc_the_cccl_folders_are_known_by_name(monkeypatch):
    monkeypatch.setattr(gate, "nvcc_gate", lambda: (None, "no nvcc"))
    assert "CCCL" in toolkit_headers.toolkit_header("thrust/sort.h")
    assert toolkit_headers.toolkit_header("cub") is None                  # a file named cub, not the library
    assert toolkit_headers.toolkit_header("mylib/cub.cuh") is None


@needs_nvcc
def test_check_calls_such_a_kernel_unchecked(tmp_path, capsys):
    import json

    from emitters.registry import emit
    from harness.cli import main
    from reference.shapes import get_shape
    src = tmp_path / "embed.cu"
    src.write_text("#include <thrust/device_vector.h>\n" + emit("embed", None, get_shape("tiny")).code)
    rc = main(["check", "--source", str(src), "--backend", "emu", "--seed", "1", "--out", str(tmp_path / "out")])
    rows = json.loads((tmp_path / "out" / "report.json").read_text())["rows"]
    assert rc == 3 and {r["verdict"] for r in rows} == {"unchecked"}
    assert "thrust/device_vector.h" in rows[0]["reason"]


@needs_nvcc
def test_cub2s_operators_build_on_cub3(emu):
    """CUB 2's cub::Max, Min and Sum, which CUB 3 (CUDA 13) dropped: qconform gives them back ahead of every nvcc
    compile (host_libraries.CUB2_OPERATORS), so a kernel written for CUDA 12 (Kaldi's softmax since 2019) builds and
    runs, with CUB 2's results."""
    import numpy as np
    source = ("#include <cub/cub.cuh>\n__global__ void k(const float* x, float* y) {\n"
              "  typedef cub::BlockReduce<float, 64> R;\n  __shared__ R::TempStorage t;\n  float v = x[threadIdx.x];\n"
              "  float m = R(t).Reduce(v, cub::Max());\n  __syncthreads();\n  float n = R(t).Reduce(v, cub::Min());\n"
              "  __syncthreads();\n  float s = R(t).Reduce(v, cub::Sum());\n"
              "  if (threadIdx.x == 0) { y[0] = m; y[1] = n; y[2] = s; }\n}\n")
    x = np.random.default_rng(7).integers(-50, 50, 64).astype(np.float32)
    y = np.zeros(3, np.float32)
    emu.load(source).launch("k", (1,), (64,), 0, [x, y], outputs=(1,))
    assert y.tolist() == [x.max(), x.min(), x.sum()]


@needs_nvcc
def test_a_name_no_cub_of_this_toolkit_has_is_not_the_kernels_fault(emu):
    """cub::Difference, another of CUB 2's functors that CUB 3 dropped and qconform does not give back: the toolkit
    here cannot build the kernel, which says nothing of it."""
    source = ("#include <cub/cub.cuh>\n__global__ void k(float* y) {\n"
              "  y[threadIdx.x] = cub::Difference()(y[threadIdx.x], 1.0f);\n}\n")
    if "release 13" not in gate.describe():
        pytest.skip("the gate's toolkit is not CUDA 13 (its CUB may still have cub::Difference)")
    with pytest.raises(UnsupportedConstruct, match="cub::Difference is not in the CUB of the CUDA toolkit that "
                                                   "compiles here"):
        emu.load(source)


def test_both_backends_read_nvccs_other_cub_error_so():
    """The rule is in the one constructor of build errors (backends.base.build_error), which emu's gate and the GPU
    backend's nvcc compile share."""
    from harness.backends.base import build_error
    log = 'kernel.cu(5): error: namespace "cub" has no member "Sum"\n'
    assert isinstance(build_error("nvcc could not compile the source for sm_90:", log, log), UnsupportedConstruct)
    other = 'kernel.cu(5): error: identifier "undefined_thing" is undefined\n'       # negative control
    err = build_error("nvcc could not compile the source for sm_90:", other, other)
    assert isinstance(err, BuildError) and "undefined_thing" in str(err)
