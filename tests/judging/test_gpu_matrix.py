"""The full conformance matrix on a GPU, qwen3-30b-a3b shapes included (`pytest -m gpu`); skips with the
reason where there is no usable GPU."""
from __future__ import annotations

import pytest

from emitters.registry import golden_matrix, mode_label
from harness.judging.core import FAIL, UNCHECKED

pytestmark = pytest.mark.gpu
MATRIX = golden_matrix(("tiny", "tails", "qwen3-30b-a3b"))


@pytest.fixture(scope="module")
def gpu():
    from harness.backends import get_backend, gpu_unavailable_reason
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no usable GPU: {reason}")
    return get_backend("gpu")


@pytest.mark.parametrize("family,mode,shape", MATRIX, ids=[f"{f}-{mode_label(m)}-{s}" for f, m, s in MATRIX])
def test_emitted_kernels_conform_on_gpu(gpu, family, mode, shape):
    from harness.judging.runner import emitted_jobs, run_cases
    from reference.shapes import get_shape
    jobs = [j for j in emitted_jobs([get_shape(shape)], [mode] if mode else [], 20240601, [family])
            if j.label == f"{family}/{mode_label(mode)}/{shape}"]
    assert len(jobs) == 1 and jobs[0].cases, f"no cases for {family}/{mode_label(mode)}/{shape}"
    run = run_cases(gpu, jobs, progress=False)
    bad = [r for r in run.rows if r["verdict"] in (FAIL, UNCHECKED)]
    assert not bad, "\n".join(f"{r['verdict']} {r['case']}: {r['reason'][:300]} (replay: {r['replay']})" for r in bad)
    assert all(r["kernel_ms"] and r["kernel_ms"] > 0 for r in run.rows)
