"""`qconform extract FILE.rs --out DIR`: write the CUDA kernel sets of a Rust emitter as .cu files."""
from __future__ import annotations

from harness.cli.options import add_force_option, path_name
from harness.toolchain.rust_literals import extract_to_dir

# Values for the seed's format! templates: stage index 0 names its kernels k0_*; the tensor-core GEMM's
# auto-tuned subtile count is given its smallest legal value. Override with --define NAME=VALUE.
DEFAULT_DEFINES = {"i": 0, "nt": 2}


def register(sub) -> None:
    p = sub.add_parser("extract", help="decode the CUDA string literals of a Rust emitter into .cu files")
    p.add_argument("source", type=path_name, help="Rust source file, e.g. the seed's qwen_emit.rs")
    p.add_argument("--out", type=path_name, required=True,
                   help="folder for the .cu files, replaced as a whole when the run is complete")
    add_force_option(p)
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                   help="value for a format! placeholder (default: i=0, nt=2)")
    p.set_defaults(func=run)


def parse_defines(items: list[str]) -> dict[str, str]:
    values: dict[str, object] = dict(DEFAULT_DEFINES)
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--define: expected NAME=VALUE, got {item!r}")
        values[name.strip()] = value
    return values


def run(args) -> int:
    from harness.cli.lifecycle import RunFolder, check_input
    src = check_input(args.source, "source")
    if not src.is_file():
        raise ValueError(f"source: {args.source} is not a file")
    defines = parse_defines(args.define)
    with RunFolder(args.out, "--out", args.force, "extract") as folder:
        written, skipped = extract_to_dir(src, folder.path, defines)
        rc = 0 if written else 1
        folder.finish(rc, args)
    for path in written:
        print(f"wrote {folder.shown(path)}")
    for ks in skipped:
        print(f"skipped {ks.name} (line {ks.line}): template placeholders left unfilled: {', '.join(ks.unfilled)}")
    print(f"{len(written)} kernel set(s) written, {len(skipped)} template(s) skipped")
    return rc
