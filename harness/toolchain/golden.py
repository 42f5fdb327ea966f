"""Byte-for-byte locks of emitted kernel source: golden/<family>/<mode>/<shape>.cu plus golden/MANIFEST.json.

`check` re-emits the golden matrix (emitters.registry.golden_matrix) and compares every file byte for byte with
its lock, and every manifest entry (sha256, emitter parameters, contracts) with what the emitters say now; a
lock without an emitter entry and an entry without a lock are differences too. `update` re-blesses: every
file is written through a temp file and os.replace, so a reader never sees half a lock.

External locks (golden/external/NAME.cu) hold kernel source another compiler emitted; the manifest's
"external" section keeps their sha256, and `check_external` compares a fresh file with its lock.

golden/RESOURCES.json (written by `update` when an nvcc is found) keeps the ptxas resource table of every
locked file per arch; it records each file's sha256 so a stale table is visible.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

from emitters.contract import KernelSource
from emitters.registry import GOLDEN_SHAPES, emit, golden_matrix, mode_label

from harness.cache import atomic_write

MANIFEST = "MANIFEST.json"
RESOURCES = "RESOURCES.json"
EXTERNAL = "external"
FORMAT = 1


def default_root() -> Path:
    """./golden when the current folder has one, else the golden/ folder of this checkout."""
    here = Path.cwd() / "golden"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "golden"


def lock_relpath(family: str, mode, shape: str) -> str:
    return f"{family}/{mode_label(mode)}/{shape}.cu"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _json(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n"


# ------------------------------------------------------------------------------------------------------------
# emitting
@dataclass
class Emitted:
    sources: dict[str, KernelSource] = field(default_factory=dict)   # relpath -> source
    errors: dict[str, str] = field(default_factory=dict)             # relpath -> why it could not be emitted


EmitFn = Callable[[str, object, str], KernelSource]


def emit_matrix(shapes: Sequence[str] = GOLDEN_SHAPES, emit_fn: Optional[EmitFn] = None) -> Emitted:
    """Emit every (family, mode, shape) of the golden matrix; an emitter that raises is recorded, not fatal."""
    emit_fn = emit_fn or emit
    out = Emitted()
    for family, mode, shape in golden_matrix(shapes):
        rel = lock_relpath(family, mode, shape)
        try:
            out.sources[rel] = emit_fn(family, mode, shape)
        except Exception as exc:   # noqa: BLE001  (reported per entry; the rest of the matrix still runs)
            out.errors[rel] = f"{type(exc).__name__}: {exc}"
    return out


def manifest_entry(ks: KernelSource) -> dict:
    return {
        "sha256": sha256_text(ks.code),
        "family": ks.family,
        "mode": mode_label(ks.mode),
        "shape": ks.shape,
        "emitter_params": json.loads(_json(dict(ks.emitter_params))),
        "kernels": [json.loads(_json(c.describe())) for c in ks.contracts],
    }


def read_manifest(root: Path) -> dict:
    path = root / MANIFEST
    if not path.is_file():
        return {"format": FORMAT, "files": {}, "external": {}}
    data = json.loads(path.read_text())
    data.setdefault("files", {})
    data.setdefault("external", {})
    return data


def locked_files(root: Path) -> set[str]:
    """Relative paths of every .cu lock of the emitted matrix (external locks excluded)."""
    if not root.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in root.rglob("*.cu")
            if p.relative_to(root).parts[0] != EXTERNAL}


def _in_scope(rels: Iterable[str], shapes: Sequence[str]) -> set[str]:
    """The lock paths that belong to the given shape sets (a run over some shapes leaves the others alone)."""
    return {rel for rel in rels if Path(rel).stem in set(shapes)}


# ------------------------------------------------------------------------------------------------------------
# checking
@dataclass(frozen=True)
class Difference:
    path: str     # relative to the golden root
    kind: str     # changed | missing | extra | manifest | emit-error | external
    detail: str   # unified diff or message


@dataclass
class CheckReport:
    checked: int
    differences: list[Difference]
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences


def unified(old: str, new: str, path: str, old_label: str = "lock", new_label: str = "emitted") -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"{old_label}/{path}", tofile=f"{new_label}/{path}"))


def check(root: Path, emitted: Optional[Emitted] = None, shapes: Sequence[str] = GOLDEN_SHAPES) -> CheckReport:
    root = Path(root)
    emitted = emitted if emitted is not None else emit_matrix(shapes)
    manifest = read_manifest(root)
    diffs: list[Difference] = []
    for rel, err in sorted(emitted.errors.items()):
        diffs.append(Difference(rel, "emit-error", err))
    for rel, ks in sorted(emitted.sources.items()):
        path = root / rel
        if not path.is_file():
            diffs.append(Difference(rel, "missing", f"no lock file for {rel}; run `qconform golden update`"))
            continue
        old = path.read_bytes().decode()
        if old != ks.code:
            diffs.append(Difference(rel, "changed", unified(old, ks.code, rel)))
        want = manifest_entry(ks)
        have = manifest["files"].get(rel)
        if have != want:
            diffs.append(Difference(rel, "manifest", unified(_json(have) if have is not None else "", _json(want),
                                                              f"{MANIFEST}#{rel}")))
    wanted = set(emitted.sources) | set(emitted.errors)
    for rel in sorted(_in_scope(locked_files(root), shapes) - wanted):
        diffs.append(Difference(rel, "extra", f"lock file {rel} has no emitter entry in the golden matrix"))
    for rel in sorted(_in_scope(manifest["files"], shapes) - wanted):
        diffs.append(Difference(rel, "extra", f"{MANIFEST} lists {rel}, which the golden matrix no longer emits"))
    diffs.extend(_check_external_shas(root, manifest))
    return CheckReport(len(emitted.sources), diffs, _resource_warnings(root, manifest))


def _check_external_shas(root: Path, manifest: Mapping) -> list[Difference]:
    out = []
    listed = manifest.get("external", {})
    for rel, entry in sorted(listed.items()):
        path = root / rel
        if not path.is_file():
            out.append(Difference(rel, "external", f"external lock {rel} is listed in {MANIFEST} but missing"))
        elif sha256_text(path.read_bytes().decode()) != entry.get("sha256"):
            out.append(Difference(rel, "external", f"external lock {rel} does not match its sha256 in {MANIFEST} "
                                                    "(edited by hand?)"))
    ext = root / EXTERNAL
    present = {p.relative_to(root).as_posix() for p in ext.rglob("*.cu")} if ext.is_dir() else set()
    for rel in sorted(present - set(listed)):
        out.append(Difference(rel, "external", f"external lock {rel} is not listed in {MANIFEST}"))
    return out


def _resource_warnings(root: Path, manifest: Mapping) -> list[str]:
    path = root / RESOURCES
    if not path.is_file():
        return [f"{RESOURCES} is absent; `qconform golden update` writes it when nvcc is found"] \
            if manifest["files"] else []
    table = json.loads(path.read_text()).get("files", {})
    stale = sorted(rel for rel, entry in manifest["files"].items()
                   if table.get(rel, {}).get("sha256") != entry.get("sha256"))
    stale += sorted(rel for rel, entry in manifest.get("external", {}).items()
                    if table.get(rel, {}).get("sha256") != entry.get("sha256"))
    return [f"{RESOURCES} is stale for {len(stale)} file(s) (first: {stale[0]}); re-run `qconform golden update` "
            "with nvcc available"] if stale else []


# ------------------------------------------------------------------------------------------------------------
# updating
@dataclass(frozen=True)
class Change:
    path: str
    kind: str   # added | changed | removed | manifest (only the manifest entry changed)


def update(root: Path, emitted: Optional[Emitted] = None, shapes: Sequence[str] = GOLDEN_SHAPES) -> list[Change]:
    """Write every emitted file whose bytes differ, drop locks no longer emitted, rewrite the manifest.

    An entry whose emitter failed keeps its old lock and manifest entry untouched (it is never re-blessed from
    a broken emit); the failures are in `emitted.errors`, which the caller reports.
    """
    root = Path(root)
    emitted = emitted if emitted is not None else emit_matrix(shapes)
    manifest = read_manifest(root)
    changes: list[Change] = []
    for rel, ks in sorted(emitted.sources.items()):
        path = root / rel
        if not path.is_file():
            changes.append(Change(rel, "added"))
        elif path.read_bytes().decode() != ks.code:
            changes.append(Change(rel, "changed"))
        else:
            continue
        atomic_write(path, ks.code)
    keep = set(emitted.sources) | set(emitted.errors)
    for rel in sorted(_in_scope(locked_files(root), shapes) - keep):
        (root / rel).unlink()
        changes.append(Change(rel, "removed"))
        _prune_empty_dirs((root / rel).parent, root)
    files = {rel: manifest_entry(ks) for rel, ks in emitted.sources.items()}
    # entries whose emitter failed, and entries of shape sets outside this run, keep their old manifest entry
    files.update({rel: entry for rel, entry in manifest["files"].items()
                  if rel in emitted.errors or rel not in _in_scope([rel], shapes)})
    for rel, entry in sorted(files.items()):
        if manifest["files"].get(rel) != entry and not any(c.path == rel for c in changes):
            changes.append(Change(rel, "manifest"))
    new_manifest = {"format": FORMAT, "files": dict(sorted(files.items())), "external": manifest.get("external", {})}
    if not (root / MANIFEST).is_file() or (root / MANIFEST).read_text() != _json(new_manifest):
        atomic_write(root / MANIFEST, _json(new_manifest))
    return changes


def _prune_empty_dirs(folder: Path, root: Path) -> None:
    while folder != root and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


# ------------------------------------------------------------------------------------------------------------
# external locks
def external_relpath(root: Path, lock: "str | Path") -> str:
    """The lock's path relative to root; it must be a .cu file inside <root>/external/."""
    root_r = Path(root).resolve()
    lock_r = Path(lock).resolve()
    ext = root_r / EXTERNAL
    if lock_r.suffix != ".cu":
        raise ValueError(f"--lock: an external lock must be a .cu file, got {lock}")
    if ext not in lock_r.parents:
        raise ValueError(f"--lock: an external lock must live under {EXTERNAL}/ of the golden folder, got {lock}")
    return lock_r.relative_to(root_r).as_posix()


def _read_source(source: "str | Path") -> str:
    p = Path(source)
    if not p.is_file():
        raise ValueError(f"--source: no such file {source}")
    return p.read_bytes().decode()


def check_external(root: Path, source: "str | Path", lock: "str | Path") -> CheckReport:
    root = Path(root)
    rel = external_relpath(root, lock)
    new = _read_source(source)
    manifest = read_manifest(root)
    path = root / rel
    diffs = []
    if not path.is_file():
        diffs.append(Difference(rel, "missing", f"no external lock {rel}; run `qconform golden update --source "
                                                f"{Path(source).name} --lock {rel}`"))
    else:
        old = path.read_bytes().decode()
        if old != new:
            diffs.append(Difference(rel, "changed", unified(old, new, rel, new_label="source")))
        entry = manifest["external"].get(rel)
        if entry is None:
            diffs.append(Difference(rel, "external", f"external lock {rel} is not listed in {MANIFEST}"))
        elif entry.get("sha256") != sha256_text(old):
            diffs.append(Difference(rel, "external", f"external lock {rel} does not match its sha256 in {MANIFEST}"))
    return CheckReport(1, diffs)


def update_external(root: Path, source: "str | Path", lock: "str | Path") -> list[Change]:
    root = Path(root)
    rel = external_relpath(root, lock)
    new = _read_source(source)
    path = root / rel
    kind = "added" if not path.is_file() else ("changed" if path.read_bytes().decode() != new else "")
    manifest = read_manifest(root)
    entry = {"sha256": sha256_text(new), "source_name": Path(source).name}
    if kind:
        atomic_write(path, new)
    if manifest["external"].get(rel) != entry:
        manifest["external"][rel] = entry
        manifest.setdefault("format", FORMAT)
        atomic_write(root / MANIFEST, _json(manifest))
        kind = kind or "manifest"
    return [Change(rel, kind)] if kind else []


# ------------------------------------------------------------------------------------------------------------
# resource table
def resource_table(root: Path, archs: Sequence[str], toolchain=None, workers: Optional[int] = None) -> dict:
    """Compile every locked file (matrix and external) for each arch (cached) and tabulate ptxas resources."""
    from .compile import compile_many, nvcc_flags
    from .finder import find_toolchain

    root = Path(root)
    tc = toolchain or find_toolchain()
    manifest = read_manifest(root)
    rels = sorted(manifest["files"]) + sorted(manifest["external"])
    jobs = [(rel, (root / rel).read_bytes().decode()) for rel in rels]
    results = compile_many(jobs, archs, tc, workers)
    files = {}
    for rel, code in jobs:
        per_arch = {}
        for arch in archs:
            r = results[(rel, arch)]
            per_arch[arch] = ({k: v.as_dict() for k, v in sorted(r.resources.items())} if r.ok
                              else {"compile_error": r.log.strip()[-4000:]})
        files[rel] = {"sha256": sha256_text(code), "archs": per_arch}
    flags = [("-arch=<arch>" if f.startswith("-arch=") else f) for f in nvcc_flags(archs[0])]
    return {"format": FORMAT, "nvcc": tc.version.split(" | ")[0], "flags": flags, "archs": list(archs),
            "files": files}


def _compact_json(obj) -> str:
    """Indented JSON whose innermost objects (one kernel's resource row) sit on one line each."""
    text = _json(obj)
    return re.sub(r"\{\n\s*([^{}\[\]]*?)\n\s*\}",
                  lambda m: "{" + " ".join(ln.strip() for ln in m.group(1).splitlines()) + "}", text)


def write_resources(root: Path, table: Mapping) -> bool:
    """Write RESOURCES.json when its content changed; True when written."""
    path = Path(root) / RESOURCES
    text = _compact_json(table)
    if path.is_file() and path.read_text() == text:
        return False
    atomic_write(path, text)
    return True


def failed_compiles(table: Mapping) -> list[str]:
    return [f"{rel} ({arch})" for rel, entry in table["files"].items()
            for arch, kernels in entry["archs"].items() if "compile_error" in kernels]


def load_resources(root: Optional[Path] = None) -> dict:
    """golden/RESOURCES.json as a dict ({} when absent), for reports."""
    path = Path(root or default_root()) / RESOURCES
    return json.loads(path.read_text()) if path.is_file() else {}


def iter_resource_rows(table: Mapping) -> Iterable[tuple[str, str, str, dict]]:
    """(file, arch, kernel, resources) rows of a RESOURCES.json table, for reports."""
    for rel, entry in sorted(table.get("files", {}).items()):
        for arch, kernels in sorted(entry["archs"].items()):
            for name, res in sorted(kernels.items()):
                if name != "compile_error":
                    yield rel, arch, name, res
