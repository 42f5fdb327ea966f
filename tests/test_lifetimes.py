"""No process qconform starts outlives the run: the command line adopts the orphans among its descendants and a
run ended by a signal kills and reaps them (harness.lifetimes); programs a judge process starts do not inherit
an ignored SIGINT; the GPU toolchain's nvcc dies with the process that started it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.judging.executors import Work, make_executor
from tests.fake_tools import kill_and_check_the_compiler_dies, running

REPO = Path(__file__).resolve().parents[1]

# A process that (maybe) adopts orphans, starts a child that starts a grandchild and exits, says the
# grandchild's pid, then ends what is left of its descendants and says which pids it ended.
ORPHANS = r"""
import subprocess, sys
from harness import lifetimes
if sys.argv[1] == "adopt":
    assert lifetimes.adopt_orphans()
child = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 </dev/null & echo $!"], capture_output=True, text=True)
print(child.stdout.strip(), flush=True)
print(" ".join(map(str, lifetimes.end_descendants())), flush=True)
"""


def _orphan_run(mode: str) -> tuple[int, list[int]]:
    out = subprocess.run([sys.executable, "-c", ORPHANS, mode], capture_output=True, text=True, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert out.returncode == 0, out.stderr
    grandchild, ended = out.stdout.split("\n")[:2]
    return int(grandchild), [int(p) for p in ended.split()]


def test_a_run_ends_the_orphaned_grandchild_it_adopted():
    grandchild, ended = _orphan_run("adopt")
    try:
        assert ended == [grandchild]
        assert not running(grandchild)
    finally:
        if running(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_negative_control_without_adopting_the_orphan_is_out_of_reach():
    grandchild, ended = _orphan_run("keep")
    try:
        assert ended == [] and running(grandchild)
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_end_descendants_ends_a_whole_tree_of_children():
    script = r"""
import subprocess, sys
from harness import lifetimes
lifetimes.adopt_orphans()
procs = [subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & wait"]) for _ in range(3)]
import time; time.sleep(0.5)
before = lifetimes.children()
ended = lifetimes.end_descendants()
print(len(before), len(ended), len(lifetimes.children()))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "9", "0"]       # 3 shells, then their 6 orphaned sleeps; none left


class _Nothing:
    def close(self):
        pass


def _setup():
    return _Nothing()


def _ignored_signals_of_a_program_started_here(_state, _context, _unit) -> int:
    status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True).stdout
    return int(next(ln for ln in status.splitlines() if ln.startswith("SigIgn:")).split()[1], 16)


def test_a_program_a_judge_process_starts_ends_on_sigint():
    """A judge process leaves interrupts to its parent, but what it starts (a compiler) must not ignore them:
    an ignored signal stays ignored across exec, and a cc1plus that ignores Ctrl-C outlives the run."""
    with make_executor(2).open(Work(_setup, _ignored_signals_of_a_program_started_here, None)) as session:
        masks = [mask for _, mask in session.results(["a", "b"])]
    assert all(not mask & (1 << (signal.SIGINT - 1)) for mask in masks), [hex(m) for m in masks]


# nvcc's run by the GPU toolchain (a stand-in that waits): the process says the stand-in's pid and waits.
NVCC_STARTER = r"""
import sys, threading, time
from pathlib import Path
from harness.toolchain import compile as tc_compile
pid = Path(sys.argv[2])
threading.Thread(target=tc_compile._run_tool, args=([sys.argv[1], pid.as_posix()], 600), daemon=True).start()
deadline = time.monotonic() + 60
while not (pid.exists() and pid.read_text().endswith("\n")) and time.monotonic() < deadline:
    time.sleep(0.02)
print(pid.read_text().strip(), flush=True)
time.sleep(600)
"""


def test_the_gpu_toolchains_nvcc_dies_with_the_process_that_started_it(tmp_path):
    waits = tmp_path / "nvcc"
    waits.write_text('#!/bin/sh\necho $$ > "$1"\nexec sleep 600\n')
    waits.chmod(0o755)
    starter = subprocess.Popen([sys.executable, "-c", NVCC_STARTER, str(waits), str(tmp_path / "pid")],
                               stdout=subprocess.PIPE, text=True, cwd=REPO,
                               env=dict(os.environ, PYTHONPATH=str(REPO), QCONFORM_COMPILER_CONFINE="off"))
    kill_and_check_the_compiler_dies(starter)
