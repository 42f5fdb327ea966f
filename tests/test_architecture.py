"""The import arrows draw the folder tree: CLI -> stages (cases, judging, reports, model) -> backends and
toolchain -> emitters -> cudasrc and reference, never back, and no import circles. Read from the source with
ast (imports inside functions count too), so a violation fails here before it is ever run."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("reference", "cudasrc", "emitters", "harness")

# Layer of each package: a module may import modules of its own layer or below, never above.
LAYERS = {
    "reference": 0, "cudasrc": 0,
    "emitters": 1,
    "harness.cache": 2, "harness.backends": 2, "harness.toolchain": 2,
    "harness.cases": 3, "harness.judging": 3, "harness.reports": 3, "harness.model": 3, "harness.mutation": 3,
    "harness.racescan": 3,
    "harness.cli": 4, "harness": 4,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    mods = {}
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            mods[module_name(path)] = path
    return mods


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports. `from pkg import x` counts as an import of pkg.x when that is a
    module, else of pkg. Importing a module also runs its parent packages, but that is Python's doing, not an
    arrow of the design, so parents are not counted."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:      # `import a.b.c` of a module: c; of a name inside b: b
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = project_modules()
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def layer_package(module: str) -> str:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return best


def test_the_walker_sees_the_known_arrows(graph):
    # Negative controls for the walker itself: arrows that exist must be found.
    assert "harness.judging.registry" in graph["harness.judging.ops"]
    assert "cudasrc.types" in graph["emitters.contract"]
    assert "harness.backends.args" in graph["harness.backends.emu.backend"]
    assert {"harness.judging.attention", "harness.judging.ops", "harness.judging.rows"} <= graph["harness.judging"]


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    return [f"{a} -> {b}" for a, targets in graph.items() for b in sorted(targets)
            if LAYERS[layer_package(a)] < LAYERS[layer_package(b)]]


def test_the_checks_catch_planted_violations():
    # Negative controls: a circle through three modules, and an arrow from the reference up into harness.
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []
    assert layer_violations({"reference.quant": {"harness.cache"}, "harness.cli": {"reference.quant"}}) == \
        ["reference.quant -> harness.cache"]


def test_no_import_circles(graph):
    circles = import_circles(graph)
    assert not circles, f"import circles: {circles}"


def test_arrows_point_down_the_layers(graph):
    wrong = layer_violations(graph)
    assert not wrong, "imports against the layering CLI -> stages -> backends/toolchain -> emitters -> " \
                      "cudasrc/reference:\n" + "\n".join(wrong)


def test_packages_of_one_layer_do_not_import_each_other_both_ways(graph):
    arrows = {(layer_package(a), layer_package(b)) for a, ts in graph.items() for b in ts
              if layer_package(a) != layer_package(b)}
    both = sorted(f"{a} <-> {b}" for a, b in arrows if (b, a) in arrows and a < b)
    assert not both, f"packages importing each other: {both}"


@pytest.mark.parametrize("package, allowed", [
    ("reference", ("reference",)),
    ("cudasrc", ("cudasrc",)),
    ("emitters", ("emitters", "cudasrc", "reference")),
    ("harness.backends", ("harness.backends", "harness.cache", "harness.toolchain", "cudasrc")),
])
def test_what_the_lower_packages_may_import(graph, package, allowed):
    wrong = [f"{a} -> {b}" for a, targets in graph.items() if a == package or a.startswith(package + ".")
             for b in sorted(targets) if not any(b == p or b.startswith(p + ".") for p in allowed)]
    assert not wrong, f"{package} may import only {', '.join(allowed)}:\n" + "\n".join(wrong)


def test_every_package_says_what_comes_in_and_what_goes_out():
    packages = [p for root in ("harness", "cudasrc") for p in (REPO / root).rglob("__init__.py")]
    assert len(packages) >= 10
    vague = []
    for path in packages:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "In:" not in doc or "Out:" not in doc:
            vague.append(str(path.relative_to(REPO)))
    assert not vague, f"package docstrings without 'In:' and 'Out:': {vague}"
