"""Small GPUVerify-style files written by the tests, scored by the GPUVerify adapter as it scores the suite."""
from __future__ import annotations

from ci.race_suites import gpuverify


def score_cases(root, cases: dict[str, str]) -> dict[str, dict]:
    """Each case's text as `<root>/testsuite/CUDA/<name>/kernel.cu`, scored (seed 0) on one emu backend."""
    from harness.backends.emu.backend import EmuBackend
    suite = root / "testsuite" / "CUDA"
    for name, text in cases.items():
        (suite / name).mkdir(parents=True)
        (suite / name / "kernel.cu").write_text(text)
    backend = EmuBackend(timeout_s=60, block_sampling="all")
    try:
        return {name: gpuverify.score_file(backend, suite / name / "kernel.cu", suite, 0) for name in cases}
    finally:
        backend.close()
