"""Kernels as C++ allows them to be written and GPUMD writes them: overloaded `__global__` functions, `void __global__`
in that order, and a `__shared__` variable declared among a switch's cases."""
from __future__ import annotations

import numpy as np
import pytest

from harness.backends import DataRace, UnsupportedConstruct
from harness.backends.emu.rewrite import rewrite

OVERLOADS = """static __global__ void scale(int n, float* y, float f) { if (threadIdx.x < n) y[threadIdx.x] *= f; }
static void __global__ scale(int n, int label, const int* __restrict__ labels, float* y, float f)
{ if (threadIdx.x < n && labels[threadIdx.x] == label) y[threadIdx.x] *= f; }
"""


def test_each_overload_is_a_kernel_named_by_its_parameter_types(emu):
    assert [(k.name, k.spelling, k.line) for k in rewrite(OVERLOADS).kernels] == [
        ("scale(int,float*,float)", "scale", 1), ("scale(int,int,const int*,float*,float)", "scale", 2)]
    module = emu.load(OVERLOADS)
    y = np.ones(4, np.float32)
    module.launch("scale(int,float*,float)", (1,), (4,), 0, [np.int32(4), y, np.float32(3)])
    assert np.array_equal(y, [3, 3, 3, 3])
    labels = np.array([1, 0, 1, 0], np.int32)
    module.launch("scale(int,int,const int*,float*,float)", (1,), (4,), 0,
                  [np.int32(4), np.int32(1), labels, y, np.float32(2)])
    assert np.array_equal(y, [6, 3, 6, 3])            # the other overload: only the labelled elements
    with pytest.raises(ValueError, match=r"no kernel 'scale' in this module \(it has scale\(int,float\*,float\), "):
        module.launch("scale", (1,), (4,), 0, [np.int32(4), y, np.float32(3)])


def test_a_kernel_defined_twice_is_refused():
    """The negative control: the same parameter types twice is no overload but a redefinition."""
    with pytest.raises(UnsupportedConstruct, match=r"kernel 'k\(int\*\)' is defined twice \(line 1 and line 2\)"):
        rewrite("__global__ void k(int* a) { a[0] = 1; }\n__global__ void k(int* a) { a[0] = 2; }\n")


SWITCH = """__global__ void sums(const float* x, float* out)
{
    switch (blockIdx.x)
    {
        case 0:
            __shared__ float s_a[64];
            s_a[threadIdx.x] = x[threadIdx.x];
            __syncthreads();
            if (threadIdx.x == 0) { float t = 0; for (int i = 0; i < 64; ++i) t += s_a[i]; out[0] = t; }
            break;
        case 1:
            __shared__ float s_b[64];
            s_b[threadIdx.x] = 2 * x[threadIdx.x];
            RACY_BARRIER
            if (threadIdx.x == 0) { float t = 0; for (int i = 0; i < 64; ++i) t += s_b[i]; out[1] = t; }
            break;
    }
}
"""


def test_shared_variables_among_a_switchs_cases(detector):
    """C++ forbids a case label that jumps past an initialized reference, which is what emu makes of a __shared__
    declaration: those among a switch's cases are made before the switch. The race report still names each
    variable's own line; the negative control drops case 1's barrier."""
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(2, np.float32)
    detector.load(SWITCH.replace("RACY_BARRIER", "__syncthreads();")).launch("sums", (2,), (64,), 0, [x, out],
                                                                             outputs=(1,))
    assert np.array_equal(out, [x.sum(), 2 * x.sum()])
    with pytest.raises(DataRace, match=r"__shared__ 's_b' \(line 12\) index \d+ .*block \(1,0,0\)"):
        detector.load(SWITCH.replace("RACY_BARRIER", "")).launch("sums", (2,), (64,), 0, [x, out], outputs=(1,))
