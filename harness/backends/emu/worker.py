"""The emu worker process: loads compiled modules and runs launches, so a crash or hang in a kernel never
takes down the caller. Requests arrive on stdin; replies leave on a private copy of stdout; whatever the
kernels or the runtime print goes to stderr, which the parent keeps for crash reports."""
from __future__ import annotations

import os
import sys


def main() -> int:
    from harness.backends import protocol
    reply_fd = protocol.reply_channel()
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

    def module(path: str) -> NativeModule:
        return modules.get(path) or modules.setdefault(path, NativeModule(path))

    def handle(req: dict) -> dict:
        if req["op"] == "load":
            return {"ok": {k: v.param_sizes for k, v in module(req["path"]).kernels.items()}}
        if req["op"] == "symbols":
            return {"ok": {k: (size, writable) for k, (_, size, writable) in module(req["path"]).symbols.items()}}
        if req["op"] == "launch":
            spec = req["spec"]
            mod = module(spec.so_path)
            staged = {i: a for i, a in enumerate(spec.args) if isinstance(a, staging.Staged)}
            raws = shared.views(staged, spec.staging_size) if staged else {}
            for i, raw in raws.items():   # the staged data, seen as the array it was
                a = spec.args[i]
                spec.args[i] = raw[GUARD_BYTES:GUARD_BYTES + a.nbytes].view(a.dtype).reshape(a.shape)
            reply = {"ok": execute(mod, spec, resident, raws)}
            del raws
            return reply
        if req["op"] == "alloc":
            buf = req["buffer"]
            resident[buf.id] = Resident(buf, DeviceBuffer(module(req["path"]), buf.nbytes, req["init"],
                                                          req["poison"], req["sanitize"]))
            return {"ok": None}
        if req["op"] == "write":
            resident[req["id"]].storage.fill(req["array"])
            return {"ok": None}
        if req["op"] == "read":
            r = resident[req["id"]]
            return {"ok": r.storage.read(r.buffer.shape, r.buffer.dtype)}
        if req["op"] == "free":
            resident.pop(req["id"]).storage.release()
            return {"ok": None}
        return {"error": f"unknown request {req['op']!r}"}

    def handle_and_watch(req: dict) -> dict:
        reply = handle(req)
        # Address space held by the kernel's leftovers or by the tool (loaded modules, buffers) must not starve
        # the next case: a worker near its limit is replaced before the next request.
        if memory_limit and sandbox.address_space() > 0.75 * memory_limit:
            reply["restart"] = True
        return reply

    def out_of_memory(exc: MemoryError) -> dict:
        # the worker's memory limit, reached by the tool's own memory (buffers, fiber stacks, race shadow):
        # unchecked, and the worker is replaced
        limit = limits.describe() if limits is not None else "the machine's"
        return {"fault": ("ResourceExhausted", f"the emu worker's memory limit ({limit}) was reached by the "
                                               f"tool's own memory ({exc or 'an allocation failed'}); the tool's "
                                               "limit, not the kernel's (raise memory_limit_mb)"),
                "restart": True}

    return protocol.serve(reply_fd, handle_and_watch, out_of_memory)


if __name__ == "__main__":
    sys.exit(main())
