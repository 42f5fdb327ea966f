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
    "harness.cache": 2, "harness.interrupts": 2, "harness.landlock": 2, "harness.confine": 2, "harness.lifetimes": 2, "harness.backends": 2, "harness.toolchain": 2,
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


def imported_module(node: ast.ImportFrom, package: str) -> str:
    """The module a `from ... import` names, relative imports resolved against `package`."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


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
            mod = imported_module(node, package)
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
    ("harness.backends", ("harness.backends", "harness.cache", "harness.confine", "harness.landlock", "harness.lifetimes",
                          "harness.toolchain", "cudasrc")),
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


# -- private names stay private -----------------------------------------------------------------------------------
def private_imports(name: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """`from M import _x` in module `name` where _x is a private name of another module M. A private submodule
    (`from pkg import _mod`) may be imported inside its own package: that is what the underscore says."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        mod = imported_module(node, package)
        for alias in node.names:
            if not alias.name.startswith("_") or alias.name.startswith("__") or mod == name:
                continue
            sub = f"{mod}.{alias.name}"
            if sub in modules and (name == mod or name.startswith(mod + ".")):
                continue
            found.append(f"{name}:{node.lineno} imports {alias.name} from {mod}")
    return found


def test_no_module_imports_another_modules_private_names():
    mods = project_modules()
    wrong = [w for name, path in mods.items() for w in private_imports(name, path, mods)]
    assert not wrong, "private names imported across modules (make them public where shared):\n" + "\n".join(wrong)


def test_the_private_import_check_catches_a_planted_one(tmp_path):
    # Negative control: a private helper imported from a sibling is found, in either spelling; a module's own
    # private submodule imported inside its package, and dunder names, are not.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    files = {"core.py": "def _helper(): ...\n", "_impl.py": "",
             "ops.py": "from .core import _helper, public\nfrom pkg.core import _helper as h\nfrom pkg import _impl\n"
                       "from .core import __doc__\n"}
    mods = {}
    for fname, text in files.items():
        (pkg / fname).write_text(text)
        mods[f"pkg.{fname[:-3]}"] = pkg / fname
    assert private_imports("pkg.ops", pkg / "ops.py", mods) == [
        "pkg.ops:1 imports _helper from pkg.core", "pkg.ops:2 imports _helper from pkg.core"]
    assert private_imports("other.mod", pkg / "ops.py", mods)[-1] == "other.mod:3 imports _impl from pkg"


# -- every parameter is read ----------------------------------------------------------------------------------------
def _is_stub(fn: ast.FunctionDef) -> bool:
    """An interface's default or placeholder: only a docstring, pass, ..., a raise, or a return of a constant."""
    body = [b for b in fn.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return all(isinstance(b, (ast.Pass, ast.Raise)) or (isinstance(b, ast.Return) and (
        b.value is None or isinstance(b.value, (ast.Constant, ast.Dict, ast.Tuple, ast.List))
        and not any(isinstance(n, ast.Name) for n in ast.walk(b.value)))) for b in body)


def _methods(tree: ast.AST) -> list[str]:
    return [f.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _base_names(cls: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr for b in cls.bases if isinstance(b, (ast.Name, ast.Attribute))]


def unread_parameters(source: str, where: str = "", shared_methods: "set[str] | frozenset" = frozenset(),
                      own_classes: "set[str] | None" = None) -> list[str]:
    """Parameters a function takes and never reads (an argument its callers pass for nothing). A name starting
    with `_` is declared unused on purpose; abstract methods and stubs have nothing to read. A method keeps the
    signature it shares: with the other classes of the project that define it (`shared_methods`: a hook and its
    overrides), or with a library's base class (a base not among `own_classes`, the project's)."""
    found = []
    tree = ast.parse(source)
    exempt = set()
    for c in ast.walk(tree):
        if isinstance(c, ast.ClassDef):
            library = own_classes is not None and any(b not in own_classes for b in _base_names(c))
            exempt |= {id(f) for f in c.body if getattr(f, "name", None) in shared_methods or library}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_stub(node) or id(node) in exempt:
            continue
        if any(isinstance(d, (ast.Name, ast.Attribute)) and getattr(d, "id", getattr(d, "attr", "")) == "abstractmethod"
               for d in node.decorator_list):
            continue
        read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        a = node.args
        for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            if arg.arg not in ("self", "cls") and not arg.arg.startswith("_") and arg.arg not in read:
                found.append(f"{where}:{node.lineno} {node.name}({arg.arg})")
    return found


# Bases from the standard library that impose no signature on the methods of a subclass.
NEUTRAL_BASES = {"object", "ABC", "Protocol", "Exception", "RuntimeError", "ValueError", "KeyError", "TypeError",
                 "OSError", "NamedTuple", "Enum", "IntEnum", "str", "int", "dict", "list", "tuple"}


def test_no_function_takes_a_parameter_it_never_reads():
    sources = {name: path.read_text() for name, path in project_modules().items()}
    trees = {name: ast.parse(text) for name, text in sources.items()}
    counts: dict[str, int] = {}
    own = set(NEUTRAL_BASES)
    for tree in trees.values():
        for m in _methods(tree):
            counts[m] = counts.get(m, 0) + 1
        own |= {c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef)}
    shared = {m for m, n in counts.items() if n > 1}
    wrong = [w for name, text in sources.items() for w in unread_parameters(text, name, shared, own)]
    assert not wrong, "parameters never read (drop them, or use them):\n" + "\n".join(wrong)


def test_the_unread_parameter_check_catches_a_planted_one():
    # Negative control: the shape of kernel_budget(weights, record, lane) that ignored its weights.
    src = ("def budget(weights, record, lane):\n    return bound(record, lane)\n"
           "def used(a, *, b):\n    return a + b\n"
           "def hook(ctx):\n    return {}\n"
           "def on_purpose(_unused, x):\n    return x\n")
    assert unread_parameters(src, "m") == ["m:1 budget(weights)"]
    hook = "class Base:\n    def step(self, x, layer):\n        return x\n"
    assert unread_parameters(hook, "m") == ["m:2 step(layer)"]          # alone, a hook's unread parameter counts
    assert unread_parameters(hook, "m", {"step"}) == []                  # an override reads it: the shared signature
    plugin = "class P(WorkerPlugin):\n    def setup(self, worker):\n        self.up = True\n"
    assert unread_parameters(plugin, "m", own_classes={"P"}) == []                 # the library's signature
    assert unread_parameters(plugin, "m", own_classes={"P", "WorkerPlugin"}) == ["m:2 setup(worker)"]
