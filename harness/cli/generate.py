"""`qconform generate`: token exactness of the decoder lanes against the exact lane on a model (the cached tiny
synthetic model by default), optionally against llama.cpp; writes report.json / report.md / report.html."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.cli.options import (add_force_option, add_verify_weights_option, check_context, check_tokens,
                                 path_name, positive_int, seed as seed_value, token_list)
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
    p.add_argument("--no-router-effect", action="store_true", help="skip the F32-router comparison")
    p.add_argument("--source", type=path_name, action="append", default=[],
                   help="CUDA file to take the kernels from (repeatable; default: qconform's emitters), e.g. the "
                        "seed's extracted GEN_DEVICE_KERNELS.cu, MOE_ROUTER_TOPK_KERNELS.cu, MOE_SINGLE_PASS_KERNELS.cu")
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


class StepProgress:
    """A rich bar on a terminal; otherwise a plain line every PLAIN_EVERY_S seconds."""

    PLAIN_EVERY_S = 10.0

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = self.task = None
        self.last = time.monotonic()

    def __enter__(self):
        if self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(file=self.stream))
            self.bar.__enter__()
        return self

    def __call__(self, label: str, done: int, total: int) -> None:
        if self.bar is not None:
            if self.task is None:
                self.task = self.bar.add_task(label, total=total)
            self.bar.update(self.task, completed=done, description=f"decode steps ({label})")
            return
        now = time.monotonic()
        if now - self.last >= self.PLAIN_EVERY_S or done == total:
            self.last = now
            print(f"generate: {done}/{total} decode steps ({label})", file=self.stream, flush=True)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)


def generation_section(out_dir: Path, n_tokens: int = 16) -> int:
    """The whole-model section of `qconform report`: every lane on the cached tiny synthetic model (seed 0,
    prompt 1,2,3), written under out_dir; 1 if a lane fails."""
    from harness.model.checkpoint import open_checkpoint
    from harness.model.generation import run_generation
    from harness.reports.generation import write_generation_report
    from harness.model.synthetic import default_model_path
    path = default_model_path(0)
    ckpt = open_checkpoint(path)
    with StepProgress() as progress:
        result = run_generation(ckpt.weights, prompt=[1, 2, 3], n_tokens=n_tokens, model_name=path.name,
                                progress=progress)
    write_generation_report(out_dir, result, _piece_function(ckpt))
    verdicts = ", ".join(f"{s.name} {s.verdict}" for s in result.lanes)
    print(f"generation (tiny synthetic model, {n_tokens} tokens): {verdicts} ({result.elapsed_s:.1f} s)")
    return 1 if result.failed else 0


def _check_paths(args) -> None:
    """Every input readable and every output writable, before the model is opened."""
    from harness.cli.lifecycle import check_input, check_output
    for src in args.source:
        check_input(src, "--source")
    if args.model and Path(args.model).exists():
        check_input(args.model, "--model")
    if args.lock and (args.update_lock or not Path(args.lock).exists()):
        check_output(args.lock, "--lock", "file", force=True)        # recorded or re-blessed at the end
    elif args.lock:
        check_input(args.lock, "--lock")


def run(args) -> int:
    if args.backend == "reference":
        for flag, given in (("--source", args.source), ("--lock", args.lock), ("--update-lock", args.update_lock),
                            ("--emu-schedules", args.emu_schedules is not None),
                            ("--emu-schedule", args.emu_schedule is not None)):
            if given:
                raise ValueError(f"{flag}: applies to the kernels; give --backend emu, gpu or auto")
    elif args.compare is not None:
        raise ValueError("--compare: compare with llama.cpp on --backend reference (the kernel backends report "
                         "their own streams)")
    if args.emu_schedule is not None and args.emu_schedules is not None:
        raise ValueError("--emu-schedule: runs one schedule; leave out --emu-schedules")
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
    piece = _piece_function(ckpt)
    external, external_lanes = None, ()
    if args.compare == "llama.cpp":
        from harness.model.llama_cpp import import_llama, llama_streams
        import_llama()              # before any decoding: say now that the extra is missing
        external, external_lanes = (lambda p, fed: llama_streams(path, p, fed, args.tokens)), ("fast",)
    print(f"qconform generate: {path.name}, lanes {','.join(lanes)}, prompt {prompt}, {args.tokens} tokens, "
          f"backend {args.backend}")
    with folder:
        if args.backend != "reference":
            rc = _run_kernels(args, ckpt, path, lanes, prompt, piece, folder.path)
        else:
            from harness.model.generation import run_generation
            from harness.reports.generation import write_generation_report
            with StepProgress() as progress:
                result = run_generation(ckpt.weights, prompt=prompt, n_tokens=args.tokens, lanes=lanes,
                                        model_name=path.name, router_check=not args.no_router_effect,
                                        external=external, external_lanes=external_lanes, progress=progress)
            write_generation_report(folder.path, result, piece)
            print_summary(result, piece)
            print(f"({result.elapsed_s:.1f} s)")
            rc = 1 if result.failed else 0
        folder.finish(rc, args, args.seed)
    print(folder.wrote_line())
    return rc


def _run_kernels(args, ckpt, path, lanes, prompt, piece, out: Path) -> int:
    """--backend emu|gpu|auto: every kernel lane on the backend, against its reference lane and exact."""
    from harness.model.generation import run_generation
    from harness.model.kernel_generation import (KernelSetup, KernelStreams, kernel_lanes, prepare_lanes,
                                                 read_sources)
    from harness.reports.kernel_generation import write_report
    from harness.model.locks import Stream, apply_lock
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
                        not args.no_blame)
    maxseq = len(prompt) + args.tokens - 1
    runners = prepare_lanes(ckpt.weights, klanes, maxseq, setup)
    with StepProgress() as progress:
        streams = KernelStreams(ckpt.weights, runners, args.tokens, setup, backend.name, progress)
        result = run_generation(ckpt.weights, prompt=prompt, n_tokens=args.tokens, lanes=lanes, model_name=path.name,
                                router_check=not args.no_router_effect, external=streams,
                                external_lanes=tuple(klanes), progress=progress)
    locks = []
    if args.lock:
        sha = ckpt.sha256()
        locks = apply_lock(args.lock, [Stream(sha, tuple(prompt), r.lane, r.backend, tuple(r.tokens), r.source)
                                       for r in streams.results], update=args.update_lock)
    meta = {"backend": backend.describe(), "sources": list(args.source)}
    write_report(out, result, streams.results, locks, piece, meta)
    print_summary(result, piece)
    print_kernel_summary(streams.results, locks)
    print(f"({result.elapsed_s:.1f} s)")
    failed = result.failed or any(r.failed for r in streams.results) or any(c.failed for c in locks)
    return 1 if failed else 0


def _emu_with(name: str, options: dict):
    flag = "--emu-schedule" if "schedule" in options else "--emu-schedules"
    if name == "gpu":
        raise ValueError(f"{flag}: applies to the emu backend, not --backend gpu")
    from harness.backends import gpu_unavailable_reason
    if name == "auto" and gpu_unavailable_reason() is None:
        raise ValueError(f"{flag}: --backend auto picked the GPU here; give --backend emu")
    from harness.backends import get_backend
    return get_backend("emu", **options)


def print_kernel_summary(results, locks) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title="kernels against their reference lane")
    for col in ("lane", "backend", "verdict", "first bad step", "same tokens", "s/step", "blame"):
        table.add_column(col, overflow="fold")
    for r in results:
        first = "none" if r.first_bad is None else str(r.steps[r.first_bad].step)
        if r.fault:
            first = "fault"
        blame = ""
        if r.blame:
            blame = r.blame["finding"] + (f"\n{r.blame['replay']}" if r.blame.get("replay") else "")
        style = {"fail": "red", "tie": "yellow"}.get(r.verdict)
        table.add_row(r.lane, r.backend, r.verdict, first, "yes" if r.tokens == r.ref_tokens else "no",
                      f"{r.seconds_per_step:.3f}", blame, style=style)
    Console(width=200).print(table)
    for c in locks:
        print(f"lock: {c.stream.lane} ({c.stream.backend}): {c.status}" + (f": {c.message}" if c.failed else ""))


def _piece_function(ckpt):
    if not ckpt.tokens:
        return None
    from harness.model.pieces import token_pieces
    pieces = token_pieces(ckpt.tokens)
    return lambda t: pieces[t] if 0 <= t < len(pieces) else f"<{t}>"


def print_summary(result, piece=None) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=f"generate {result.model}: streams against the exact lane")
    for col in ("stream", "verdict", "first divergence", "exact margin", "gap", "bound", "same top-1", "KL mean",
                "KL max", "max logit err", "median step err / bound", "bound/err min, median"):
        table.add_column(col)
    for s in result.lanes + result.external:
        d, t = s.divergence, s.teacher
        style = {"fail": "red", "tie": "yellow"}.get(s.verdict)
        table.add_row(s.name, s.verdict, "none" if d is None else str(d.index),
                      "" if d is None else f"{d.exact_margin:.3g}", "" if d is None else f"{d.exact_gap:.3g}",
                      "" if d is None else f"{d.bound:.3g}", f"{100 * t['top1_agreement']:.1f}%",
                      f"{t['kl_mean']:.3g}", f"{t['kl_max']:.3g}", f"{t['max_logit_error']:.3g}",
                      f"{t['median_step_error']:.3g} / {t['median_step_bound']:.3g}",
                      f"{t['bound_over_error_min']:.3g}, {t['bound_over_error_median']:.3g}", style=style)
    Console(width=160).print(table)
    ex = result.exact_tokens
    shown = " ".join(f"{t}{'' if piece is None else '[' + piece(t) + ']'}" for t in ex)
    print(f"exact tokens: {shown}")
