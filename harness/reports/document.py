"""A report as a list of blocks (headings, text, tables, charts, preformatted text), and its one Markdown, one
HTML and one console renderer. Row builders make each table once; every format renders that same table. Numbers
are formatted once (`fmt`), verdicts are the judges' vocabulary (harness.judging.registry) everywhere."""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence, Union

from harness.judging.registry import FAIL, PASS, TIE, UNCHECKED

# worst first: a group of cases shows its worst verdict; a group whose only non-pass cases are unchecked still
# says unchecked (it was not fully judged)
SEVERITY = {FAIL: 0, UNCHECKED: 1, TIE: 2, PASS: 3}
COLOURS = {PASS: "#cfeccf", TIE: "#fde7b0", FAIL: "#f5b5b5", UNCHECKED: "#dddddd"}
CONSOLE_STYLE = {FAIL: "red", TIE: "yellow", UNCHECKED: "dim"}
CSS = ("body{font-family:sans-serif;margin:2em;max-width:1300px} table{border-collapse:collapse;font-size:13px}"
       "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top} .pass{color:#176317} "
       ".fail{color:#b00;font-weight:bold} .tie{color:#a60} .unchecked{color:#666} section{margin-bottom:1.5em}"
       "code{font-size:12px} .diff{background:#fee} table.grid td.cell{text-align:center;min-width:64px;color:#111;"
       "font-weight:normal} table.grid td.cell a{color:#111;text-decoration:none;display:block} "
       "table.grid th.kname{text-align:left} td.empty{background:#fff}")


def fmt(x, digits: int = 3) -> str:
    """The one number format of every report: 3 significant digits, '-' for nothing."""
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}" if math.isfinite(x) else str(x)
    return str(x)


def percent(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


DIFF = "diff"     # the mark of a token that differs from the exact lane's


def piece_of(pieces, t: int) -> str:
    """Token t's printable piece (`pieces`: one per token id); <t> for an id outside the vocabulary."""
    return pieces[t] if 0 <= t < len(pieces) else f"<{t}>"


def token_text(t: int, pieces=None) -> str:
    """A token id with its piece, as every report shows it."""
    return f"{t} `{piece_of(pieces, t)}`" if pieces is not None else str(t)


def worst_verdict(verdicts) -> str:
    vs = list(verdicts)
    return min(vs, key=lambda v: SEVERITY.get(v, 1)) if vs else UNCHECKED


# -- blocks ----------------------------------------------------------------------------------------------------------
@dataclass
class Heading:
    text: str
    level: int = 2
    anchor: Optional[str] = None       # the HTML id links point at


@dataclass
class Text:
    """A paragraph; `code` spans in backticks render as code in HTML."""
    text: str


@dataclass
class Items:
    """A bulleted list of texts (inline `code` and **bold** as in Text)."""
    items: list


@dataclass
class Pre:
    text: str


@dataclass
class Chart:
    """Inline SVG; HTML only (the Markdown report has the numbers in its tables)."""
    svg: str


@dataclass
class Raw:
    """HTML that a row builder cannot express as a table (the conformance overview grid); HTML only."""
    html: str


@dataclass
class Cell:
    text: str
    mark: Optional[str] = None         # colours the cell: a verdict, or DIFF
    code: bool = False
    html: Optional[str] = None         # HTML-only richer content (nested details); the text stands elsewhere


@dataclass
class Table:
    columns: Sequence[str]
    rows: list = field(default_factory=list)           # rows of cells (str or Cell)
    title: str = ""                                     # the console table's title
    row_verdicts: list = field(default_factory=list)   # per row, colours the console row (optional)

    def add(self, cells: Sequence, verdict: Optional[str] = None) -> None:
        self.rows.append([c if isinstance(c, Cell) else Cell(fmt(c) if not isinstance(c, str) else c)
                          for c in cells])
        self.row_verdicts.append(verdict)


Block = Union[Heading, Text, Items, Pre, Chart, Raw, Table]


# -- Markdown --------------------------------------------------------------------------------------------------------
def _md_cell(c: Cell) -> str:
    text = c.text.replace("|", "\\|").replace("\n", " ")
    if c.code and text:
        return f"`{text}`"
    return f"**{text}**" if c.mark in SEVERITY else text


def markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += [f"{'#' * b.level} {b.text}", ""]
        elif isinstance(b, Text):
            out += [b.text, ""]
        elif isinstance(b, Items):
            out += [f"- {item}" for item in b.items] + [""]
        elif isinstance(b, Pre):
            out += ["    " + line for line in b.text.splitlines()] + [""]
        elif isinstance(b, Table):
            out += ["| " + " | ".join(b.columns) + " |", "|" + "---|" * len(b.columns)]
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in b.rows]
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


# -- HTML ------------------------------------------------------------------------------------------------------------
def _inline(text: str) -> str:
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def _html_cell(c: Cell) -> str:
    cls = f" class='{c.mark}'" if c.mark else ""
    body = c.html if c.html is not None else (f"<code>{html.escape(c.text)}</code>" if c.code and c.text
                                              else html.escape(c.text).replace("\n", "<br>"))
    return f"<td{cls}>{body}</td>"


def html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    rows = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in t.rows)
    return f"<table><tr>{head}</tr>{rows}</table>"


def html_body(blocks: Sequence[Block]) -> str:
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            ident = f" id='{b.anchor}'" if b.anchor else ""
            out.append(f"<h{b.level}{ident}>{_inline(b.text)}</h{b.level}>")
        elif isinstance(b, Text):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Items):
            out.append("<ul>" + "".join(f"<li>{_inline(str(i))}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Pre):
            out.append(f"<pre>{html.escape(b.text)}</pre>")
        elif isinstance(b, (Chart, Raw)):
            out.append(b.svg if isinstance(b, Chart) else b.html)
        elif isinstance(b, Table):
            out.append(html_table(b))
    return "\n".join(out)


def html_page(title: str, blocks: Sequence[Block], css: str = CSS) -> str:
    """The whole page, assembled from its blocks."""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{css}</style></head><body>\n{html_body(blocks)}\n</body></html>\n")


# -- console ---------------------------------------------------------------------------------------------------------
def console(tables: Sequence[Table], width: int = 160, file=None) -> None:
    """Print tables with rich (the terminal summary of a run)."""
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text as RichText
    con = Console(width=width, file=file)
    for t in tables:
        rt = RichTable(title=t.title or None)
        for col in t.columns:
            rt.add_column(col, overflow="fold")
        for row, verdict in zip(t.rows, t.row_verdicts or [None] * len(t.rows)):
            rt.add_row(*(RichText(c.text) for c in row), style=CONSOLE_STYLE.get(verdict))
        con.print(rt)


__all__ = ["Block", "COLOURS", "CSS", "Cell", "DIFF", "Chart", "Heading", "Items", "Pre", "Raw", "SEVERITY", "Table", "Text", "console",
           "fmt", "html_body", "html_page", "html_table", "markdown", "percent", "piece_of", "token_text",
           "worst_verdict"]
