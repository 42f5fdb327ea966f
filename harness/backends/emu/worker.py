"""The emu worker process: loads compiled modules and runs launches, so a crash or hang in a kernel never
takes down the caller. Requests arrive on stdin; replies leave on a private copy of stdout; whatever the
kernels or the runtime print goes to stderr, which the parent keeps for crash reports."""
from __future__ import annotations

import os
import sys
import traceback


def main() -> int:
    reply_fd = os.dup(1)
    os.dup2(2, 1)      # stray prints must not corrupt the reply channel
    from harness.backends import protocol
    protocol.die_with_parent()
    from .native import NativeModule
    from .runs import DeviceBuffer, Resident, execute
    from .watchdog import from_environment

    from . import staging
    from harness.backends.base import GUARD_BYTES
    from . import sandbox

    limits = sandbox.Limits.from_env(os.environ[sandbox.ENV]) if os.environ.get(sandbox.ENV) else None
    memory_limit = 0
    if limits is not None:      # after every import the worker needs, before any kernel library is loaded
        try:
            sandbox.apply(limits)
            memory_limit = (limits.memory_mb or 0) << 20
        except Exception as exc:   # run nothing unsandboxed: the parent reports the reason
            print(f"emu-worker: the sandbox could not be applied: {exc!r}", file=sys.stderr, flush=True)
            return sandbox.SETUP_FAILED_EXIT

    progress = from_environment()
    if progress is not None:
        NativeModule.progress_address = progress.address
        progress.bump()        # ready: from now on the parent's watchdog expects blocks to finish
    shared = staging.from_environment()
    modules: dict[str, NativeModule] = {}
    resident: dict[int, Resident] = {}     # Module.alloc's buffers, by id
    in_fd = sys.stdin.fileno()
    while True:
        try:
            req = protocol.receive(in_fd)
        except protocol.Closed:
            return 0
        try:
            if req["op"] == "load":
                mod = modules.get(req["path"]) or modules.setdefault(req["path"], NativeModule(req["path"]))
                reply = {"ok": {k: v.param_sizes for k, v in mod.kernels.items()}}
            elif req["op"] == "symbols":
                mod = modules.get(req["path"]) or modules.setdefault(req["path"], NativeModule(req["path"]))
                reply = {"ok": {k: (size, writable) for k, (_, size, writable) in mod.symbols.items()}}
            elif req["op"] == "launch":
                spec = req["spec"]
                mod = modules.get(spec.so_path) or modules.setdefault(spec.so_path, NativeModule(spec.so_path))
                staged = {i: a for i, a in enumerate(spec.args) if isinstance(a, staging.Staged)}
                raws = shared.views(staged, spec.staging_size) if staged else {}
                for i, raw in raws.items():   # the staged data, seen as the array it was
                    a = spec.args[i]
                    spec.args[i] = raw[GUARD_BYTES:GUARD_BYTES + a.nbytes].view(a.dtype).reshape(a.shape)
                reply = {"ok": execute(mod, spec, resident, raws)}
                del raws
                if memory_limit and sandbox.address_space() > 0.75 * memory_limit:
                    reply["restart"] = True    # what the kernel left allocated must not starve the next case
            elif req["op"] == "alloc":
                buf = req["buffer"]
                mod = modules.get(req["path"]) or modules.setdefault(req["path"], NativeModule(req["path"]))
                resident[buf.id] = Resident(buf, DeviceBuffer(mod, buf.nbytes, req["init"], req["poison"],
                                                              req["sanitize"]))
                reply = {"ok": None}
            elif req["op"] == "write":
                resident[req["id"]].storage.fill(req["array"])
                reply = {"ok": None}
            elif req["op"] == "read":
                r = resident[req["id"]]
                reply = {"ok": r.storage.read(r.buffer.shape, r.buffer.dtype)}
            elif req["op"] == "free":
                resident.pop(req["id"]).storage.release()
                reply = {"ok": None}
            else:
                reply = {"error": f"unknown request {req['op']!r}"}
        except MemoryError as exc:  # the worker's memory limit, reached by the tool's own buffers: unchecked
            limit = limits.describe() if limits is not None else "the machine's"
            reply = {"fault": ("ResourceExhausted", f"the emu worker's memory limit ({limit}) was reached while it "
                                                    f"prepared buffers ({exc}); the tool's limit, not the kernel's "
                                                    "(raise memory_limit_mb)")}
        except Exception:  # reported to the caller, the worker stays up
            reply = {"error": traceback.format_exc()}
        protocol.send(reply_fd, reply)


if __name__ == "__main__":
    sys.exit(main())
