"""`qconform replay-launch`: rerun one launch of a lane's decode step on the reference lane's inputs.

Blame prints this command for the launch it names. The step is the last token of --fed (the tokens fed so far,
prompt and generated); every input of the launch (weights, the KV rows of the earlier positions, the buffers
the step's earlier launches wrote) is the reference decoder's value, in the kernel's layout, and the launch's
outputs are judged by its op's conformance judge under its per-case budget.
"""
from __future__ import annotations

import sys

from harness.cli.options import (add_include_option, add_verify_weights_option, check_tokens, include_dirs,
                                 non_negative_int, path_name, seed as seed_value, token_list)
from harness.model.program import LANES


def register(sub) -> None:
    p = sub.add_parser("replay-launch", help="rerun one launch of a decode step on the reference lane's inputs")
    p.add_argument("--lane", required=True, choices=LANES)
    p.add_argument("--fed", required=True, type=token_list,
                   help="comma-separated tokens fed up to and including the step")
    p.add_argument("--launch", required=True, type=non_negative_int, help="launch index in the step (as blame names it)")
    p.add_argument("--model", type=path_name, default=None,
                   help="GGUF checkpoint or synthetic preset (default: the tiny model)")
    p.add_argument("--seed", type=seed_value, default=0, help="seed of the default synthetic model")
    p.add_argument("--source", type=path_name, action="append", default=[], help="CUDA file(s) the kernels came from")
    add_include_option(p)
    p.add_argument("--backend", default="auto", choices=["auto", "emu", "gpu"])
    add_verify_weights_option(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from harness.model.blame import blame_step
    from harness.model.checkpoint import open_checkpoint
    from harness.model.kernel_generation import read_sources
    from harness.model.program import build_program
    from harness.model.synthetic import resolve_model
    from harness.judging.runner import resolve_backend
    from harness.cli.lifecycle import check_input
    from harness.backends.base import source_flags
    for src in args.source:
        check_input(src, "--source")
    flags = source_flags(args.source, include_dirs(args))
    ckpt = open_checkpoint(resolve_model(args.model, seed=args.seed), verify=args.verify_weights)
    fed = check_tokens(args.fed, ckpt.config.vocab, "--fed")
    program = build_program(ckpt.config, args.lane, maxseq=len(fed), sources=read_sources(args.source) or None)
    if not 0 <= args.launch <= program.advance.index:
        raise ValueError(f"--launch: lane {args.lane} has launches 0..{program.advance.index}, not {args.launch}")
    be = resolve_backend(args.backend)
    module = be.load(program.code, flags)
    rep = blame_step(ckpt.weights, program, module, fed, only=args.launch)
    lv = rep.launches[0]
    print(f"replay-launch {args.lane}, step {rep.step} (position {rep.step}), {lv.where}\n"
          f"  model: {ckpt.path.name}\n  source: {program.source_label}\n  backend: {be.name}\n"
          f"  inputs: the reference lane's values after feeding {fed}\n  verdict: {lv.verdict.upper()}")
    if lv.output:
        print(f"  worst output: {lv.output}, element {lv.worst_index}, {lv.usage} x budget (budget there {lv.budget})")
    if lv.reason:
        print(f"  reason: {lv.reason}")
    for n in rep.notes:
        print(f"  note: {n}", file=sys.stderr)
    return 1 if lv.verdict == "fail" else 0
