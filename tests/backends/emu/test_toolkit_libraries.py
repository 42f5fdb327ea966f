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
def test_cub2s_operators_leave_a_sources_own_namespace_cuda_alone(emu):
    """arrayfire's CUDA backend lives in `namespace cuda`, which its files bring in with `using namespace cuda;`
    before including the standard library. The operators' header includes nothing, so no `cuda::std` appears to
    make `std` ambiguous there (it did while the header included libcu++: "std" is ambiguous, in <vector>)."""
    emu.load("namespace cuda {\ninline __device__ int three() { return 3; }\n}\nusing namespace cuda;\n"
             "#include <vector>\n__global__ void k(int* y) { std::size_t n = three(); y[threadIdx.x] = (int)n; }\n")


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
    broken = "error: Broken module found, compilation aborted!\n"        # NVVM's verifier: nvcc's own failure
    err = build_error("nvcc could not compile the source for sm_90:", broken, broken)
    assert isinstance(err, UnsupportedConstruct) and "nvcc failed inside itself (error: Broken module found" in str(err)
    other = 'kernel.cu(5): error: identifier "undefined_thing" is undefined\n'       # negative control
    err = build_error("nvcc could not compile the source for sm_90:", other, other)
    assert isinstance(err, BuildError) and "undefined_thing" in str(err)


COMPLEX_KERNEL = r"""#include <cuComplex.h>
#include <math_functions.h>
__global__ void k(const float2* a, const float2* b, float2* prod, float2* quot, float* mag, double2* wide) {
  int i = threadIdx.x;
  prod[i] = cuCmulf(a[i], b[i]);
  quot[i] = cuCdivf(a[i], b[i]);
  mag[i] = cuCabsf(a[i]);
  wide[i] = cuCfma(cuComplexFloatToDouble(a[i]), cuComplexFloatToDouble(b[i]), make_cuDoubleComplex(1.0, -1.0));
}
"""


def test_cucomplex_computes_what_numpy_does(emu):
    """cuComplex.h (arrayfire's math includes it) on emu: products, quotients (scaled, so a huge divisor does not
    overflow), magnitudes and the double fused multiply-add, against NumPy's complex arithmetic."""
    import numpy as np
    rng = np.random.default_rng(11)
    a = rng.uniform(-4, 4, (32, 2)).astype(np.float32)
    b = rng.uniform(-4, 4, (32, 2)).astype(np.float32)
    b[0] = (3e30, -2e30)                     # |b|^2 overflows float: the plain formula would give 0 and nan
    prod, quot, wide = (np.zeros((32, 2), np.float32), np.zeros((32, 2), np.float32), np.zeros((32, 2), np.float64))
    mag = np.zeros(32, np.float32)
    emu.load(COMPLEX_KERNEL).launch("k", (1,), (32,), 0, [a, b, prod, quot, mag, wide], outputs=(2, 3, 4, 5))
    za, zb = a[:, 0] + 1j * a[:, 1].astype(np.complex128), b[:, 0] + 1j * b[:, 1].astype(np.complex128)
    for got, want in ((prod, za * zb), (quot, za / zb), (wide, za * zb + (1 - 1j))):
        assert np.allclose(got[:, 0] + 1j * got[:, 1], want, rtol=1e-5, atol=1e-36)
    assert np.all(np.isfinite(quot[0])) and np.allclose(mag, np.abs(za), rtol=1e-6)


def test_a_source_sees_a_cuda_compile(emu):
    """nvcc defines __CUDACC__ (and __NVCC__, __CUDACC_VER_MAJOR__) for the source; emu's build does too, so code
    under `#ifdef __CUDACC__` (arrayfire's includes of math_constants.h) is the code that runs. Negative control:
    the `#else` branch's value is not the one that came back."""
    import numpy as np
    y = np.zeros(4, np.int32)
    emu.load("#if defined(__CUDACC__) && defined(__NVCC__) && __CUDACC_VER_MAJOR__ >= 12\n#define BRANCH 7\n#else\n"
             "#define BRANCH 3\n#endif\n__global__ void k(int* y) { y[threadIdx.x] = BRANCH; }\n"
             ).launch("k", (1,), (4,), 0, [y], outputs=(0,))
    assert y.tolist() == [7, 7, 7, 7]


ERFINV_KERNEL = r"""__global__ void k(const double* y, float* f, float* fc, double* d, double* dc, float* q, float* p) {
  int i = threadIdx.x;
  f[i] = erfinvf((float)y[i]); fc[i] = erfcinvf((float)y[i] + 1.0f);
  d[i] = erfinv(y[i]); dc[i] = erfcinv(1.0 - y[i]);
  q[i] = normcdfinvf(0.5f * ((float)y[i] + 1.0f)); p[i] = normcdff(q[i]);
}
"""


def test_cudas_inverse_error_functions(emu):
    """erfinv, erfcinv, normcdfinv and normcdf (and their float forms), CUDA math that C's library lacks: cuRAND's
    normal generators call erfcinvf in the device code a CUDA compile (__CUDACC__) takes. Checked by their
    definitions: erf of the inverse gives the argument back, erfcinv(1 - y) == erfinv(y), the ends are infinite
    and outside the domain is NaN."""
    import math

    import numpy as np
    y = np.concatenate([np.linspace(-0.9999, 0.9999, 28), [1e-300, -1.0, 1.0, 1.5]])
    f, fc, q, p = (np.zeros(32, np.float32) for _ in range(4))
    d, dc = np.zeros(32), np.zeros(32)
    emu.load(ERFINV_KERNEL).launch("k", (1,), (32,), 0, [y, f, fc, d, dc, q, p], outputs=(1, 2, 3, 4, 5, 6))
    inside = slice(0, 29)
    assert max(abs(math.erf(x) - v) for x, v in zip(d[inside], y[inside])) <= 2.3e-16
    assert np.allclose(dc[:28], d[:28], rtol=1e-13) and dc[28] == 0.0       # 1 - 1e-300 is 1.0 in double
    yf = y.astype(np.float32)
    assert max(abs(math.erf(float(x)) - float(v)) for x, v in zip(f[inside], yf[inside])) < 1e-7
    assert max(abs(math.erfc(float(x)) - (float(v) + 1)) for x, v in zip(fc[inside], yf[inside])) < 2e-7
    assert np.allclose(p[inside], 0.5 * (yf[inside] + 1), atol=1e-6)
    assert math.isclose(d[28], 1e-300 * math.sqrt(math.pi) / 2, rel_tol=1e-15)     # a tiny argument's own inverse
    assert d[29] == -np.inf and d[30] == np.inf and np.isnan(d[31]) and np.isnan(f[31])


TRIG_KERNEL = r"""__global__ void k(const double* x, double* s, double* c, float* sf, float* cf, double* n, double* e) {
  int i = threadIdx.x;
  sincospi(x[i], &s[i], &c[i]);
  sincospif((float)x[i], &sf[i], &cf[i]);
  n[i] = norm3d(x[i], 2.0, 2.0) * rnorm4d(x[i], 2.0, 2.0, 0.0) + rcbrt(8.0) + rhypot(3.0, 4.0);
  e[i] = erfcx(x[i]);
}
"""


def test_cudas_pi_trigonometry_norms_and_scaled_erfc(emu):
    """sincospi (cuRAND's Box-Muller calls it), sinpi and cospi exact at whole and half turns, the norms, rcbrt and
    erfcx, against their definitions."""
    import math

    import numpy as np
    x = np.array([0.0, 0.5, 1.0, 1.5, 2.0, -3.0, 0.25, 1e6 + 0.5] + list(np.linspace(-5, 5, 24)))
    s, c, n, e = (np.zeros(32) for _ in range(4))
    sf, cf = np.zeros(32, np.float32), np.zeros(32, np.float32)
    emu.load(TRIG_KERNEL).launch("k", (1,), (32,), 0, [x, s, c, sf, cf, n, e], outputs=(1, 2, 3, 4, 5, 6))
    assert s[:6].tolist() == [0.0, 1.0, 0.0, -1.0, 0.0, -0.0] and c[1] == 0.0 and c[3] == 0.0 and c[7] == 0.0
    assert math.copysign(1.0, s[5]) == -1.0 and c[0] == 1.0 and c[2] == -1.0
    assert np.allclose(s, np.sin(np.pi * np.remainder(x, 2.0)), atol=1e-15)
    assert np.allclose(c, np.cos(np.pi * np.remainder(x, 2.0)), atol=1e-15)
    assert np.allclose(sf, s, atol=1e-6) and np.allclose(cf, c, atol=1e-6)
    assert np.allclose(n, np.ones(32) + 0.5 + 0.2, rtol=1e-15)
    assert np.allclose(e[8:], [math.exp(v * v) * math.erfc(v) for v in x[8:]], rtol=1e-12)


FLOAT_OVERLOADS = r"""
template<typename U> U rsqrt(U v) { return U(1) / sqrt(v); }        // host code of the source (Megatron's)
template<> float rsqrt(float v) { return rsqrtf(v); }
__global__ void k(const float* x, float* out, int* is_float) {
  int i = threadIdx.x;
  float v = x[i];
  out[5 * i] = rsqrt(v);
  out[5 * i + 1] = sinpi(v);
  out[5 * i + 2] = rcbrt(v);
  out[5 * i + 3] = normcdf(v);
  out[5 * i + 4] = exp10(v);
  is_float[i] = sizeof(rsqrt(v)) == 4 && sizeof(sinpi(v)) == 4 && sizeof(erfcinv(v)) == 4 && sizeof(erfinv(v)) == 4
                && sizeof(normcdfinv(v)) == 4 && sizeof(cospi(v)) == 4 && sizeof(erfcx(v)) == 4
                && sizeof(rcbrt(v)) == 4 && sizeof(normcdf(v)) == 4 && sizeof(exp10(v)) == 4;
}
"""


def test_cudas_float_overloads_take_a_float_call(emu):
    """CUDA's C++ math declares float overloads (`float rsqrt(float)`, `sinpi`, `rcbrt`, `normcdf`, ...): a call
    with a float is the float function, and a source's own host template of the name (Megatron's layer norm defines
    `template<typename U> U rsqrt(U)` and calls `rsqrt(sigma2 + epsilon)` in its kernel) does not win it. Emu had
    only the double forms: the call took the source's host function and the build stopped ("calls host
    function(s) that device code cannot call")."""
    import numpy as np
    x = np.linspace(0.25, 4.0, 32).astype(np.float32)
    out, is_float = np.zeros(160, np.float32), np.zeros(32, np.int32)
    emu.load(FLOAT_OVERLOADS).launch("k", (1,), (32,), 0, [x, out, is_float], outputs=(1, 2))
    assert is_float.all()
    got = out.reshape(32, 5).astype(np.float64)
    xd = x.astype(np.float64)
    assert np.allclose(got[:, 0], 1 / np.sqrt(xd), rtol=1e-6) and np.allclose(got[:, 2], np.cbrt(xd) ** -1, rtol=1e-6)
    assert np.allclose(got[:, 1], np.sin(np.pi * xd), atol=1e-6) and np.allclose(got[:, 4], 10.0 ** xd, rtol=1e-6)
