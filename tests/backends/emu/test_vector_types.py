"""CUDA's built-in vector types on emu: every <base><n> (n = 1..4), the 8-byte bases' 4_16a / 4_32a forms of CUDA
13, their make_ functions, sizes and alignments as CUDA lays them out (a 3-vector is unpadded and aligned as its
element; a 1-, 2- or 4-vector is aligned to its size, at most 16, except the _32a forms)."""
from __future__ import annotations

import numpy as np
import pytest

from cudasrc.types import VECTOR_BYTES
from harness.backends.emu.backend import EmuBackend

BASES = {"char": 1, "uchar": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "long": 8, "ulong": 8,
         "longlong": 8, "ulonglong": 8, "float": 4, "double": 8}
TYPES = [f"{b}{n}" for b in BASES for n in (1, 2, 3, 4)] + \
        [f"{b}4_{a}a" for b, s in BASES.items() if s == 8 for a in (16, 32)]


def _expected(name: str) -> tuple[int, int]:
    base = name.rstrip("0123456789a_").rstrip("0123456789")
    size = BASES[base]
    if name.endswith("_16a") or name.endswith("_32a"):
        return 4 * size, int(name[-3:-1])
    n = int(name[len(base)])
    return n * size, size if n == 3 else min(n * size, 16)


@pytest.fixture(scope="module")
def module():
    be = EmuBackend(schedules=1, timeout_s=60)
    lines = []
    for i, t in enumerate(TYPES):
        n = 3 if t.endswith(("3",)) else 1 if t.endswith("1") else 2 if t.endswith("2") else 4
        args = ", ".join(["1", "2", "3", "4"][:n])
        lines.append(f"  {{ {t} v = make_{t}({args}); out[{3 * i}] = sizeof(v); out[{3 * i + 1}] = alignof({t});"
                     f" out[{3 * i + 2}] = (long long)v.x + (long long)v.{'xyzw'[n - 1]}; }}")
    src = "__global__ void sizes(long long* out) {\n  if (threadIdx.x) return;\n" + "\n".join(lines) + "\n}\n"
    yield be.load(src)
    be.close()


def test_every_vector_type_has_cudas_size_alignment_and_make_function(module):
    out = np.zeros(3 * len(TYPES), np.int64)
    module.launch("sizes", (1,), (1,), 0, [out], [0])
    got = {t: tuple(out[3 * i:3 * i + 3]) for i, t in enumerate(TYPES)}
    for t in TYPES:
        size, align = _expected(t)
        n = int(t[-1]) if t[-1].isdigit() else 4
        assert got[t] == (size, align, 1 + n), (t, got[t])
        assert VECTOR_BYTES[t] == size, t           # the argument check's view of the same type


def test_a_vector_pointer_parameter_takes_a_buffer_of_whole_vectors():
    be = EmuBackend(schedules=1, timeout_s=60)
    try:
        mod = be.load("__global__ void k(const double4* x, double* y) { y[threadIdx.x] = x[threadIdx.x].w; }\n")
        x = np.arange(16, dtype=np.float64)
        y = np.zeros(4)
        mod.launch("k", (1,), (4,), 0, [x, y], [1])
        assert list(y) == [3.0, 7.0, 11.0, 15.0]
        with pytest.raises(ValueError, match="double4 vectors"):
            mod.launch("k", (1,), (4,), 0, [x[:15], y], [1])     # 15 doubles are not whole double4s
    finally:
        be.close()
