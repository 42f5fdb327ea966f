"""A compiler that an emu build starts (nvcc's device-side check beside the host compiler) dies with the
process that started it: a judge process killed mid-build (`-j`, an interrupt: the parent kills its judge
processes with SIGKILL) leaves no compiler running."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# A process that starts the gate's compile (nvcc replaced by a program that waits), says its pid, and waits.
STARTER = r"""
import sys, time
from pathlib import Path
from harness.backends.emu import gate
gate.nvcc_gate = lambda: (sys.argv[1], "a stand-in that waits")
proc = gate.start_device_compile("__global__ void k(float* y) { y[0] = 1.0f; }", "k.cu", Path(sys.argv[2]))
print(proc.pid, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        return ") Z" not in Path(f"/proc/{pid}/stat").read_text()     # a zombie has ended
    except OSError:
        return False


def test_the_gate_compiler_dies_with_the_process_that_started_it(tmp_path):
    waits = tmp_path / "nvcc"
    waits.write_text("#!/bin/sh\nexec sleep 600\n")
    waits.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(waits), str(work)], stdout=subprocess.PIPE,
                               text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    compiler = int(starter.stdout.readline())
    try:
        assert _running(compiler)
        starter.kill()                      # as the -j pool kills a judge process
        starter.wait()
        deadline = time.monotonic() + 30    # the kernel signals at once; the margin is for a loaded machine
        while _running(compiler) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(compiler), "the compiler outlived the process that started it"
    finally:
        if _running(compiler):
            os.kill(compiler, signal.SIGKILL)
        starter.stdout.close()
