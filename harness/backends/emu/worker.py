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
    from . import protocol
    from .native import NativeModule
    from .runs import execute

    modules: dict[str, NativeModule] = {}
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
            elif req["op"] == "launch":
                spec = req["spec"]
                mod = modules.get(spec.so_path) or modules.setdefault(spec.so_path, NativeModule(spec.so_path))
                reply = {"ok": execute(mod, spec)}
            else:
                reply = {"error": f"unknown request {req['op']!r}"}
        except Exception:  # reported to the caller, the worker stays up
            reply = {"error": traceback.format_exc()}
        protocol.send(reply_fd, reply)


if __name__ == "__main__":
    sys.exit(main())
