"""`qconform make-model --preset tiny|tails|qwen3-30b-a3b [--layers N] [--seed S] --out FILE.gguf`: write a
synthetic qwen3moe checkpoint (Q8_0 matrices, F32 norms and router, a byte-level gpt2 vocabulary)."""
from __future__ import annotations

import time

from harness.cli.options import add_force_option, path_name, positive_int, seed as seed_value


def register(sub) -> None:
    from harness.model.synthetic import PRESETS
    p = sub.add_parser("make-model", help="write a synthetic qwen3moe GGUF checkpoint (seeded, streamed)")
    p.add_argument("--preset", required=True, choices=PRESETS, help="model dimensions (reference/shapes.py)")
    p.add_argument("--layers", type=positive_int, default=None, help="number of blocks (default: the preset's)")
    p.add_argument("--seed", type=seed_value, default=0, help="weight seed (default 0)")
    p.add_argument("--out", type=path_name, required=True,
                   help="the .gguf file to write (written to a temporary name first; an existing file needs --force)")
    add_force_option(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    from harness.cli.lifecycle import check_output
    from harness.model.synthetic import write_synthetic_gguf
    out = check_output(args.out, "--out", "file", args.force)
    t0 = time.monotonic()
    out = write_synthetic_gguf(args.preset, out, layers=args.layers, seed=args.seed, progress=not args.no_progress)
    size = out.stat().st_size
    dt = time.monotonic() - t0
    print(f"wrote {out} ({size / 1e6:.1f} MB in {dt:.1f} s, {size / 1e6 / max(dt, 1e-9):.1f} MB/s)")
    return 0
