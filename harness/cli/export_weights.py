"""`qconform export-weights FILE.gguf --out DIR`: the raw weight files (int8 quants, float32 scales and norms)
that the seed's generation program loads, verified against gguf-py's dequantization."""
from __future__ import annotations

from harness.cli.options import add_force_option, path_name


def register(sub) -> None:
    p = sub.add_parser("export-weights", help="write a checkpoint's weights as the seed generation program's "
                                              "raw files (.q/.s/.f)")
    p.add_argument("model", type=path_name, help="a qwen3moe GGUF checkpoint")
    p.add_argument("--out", type=path_name, required=True,
                   help="folder to create (written to a temporary name first; an existing one needs --force)")
    add_force_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from harness.cli.lifecycle import check_input, check_output
    from harness.model.export import export_weights
    check_input(args.model, "model")
    out = check_output(args.out, "--out", "folder", args.force)
    res = export_weights(args.model, out, progress=not args.no_progress, replace=args.force)
    print(f"wrote {res.files} files ({res.bytes / 1e6:.1f} MB) to {res.folder} in {res.seconds:.1f} s "
          f"({res.bytes / 1e6 / max(res.seconds, 1e-9):.1f} MB/s), each verified against gguf-py's dequantization")
    return 0
