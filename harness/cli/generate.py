"""`qconform generate`: token exactness of the decoder lanes against the exact lane on a model (the cached tiny
synthetic model by default), optionally against llama.cpp; writes report.json / report.md / report.html."""
from __future__ import annotations

from pathlib import Path

from harness.cli.options import (add_force_option, add_include_option, add_verify_weights_option, check_context,
                                 check_tokens, include_dirs, path_name, positive_float, positive_int,
                                 seed as seed_value, token_list)
from reference.decoder import LANES

BACKENDS = ("reference", "emu", "gpu", "auto")
COMPARE = ("llama.cpp",)
ONE_SCHEDULE_POLICIES = ("forward", "reverse", "warp-greedy", "random")      # harness.backends.emu.runs


def register(sub) -> None:
    p = sub.add_parser("generate", help="greedy generation per lane against the exact lane (token exactness)")
    p.add_argument("--model", type=path_name, default=None,
                   help="GGUF checkpoint (default: the cached tiny synthetic model, made on first use)")
    p.add_argument("--backend", default="reference", choices=BACKENDS,
                   help="where the decode steps run: 'reference' runs the NumPy lanes")
    p.add_argument("--lanes", default=",".join(LANES), help=f"comma-separated lanes ({', '.join(LANES)})")
    p.add_argument("--prompt-tokens", type=token_list, default=[1, 2, 3], help="comma-separated prompt token ids")
    p.add_argument("--tokens", type=positive_int, default=16,
                   help="tokens to generate (the prompt and these must fit the model's context)")
    p.add_argument("--out", type=path_name, default="reports/generate",
                   help="output folder, replaced as a whole when the run is complete")
    add_force_option(p)
    add_verify_weights_option(p)
    p.add_argument("--seed", type=seed_value, default=0, help="seed of the default synthetic model")
    p.add_argument("--compare", default=None, choices=COMPARE,
                   help="also run the GGUF through llama.cpp (extra 'llama': llama-cpp-python)")
    p.add_argument("--compare-stall", type=positive_float, default=None, metavar="SECONDS",
                   help="--compare: the longest wait for llama.cpp's next token, loading included, before its "
                        "stream is unchecked (default 600)")
    p.add_argument("--no-router-effect", action="store_true", help="skip the F32-router comparison")
    p.add_argument("--source", type=path_name, action="append", default=[],
                   help="CUDA file to take the kernels from (repeatable; default: qconform's emitters), e.g. the "
                        "seed's extracted GEN_DEVICE_KERNELS.cu, MOE_ROUTER_TOPK_KERNELS.cu, MOE_SINGLE_PASS_KERNELS.cu")
    add_include_option(p)
    p.add_argument("--lock", type=path_name, default=None,
                   help="token lock file: recorded when absent, else every kernel stream is checked against it")
    p.add_argument("--update-lock", action="store_true", help="re-bless --lock with the current streams")
    p.add_argument("--no-blame", action="store_true", help="do not rerun a failing step launch by launch")
    p.add_argument("--emu-schedules", type=positive_int, default=None,
                   help="emu: thread schedules per launch (default: the backend's, $QCONFORM_EMU_SCHEDULES or 5)")
    p.add_argument("--emu-schedule", default=None, choices=ONE_SCHEDULE_POLICIES, metavar="NAME",
                   help="emu: run every launch once under this one schedule (forward, reverse, warp-greedy, "
                        "random) in place of the checked ones, its results feeding the rest of the chain: what "
                        "that interleaving does to the tokens (no race is reported: nothing is compared)")
    p.set_defaults(func=run)


def parse_lanes(text: str) -> list[str]:
    lanes = [t.strip() for t in text.split(",") if t.strip()]
    if not lanes:
        raise ValueError("--lanes: empty lane list")
    for lane in lanes:
        if lane not in LANES:
            raise ValueError(f"--lanes: unknown lane {lane!r}; expected some of {', '.join(LANES)}")
    if len(set(lanes)) != len(lanes):
        raise ValueError(f"--lanes: a lane is listed twice in {text!r}")
    return lanes


def step_progress():
    """The progress of a generation run: decode steps of both phases under one total (harness.judging.progress)."""
    from harness.judging.progress import Progress
    return Progress(title="generate", unit="decode steps", interval_s=10.0, heartbeat=True)


def generation_section(out_dir: Path, n_tokens: int = 16) -> int:
    """The whole-model section of `qconform report`: every lane on the cached tiny synthetic model (seed 0,
    prompt 1,2,3), written under out_dir; 1 if a lane fails."""
    from harness.model.checkpoint import open_checkpoint
    from harness.model.generation import run_generation
    from harness.reports.generation import write_generation_report
    from harness.model.synthetic import default_model_path
    path = default_model_path(0)
    ckpt = open_checkpoint(path)
    with step_progress() as bar:
        result = run_generation(ckpt.weights, prompt=[1, 2, 3], n_tokens=n_tokens, model_name=path.name,
                                progress=bar)
    write_generation_report(out_dir, result, _pieces(ckpt))
    verdicts = ", ".join(f"{s.name} {s.verdict}" for s in result.lanes)
    print(f"generation (tiny synthetic model, {n_tokens} tokens): {verdicts} ({result.elapsed_s:.1f} s)")
    return 1 if result.failed else 0


def _check_paths(args) -> None:
    """Every input readable and every output writable, before the model is opened."""
    from harness.cli.lifecycle import check_input, check_output
    for src in args.source:
        check_input(src, "--source")
    include_dirs(args)
    if args.model and Path(args.model).exists():
        check_input(args.model, "--model")
    if args.lock and (args.update_lock or not Path(args.lock).exists()):
        check_output(args.lock, "--lock", "file", force=True)        # recorded or re-blessed at the end
    elif args.lock:
        check_input(args.lock, "--lock")


def run(args) -> int:
    if args.backend == "reference":
        for flag, given in (("--source", args.source), ("-I", args.include_dirs), ("--lock", args.lock),
                            ("--update-lock", args.update_lock),
                            ("--emu-schedules", args.emu_schedules is not None),
                            ("--emu-schedule", args.emu_schedule is not None)):
            if given:
                raise ValueError(f"{flag}: applies to the kernels; give --backend emu, gpu or auto")
    elif args.compare is not None:
        raise ValueError("--compare: compare with llama.cpp on --backend reference (the kernel backends report "
                         "their own streams)")
    if args.emu_schedule is not None and args.emu_schedules is not None:
        raise ValueError("--emu-schedule: runs one schedule; leave out --emu-schedules")
    if args.compare_stall is not None and args.compare is None:
        raise ValueError("--compare-stall: limits the --compare run; give --compare too")
    if args.update_lock and not args.lock:
        raise ValueError("--update-lock: give the lock file with --lock")
    lanes = parse_lanes(args.lanes)
    _check_paths(args)
    from harness.cli.lifecycle import RunFolder
    from harness.model.checkpoint import open_checkpoint
    from harness.model.synthetic import resolve_model
    folder = RunFolder(args.out, "--out", args.force, "generate")
    path = resolve_model(args.model, seed=args.seed)
    ckpt = open_checkpoint(path, verify=args.verify_weights)
    prompt = check_tokens(args.prompt_tokens, ckpt.config.vocab, "--prompt-tokens")
    check_context(ckpt.metadata, len(prompt) + args.tokens, "--tokens",
                  f"the prompt ({len(prompt)} tokens) and {args.tokens} generated tokens")
    pieces = _pieces(ckpt)
    external, external_lanes = None, ()
    if args.compare == "llama.cpp":
        from harness.model.llama_cpp import STALL_S, import_llama, llama_streams
        import_llama()              # before any decoding: say now that the extra is missing
        stall_s = args.compare_stall or STALL_S
        external, external_lanes = (lambda p, fed: llama_streams(path, p, fed, args.tokens, stall_s)), ("fast",)
    from harness.model.generation import run_generation
    from harness.reports.generation import print_summary, write_generation_report
    print(f"qconform generate: {path.name}, lanes {','.join(lanes)}, prompt {prompt}, {args.tokens} tokens, "
          f"backend {args.backend}")
    with folder:
        kernels = _kernel_job(args, ckpt, lanes, prompt) if args.backend != "reference" else None
        with step_progress() as bar:
            result = run_generation(ckpt.weights, prompt=prompt, n_tokens=args.tokens, lanes=lanes,
                                    model_name=path.name, router_check=not args.no_router_effect, external=external,
                                    external_lanes=external_lanes, kernels=kernels, progress=bar)
        write_generation_report(folder.path, result, pieces)
        print_summary(result, pieces)
        print(f"({result.elapsed_s:.1f} s)")
        rc = 1 if result.failed else 0
        folder.finish(rc, args, args.seed)
    print(folder.wrote_line())
    return rc


def _kernel_job(args, ckpt, lanes, prompt):
    """--backend emu|gpu|auto: every kernel lane's program loaded on the backend (phase 2 of the run)."""
    from harness.backends.base import source_flags
    from harness.model.generation import KernelJob
    from harness.model.kernel_generation import KernelSetup, kernel_lanes, prepare_lanes, read_sources
    from harness.model.locks import LockRequest
    from harness.judging.runner import resolve_backend
    klanes = kernel_lanes(lanes)
    if not klanes:
        raise ValueError(f"--lanes: none of {', '.join(lanes)} has kernels (the exact lane is reference only)")
    options = {}
    if args.emu_schedules is not None:
        options["schedules"] = args.emu_schedules
    if args.emu_schedule is not None:
        options["schedule"] = args.emu_schedule
    backend = resolve_backend(args.backend) if not options else _emu_with(args.backend, options)
    setup = KernelSetup(backend, read_sources(args.source), list(args.source), args.model, args.seed,
                        not args.no_blame, tuple(args.include_dirs), source_flags(args.source, args.include_dirs))
    runners = prepare_lanes(ckpt.weights, klanes, len(prompt) + args.tokens - 1, setup)
    lock = LockRequest(Path(args.lock), ckpt.sha256(), args.update_lock) if args.lock else None
    return KernelJob(setup, runners, lock)


def _emu_with(name: str, options: dict):
    flag = "--emu-schedule" if "schedule" in options else "--emu-schedules"
    if name == "gpu":
        raise ValueError(f"{flag}: applies to the emu backend, not --backend gpu")
    from harness.backends import gpu_unavailable_reason
    if name == "auto" and gpu_unavailable_reason() is None:
        raise ValueError(f"{flag}: --backend auto picked the GPU here; give --backend emu")
    from harness.backends import get_backend
    return get_backend("emu", **options)


def _pieces(ckpt):
    """Each token id's printable piece, or None for a checkpoint without a vocabulary. The checkpoint's
    `tokens` are already pieces (escaped once by harness.model.pieces); escaping them again printed a byte
    token as \\xa5."""
    return ckpt.tokens or None
