"""One table, three renderers (harness.reports.document); one number format and one verdict vocabulary in the
reports; the generation page assembled from its blocks, kernels included."""
from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from harness.reports.document import Cell, Heading, Items, Table, Text, console, fmt, html_page, markdown

REPORTS = Path(__file__).resolve().parents[2] / "harness" / "reports"


def _table() -> Table:
    t = Table(["case", "verdict", "max abs", "reason"], title="t")
    t.add([Cell("gk_gemv[a|b]", code=True), Cell("fail", "fail"), 1.23456e-7, "x < y [red]not markup[/red]"], "fail")
    t.add(["other", Cell("pass", "pass"), None, "line one\nline two"])
    return t


def test_one_table_renders_the_same_cells_in_every_format():
    t = _table()
    md = markdown([Heading("Cases"), t])
    assert "| `gk_gemv[a\\|b]` | **fail** | 1.23e-07 | x < y [red]not markup[/red] |" in md
    assert "| other | **pass** | - | line one line two |" in md
    page = html_page("r", [Heading("Cases", anchor="cases"), t])
    assert "<h2 id='cases'>Cases</h2>" in page
    assert "<td><code>gk_gemv[a|b]</code></td><td class='fail'>fail</td><td>1.23e-07</td>" in page
    assert "x &lt; y" in page and "line one<br>line two" in page
    out = io.StringIO()
    console([t], file=out)
    text = out.getvalue()
    assert "[red]not markup[/red]" in text and "1.23e-07" in text and "gk_gemv[a|b]" in text


def test_the_page_is_assembled_once():
    page = html_page("r", [Heading("A", 1), Text("uses `code` and **bold**"), Items(["one `x`"])])
    assert page.count("<html>") == 1 and page.count("</body></html>") == 1 and page.endswith("</body></html>\n")
    assert "<p>uses <code>code</code> and <b>bold</b></p>" in page and "<li>one <code>x</code></li>" in page


@pytest.mark.parametrize("value, text", [(None, "-"), (0.0, "0"), (1234567.0, "1.23e+06"), (float("inf"), "inf"),
                                         (3, "3"), ("as is", "as is")])
def test_one_number_format(value, text):
    assert fmt(value) == text


def _modules():
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted(REPORTS.glob("*.py"))]


def test_no_report_module_redefines_the_verdicts_or_a_number_format():
    """Verdict strings come from harness.judging.registry, numbers go through document.fmt: no module of the
    reports assigns a verdict literal to a name or defines another formatter."""
    verdicts = {"pass", "tie", "fail", "unchecked"}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                assert not any(isinstance(v, ast.Constant) and v.value in verdicts for v in values), \
                    f"{path.name}:{node.lineno} defines a verdict string"
            if isinstance(node, ast.FunctionDef) and node.name in ("fmt", "_fmt", "_g", "format_number"):
                assert path.name == "document.py", f"{path.name}:{node.lineno} defines a number format"


def test_no_report_module_patches_a_page_or_imports_a_private_name():
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__future__"]
                assert not private, f"{path.name}:{node.lineno} imports {private}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace":
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                assert not any("</body>" in str(a) for a in args), f"{path.name}:{node.lineno} patches the page"


def test_the_kernel_tables_first_bad_step_is_one_cell_in_every_format():
    """The generation report's kernels table is built once: its 'first bad step' cell (here a fault) reads the
    same in report.md, report.html and the console summary, and the page has the kernels section inside it."""
    import dataclasses

    from harness.model.generation import run_generation
    from harness.model.kernel_lane import KernelLaneResult
    from harness.reports.generation import blocks, print_summary
    from tests.model.weights import small_weights

    run = run_generation(small_weights(0), prompt=[1], n_tokens=2, lanes=("exact", "fast"), router_check=False)
    faulted = KernelLaneResult("fast", "emu", "test.cu", [1], [], [3, 4], [], "fail",
                               fault="race on x[3] at step 0, layer 1\nsecond line")
    run = dataclasses.replace(run, backend="emu (test)", kernels=[faulted])
    assert run.failed
    cell = "fault: race on x[3] at step 0, layer 1"
    doc = blocks(run)
    assert f"| {cell} |" in markdown(doc)
    page = html_page("generate", doc)
    assert f"<td>{cell}</td>" in page and page.index("Kernels against their reference lane") < page.index("</body>")
    out = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(out):
        print_summary(run)
    assert cell in " ".join(out.getvalue().split())
