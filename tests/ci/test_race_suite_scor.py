"""ci/race_suites/scor.py on a miniature ScoR checkout (microbenchmarks/src, files written here in the form of
ScoR's, not copied from it): labels from the file name's prefix, the launch from the `#define`s the host program
launches with, buffer sizes from its cudaMalloc calls (a fallback where they cannot be read), and the suite
found by ci/score_race_suite.py. No kernel runs here."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ci.race_suites import gpuverify, indigo, scor
from cudasrc.signatures import kernel_signatures, strip_comments


RACY = r"""#include <stdio.h>

#define NBLOCKS  2
#define TPERBLK  33
#define NTHREADS (NBLOCKS * TPERBLK)

void errCheck() { if (cudaGetLastError() != cudaSuccess) { printf("error\n"); exit(1); } }

__device__ int flag = 0;

__global__ void kmain(volatile unsigned int *data, float *out)   // inter-warp: one plain store, one atomic
{
    if (threadIdx.x == 0) atomicExch_block((unsigned int *)&data[0], 1);
    else if (threadIdx.x == 32) data[0] = 2;
    out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;
}

int main()
{
    unsigned int *d_data;
    float *d_out;
    cudaMalloc(&d_data, sizeof(unsigned int));
    cudaMalloc((void **)&d_out, NTHREADS * sizeof(float));
    kmain<<<NBLOCKS, TPERBLK>>>(d_data, d_out);
    errCheck();
    return 0;
}
"""
RACE_FREE = r"""#define NBLOCKS 1   // one block
#define TPERBLK 1

__device__ int lock = 0;

__global__ void kmain(int *data)
{
    while (atomicCAS_block(&lock, 0, 1) != 0) {}
    data[0] = 1;
    atomicExch_block(&lock, 0);
}

int main()
{
    int *d_data;
    size_t nbytes = 4;
    cudaMalloc(&d_data, nbytes);        /* not a size the adapter reads: the fallback */
    kmain<<<NBLOCKS,TPERBLK>>>(d_data);
    return 0;
}
"""


@pytest.fixture()
def checkout(tmp_path):
    src = tmp_path / "microbenchmarks" / "src"
    src.mkdir(parents=True)
    (src / "race_interwarp_none-blkatom_waw.cu").write_text(RACY)
    (src / "norace_intrawarp_blklock.cu").write_text(RACE_FREE)
    (src / "helper.cu").write_text("__global__ void k(int* a) { a[0] = 0; }\n")       # no label: not in the suite
    return tmp_path


def _parsed(path: Path):
    text = path.read_text()
    host = strip_comments(text)
    consts = scor.defines(host)
    sig, = kernel_signatures(indigo.device_code(text))
    return host, consts, sig


def test_labels_and_suite(checkout, scorer):
    src = checkout / "microbenchmarks" / "src"
    assert [f.name for f in scor.suite_files(checkout)] == ["norace_intrawarp_blklock.cu",
                                                              "race_interwarp_none-blkatom_waw.cu"]
    assert scor.label_of(src / "race_interwarp_none-blkatom_waw.cu") == "racy"
    assert scor.label_of(src / "norace_intrawarp_blklock.cu") == "race-free"
    assert scor.label_of(src / "helper.cu") is None and scor.label_of(Path("racy_x.cu")) is None
    assert scor.scope_of(src / "race_interwarp_none-blkatom_waw.cu") == "interwarp"
    assert scor.suite_files(checkout / "microbenchmarks") is None          # not a checkout's root
    suite = scorer.open_suite(checkout)
    assert suite.name == "ScoR" and suite.per_label is None and len(suite.files) == 2
    assert suite.group(suite.files[1]) == "interwarp" and suite.key(suite.files[1]) == suite.files[1].name


def test_launch_and_buffers(checkout):
    src = checkout / "microbenchmarks" / "src"
    host, consts, sig = _parsed(src / "race_interwarp_none-blkatom_waw.cu")
    assert consts == {"NBLOCKS": 2, "TPERBLK": 33, "NTHREADS": 66}
    grid, block, args = scor.launch_of(host, "kmain", consts)
    assert (grid, block, args) == ((2, 1, 1), (33, 1, 1), ["d_data", "d_out"])
    allocated = scor.allocations(host, consts)
    assert allocated == {"d_data": 4, "d_out": 66 * 4}
    assert scor.buffer_sizes(sig, args, allocated) == ({"data": 1, "out": 66}, [])
    # the inputs: GPUVerify's seeded buffers, at the host's sizes; the same seed gives the same values
    header = {"block": block, "grid": grid, "defines": {}}
    made = [gpuverify.make_args(sig, header, {}, np.random.default_rng([0, 7]), sizes={"data": 1, "out": 66})
            for _ in range(2)]
    data, out = made[0]
    assert data.shape == (1,) and data.dtype == np.uint32 and out.shape == (66,) and out.dtype == np.float32
    assert all(np.array_equal(a, b) for a, b in zip(*made))

    host, consts, sig = _parsed(src / "norace_intrawarp_blklock.cu")
    assert scor.launch_of(host, "kmain", consts) == ((1, 1, 1), (1, 1, 1), ["d_data"])
    allocated = scor.allocations(host, consts)
    assert allocated == {}            # `nbytes` is a variable
    assert scor.buffer_sizes(sig, ["d_data"], allocated) == ({"data": scor.SCOR_FALLBACK_ELEMENTS}, ["data"])
    with pytest.raises(ValueError, match="expected <<<NBLOCKS, TPERBLK>>>"):
        scor.launch_of(host.replace("<<<NBLOCKS,TPERBLK>>>", "<<<1, 32>>>"), "kmain", consts)
    with pytest.raises(ValueError, match="no integer `#define` of TPERBLK"):
        scor.launch_of(host, "kmain", {"NBLOCKS": 1})
