"""Every golden lock compiles with nvcc for sm_80 and sm_90 (cached by source hash), with no spill, no stack frame
its design does not justify, static shared memory within 48 KiB, and the SASS its contract promises (IDP4A /
IMMA for int8 activations, 128-bit loads for the 16-byte tiers, f64 math for f64 accumulation). The resource
table in golden/RESOURCES.json must agree with what this nvcc reports."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.toolchain import compile as cc
from harness.toolchain import golden

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
MANIFEST = golden.read_manifest(GOLDEN)
FILES = sorted(MANIFEST["files"]) + sorted(MANIFEST["external"])
ARCHS = cc.DEFAULT_ARCHS


def _params():
    if not FILES:
        return [pytest.param(None, None, marks=pytest.mark.skip(reason="golden/ holds no locks yet"))]
    return [pytest.param(rel, arch, id=f"{rel}-{arch}") for rel in FILES for arch in ARCHS]


def _compiled(rel, arch, tc):
    code = (GOLDEN / rel).read_bytes().decode()
    result = cc.compile_source(code, arch, tc)
    entry = MANIFEST["files"].get(rel)
    if entry is not None:
        promises = cc.promises_from_contracts(entry["kernels"])
    else:   # an external lock: no contract, so only resources are judged
        promises = [cc.KernelPromise(name, None, 0) for name in result.resources]
    return code, result, promises, entry is not None


@pytest.mark.parametrize("rel,arch", _params())
def test_golden_kernel_compiles_within_its_resources(rel, arch, toolchain):
    code, result, promises, _ = _compiled(rel, arch, toolchain)
    problems = cc.check_compiled(code, result, promises, toolchain, read_sass=False)
    assert not problems, f"{rel}:\n" + "\n".join(problems)
    assert set(result.resources) >= {p.name for p in promises}


@pytest.mark.parametrize("rel,arch", _params())
def test_golden_kernel_sass_keeps_its_promises(rel, arch, sass_toolchain):
    code, result, promises, has_contracts = _compiled(rel, arch, sass_toolchain)
    if not has_contracts:
        pytest.skip(f"{rel} is an external lock: no contract states what its SASS must show")
    problems = cc.check_compiled(code, result, promises, sass_toolchain)
    assert not problems, f"{rel}:\n" + "\n".join(problems)


@pytest.mark.parametrize("arch", ARCHS)
def test_resource_table_matches_this_nvcc(arch, toolchain):
    path = GOLDEN / golden.RESOURCES
    if not FILES:
        pytest.skip("golden/ holds no locks yet")
    assert path.is_file(), f"{golden.RESOURCES} missing: run `qconform golden update` with nvcc available"
    table = json.loads(path.read_text())
    if table["nvcc"] != toolchain.version.split(" | ")[0]:
        pytest.skip(f"{golden.RESOURCES} was written by {table['nvcc']!r}, this nvcc is {toolchain.version!r}")
    stale = [rel for rel in FILES if table["files"].get(rel, {}).get("sha256")
             != golden.sha256_text((GOLDEN / rel).read_bytes().decode())]
    assert not stale, f"{golden.RESOURCES} is stale for {stale[:5]}; re-run `qconform golden update`"
    for rel in FILES:
        result = cc.compile_source((GOLDEN / rel).read_bytes().decode(), arch, toolchain)
        want = {k: v.as_dict() for k, v in result.resources.items()}
        assert table["files"][rel]["archs"][arch] == want, f"{rel} ({arch})"
