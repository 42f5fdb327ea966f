"""ci/race_suites/scor_apps.py on a miniature of ScoR's benchmarks folder (kernels written here in the form of
ScoR's applications, not copied from them): each application is two labelled programs, its `-D RACEY` build and its
plain one, built with its folder's headers and the Makefile's NBLOCKS and NTHREADS, its kernels run in the host
program's order on shared buffers; the suite is found by ci/score_race_suite.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from ci import score_race_suite
from ci.race_suites import scor_apps

# 1dconv's two kernels and parameter lists; RACEY adds across blocks with a block-scope atomic (the planted race)
CONV = r"""#include "1dconv_kernel.cuh"

__global__ void initKernel(float *filter, int filterSize, float *array, int arraySize, float *output)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < arraySize; i += NTHREADS_TOT) output[i] = 0.0f;
}

__global__ void convolveKernel(float *filter, int filterSize, float *array, int arraySize, float *output)
{
    int gtid = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = gtid; k < arraySize * filterSize; k += NTHREADS_TOT) {
        int out = k / filterSize;
#ifdef RACEY
        atomicAdd_block(&output[out], array[out] * filter[k % filterSize]);
#else
        atomicAdd(&output[out], array[out] * filter[k % filterSize]);
#endif
    }
}
"""
CONV_HEADER = "#define NTHREADS_TOT (NBLOCKS * NTHREADS)\n"


def miniature(root: Path) -> Path:
    for app, spec in scor_apps.APPS.items():
        (root / app).mkdir(parents=True)
        (root / app / spec.kernel_file).write_text("__global__ void stub(int *x) { }\n")
    (root / "1dconv" / "1dconv_kernel.cu").write_text(CONV)
    (root / "1dconv" / "1dconv_kernel.cuh").write_text(CONV_HEADER)
    return root


def test_each_application_is_two_labelled_programs(tmp_path):
    root = miniature(tmp_path / "benchmarks")
    files = scor_apps.suite_files(root)
    assert len(files) == 2 * len(scor_apps.APPS) == 14
    assert [scor_apps.label_of(f) for f in files[:2]] == ["racy", "race-free"]
    assert scor_apps.record_name(files[0]) == f"{files[0].parent.name} (racy)"
    suite = score_race_suite.open_suite(root)
    assert suite is not None and suite.name == "ScoR applications"
    (root / "1dconv" / "1dconv_kernel.cu").unlink()
    assert scor_apps.suite_files(root) is None                      # not ScoR's benchmarks folder


def test_the_racey_build_races_across_blocks_and_the_plain_build_does_not(tmp_path):
    from harness.backends.emu.backend import EmuBackend
    root = miniature(tmp_path / "benchmarks")
    backend = EmuBackend(timeout_s=60, block_sampling="all")
    try:
        racy = scor_apps.score_file(backend, root / "1dconv" / "racy", 0)
        plain = scor_apps.score_file(backend, root / "1dconv" / "race-free", 0)
    finally:
        backend.close()
    assert racy["verdict"] == "race" and racy["data_race"] and racy["flags"][-1] == "-DRACEY"
    conv = racy["kernels"]["convolveKernel"]
    assert conv["scope"] == "grid" and "block-scope atomic is not atomic for another block" in conv["detail"]
    assert not plain["data_race"] and plain["verdict"] in ("clean", "order-dependent")   # float sums' order


@pytest.mark.parametrize("app", sorted(scor_apps.APPS))
def test_an_applications_launches_share_the_hosts_buffers(app):
    """The host program's launches run on its buffers: a later launch sees what an earlier one wrote (the same
    arrays), and a work range the host divides (head, tail) covers every item, the last block's to the end."""
    import numpy as np
    spec = scor_apps.APPS[app]
    launches = spec.launches(np.random.default_rng(0), spec.nblocks, spec.nthreads)
    args = [launch.make_args({}) for launch in launches]
    assert all(len(a) >= 3 and all(x.size for x in a if isinstance(x, np.ndarray)) for a in args)
    if len(launches) > 1:
        arrays = [{id(x) for x in a if isinstance(x, np.ndarray)} for a in args]
        assert set.intersection(*arrays)
    if app.startswith("graph-"):
        for launch in launches:
            head, tail = launch.make_args({})[:2]
            assert head[0] == 0 and np.all(head[1:] == tail[:-1]) and tail[-1] in (6000, 12000)
