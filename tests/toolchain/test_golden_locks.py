"""Golden locks: the repository's locks match what the emitters write now, and the lock machinery itself
catches every kind of drift (perturbed emitter output, tampered lock, missing and extra files, manifest edits,
external locks)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from emitters.contract import KernelContract, KernelSource, Param, Role
from emitters.registry import golden_matrix
from harness.toolchain import golden
from harness.cli import main
from reference.modes import Mode

REPO_GOLDEN = Path(__file__).resolve().parents[2] / "golden"


# ---------------------------------------------------------------------------------------------------------------
# the real locks
def test_repository_locks_match_the_emitters():
    if not golden_matrix():
        pytest.skip("no emitter family is importable yet; the golden matrix is empty")
    t0 = time.perf_counter()
    report = golden.check(REPO_GOLDEN)
    elapsed = time.perf_counter() - t0
    shown = "\n".join(f"{d.kind}: {d.path}\n{d.detail[:3000]}" for d in report.differences[:10])
    assert report.ok, (f"{len(report.differences)} golden difference(s); if the change is intended re-bless with "
                       f"`qconform golden update` and review the diff:\n{shown}")
    assert report.checked == len(golden_matrix())
    print(f"emit+check of {report.checked} files: {elapsed:.2f} s")   # measured; the claim lives in the report


def test_manifest_records_contracts_and_sha_of_every_lock():
    manifest = golden.read_manifest(REPO_GOLDEN)
    if not manifest["files"]:
        pytest.skip("no golden locks written yet")
    for rel, entry in manifest["files"].items():
        text = (REPO_GOLDEN / rel).read_bytes().decode()
        assert entry["sha256"] == golden.sha256_text(text), rel
        assert entry["kernels"], f"{rel}: no contracts recorded"
        assert {k["name"] for k in entry["kernels"]} <= {m for m in _global_names(text)}, rel


def _global_names(code: str) -> set[str]:
    from cudasrc.signatures import kernel_signatures
    return {s.name for s in kernel_signatures(code)}


# ---------------------------------------------------------------------------------------------------------------
# a hermetic matrix for the machinery
def _contract(name: str, mode) -> KernelContract:
    return KernelContract(
        name=name, family="fake", op="copy", mode=mode,
        params=(Param("x", "const float*", Role.INPUT, count="n"), Param("y", "float*", Role.OUTPUT, count="n"),
                Param("n", "int", Role.SCALAR, value="n")),
        grid=("ceil_div(n, 128)", "1", "1"), block=("128", "1", "1"), instances=(("row", {"n": "d"}),))


def _fake_source(family: str, mode, shape: str, extra: str = "") -> KernelSource:
    name = f"fake_copy_{mode.value if mode else 'any'}"
    code = (f"// {family} {shape}\n__global__ void {name}(const float* x, float* y, int n) {{\n"
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i];\n}}\n{extra}")
    return KernelSource(family, mode, shape, code, (_contract(name, mode),), {"threads": 128, "shape": shape})


MATRIX = [("fake", Mode.DEQUANT, "tiny"), ("fake", Mode.INT8_ACT, "tiny"), ("fake", None, "tails")]


@pytest.fixture
def fake_matrix(monkeypatch):
    """Point the golden module at a fixed two-family matrix whose output a test can perturb."""
    state = {"extra": ""}
    monkeypatch.setattr(golden, "golden_matrix", lambda shapes=None: list(MATRIX))
    monkeypatch.setattr(golden, "emit", lambda fam, mode, shape: _fake_source(fam, mode, shape, state["extra"]))
    return state


def test_update_then_check_is_clean_and_idempotent(tmp_path, fake_matrix):
    changes = golden.update(tmp_path)
    assert sorted(c.path for c in changes) == ["fake/any/tails.cu", "fake/dequant/tiny.cu", "fake/int8act/tiny.cu"]
    assert {c.kind for c in changes} == {"added"}
    assert golden.check(tmp_path).ok
    assert golden.update(tmp_path) == []          # nothing to re-bless the second time
    assert not list(tmp_path.rglob("*.tmp")), "atomic writes left temp files behind"
    manifest = json.loads((tmp_path / golden.MANIFEST).read_text())
    entry = manifest["files"]["fake/dequant/tiny.cu"]
    assert entry["emitter_params"] == {"threads": 128, "shape": "tiny"}
    assert entry["kernels"][0]["name"] == "fake_copy_dequant" and entry["kernels"][0]["mode"] == "dequant"


def test_perturbed_emitter_output_fails_with_a_unified_diff(tmp_path, fake_matrix):
    golden.update(tmp_path)
    fake_matrix["extra"] = "// one more line\n"
    report = golden.check(tmp_path)
    assert not report.ok
    changed = [d for d in report.differences if d.kind == "changed"]
    assert len(changed) == 3
    assert changed[0].detail.startswith("--- lock/") and "+// one more line" in changed[0].detail
    # manifest entries follow the bytes, so their sha256 differs too
    assert {d.kind for d in report.differences} == {"changed", "manifest"}


def test_tampered_lock_fails(tmp_path, fake_matrix):
    golden.update(tmp_path)
    lock = tmp_path / "fake/dequant/tiny.cu"
    lock.write_text(lock.read_text().replace("y[i] = x[i]", "y[i] = 2.0f * x[i]"))
    report = golden.check(tmp_path)
    assert [(d.kind, d.path) for d in report.differences] == [("changed", "fake/dequant/tiny.cu")]
    assert "-  if (i < n) y[i] = 2.0f * x[i];" in report.differences[0].detail
    assert "+  if (i < n) y[i] = x[i];" in report.differences[0].detail


def test_missing_and_extra_locks_are_reported(tmp_path, fake_matrix):
    golden.update(tmp_path)
    (tmp_path / "fake/int8act/tiny.cu").unlink()
    stray = tmp_path / "fake/twopass/tiny.cu"
    stray.parent.mkdir(parents=True)
    stray.write_text("__global__ void stray() {}\n")
    kinds = {(d.kind, d.path) for d in golden.check(tmp_path).differences}
    assert kinds == {("missing", "fake/int8act/tiny.cu"), ("extra", "fake/twopass/tiny.cu")}
    changes = {(c.kind, c.path) for c in golden.update(tmp_path)}
    assert changes == {("added", "fake/int8act/tiny.cu"), ("removed", "fake/twopass/tiny.cu")}
    assert not stray.parent.exists(), "an emptied lock folder should be removed"
    assert golden.check(tmp_path).ok


def test_manifest_edit_is_a_difference(tmp_path, fake_matrix):
    golden.update(tmp_path)
    path = tmp_path / golden.MANIFEST
    data = json.loads(path.read_text())
    data["files"]["fake/any/tails.cu"]["emitter_params"]["threads"] = 256
    path.write_text(json.dumps(data))
    diffs = golden.check(tmp_path).differences
    assert [(d.kind, d.path) for d in diffs] == [("manifest", "fake/any/tails.cu")]
    assert '-  "threads": 256' in diffs[0].detail and '+  "threads": 128' in diffs[0].detail


def test_a_shape_subset_leaves_other_shapes_alone(tmp_path, fake_matrix, monkeypatch):
    golden.update(tmp_path)
    monkeypatch.setattr(golden, "golden_matrix", lambda shapes=None: [e for e in MATRIX if e[2] in shapes])
    fake_matrix["extra"] = "// tiny only\n"
    changes = golden.update(tmp_path, shapes=["tiny"])
    assert {(c.kind, c.path) for c in changes} == {("changed", "fake/dequant/tiny.cu"),
                                                   ("changed", "fake/int8act/tiny.cu")}
    assert (tmp_path / "fake/any/tails.cu").is_file()
    assert "fake/any/tails.cu" in golden.read_manifest(tmp_path)["files"]
    assert golden.check(tmp_path, shapes=["tiny"]).ok
    assert [(d.kind, d.path) for d in golden.check(tmp_path, shapes=["tails"]).differences] == \
        [("changed", "fake/any/tails.cu"), ("manifest", "fake/any/tails.cu")]


def test_failing_emitter_is_reported_and_never_reblessed(tmp_path, fake_matrix, monkeypatch):
    golden.update(tmp_path)
    before = (tmp_path / "fake/dequant/tiny.cu").read_text()

    def broken(fam, mode, shape):
        if mode is Mode.DEQUANT:
            raise ValueError("kernel fake_copy_dequant: parameter n breaks 'n % 32 == 0'")
        return _fake_source(fam, mode, shape)
    monkeypatch.setattr(golden, "emit", broken)
    report = golden.check(tmp_path)
    assert [(d.kind, d.path) for d in report.differences] == [("emit-error", "fake/dequant/tiny.cu")]
    assert "n % 32 == 0" in report.differences[0].detail
    golden.update(tmp_path)
    assert (tmp_path / "fake/dequant/tiny.cu").read_text() == before
    assert "fake/dequant/tiny.cu" in golden.read_manifest(tmp_path)["files"]


# ---------------------------------------------------------------------------------------------------------------
# CLI
def test_cli_check_and_update(tmp_path, fake_matrix, capsys):
    args = ["golden", "check", "--golden-dir", str(tmp_path)]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "missing: fake/dequant/tiny.cu" in out and "3 difference(s)" in out
    assert main(["golden", "update", "--golden-dir", str(tmp_path), "--no-resources"]) == 0
    out = capsys.readouterr().out
    assert "added    fake/any/tails.cu" in out and "3 change(s)" in out
    assert main(args) == 0
    assert "all locks match" in capsys.readouterr().out
    fake_matrix["extra"] = "// drift\n"
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "changed: fake/any/tails.cu" in out and "+// drift" in out and out.count("--- lock/fake/") == 3


def test_cli_rejects_half_an_external_request(tmp_path, capsys):
    assert main(["golden", "check", "--golden-dir", str(tmp_path), "--source", "x.cu"]) == 2
    assert "--source and --lock" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------
# external locks
def test_external_lock_roundtrip_and_drift(tmp_path, capsys):
    root = tmp_path / "golden"
    src = tmp_path / "other_compiler.cu"
    src.write_text("__global__ void k(float* y) { y[0] = 1.0f; }\n")
    lock = root / "external" / "other.cu"
    base = ["--golden-dir", str(root), "--source", str(src), "--lock", str(lock)]
    assert main(["golden", "check", *base]) == 1                      # no lock yet
    assert "missing: external/other.cu" in capsys.readouterr().out
    assert main(["golden", "update", *base, "--no-resources"]) == 0
    manifest = golden.read_manifest(root)
    assert manifest["external"]["external/other.cu"] == {"sha256": golden.sha256_text(src.read_text()),
                                                         "source_name": "other_compiler.cu"}
    assert main(["golden", "check", *base]) == 0
    capsys.readouterr()
    src.write_text("__global__ void k(float* y) { y[0] = 2.0f; }\n")    # the other compiler changed its output
    assert main(["golden", "check", *base]) == 1
    out = capsys.readouterr().out
    assert "changed: external/other.cu" in out and "+__global__ void k(float* y) { y[0] = 2.0f; }" in out


def test_tampered_external_lock_is_caught_by_the_matrix_check(tmp_path, fake_matrix):
    src = tmp_path / "ext.cu"
    src.write_text("__global__ void e() {}\n")
    golden.update(tmp_path / "g")
    golden.update_external(tmp_path / "g", src, tmp_path / "g" / "external" / "e.cu")
    assert golden.check(tmp_path / "g").ok
    (tmp_path / "g" / "external" / "e.cu").write_text("__global__ void e() { }\n")
    (tmp_path / "g" / "external" / "unlisted.cu").write_text("\n")
    diffs = {(d.kind, d.path) for d in golden.check(tmp_path / "g").differences}
    assert diffs == {("external", "external/e.cu"), ("external", "external/unlisted.cu")}


@pytest.mark.parametrize("lock", ["elsewhere/x.cu", "external/x.txt"])
def test_external_lock_path_rules(tmp_path, lock):
    src = tmp_path / "s.cu"
    src.write_text("\n")
    with pytest.raises(ValueError, match="--lock"):
        golden.update_external(tmp_path, src, tmp_path / lock)


def test_external_source_must_exist(tmp_path):
    with pytest.raises(ValueError, match="--source: no such file"):
        golden.check_external(tmp_path, tmp_path / "nope.cu", tmp_path / "external" / "x.cu")
