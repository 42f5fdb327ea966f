"""The source the GPU backend hands to nvcc compiles, and its kernels keep their plain names (needs nvcc, no GPU).

PyCUDA finds a kernel by its symbol name and by default wraps the whole file in `extern "C" { }`; these
tests compile with the same nvcc invocation PyCUDA uses (`--cubin -arch sm_XX`) and read the symbol names
out of the cubin.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness.backends.gpu import find_nvcc, prepare_source
from harness.toolchain.rust_literals import kernel_sets
from tests.seed import seed_source

ARCH = "sm_90"   # the lent GPU machines are Hopper; any arch shows the naming

HALF_SRC = """#include <cuda_fp16.h>
__global__ void to_half(const float* x, __half* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(x[i]);
}
__global__ void axpy(const float* x, float* y, int n, float a) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""


@pytest.fixture(scope="module")
def nvcc() -> str:
    path = find_nvcc()
    if path is None:
        pytest.skip("nvcc not found ($QCONFORM_NVCC, PATH, $CUDA_HOME/bin, the system CUDA toolkit, the toolchain extra)")
    return path


def compile_cubin(nvcc: str, text: str, tmp: Path, target: str = "cubin") -> tuple[int, bytes, str]:
    src = tmp / "kernel.cu"
    src.write_text(text)
    out = tmp / f"kernel.{target}"
    proc = subprocess.run([nvcc, f"--{target}", "-arch", ARCH, "-o", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, out.read_bytes() if proc.returncode == 0 else b"", proc.stderr


def plain_symbol(binary: bytes, name: str) -> bool:
    """The kernel's code is under its plain name: cubin section `.text.NAME`, or PTX `.entry NAME(`."""
    return (b".text." + name.encode() + b"\x00") in binary or (b".entry " + name.encode() + b"(") in binary


def test_prepared_source_keeps_plain_names_and_cpp_headers(nvcc, tmp_path):
    rc, cubin, err = compile_cubin(nvcc, prepare_source(HALF_SRC), tmp_path)
    assert rc == 0, err
    assert plain_symbol(cubin, "to_half") and plain_symbol(cubin, "axpy")


def test_negative_controls_unprepared_and_whole_file_extern_c(nvcc, tmp_path):
    rc, cubin, err = compile_cubin(nvcc, HALF_SRC, tmp_path)
    assert rc == 0, err
    assert not plain_symbol(cubin, "axpy") and b"_Z4axpyPKfPfif" in cubin      # C++ mangling
    # PyCUDA's default wrap puts <cuda_fp16.h>'s C++ inside extern "C": nvcc refuses it.
    rc, _, err = compile_cubin(nvcc, 'extern "C" {\n' + HALF_SRC + "\n}\n", tmp_path)
    assert rc != 0 and "linkage" in err


def test_compiler_messages_keep_source_line_numbers(nvcc, tmp_path):
    broken = "__global__ void k(__half* y) {\n  y[0] = undefined_name;\n}\n"
    rc, _, err = compile_cubin(nvcc, prepare_source(broken), tmp_path)
    assert rc != 0 and re.search(r"kernel\.cu\(2\).*undefined_name", err), err


def test_seed_fp16_kernel_set_compiles_with_plain_names(nvcc, tmp_path):
    """The seed's kernel strings lack their host program's headers: its fp16 set needs <cuda_fp16.h> added.

    Compiled to PTX (the front end decides the names; ptxas would only add time)."""
    sets = {ks.name: ks for ks in kernel_sets(seed_source(), {"i": 0, "nt": 2})}
    ks = sets["emit_forward#1"]
    assert "__half" in ks.code and "cuda_fp16" not in ks.code
    rc, cubin, err = compile_cubin(nvcc, prepare_source(ks.code), tmp_path, target="ptx")
    assert rc == 0, err
    missing = [k for k in ks.kernels if not plain_symbol(cubin, k)]
    assert ks.kernels and not missing
