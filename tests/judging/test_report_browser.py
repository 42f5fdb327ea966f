"""report.html in a real browser: headless Chromium renders the overview grid, coloured by verdict, failing
kernels first, and the histograms with their labelled axes. Skips with the reason where no Chromium is
installed (ci/test.sh installs it)."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest

from harness.reports.charts import svg_histogram
from harness.reports.document import COLOURS
from harness.reports.writer import html_report

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def _browser() -> str:
    for b in BROWSERS:
        path = shutil.which(b)
        if path:
            return path
    pytest.skip(f"no headless browser found (looked for {', '.join(BROWSERS)}); install chromium")


def _png_pixels(data: bytes) -> np.ndarray:
    """(height, width, 3) uint8 of an 8-bit non-interlaced RGB/RGBA PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            ch = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * ch)
    out = np.zeros((h, w * ch), dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(w * ch, dtype=np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:                                     # 1 (sub), 3 (average), 4 (Paeth) need the left neighbour
            cur = np.zeros(w * ch, dtype=np.int32)
            for x in range(w * ch):
                a = cur[x - ch] if x >= ch else 0
                b = prev[x]
                c = prev[x - ch] if x >= ch else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + pred) & 255
        out[y] = cur
    return out.reshape(h, w, ch)[:, :, :3].astype(np.uint8)


def _rgb(hexcol: str) -> tuple[int, int, int]:
    return tuple(int(hexcol[i:i + 2], 16) for i in (1, 3, 5))


def _row(kernel: str, mode: str, shape: str, verdict: str, margin: float, hist=None) -> dict:
    return {"case": f"{kernel}[{mode},{shape},default,gauss,seed=1]", "kernel": kernel, "mode": mode, "shape": shape,
            "verdict": verdict, "margin": margin, "reason": "" if verdict == "pass" else "over budget",
            "metrics": {"max_abs": 1e-6, "max_ulp": None, "metric_note": "integer output"},
            "error_distribution": hist, "headline_comparison": "y vs mode", "comparisons": [], "notes": []}


def _doc(rows):
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in ("pass", "tie", "fail", "unchecked")}
    return {"meta": {"backend": "emu", "seed": 1, "shapes": ["tiny", "tails"]}, "summary": counts,
            "unchecked_kernels": [], "rows": rows}


def test_overview_renders_in_headless_chromium(tmp_path):
    browser = _browser()
    from harness.judging.metrics import usage_histogram
    hist = usage_histogram(np.array([1e-9, 1e-4, 2e-4, 0.0]), np.full(4, 1e-3))
    # 'aaa_ok' sorts first by name; the failing 'zzz_bad' must still be listed first
    rows = [_row("aaa_ok", "int8act", "tiny", "pass", 0.6, hist), _row("aaa_ok", "int8act", "tails", "pass", 0.5, hist),
            _row("zzz_bad", "int8act", "tiny", "fail", -3.0, hist), _row("zzz_bad", "int8act", "tails", "pass", 0.2)]
    page = tmp_path / "report.html"
    page.write_text(html_report(_doc(rows)))
    shot = tmp_path / "shot.png"
    common = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,700"]
    r = subprocess.run([browser, *common, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True,
                       timeout=120)
    assert shot.is_file(), f"no screenshot: {r.stderr[-2000:]}"
    px = _png_pixels(shot.read_bytes())
    ys = {}
    for verdict in ("pass", "fail"):
        hit = np.all(np.abs(px.astype(int) - np.array(_rgb(COLOURS[verdict]))) <= 3, axis=2)
        assert hit.sum() > 200, f"no {verdict}-coloured overview cell in the screenshot"
        ys[verdict] = np.flatnonzero(hit.any(axis=1))
    # the failing kernel's row (a fail and a pass cell) comes first; the passing kernel's row lies below it
    assert ys["fail"].max() < ys["pass"].max() and ys["fail"].min() <= ys["pass"].min(), \
        "the failing kernel's row is not above the passing one"
    dom = subprocess.run([browser, *common, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert "id=\"overview\"" in dom and "log10(|error| / budget)" in dom and "href=\"#k-zzz_bad-int8act\"" in dom


def test_histogram_axes_are_labelled_and_the_budget_line_is_drawn():
    from harness.judging.metrics import usage_histogram
    err = np.array([0.0, 1e-12, 5e-4, 2e-3, 0.5])
    h = usage_histogram(err, np.full(5, 1e-3))
    assert h["exact"] == 1 and h["below"] == 1 and sum(h["counts"]) + h["above"] == 3
    over = sum(c for e, c in zip(h["edges"], h["counts"]) if e >= 0)
    assert over == 2                                  # 2e-3 and 0.5 are over their budget
    svg = svg_histogram(h, "t")
    assert "log10(|error| / budget)" in svg and ">elements<" in svg and ">budget<" in svg
    assert svg_histogram(None, "t").startswith("<p")


def test_a_rows_metrics_budget_and_margin_come_from_one_comparison():
    """The headline is the budgeted comparison that decided the verdict (else the one nearest its budget); the
    row's metrics, budget and margin are all its own; a token tie without a budget keeps a budgeted headline."""
    from types import SimpleNamespace

    from harness.judging.records import headline
    from harness.judging.registry import Comparison
    mode = Comparison("y", "mode", "pass", {"max_abs": 1e-6}, "gamma", 1e-5, 1e-6, 0.1)
    deq = Comparison("y", "dequant", "pass", {"max_abs": 3e-3}, "gamma + act", 4e-3, 3e-3, 0.75)
    tok = Comparison("token (greedy argmax)", "dequant", "tie", {}, "gap <= 2 err")
    bad = Comparison("y", "dequant", "fail", {"max_abs": 1.0}, "gamma + act", 1e-3, 1.0, 1000.0)
    assert headline(SimpleNamespace(comparisons=[mode, deq])) is deq          # nearest its budget
    assert headline(SimpleNamespace(comparisons=[mode, deq, tok])) is deq     # budgeted, though the tie decided
    assert headline(SimpleNamespace(comparisons=[deq, tok, mode, bad])) is bad
