"""`qconform golden check|update`: byte-for-byte locks of emitted kernels (and of external kernel source).

  qconform golden check                      re-emit the golden matrix, compare with golden/, exit 1 on a difference
  qconform golden update                     re-bless golden/ and MANIFEST.json, refresh RESOURCES.json (nvcc)
  qconform golden check  --source F.cu --lock golden/external/NAME.cu    compare another compiler's output
  qconform golden update --source F.cu --lock golden/external/NAME.cu    lock it
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from emitters.registry import GOLDEN_SHAPES
from harness.cli.options import path_name


def register(sub) -> None:
    p = sub.add_parser("golden", help="check or re-bless the byte-for-byte locks of emitted kernels",
                       description=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["check", "update"],
                   help="check: re-emit and compare byte for byte (exit 1 on a difference); update: re-bless")
    p.add_argument("--golden-dir", type=path_name, default=None,
                   help="lock folder (default: ./golden if present, else the checkout's golden/)")
    p.add_argument("--shapes", default=",".join(GOLDEN_SHAPES), help="comma-separated shape sets of the matrix")
    p.add_argument("--source", default=None, help="external kernel source file to check or lock (needs --lock)")
    p.add_argument("--lock", default=None, help="external lock path under golden/external/ (needs --source)")
    p.add_argument("--archs", default="sm_80,sm_90", help="archs for RESOURCES.json (update)")
    p.add_argument("--no-resources", action="store_true", help="update: do not compile or touch RESOURCES.json")
    p.set_defaults(func=run)


def _console():
    from rich.console import Console
    return Console(highlight=False, soft_wrap=True)


def _print_diff(console, text: str) -> None:
    if console.is_terminal:
        from rich.syntax import Syntax
        console.print(Syntax(text, "diff", theme="ansi_dark", word_wrap=False))
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _report(console, report) -> int:
    for d in report.differences:
        console.print(f"[bold red]{d.kind}[/]: {d.path}" if console.is_terminal else f"{d.kind}: {d.path}")
        if d.detail.startswith("---"):
            _print_diff(console, d.detail)
        else:
            print(f"  {d.detail}")
    for w in report.warnings:
        print(f"warning: {w}")
    n = len(report.differences)
    print(f"golden check: {report.checked} file(s) checked, {n} difference(s)" + ("" if n else ", all locks match"))
    return 1 if n else 0


def run(args) -> int:
    from harness.toolchain import golden

    if (args.source is None) != (args.lock is None):
        raise ValueError("--source and --lock: give both (external lock) or neither (golden matrix)")
    root = Path(args.golden_dir) if args.golden_dir else golden.default_root()
    console = _console()
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if not shapes:
        raise ValueError("--shapes: empty shape list")

    if args.action == "check":
        if not root.is_dir() and not args.source:
            raise ValueError(f"--golden-dir: no golden lock folder at {root}; run in a checkout, install qconform "
                             f"with its locks, or give --golden-dir")
        t0 = time.perf_counter()
        if args.source:
            report = golden.check_external(root, args.source, args.lock)
        else:
            report = golden.check(root, shapes=shapes)
        rc = _report(console, report)
        print(f"({time.perf_counter() - t0:.2f} s)")
        return rc

    # update
    from harness.cli.lifecycle import check_output
    check_output(str(root), "--golden-dir", "update")
    errors: dict[str, str] = {}
    if args.source:
        changes = golden.update_external(root, args.source, args.lock)
    else:
        emitted = golden.emit_matrix(shapes)
        errors = emitted.errors
        changes = golden.update(root, emitted, shapes)
    for c in changes:
        print(f"{c.kind:8s} {c.path}")
    for rel, err in sorted(errors.items()):
        print(f"error    {rel}: not re-blessed, the emitter failed: {err}")
    print(f"golden update: {len(changes)} change(s)" + (f", {len(errors)} emit error(s)" if errors else ""))
    rc = 1 if errors else 0
    if args.no_resources:
        return rc
    return max(rc, _update_resources(root, [a.strip() for a in args.archs.split(",") if a.strip()]))


def _update_resources(root: Path, archs: list[str]) -> int:
    from harness.toolchain import golden
    from harness.toolchain.finder import toolchain_or_reason

    tc, why = toolchain_or_reason()
    if tc is None:
        print(f"warning: {golden.RESOURCES} not refreshed: {why}")
        return 0
    t0 = time.perf_counter()
    table = golden.resource_table(root, archs, tc)
    written = golden.write_resources(root, table)
    failed = golden.failed_compiles(table)
    print(f"{golden.RESOURCES}: {'written' if written else 'unchanged'} ({len(table['files'])} file(s) x "
          f"{len(archs)} arch(s), {time.perf_counter() - t0:.1f} s)")
    for f in failed:
        print(f"compile failed: {f} (see {golden.RESOURCES})")
    return 1 if failed else 0
