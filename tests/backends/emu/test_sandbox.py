"""Checking a stranger's kernel never touches the machine (SECURITY.md). Each probe keeps the name and
parameters of the `gk_argmax_adv` contract; each is refused or contained, creates no file, leaves no process
and never passes, while a clean kernel with the same contract (the negative control) still runs and passes.

Two walls, tested one by one: the device-code gate (nvcc's device-side compile, the object checks) refuses a
probe before anything runs; behind it (the `ungated` fixture builds past the gate), the worker's sandbox
stops whatever runs and names what was attempted."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from harness.backends.base import BuildError, KernelCrash, OutOfBounds, SandboxViolation
from harness.backends.emu import gate, sandbox
from tests.marks import needs_nvcc

SIG = "__global__ void gk_argmax_adv(const float* logits, int vocab, int* d_tok, int* d_pos)"
HEADERS = "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n#include <sys/syscall.h>\n#include <fcntl.h>\n"
CLEAN_BODY = """{
  __shared__ float bv[1024]; __shared__ int bi[1024];
  const int t = threadIdx.x;
  float v = -1e30f; int at = 0;
  for (int i = t; i < vocab; i += blockDim.x) if (logits[i] > v) { v = logits[i]; at = i; }
  bv[t] = v; bi[t] = at;
  __syncthreads();
  if (t == 0) {
    for (int k = 1; k < (int)blockDim.x; ++k)
      if (bv[k] > bv[0] || (bv[k] == bv[0] && bi[k] < bi[0])) { bv[0] = bv[k]; bi[0] = bi[k]; }
    *d_tok = bi[0]; *d_pos = *d_pos + 1; %s
  }
}"""
SLEEP_TOKEN = "4242.5"     # the argument of the probe's `sleep`: how a survivor would be found

needs_sandbox = pytest.mark.skipif(sandbox.unavailable_reason() is not None,
                                   reason=f"no seccomp sandbox here: {sandbox.unavailable_reason()}")


def probes(tmp: Path) -> dict[str, str]:
    """name -> full source of the probe kernel (each tries to leave a file in `tmp` or a process behind)."""
    def kernel(extra: str, prelude: str = "") -> str:
        return HEADERS + prelude + SIG + (CLEAN_BODY % extra)
    return {
        "system": kernel(f'system("touch {tmp}/system");'),
        "fopen": kernel(f'FILE* f = fopen("{tmp}/fopen", "w"); if (f) {{ fprintf(f, "%s", getenv("HOME")); fclose(f); }}'),
        "syscall": kernel(f'syscall(SYS_creat, "{tmp}/creat", 0644);'),
        "initializer": kernel("", f'static int planted = system("touch {tmp}/initializer");\n'),
        "fork": kernel(f'if (fork() == 0) {{ execl("/bin/sleep", "sleep", "{SLEEP_TOKEN}", (char*)0); }}'),
        # creat(path, 0644) as a raw system call: no C library function names it
        "hidden_asm": kernel(f'long r; const char* p = "{tmp}/asm"; HIDDEN_ASM volatile("syscall" : "=a"(r) : '
                             f'"a"(85L), "D"(p), "S"(0644L) : "rcx", "r11", "memory");',
                             "#define HIDDEN_ASM __asm__\n"),
    }


def clean_source() -> str:
    return HEADERS + SIG + (CLEAN_BODY % "")


def run_argmax(mod, vocab: int = 1000) -> tuple[int, np.ndarray]:
    logits = np.random.default_rng(16).standard_normal(vocab).astype(np.float32)
    tok, pos = np.zeros(1, np.int32), np.zeros(1, np.int32)
    mod.launch("gk_argmax_adv", (1,), (32,), 0, [logits, np.int32(vocab), tok, pos], outputs=(2,))
    return int(tok[0]), logits


def survivors() -> list[int]:
    """Processes of this user still running the probe's `sleep`."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if SLEEP_TOKEN.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def assert_contained(tmp: Path) -> None:
    assert not [p.name for p in tmp.iterdir()], "a probe created a file"
    assert not survivors(), "a probe left a process behind"


@pytest.fixture
def backend():
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(timeout_s=60, schedules=2)
    yield be
    be.close()


def test_the_clean_kernel_passes(backend):
    tok, logits = run_argmax(backend.load(clean_source()))
    assert tok == int(np.argmax(logits))


# ---- wall 1: the device-code gate --------------------------------------------------------------------------
@needs_nvcc
@pytest.mark.parametrize("probe,called", [("system", "system"), ("fopen", "fopen"), ("syscall", "syscall"),
                                          ("fork", "fork")])
def test_nvcc_refuses_host_calls_in_device_code(backend, tmp_path, probe, called):
    with pytest.raises(BuildError, match=rf'calling a __host__ function\("{called}"\) from a __global__ function'):
        backend.load(probes(tmp_path)[probe])
    assert_contained(tmp_path)


def test_without_nvcc_the_object_check_refuses_host_calls(backend, tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "nvcc_gate", lambda: (None, "nvcc hidden by the test"))
    for probe, called in [("system", "system"), ("fopen", "fopen"), ("syscall", "syscall"), ("fork", "fork")]:
        with pytest.raises(BuildError, match=rf"calls host function\(s\) that device code cannot call: .*\b{called}\b"):
            backend.load(probes(tmp_path)[probe])
    tok, logits = run_argmax(backend.load(clean_source()))      # the negative control still runs
    assert tok == int(np.argmax(logits))
    assert_contained(tmp_path)


def test_file_scope_initializers_are_refused(backend, tmp_path):
    with pytest.raises(BuildError, match=r"file-scope host code that would run when its library is loaded"):
        backend.load(probes(tmp_path)["initializer"])
    with pytest.raises(BuildError, match=r"file-scope host code"):
        backend.load(clean_source() + "\n__device__ int seen;\n"
                     "__attribute__((constructor)) __host__ __device__ static void at_load() { seen = 1; }\n")
    # a host function is dropped before the build, as a GPU build leaves it on the host: it cannot run at load
    module = backend.load(clean_source() + "\nstatic volatile int seen;\n"
                          "__attribute__((constructor)) static void at_load() { seen = 1; }\n")
    assert module.built.kernels
    assert_contained(tmp_path)


def test_inline_asm_hidden_behind_a_macro_is_refused(backend, tmp_path, monkeypatch):
    if gate.nvcc_gate()[0] is not None:     # x86 register constraints are not PTX: nvcc refuses it first
        with pytest.raises(BuildError, match=r"nvcc's device-side compile refused it"):
            backend.load(probes(tmp_path)["hidden_asm"])
    monkeypatch.setattr(gate, "nvcc_gate", lambda: (None, "nvcc hidden by the test"))
    with pytest.raises(BuildError, match=r"inline assembly .*'syscall'"):     # found after preprocessing
        backend.load(probes(tmp_path)["hidden_asm"])
    assert_contained(tmp_path)


# ---- wall 2: the sandbox, for whatever gets past the gate --------------------------------------------------
@needs_sandbox
@pytest.mark.parametrize("probe,named", [
    ("system", r"while blocking signals, as system\(\)"),
    ("fopen", r"called openat\(\) \(system call \d+\) to open a file for writing"),
    ("syscall", r"called creat\(\) \(system call \d+\) to open a file for writing"),
    ("fork", r"called clone\(\) \(system call \d+\) to start a process or thread"),
    ("hidden_asm", r"called creat\(\)"),
    ("initializer", r"while blocking signals"),
])
def test_the_sandbox_stops_what_passes_the_gate(backend, tmp_path, ungated, probe, named):
    with pytest.raises(SandboxViolation, match=rf"SandboxViolation: .*{named}.*refused by the sandbox") as info:
        run_argmax(backend.load(probes(tmp_path)[probe]))
    assert "the worker process was stopped and is replaced" in str(info.value)
    assert_contained(tmp_path)
    tok, logits = run_argmax(backend.load(clean_source()))     # a new worker runs the next kernel
    assert tok == int(np.argmax(logits))


@pytest.mark.skipif(sandbox.landlock_abi() == 0, reason="this kernel has no Landlock")
def test_a_kernel_past_the_gate_cannot_read_the_users_files(backend, tmp_path, ungated, monkeypatch):
    """The probe opens a planted secret beside the tests (outside every readable root) and reports its first
    byte as the token, or -1 when the open is refused; the negative control runs it unsandboxed."""
    secret = tmp_path / "secret.txt"
    secret.write_text("g-planted\n")
    reader = (f'FILE* f = fopen("{secret}", "r"); *d_tok = f ? fgetc(f) : -1; if (f) fclose(f);')
    source = HEADERS + SIG + (CLEAN_BODY % reader)
    tok, _ = run_argmax(backend.load(source))
    assert tok == -1
    roots = [Path(r).resolve() for r in sandbox.readable_roots()]
    assert not any(r == secret.parent or r in secret.parents for r in roots)      # outside every root
    assert Path.home().resolve() not in roots and Path("/") not in roots
    monkeypatch.setenv(sandbox.OFF_ENV, "off")                         # the negative control: no sandbox
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(timeout_s=60, schedules=2)
    try:
        tok, _ = run_argmax(be.load(source))
    finally:
        be.close()
    assert tok == ord("g")


@pytest.mark.skipif(sandbox.landlock_abi() == 0, reason="this kernel has no Landlock")
def test_the_folder_qconform_runs_in_and_the_import_paths_dot_entries_stay_unread(tmp_path, ungated, monkeypatch):
    """A CI job runs qconform at the top of its checkout, whose .git/config may hold a token. The worker does not
    run there (`python -m` would put that folder on its import path, which it may read), and of the folders on its
    import path it may read everything but the entries at their top whose names begin with a dot."""
    checkout, lib = tmp_path / "checkout", tmp_path / "lib"
    for folder in (checkout / ".git", lib / ".git", lib / "pkg"):
        folder.mkdir(parents=True)
    for path in (checkout / ".git" / "config", checkout / "notes.txt", lib / ".git" / "config",
                 lib / "pkg" / "data.txt"):
        path.write_text("g-planted\n")
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("PYTHONPATH", str(lib))
    monkeypatch.setenv("QCONFORM_CACHE", "relative-cache")          # resolved here, not in the worker's folder
    from harness.backends.emu.backend import EmuBackend

    def first_byte(path: Path) -> int:
        reader = f'FILE* f = fopen("{path}", "r"); *d_tok = f ? fgetc(f) : -1; if (f) fclose(f);'
        be = EmuBackend(timeout_s=60, schedules=1)
        try:
            return run_argmax(be.load(HEADERS + SIG + (CLEAN_BODY % reader)))[0]
        finally:
            be.close()

    assert first_byte(lib / "pkg" / "data.txt") == ord("g")        # the import path is readable...
    assert first_byte(lib / ".git" / "config") == -1                # ...but not its dot entries
    assert first_byte(checkout / ".git" / "config") == -1           # nor the folder qconform was started in
    assert first_byte(checkout / "notes.txt") == -1
    assert (checkout / "relative-cache" / "emu").is_dir()


def test_a_reply_forged_by_the_kernel_is_not_read(backend, tmp_path, ungated):
    """The kernel shares the worker's descriptors: a pickle it writes into the reply pipe that would run
    `touch` in the parent is refused by the parent's reader, and the worker is replaced."""
    forge = (f'const char msg[] = "cposix\\nsystem\\n(S\'touch {tmp_path}/forged\'\\ntR.";'
             "unsigned long long n = sizeof(msg) - 1;"
             "for (int fd = 3; fd < 64; ++fd) { if (write(fd, &n, 8) == 8) write(fd, msg, n); }")
    with pytest.raises(SandboxViolation, match=r"forged message \(it named posix\.system\).*refused by the parent"):
        run_argmax(backend.load(HEADERS + SIG + (CLEAN_BODY % forge)))
    assert_contained(tmp_path)
    tok, logits = run_argmax(backend.load(clean_source()))
    assert tok == int(np.argmax(logits))


@needs_sandbox
def test_a_sandbox_violation_fails_the_case(tmp_path, ungated):
    """Through the judge, as `check` runs it: the verdict is fail, and the reason names the attempt."""
    from harness.backends.base import KernelFault
    from harness.judging.core import FAIL, verdict_for_fault
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(timeout_s=60, schedules=1)
    try:
        with pytest.raises(KernelFault) as info:
            run_argmax(be.load(probes(tmp_path)["fork"]))
    finally:
        be.close()
    assert verdict_for_fault(info.value) == FAIL and "clone()" in str(info.value)


LANDLOCK_ONLY = r"""
import ctypes, os, sys
from harness.backends.emu import sandbox
ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)          # no_new_privs, then Landlock alone (no seccomp filter)
assert sandbox.apply_landlock() > 0
try:
    open(sys.argv[1], "w")
except PermissionError:
    pass
print(open("/proc/self/status").read()[:4], os.system("true") != 0, flush=True)
"""


@pytest.mark.skipif(sandbox.landlock_abi() == 0, reason="this kernel has no Landlock")
def test_landlock_refuses_writes_and_exec_even_without_the_filter(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", LANDLOCK_ONLY, str(tmp_path / "written")], capture_output=True,
                       text=True, timeout=120, cwd=Path(__file__).resolve().parents[3])
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["Name", "True"]      # reads work; `sh` could not be executed
    assert not (tmp_path / "written").exists()


@needs_sandbox
def test_without_libseccomp_the_backend_refuses_to_run(monkeypatch):
    from harness.backends.emu.backend import EmuBackend
    monkeypatch.setattr(sandbox, "unavailable_reason", lambda: "libseccomp hidden by the test")
    monkeypatch.delenv(sandbox.OFF_ENV, raising=False)
    with pytest.raises(RuntimeError, match=r"sandbox is not available: libseccomp hidden by the test.*"
                                           r"QCONFORM_EMU_SANDBOX=off"):
        EmuBackend()


# ---- memory: guard pages and the memory limit --------------------------------------------------------------
@pytest.mark.parametrize("stmt,message", [
    ("((float*)logits)[-2000] = 1.0f;", r"write to 'logits' \(arg 0, 1000 x float32\) 8000 byte\(s\) before its "
                                        r"start \(element -2000\) at byte offset -8000: it hit the inaccessible guard pages"),
    ("d_tok[3000] = 1;", r"write to 'd_tok' \(arg 2, 1 x int32\) \d+ byte\(s\) past its end \(element 3000 of 1\)"),
    ("*d_pos = (int)logits[-3000];", r"read of 'logits' \(arg 0, 1000 x float32\) 12000 byte\(s\) before its start"),
])
def test_wild_accesses_near_a_buffer_are_out_of_bounds_by_default(backend, stmt, message):
    with pytest.raises(OutOfBounds, match=message):
        run_argmax(backend.load(HEADERS + SIG + (CLEAN_BODY % stmt)))
    tok, logits = run_argmax(backend.load(clean_source()))
    assert tok == int(np.argmax(logits))


def test_the_sentinel_band_still_names_the_exact_element(backend):
    with pytest.raises(OutOfBounds, match=r"write to 'd_tok' \(arg 2, 1 x int32\) 5 byte\(s\) past its end "
                                          r"\(element 2 of 1\).*: its guard band changed"):
        run_argmax(backend.load(HEADERS + SIG + (CLEAN_BODY % "d_tok[2] = 7;")))


@needs_sandbox
def test_unbounded_allocation_stops_at_the_memory_limit():
    """A kernel that allocates without end gets NULL at the worker's limit (like device malloc on a GPU), and
    one that does not check for NULL crashes: its fault, `fail`; the machine's memory is never at stake."""
    from harness.backends.emu.backend import EmuBackend
    be = EmuBackend(timeout_s=120, schedules=1, memory_limit_mb=2048)
    grow = "for (;;) { char* p = (char*)malloc(64 << 20); if (!p) { *d_tok = -1; break; } memset(p, 1, 64 << 20); }"
    blind = "for (;;) { char* p = (char*)malloc(64 << 20); memset(p, 1, 64 << 20); }"
    try:
        with pytest.raises(KernelCrash, match=r"SIGSEGV \(write at address 0x0\)"):
            run_argmax(be.load(HEADERS + SIG + (CLEAN_BODY % blind)))
        tok, _ = run_argmax(be.load(HEADERS + SIG + (CLEAN_BODY % grow)))
        assert tok == -1, "malloc should fail at the limit"
        # what that kernel left allocated went with its worker: the next kernel runs in a new one
        tok, logits = run_argmax(be.load(clean_source()))
        assert tok == int(np.argmax(logits))
    finally:
        be.close()


# ---- no leftovers --------------------------------------------------------------------------------------------
def test_with_the_sandbox_off_a_forked_process_still_dies_with_the_worker(tmp_path, ungated, monkeypatch):
    """The degraded mode ($QCONFORM_EMU_SANDBOX=off, trusted sources): nothing stops fork, but what the worker
    started is in the worker's process group and is killed with it."""
    from harness.backends.emu.backend import EmuBackend
    monkeypatch.setenv(sandbox.OFF_ENV, "off")
    be = EmuBackend(timeout_s=60, schedules=1)
    try:
        run_argmax(be.load(probes(tmp_path)["fork"]))
        deadline = time.monotonic() + 10
        while not survivors() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert survivors(), "the unsandboxed probe should have started its sleep"
    finally:
        be.close()
    deadline = time.monotonic() + 10
    while survivors() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not survivors()


# ---- end to end: `qconform check` on a probe -----------------------------------------------------------------
def _check(tmp_path: Path, source: str) -> tuple[int, list[dict]]:
    from harness.cli import main
    src, out = tmp_path / "probe.cu", tmp_path / "report"
    src.write_text(source)
    rc = main(["check", "--source", str(src), "--backend", "emu", "--shapes", "tiny", "--seed", "3", "--out", str(out)])
    return rc, json.loads((out / "report.json").read_text())["rows"]


def test_check_passes_the_clean_kernel(tmp_path):
    rc, rows = _check(tmp_path, clean_source())
    assert rc == 0 and rows and all(r["verdict"] == "pass" for r in rows)


@needs_nvcc
def test_check_fails_a_probe_with_nvcc_s_message(tmp_path):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    rc, rows = _check(tmp_path, probes(probe_dir)["system"])
    assert rc == 1 and rows and all(r["verdict"] == "fail" and 'calling a __host__ function("system")' in r["reason"]
                                    for r in rows)
    assert_contained(probe_dir)


@needs_sandbox
def test_check_fails_a_probe_the_sandbox_stops(tmp_path, ungated):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    rc, rows = _check(tmp_path, probes(probe_dir)["fork"])
    assert rc == 1 and rows and all(r["verdict"] == "fail" and "SandboxViolation" in r["reason"] and "clone()" in r["reason"]
                                    for r in rows)
    assert_contained(probe_dir)
