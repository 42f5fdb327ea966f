"""`qconform racescan FILE.cu`: does one kernel of any CUDA source race? It runs on the CPU backend, with the
happens-before race detector, on inputs generated from a recorded seed.

The launch and the arguments come from the file's leading comment, the race corpus's header:
`// launch: KERNEL grid=X[,Y,Z] block=X[,Y,Z] [shared=BYTES]` and `// args: name:dtype[count]=fill ...`
(harness.racescan.spec). --kernel, --grid, --block, --shared and --args take precedence over the header. A
scalar declared `range(lo,hi)` is swept over its domain (harness.racescan.sweep), and --at NAME=VALUE runs
one point of it, which is how a found race is replayed. --reading counts the races as a verifier would
(harness.racescan.reading); the races it leaves out are printed, never hidden.
Exit status: 0 clean; 1 a race or another kernel fault; 2 bad input; 3 nothing was checked (the source does
not build on the CPU backend, or the emulator's own limits stopped the run).
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import re
import shlex
import sys
from typing import NamedTuple

from harness.cli.options import (add_include_option, include_dirs, non_negative_int, path_name, positive_float,
                                 positive_int, seed as seed_value)

EXIT_CLEAN, EXIT_FAULT, EXIT_UNCHECKED = 0, 1, 3
# harness.racescan.reading.BY_OPTION's names (a test holds them equal), here so that the CLI starts without
# importing the race scan
READINGS = ("memory-model", "gpuverify", "gpuverify-warp-sync", "gpuverify-intra-group",
            "gpuverify-warp-sync-intra-group", "faial", "faial-grid-level", "faial-all-levels", "gklee")


def _point(text: str) -> dict[str, int]:
    """`name=value[,name=value]`: one point of the swept scalars."""
    point = {}
    for item in text.split(","):
        name, eq, value = item.partition("=")
        if not eq or not name.strip().isidentifier():
            raise argparse.ArgumentTypeError(f"expected NAME=VALUE[,NAME=VALUE], got {text!r}")
        try:
            point[name.strip()] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name.strip()}: expected an integer value, got {value!r}") from None
    return point


def register(sub) -> None:
    p = sub.add_parser("racescan", help="run one kernel of any .cu file under the race detector")
    p.add_argument("source", type=path_name, help="CUDA C file (its leading comment may give launch and args)")
    p.add_argument("--kernel", help="the __global__ kernel to run (default: the header's launch line)")
    p.add_argument("--grid", help="grid size X[,Y,Z] (default: the header's)")
    p.add_argument("--block", help="block size X[,Y,Z] (default: the header's)")
    p.add_argument("--shared", type=non_negative_int, help="dynamic shared memory in bytes (default: the header's, else 0)")
    p.add_argument("--args", dest="arg_specs",
                   help="argument specs, one per kernel parameter: 'x:float32[256]=random(-1,1) y:float32[256]!out "
                        "n:int32=256 k:int32=range(0,64)'; fills zeros, iota, a number, random(lo,hi), "
                        "distinct(lo,hi,k) (runs of k different integers: a top-k routing table), values(a,b,...) "
                        "(default: the header's args line)")
    p.add_argument("--seed", type=seed_value, default=None, help="seed of every input (default: random, printed)")
    p.add_argument("--at", type=_point, default=None, help="run one point of the swept scalars: NAME=VALUE[,...]")
    p.add_argument("--limit", type=positive_int, default=None,
                   help="most launches of a sweep (default: harness.racescan.SWEEP_LIMIT, 1024)")
    p.add_argument("--race-check", choices=("on", "off"), default="on",
                   help="the happens-before detector (default on); off: the thread schedules alone")
    p.add_argument("--timeout", type=positive_float, default=120.0, help="emulator time limit per launch, seconds")
    p.add_argument("--sanitize", action="store_true",
                   help="an AddressSanitizer build instead of the detector's (with --race-check off): an access past a "
                        "buffer, a __shared__ array or a thread's own arrays is an OutOfBounds fault naming the line, "
                        "where the plain build may only crash somewhere else")
    p.add_argument("--barrier-sites", choices=("same", "any"), default="same",
                   help="same (default): threads waiting at __syncthreads() on different source lines are a "
                        "BarrierDivergence (PTX's bar.sync is .aligned); any: the barrier completes once every thread "
                        "arrived, as current GPUs count (llama.cpp's flash attention relies on it), with a caveat printed")
    p.add_argument("--acquire", choices=("fence", "atomic"), default="fence",
                   help="the detector's acquire rule. fence (default, the PTX memory model): a relaxed atomic "
                        "(atomicXxx) that reads a release acquires it at its thread's next fence; atomic: it "
                        "acquires at once, as the CUDA C++ Programming Guide's writer-side __threadfence() idiom "
                        "and ScoRD read it (a reading: by PTX the reader's later plain accesses still race)")
    p.add_argument("--warp-order", choices=("collectives", "syncwarp"), default=None,
                   help="what orders two lanes of one warp for the detector (default $QCONFORM_EMU_WARP_ORDER, else "
                        "collectives). collectives: any warp "
                        "collective naming both (__syncwarp, shuffles, votes, matches, reductions); syncwarp: "
                        "__syncwarp alone, as the CUDA C++ Programming Guide promises memory ordering for it only and "
                        "compute-sanitizer's racecheck has it (a shared store and read with only a shuffle between "
                        "race)")
    p.add_argument("--accesses", choices=("compiled", "source"), default=None,     # emu toolchain.ACCESS_FLAGS
                   help="source (default with g++): every access the source makes, as the CUDA C++ abstract machine "
                        "makes them (the compiler passes that drop or move accesses turned off), so a race on a load "
                        "whose value nothing uses is found too; compiled (default with clang): the accesses of the "
                        "optimised build, which a GPU build makes (such a load dropped, as nvcc drops it)")
    p.add_argument("--reading", choices=READINGS, default="memory-model",
                   help="which races count toward the verdict and the exit status. memory-model (default): every "
                        "race the detector reports; a verifier's narrower notion of a race, to compare with its "
                        "labels: gpuverify (same-value stores and stores of the value a racing access saw are "
                        "benign; -warp-sync: lanes of a warp in lock step; -intra-group: one block's threads), "
                        "faial (one block's threads, same-value stores benign; -grid-level, -all-levels), gklee. "
                        "The races it does not count are still printed; a point whose races it does not count is "
                        "judged again by the thread schedules alone (a warp's lanes in lock step under -warp-sync and gklee)")
    p.add_argument("--effect", action="store_true",
                   help="when the verdict is a race, run its launch again under the thread schedules alone (no "
                        "detector) and say what they show: whether the race changed an output on these inputs, and "
                        "any other fault (a read of memory nothing wrote) that the race's report stopped before")
    p.add_argument("--save", metavar="FILE.npz",
                   help="write every array and scalar argument as the launch left it (outputs written, inputs as "
                        "generated) to FILE.npz, under the spec names, to compare with a reference of your own; "
                        "one launch only (a sweep needs --at)")
    p.add_argument("--force", action="store_true", help="replace an existing --save file")
    add_include_option(p)
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                   help="a macro the build defines, as the program's build does (repeatable)")
    p.add_argument("--nvcc-relax", dest="relaxations", action="append", default=[],
                   choices=("extended-lambda", "expt-relaxed-constexpr"),
                   help="an nvcc language relaxation the program's build uses (llama.cpp: extended-lambda; "
                        "repeatable): nvcc's device-side check takes it, the host compiler needs none")
    p.add_argument("--empty-header", dest="empty_headers", action="append", default=[], metavar="NAME[=HEADER,...]",
                   help="a header the source includes that is not here and serves only host code (a framework's, "
                        "such as torch/all.h), found as an empty file, or as one that includes only the HEADERs "
                        "after '=' (ATen/cuda/CUDAContext.h=cublas_v2.h: a host function's cuBLAS handle) "
                        "(repeatable)")
    p.set_defaults(func=run)


def _launch(args, header: dict):
    from cudasrc.signatures import launch_name
    from harness.racescan import parse_launch, parse_args
    where = args.source
    if "launch" in header:
        line = parse_launch(header["launch"], f"{where}: header")
    elif args.kernel and args.grid and args.block:
        line = None
    else:
        raise ValueError(f"{where}: no `// launch: KERNEL grid=.. block=..` line in its leading comment; give "
                         "--kernel, --grid and --block")
    kernel = launch_name(args.kernel) if args.kernel else line.kernel
    text = " ".join([kernel, f"grid={args.grid or ','.join(map(str, line.grid))}",
                     f"block={args.block or ','.join(map(str, line.block))}",
                     f"shared={args.shared if args.shared is not None else (line.shared_bytes if line else 0)}"])
    launch = parse_launch(text, "--kernel/--grid/--block")
    spec_text = args.arg_specs if args.arg_specs is not None else header.get("args")
    if spec_text is None:
        raise ValueError(f"{where}: no `// args: ...` line in its leading comment; give --args")
    return launch, parse_args(spec_text)


_SCOPE = re.compile(r"^\s*(?:::\s*)?((?:[A-Za-z_]\w*\s*::\s*)+)(?=[A-Za-z_]\w*\s*(?:<|$))")


def _split_scope(kernel: str) -> "tuple[str, str]":
    """A kernel's name as given split into its namespaces (`a::b::`, spaces dropped; empty if none) and the name
    as the file's kernels are named (`flashinfer::K<half, 8>`: `flashinfer::`, `K<half, 8>`)."""
    m = _SCOPE.match(kernel)
    return (re.sub(r"\s+", "", m.group(1)), kernel[m.end():]) if m else ("", kernel)


def _type_name(ctype: str) -> "str | None":
    """A parameter type's struct or class name without qualifiers (`Param<float>`: a template's instance), or None
    where it names none."""
    name = re.sub(r"\b(?:const|volatile|struct)\b", "", ctype).strip()
    return name if re.fullmatch(r"[A-Za-z_][\w:]*(?:\s*<.*>)?", name, re.S) else None


def _source_layout(name: str, source: str, headers: dict):
    """The layout of struct `name` as the source and its own headers define it (LookupError where they do not)."""
    from cudasrc.structs import struct_layout
    return struct_layout(source + "\n" + "\n".join(headers.values()), re.sub(r"^(?:[A-Za-z_]\w*::)+", "", name))


def _with_layout(spec, ctype: str, source: str, headers: dict):
    """A `name:struct` spec with the layout of its parameter's type, read from the source and its own headers."""
    name = _type_name(ctype)
    if name is None:
        raise ValueError(f"args: {spec.name}: `struct` is for a struct passed by value; the parameter is {ctype}")
    try:
        layout = _source_layout(name, source, headers)
    except LookupError as exc:
        raise ValueError(f"args: {spec.name}: {exc}") from None
    pointers = {f.path: f.ctype for f in layout.fields if f.pointer}
    laid_out = spec.with_layout(layout.dtype, f"struct {name}", pointers)
    import numpy as np

    from harness.backends.args import check_pointee
    for path, array in laid_out.arrays:           # each array's dtype against its field's pointee
        check_pointee(pointers[path] + "*", f"args: {spec.name}: field {path}", np.empty(array.count, array.dtype))
    return laid_out


def _as_struct_elements(spec, ctype: str, source: str, headers: dict):
    """An array spec of scalars for a pointer to structs made of that scalar alone (`const Node*` given as int32):
    the spec marked so (ArgSpec.as_elements); any other spec as it is, for check_pointee to judge."""
    import numpy as np

    from cudasrc.types import SCALAR_DTYPES, VECTOR_BYTES, element_ctype
    from harness.backends.args import BYTE_POINTEES
    base = _type_name(element_ctype(ctype))
    if base is None or base in SCALAR_DTYPES or base in VECTOR_BYTES or base in BYTE_POINTEES or base == "void" \
            or spec.dtype == np.uint8:
        return spec
    try:
        layout = _source_layout(base, source, headers)
    except LookupError:
        return spec                       # check_pointee says what it takes
    scalars = sum(f.count for f in layout.fields)
    if any(f.pointer or f.dtype != spec.dtype for f in layout.fields) or scalars * spec.dtype.itemsize != layout.size:
        raise ValueError(f"args: {spec.name}: the kernel takes {ctype}, and struct {base} is not {spec.dtype} "
                         f"fields alone with no padding (its fields: "
                         + ", ".join(f"{f.path} {'pointer' if f.pointer else f.dtype}" for f in layout.fields)
                         + f"; {layout.size} bytes); pass its bytes as a uint8 array")
    return spec.as_elements(base, scalars)


def _dims(d) -> str:
    return "x".join(map(str, d))


def _named(items) -> str:
    return ", ".join(f"{k}={v}" for k, v in items)


def _verdict_line(v) -> str:
    what = [v.fault] if v.fault else []
    if v.races:
        what.append(f"{v.races} distinct race{'s' if v.races > 1 else ''}")
    if v.scope:
        what.append(f"scope {v.scope}")
    if v.same_value:
        what.append("same-value stores only")
    return f"verdict: {v.kind.upper()}" + (f" ({', '.join(what)})" if what else "")


def _print_reading(reading, verdict) -> None:
    """What the reading left out of the verdict: the races of a counted race's launch it does not count, and the
    first launch whose races it did not count at all (the memory model's verdict there)."""
    if verdict.kind == "race":          # the kinds follow the races in the order the report numbers them
        left = [i for i, k in enumerate(verdict.kinds, 1) if not reading.counts([k])]
        if left:
            print(f"reading {reading.name}: of the races above it leaves out race{'s' if len(left) > 1 else ''} "
                  f"{', '.join(map(str, left))} and counts the other{'s' if len(verdict.kinds) - len(left) > 1 else ''}")
    excused = verdict.excused
    if excused is None:
        return
    where = f" at {_named(excused.at)}" if excused.at else ""
    more = f"; {verdict.excused_points} launches had only such races" if verdict.excused_points > 1 else ""
    lanes = ", a warp's lanes in lock step" if reading.lock_step else ""
    print(f"left out by the reading {reading.name}{where} (the memory model's verdict: a race; the schedules alone "
          f"judged the launch again{lanes}{more}): {_verdict_line(excused)[len('verdict: '):]}")
    print(excused.detail)


def _print_host_code(source: str, headers: dict, echo=print) -> None:
    """Say which host functions of the program, its own `headers` included (confine.own_headers), the build leaves
    out (not run)."""
    from cudasrc.host_code import program_device_words, without_host_functions
    texts = [(None, source)] + [(h.name, text) for h, text in headers.items()]
    words = program_device_words(t for _, t in texts)
    parts = []
    for name, text in texts:
        host = without_host_functions(text, words)[1]
        if host:
            listed = ", ".join(f"{h.name} (line {h.line})" for h in host)
            parts.append(listed if name is None else f"in {name}: {listed}")
    if parts:
        echo("host code, not run: " + "; ".join(parts))


def _save(path, specs, args, echo=print) -> None:
    """The launch's arguments under their spec names (a null pointer has none), written then renamed; nothing
    where the launch faulted (its outputs never came back)."""
    import io

    import numpy as np

    from harness.cache import atomic_write
    if args is None:
        echo(f"--save: nothing written to {path}: the launch ended with a fault, so no output came back")
        return
    from harness.racescan.spec import StructArrays
    arrays = {}
    for s, a in zip(specs, args):
        if isinstance(a, StructArrays):           # the struct's bytes, then each array it points at
            arrays[s.name] = np.asarray(a.value)
            arrays.update({name: array for _, name, array in a.arrays})
        elif a is not None:        # an array of structs given as their scalars is kept as it was given
            arrays[s.name] = np.asarray(a).view(s.dtype) if s.elements is not None else np.asarray(a)
    data = io.BytesIO()
    np.savez(data, **arrays)
    atomic_write(path, data.getvalue())
    echo(f"saved {len(arrays)} arguments to {path}: " + ", ".join(arrays))


class Judged(NamedTuple):
    verdict: object        # harness.racescan.Verdict
    seed: int              # of every input
    reading: object        # the harness.racescan.reading.Reading of --reading, or None for the memory model's
    planned: int           # launches the sweep planned
    effect: object = None  # --effect: the Verdict of the race's launch under the thread schedules alone


def _effect_line(effect) -> str:
    """What the thread schedules alone showed at the race's launch (--effect)."""
    head = "effect (the race's launch again, the thread schedules alone, no detector): "
    if effect.kind == "clean":
        return head + ("CLEAN: every schedule gave the same outputs, so on these inputs the race changed no result "
                       "(other inputs or a GPU's timing may)")
    if effect.fault == "RaceDetected":
        return head + "ORDER-DEPENDENT: the schedules' outputs differ, so the race changes results on these inputs"
    if effect.fault == "UninitializedRead":
        return head + ("FAULT (UninitializedRead): a value read from memory nothing had written reaches an output, "
                       "either the race's read running ahead of its write or another bug (run again once the race "
                       "is fixed)")
    if effect.kind in ("unchecked", "unsupported"):
        return head + f"{effect.kind.upper()} ({effect.fault}): the tool could not tell"
    return head + f"FAULT ({effect.fault}): the race's effect, or another bug"


def run(args) -> int:
    verdict, seed, reading, planned, effect = judge(args)
    where = f" at {_named(verdict.at)}" if verdict.at else ""
    ran = f" ({verdict.points} of {planned} launches run)" if planned > 1 else ""
    left = (f" (reading {reading.name}: the races of {verdict.excused_points} launch"
            f"{'es' if verdict.excused_points > 1 else ''} left out, below)") if verdict.excused else ""
    print(_verdict_line(verdict) + where + ran + left)
    if verdict.detail:
        print(verdict.detail)
    if reading is not None:
        _print_reading(reading, verdict)
    for caveat in verdict.caveats:
        print("caveat: " + caveat)
    if effect is not None:
        print(_effect_line(effect))
        if effect.detail:
            print(effect.detail)
    if verdict.kind == "clean":
        return EXIT_CLEAN
    if verdict.kind in ("unsupported", "unchecked"):
        return EXIT_UNCHECKED
    replay = [f"qconform racescan {shlex.quote(args.source)}", f"--seed {seed}"]
    replay += [f"--{o} {shlex.quote(str(getattr(args, o)))}" for o in ("kernel", "grid", "block", "shared")
               if getattr(args, o) is not None]
    replay += [f"-I {shlex.quote(d)}" for d in args.include_dirs]
    replay += [f"--empty-header {shlex.quote(h)}" for h in args.empty_headers]
    replay += [f"-D {shlex.quote(d)}" for d in args.defines] + [f"--nvcc-relax {r}" for r in args.relaxations]
    if args.arg_specs is not None:
        replay.append(f"--args {shlex.quote(args.arg_specs)}")
    point = dict(verdict.at) or args.at
    if point:
        replay.append("--at " + ",".join(f"{k}={v}" for k, v in point.items()))
    if args.race_check == "off":
        replay.append("--race-check off")
    if args.sanitize:
        replay.append("--sanitize")
    if args.barrier_sites != "same":
        replay.append(f"--barrier-sites {args.barrier_sites}")
    if args.acquire != "fence":
        replay.append(f"--acquire {args.acquire}")
    if args.warp_order is not None:
        replay.append(f"--warp-order {args.warp_order}")
    if args.accesses is not None:
        replay.append(f"--accesses {args.accesses}")
    if reading is not None:
        replay.append(f"--reading {args.reading}")
    if args.effect:
        replay.append("--effect")
    print("replay: " + " ".join(replay), file=sys.stderr)
    return EXIT_FAULT


def judge(args, echo=print) -> Judged:
    """Check the arguments of `qconform racescan` (a ValueError names the one that breaks a rule), build and run the
    kernel as they say, and return what it judged; `echo` gets what the command prints before the verdict (the
    launch, the reading, the host code left out, the saved arguments). ci/race_suites/race_fixes.py calls it as the
    command does."""
    from harness.backends.base import source_flags
    from harness.confine import own_headers
    from harness.backends.emu.backend import EmuBackend
    from harness.cli.lifecycle import check_input, check_output
    from harness.judging.progress import Progress
    from cudasrc.instantiations import instantiated
    from cudasrc.preprocess import defines_of
    from cudasrc.signatures import program_kernel_signatures, resolve_overload, template_kernels
    from harness.racescan import SWEEP_LIMIT, make_args, read_header, sweep, sweep_points
    from harness.racescan.reading import BY_OPTION, describe
    path = check_input(args.source, "source")
    if not path.is_file():
        raise ValueError(f"source: {args.source} is not a file")
    reading = BY_OPTION[args.reading] if args.reading != "memory-model" else None
    if reading is not None and args.race_check == "off":
        raise ValueError(f"--reading {args.reading}: a reading sorts the races the detector reports, and "
                         "--race-check off runs without it; drop one of them")
    if args.effect and args.race_check == "off":
        raise ValueError("--effect: runs a race's launch again without the detector, and --race-check off runs "
                         "without it already (its verdict is the schedules'); drop one of them")
    if args.sanitize and args.race_check == "on":
        raise ValueError("--sanitize: the AddressSanitizer build and the race detector's each instrument every access "
                         "and cannot be combined; give --race-check off with it")
    save = None
    if args.save is not None:
        if not args.save.endswith(".npz"):
            raise ValueError(f"--save: {args.save} does not end in .npz (numpy's archive of named arrays)")
        save = check_output(args.save, "--save", "file", args.force)
    source = path.read_text(errors="replace")
    dirs = include_dirs(args)
    if args.empty_headers:
        from harness.toolchain.host_libraries import empty_headers
        dirs.append(str(empty_headers(args.empty_headers)))       # after the -I folders: a header there wins
    for d in args.defines:
        if not re.fullmatch(r"[A-Za-z_]\w*(=.*)?", d):
            raise ValueError(f"-D: {d!r} is not NAME or NAME=VALUE")
    flags = (source_flags([path], dirs) + tuple(f"-D{d}" for d in args.defines)
             + tuple(f"--{r}" for r in dict.fromkeys(args.relaxations)))
    headers = own_headers(source, flags)
    header = read_header(source)
    launch, specs = _launch(args, header)
    # a template kernel's instantiation that the file's host code makes (`k<8, false><<<...>>>`): made explicit
    # (as written; the launch's name is launch_name's: `k<8,unsigned int>`)
    by_name = {h.name: t for h, t in headers.items()}
    scope, written = _split_scope(args.kernel or launch.kernel)     # `flashinfer::K<...>`: K, in flashinfer::
    launch = dataclasses.replace(launch, kernel=_split_scope(launch.kernel)[1])
    source = instantiated(source, [written], defines_of(flags), by_name)
    signatures = {k.name: k for k in program_kernel_signatures(source, by_name, defines_of(flags))}
    chosen = resolve_overload(signatures, launch.kernel, len(specs))
    if chosen is not None and chosen.name != launch.kernel:       # an overload, chosen by its count of arguments
        launch = dataclasses.replace(launch, kernel=chosen.name)
    if scope and launch.kernel in signatures and signatures[launch.kernel].scope != scope:
        defined_in = signatures[launch.kernel].scope[:-2] or "the global namespace"
        raise ValueError(f"--kernel: {launch.kernel} is defined in {defined_in}, not in {scope[:-2]} "
                         f"({args.source})")
    if launch.kernel not in signatures:
        templates = [k for text in (source, *headers.values()) for k in template_kernels(text)]
        raise ValueError(f"--kernel: no __global__ kernel {launch.kernel!r} in {args.source} "
                         f"(it has: {', '.join(k.scope + name for name, k in signatures.items()) or 'none'}"
                         + (f"; template kernels, launched by naming their arguments as `--kernel "
                            f"'{templates[0]}<...>'`: {', '.join(templates)}" if templates else "") + ")")
    params = signatures[launch.kernel].params
    if len(specs) != len(params):
        where = "--args" if args.arg_specs is not None else f"{args.source}: header args"
        raise ValueError(f"{where}: {len(specs)} spec(s) for the {len(params)} parameters of {launch.kernel} "
                         f"({', '.join(n for _, n in params)})")
    import numpy as np

    from harness.backends.args import check_pointee
    for s, (ctype, _) in zip(specs, params):
        pointer = ctype.rstrip().endswith("*")
        if s.is_null and not pointer:
            raise ValueError(f"args: {s.name}: `null` is for a pointer parameter; the parameter is {ctype}")
        if pointer and s.count is None and not s.is_null and not s.is_struct:
            raise ValueError(f"args: {s.name}: the parameter is the pointer {ctype}; give an array "
                             f"(`{s.name}:dtype[count]`) or `{s.name}:null`")
        if s.count is not None and not pointer:
            raise ValueError(f"args: {s.name}: an array is for a pointer parameter; the parameter is {ctype}")
    specs = [_as_struct_elements(s, ctype, source, headers) if s.count is not None else s
             for s, (ctype, _) in zip(specs, params)]
    for s, (ctype, _) in zip(specs, params):
        if s.count is not None and s.elements is None:   # its dtype against the pointee, before anything is built
            check_pointee(ctype, f"args: {s.name}", np.empty(s.count, s.dtype))
    specs = [_with_layout(s, ctype, source, headers) if s.is_struct else s for s, (ctype, _) in zip(specs, params)]
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    domains = {s.name: s.domain for s in specs if s.domain is not None}
    limit = args.limit or SWEEP_LIMIT
    if args.at is not None:
        make_args(specs, seed, args.at)             # the point is checked against the domains before any build
        points = [args.at]
        plan = "the point " + _named(args.at.items())
    else:
        points, exhaustive = sweep_points(domains, seed, limit)
        if save is not None and len(points) > 1:
            raise ValueError(f"--save: keeps the arrays of one launch, and this runs {len(points)} (a sweep over "
                             f"{', '.join(domains)}); give --at NAME=VALUE for the launch to keep")
        plan = (f"{len(points)} points ({'every one' if exhaustive else 'corners, then seeded'}) of "
                + ", ".join(f"{n} in [{d.start}, {d.stop})" for n, d in domains.items())) if domains else "one launch"
    options = dict(timeout_s=args.timeout, barrier_sites=args.barrier_sites, acquire=args.acquire,
                   accesses=args.accesses, warp_order=args.warp_order)
    backend = EmuBackend(race_check=args.race_check == "on", sanitize=args.sanitize, **options)
    options["accesses"] = backend.accesses                 # the default the compiler allows, named once
    options["warp_order"] = backend.warp_order
    if args.warp_order is None and backend.warp_order != "collectives":
        args.warp_order = backend.warp_order               # $QCONFORM_EMU_WARP_ORDER chose it: the replay names it
    if args.accesses is None and backend.accesses != backend.toolchain.default_accesses():
        args.accesses = backend.accesses                   # $QCONFORM_EMU_ACCESSES chose it: the replay names it
    shown = re.sub(r"\s+", " ", args.kernel.strip()) if args.kernel else launch.kernel    # `const float *` readable
    if signatures[launch.kernel].overloaded:           # which of the overloads runs, by its parameter types
        shown = launch.kernel
    echo(f"racescan {args.source}: {shown}<<<{_dims(launch.grid)}, {_dims(launch.block)}, "
          f"{launch.shared_bytes}>>>, seed {seed}, {plan}, race detector {args.race_check}"
          + (", AddressSanitizer build" if args.sanitize else "")
          + (f", acquire rule {args.acquire}" if args.acquire != "fence" else "")
          + (", lanes ordered by __syncwarp alone" if backend.warp_order == "syncwarp" else "")
          + (", the optimised build's accesses" if backend.accesses == "compiled" else "")
          + (f", reading {args.reading}" if args.reading != "memory-model" else ""))
    if reading is not None:
        echo(f"reading {reading.name}: the verdict leaves out {describe(reading)}")
    if header.get("accesses", "").startswith("source") and backend.accesses == "compiled":
        echo("note: the file's header says its race shows in the build of every access of the source "
             "(--accesses source)")
    _print_host_code(source, headers, echo)
    # a point whose races the reading leaves out is judged again by the schedules alone, with a warp's lanes in
    # lock step where the reading takes them so
    schedules = (EmuBackend(race_check=False, lock_step=reading.lock_step, **options)
                 if reading is not None else None)
    kept: list = []
    try:
        with Progress(len(points), len(points) > 1, title="racescan", unit="launches", heartbeat=True) as bar:
            verdict = sweep(backend, source, launch.kernel, launch.grid, launch.block, launch.shared_bytes, specs,
                            seed, name=path.name, tick=bar.advance, points=points,
                            flags=flags, ran=kept.append if save is not None else None,
                            reading=reading, schedules=schedules)
    finally:
        backend.close()
        if schedules is not None:
            schedules.close()
    if save is not None:
        _save(save, specs, kept[-1] if kept else None, echo)
    effect = None
    if args.effect and verdict.kind == "race":
        alone = EmuBackend(race_check=False, lock_step=bool(reading is not None and reading.lock_step), **options)
        try:
            effect = sweep(alone, source, launch.kernel, launch.grid, launch.block, launch.shared_bytes, specs, seed,
                           name=path.name, points=[dict(verdict.at)], flags=flags)
        finally:
            alone.close()
    return Judged(verdict, seed, reading, len(points), effect)
