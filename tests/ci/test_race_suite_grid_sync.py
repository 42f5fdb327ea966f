"""GPUVerify's cooperative-groups files call its front end's `synchronize(group)`, which CUDA spells `group.sync()`
(gpuverify.gv_synchronize): with a grid group, emu's grid-wide barrier orders one block's read before another block's
write of the same element; the same file with the barrier left out is a race across blocks."""
from __future__ import annotations

from ci.race_suites import gpuverify

HEAD = "//pass\n//--blockDim=32 --gridDim=2\n\n#include <cuda.h>\n\nusing namespace cooperative_groups;\n"
BODY = r"""
__global__ void shift(int* A) {
  grid_group g = this_grid();
  int idx = blockDim.x * blockIdx.x + threadIdx.x;
  int temp = A[idx + 1];
  SYNC
  A[idx] = temp;
}
"""
CASES = {"grid": HEAD + BODY.replace("SYNC", "synchronize(g);"), "none": HEAD + BODY.replace("SYNC", "")}


def test_a_grid_barrier_orders_the_neighbour_read_before_the_write(verdicts):
    assert verdicts["grid"]["verdict"] == "clean", verdicts["grid"]


def test_without_it_the_read_and_the_write_race_across_blocks(verdicts):
    rec = verdicts["none"]
    assert rec["verdict"] == "race" and "'A'" in rec["kernels"]["shift"]["detail"], rec


def test_synchronize_is_defined_only_where_called():
    assert "synchronize(const G& g)" in gpuverify.gv_synchronize("cooperative_groups::synchronize(t);", "k.cu")
    assert gpuverify.gv_synchronize("int x = 1;\n", "k.cu") == "int x = 1;\n"
