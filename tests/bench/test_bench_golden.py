"""Speed of the golden machinery (issue 3, section 4). Run with `pytest tests/bench/test_bench_golden.py
--benchmark-enable`; with --benchmark-disable (the default suite) each runs once as a smoke test.

Targets, read off the benchmark table: emitting the whole golden matrix and comparing it with golden/ under 10 s;
looking the whole matrix up in a warm nvcc cache (both archs) well under the cold compile time, with no compile.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from emitters.registry import golden_matrix
from harness.toolchain import compile as cc
from harness.toolchain import golden
from harness.toolchain.finder import toolchain_or_reason

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def test_bench_emit_and_check(benchmark):
    if not golden_matrix():
        pytest.skip("no emitter family is importable yet")
    report = benchmark(golden.check, GOLDEN)
    benchmark.extra_info["files"] = report.checked
    assert report.checked == len(golden_matrix())


def test_bench_warm_compile_lookup(benchmark):
    tc, why = toolchain_or_reason()
    if tc is None:
        pytest.skip(f"needs nvcc: {why}")
    manifest = golden.read_manifest(GOLDEN)
    if not manifest["files"]:
        pytest.skip("golden/ holds no locks yet")
    jobs = [(rel, (GOLDEN / rel).read_bytes().decode()) for rel in sorted(manifest["files"])]
    if benchmark.disabled:   # smoke run in the default suite: the compile tests already cover the whole matrix
        jobs = jobs[:2]
    cc.compile_many(jobs, cc.DEFAULT_ARCHS, tc)            # warm the cache (a no-op when it already is)
    results = benchmark(cc.compile_many, jobs, cc.DEFAULT_ARCHS, tc)
    assert all(r.cached and r.ok for r in results.values()), "a warm lookup must not compile anything"
    benchmark.extra_info["compiles"] = len(results)
