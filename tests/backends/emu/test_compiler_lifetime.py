"""A compiler that an emu build starts (nvcc's device-side check beside the host compiler) dies with the
process that started it: a judge process killed mid-build (`-j`, an interrupt: the parent kills its judge
processes with SIGKILL) leaves no compiler running, and every compiler run keeps its own temporaries in the
build's scratch folder, which the next run sweeps, never in the system's temporary folder."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fake_tools import (NVCC_RUN, NVCC_VERSION, check_made_in_scratch_folders,
                              kill_and_check_the_compiler_dies, recording_tool, stand_in_system_folder,
                              temporaries_made)

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


def test_the_gate_compiler_dies_with_the_process_that_started_it(tmp_path):
    waits = tmp_path / "nvcc"
    waits.write_text("#!/bin/sh\nexec sleep 600\n")
    waits.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(waits), str(work)], stdout=subprocess.PIPE,
                               text=True, cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)))
    kill_and_check_the_compiler_dies(starter)


# A build killed while the gate's compile runs: the compile (a stand-in that makes its temporary, then waits)
# starts in a scratch folder; once its temporary exists, the process says the compiler's pid and waits.
KILLED_IN_SCRATCH = r"""
import sys, time
from pathlib import Path
from harness.backends.emu import gate
from harness.cache import scratch_folder
gate.nvcc_gate = lambda: (sys.argv[1], "a stand-in that waits")
log = Path(sys.argv[2])
with scratch_folder("emu") as work:
    proc = gate.start_device_compile("__global__ void k(float* y) { y[0] = 1.0f; }", "k.cu", work)
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.02)
    print(proc.pid, flush=True)
    time.sleep(600)
"""


def test_a_killed_builds_compiler_leaves_its_temporaries_only_where_the_next_run_sweeps(tmp_path):
    system = tmp_path / "system"            # stands for the system's temporary folder
    system.mkdir()
    log = tmp_path / "made.log"
    waits = recording_tool(tmp_path / "nvcc", log, "exec sleep 600")
    env = dict(os.environ, PYTHONPATH=str(REPO), TMPDIR=str(system), QCONFORM_CACHE=str(tmp_path / "cache"),
               QCONFORM_COMPILER_CONFINE="off")      # the stand-in logs outside the scratch folder
    starter = subprocess.Popen([sys.executable, "-c", KILLED_IN_SCRATCH, str(waits), str(log)],
                               stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    kill_and_check_the_compiler_dies(starter)
    [temporary] = temporaries_made(log)
    scratch = temporary.parent
    assert scratch.parent == tmp_path / "cache" / "emu" and temporary.is_file()   # SIGKILL: nobody cleaned up
    assert list(system.iterdir()) == []
    subprocess.run([sys.executable, "-c", "from harness.cache import cache_dir; cache_dir('emu')"], env=env,
                   cwd=REPO, check=True)
    assert not scratch.exists() and list((tmp_path / "cache" / "emu").iterdir()) == []


def test_every_compiler_run_of_an_emu_build_keeps_its_temporaries_in_a_scratch_folder(tmp_path, monkeypatch):
    from harness.backends.emu import build, gate
    from harness.backends.emu import toolchain as tc
    system = stand_in_system_folder(tmp_path, monkeypatch)
    log = tmp_path / "made.log"
    host = tc.toolchain()
    cxx = recording_tool(tmp_path / "cxx", log, f'exec "{host.cxx}" "$@"')     # the real compiler, recorded
    nvcc = recording_tool(tmp_path / "nvcc", log, NVCC_RUN)
    monkeypatch.setattr(gate, "nvcc_gate", lambda: (str(nvcc), NVCC_VERSION))
    built = build.build("__global__ void k(float* y) { y[threadIdx.x] = 1.0f; }",
                        toolchain=tc.Toolchain(str(cxx), f"recorded {host.cxx_version}", host.fiber))
    assert built.path.is_file()
    tc.boost_context_usable(str(cxx))          # the other probe (whatever it finds)
    made = temporaries_made(log)
    # the flag probe (device_flags), the runtime object, the gate's nvcc, the module's compile and its link,
    # the Boost.Context probe
    assert len(made) == 6, made
    check_made_in_scratch_folders(made, tmp_path / "cache" / "emu", system)
