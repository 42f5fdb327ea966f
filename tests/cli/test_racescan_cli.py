"""`qconform racescan FILE.cu`: one kernel of any source under the race detector, its launch and arguments
from the file's header or the options; a race at one parameter value found by the sweep and replayed with
--at; exit 0 clean, 1 a race or fault, 2 bad input, 3 nothing checked."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from tests.marks import needs_nvcc

CORPUS = Path(__file__).resolve().parents[1] / "race_corpus"
ONE_VALUE = str(CORPUS / "scalar_value_race.cu")


def test_the_sweep_finds_the_race_and_prints_its_replay(capsys):
    assert main(["racescan", ONE_VALUE, "--seed", "17"]) == 1
    out, err = capsys.readouterr()
    assert "stamp<<<1, 64, 0>>>, seed 17, 127 points (every one) of header_at in [1, 128)" in out
    assert "verdict: RACE (DataRace, 1 distinct race, scope block) at header_at=63 (63 of 127 launches run)" in out
    assert "data race on 'y' index 63" in out
    replay = err.strip().splitlines()[-1]
    assert replay == f"replay: qconform racescan {ONE_VALUE} --seed 17 --at header_at=63"
    assert main(replay.split()[2:]) == 1                      # the replay races again, at that one point
    assert "the point header_at=63" in capsys.readouterr().out
    assert main(["racescan", ONE_VALUE, "--seed", "17", "--at", "header_at=62"]) == 0     # its neighbour: clean
    capsys.readouterr()
    assert main(["racescan", str(CORPUS / "scalar_value_race_fixed.cu"), "--seed", "17"]) == 0
    out, err = capsys.readouterr()
    assert "verdict: CLEAN (127 of 127 launches run)" in out
    assert "racescan: 127/127 launches done" in err           # progress, as plain lines in a log


def test_options_replace_the_header_and_same_value_races_are_marked(tmp_path, capsys):
    src = tmp_path / "flag.cu"
    src.write_text("__global__ void flag(int* done, int* y) {\n  done[0] = 1;\n  y[threadIdx.x] = threadIdx.x;\n}\n")
    argv = ["racescan", str(src), "--kernel", "flag", "--grid", "2", "--block", "32", "--args",
            "done:int32[1] y:int32[64]", "--seed", "5"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "flag<<<2, 32, 0>>>, seed 5, one launch" in out and "scope grid, same-value stores only" in out
    replay = err.strip().splitlines()[-1]
    assert "--kernel flag --grid 2 --block 32 --args 'done:int32[1] y:int32[64]'" in replay
    assert main(shlex.split(replay)[2:]) == 1                   # the printed command, as a shell reads it
    assert main(argv + ["--race-check", "off"]) == 0          # the schedules cannot see a same-value race
    assert "verdict: CLEAN" in capsys.readouterr().out


def test_the_acquire_rule_is_an_option_and_its_replay_keeps_it(tmp_path, capsys):
    src = tmp_path / "handoff.cu"        # the writer fences; the reader's atomic has no fence after it
    src.write_text("__global__ void handoff(int* flag, int* data, int* out) {\n"
                   "  if (blockIdx.x == 1) { data[0] = 7; __threadfence(); atomicExch(flag, 1); }\n"
                   "  else { while (atomicAdd(flag, 0) == 0) {} out[0] = data[0]; }\n}\n")
    argv = ["racescan", str(src), "--kernel", "handoff", "--grid", "2", "--block", "1", "--args",
            "flag:int32[1]=zeros data:int32[1] out:int32[1]", "--seed", "3"]
    assert main(argv) == 1                                     # PTX: the reader did not acquire
    out, err = capsys.readouterr()
    assert "no fence of the second thread followed that atomic" in out and "--acquire" not in err
    assert main(argv + ["--acquire", "atomic"]) == 0
    assert "race detector on, acquire rule atomic" in capsys.readouterr().out
    src.write_text(src.read_text().replace("__threadfence(); ", ""))
    assert main(argv + ["--acquire", "atomic"]) == 1           # without the writer's fence: a race either way
    replay = capsys.readouterr().err.strip().splitlines()[-1]
    assert replay.endswith("--acquire atomic")


def test_every_access_of_the_source_is_an_option_and_its_replay_keeps_it(capsys, monkeypatch):
    dead = str(CORPUS / "shared_dead_load.cu")
    assert main(["racescan", dead, "--seed", "1"]) == 1            # by default every access of the source is made
    out, err = capsys.readouterr()
    assert "data race on __shared__ 'offset'" in out and "build" not in out.splitlines()[0]
    assert err.strip().splitlines()[-1] == f"replay: qconform racescan {dead} --seed 1"
    assert main(["racescan", dead, "--seed", "1", "--accesses", "compiled"]) == 0   # the optimised build dropped it
    out = capsys.readouterr().out
    assert "race detector on, the optimised build's accesses" in out
    assert "note: the file's header says its race shows in the build of every access of the source" in out
    assert main(["racescan", dead, "--seed", "1", "--accesses", "source"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--seed 1 --accesses source")
    assert main(["racescan", str(CORPUS / "shared_dead_load_fixed.cu"), "--seed", "1"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("QCONFORM_EMU_ACCESSES", "compiled")       # the environment's choice, named by the replay
    assert main(["racescan", str(CORPUS / "shared_rw_no_barrier.cu"), "--seed", "1"]) == 1
    out, err = capsys.readouterr()
    assert "the optimised build's accesses" in out and err.strip().endswith("--seed 1 --accesses compiled")


@pytest.mark.parametrize("stem, effect", [
    ("shared_same_value", "CLEAN: every schedule gave the same outputs"),         # the values coincide
    ("block_reduce_missing_barrier", "ORDER-DEPENDENT: the schedules' outputs differ"),
    ("shared_rw_no_barrier", "FAULT (UninitializedRead): a value read from memory nothing had written")])
def test_effect_runs_the_races_launch_under_the_schedules_alone(capsys, stem, effect):
    path = str(CORPUS / f"{stem}.cu")
    assert main(["racescan", path, "--seed", "1", "--effect"]) == 1          # still a race, whatever its effect
    out, err = capsys.readouterr()
    line = next(row for row in out.splitlines() if row.startswith("effect"))
    assert line.startswith("effect (the race's launch again, the thread schedules alone, no detector): " + effect)
    assert err.strip().endswith("--seed 1 --effect")
    assert main(["racescan", path, "--seed", "1"]) == 1 and "effect" not in capsys.readouterr().out


def test_effect_is_for_a_race_of_the_detector(capsys):
    assert main(["racescan", str(CORPUS / "shared_rw_no_barrier_fixed.cu"), "--seed", "1", "--effect"]) == 0
    assert "effect" not in capsys.readouterr().out                       # nothing to say of a clean launch
    assert main(["racescan", str(CORPUS / "shared_rw_no_barrier.cu"), "--effect", "--race-check", "off"]) == 2
    assert "--effect: runs a race's launch again without the detector" in capsys.readouterr().err


def test_a_reading_leaves_out_the_races_a_verifier_calls_benign_and_prints_them(capsys):
    same = str(CORPUS / "shared_same_value.cu")          # 64 threads store 3 into one __shared__ slot
    assert main(["racescan", same, "--seed", "1"]) == 1        # the memory model: a race
    capsys.readouterr()
    for reading, name in (("gpuverify", "GPUVerify"), ("faial", "faial"), ("gklee", "GKLEE")):
        assert main(["racescan", same, "--seed", "1", "--reading", reading]) == 0
        out = capsys.readouterr().out
        assert f"race detector on, reading {reading}\n" in out
        assert f"reading {name}: the verdict leaves out" in out and "races of stores that left the bytes as they were" in out
        assert f"verdict: CLEAN (reading {name}: the races of 1 launch left out, below)" in out
        assert f"left out by the reading {name} (the memory model's verdict: a race" in out
        assert "data race on __shared__ 'scale'" in out               # what it left out, in full
    # negative control: a read racing a store of another value counts under every reading
    assert main(["racescan", str(CORPUS / "shared_rw_no_barrier.cu"), "--seed", "1", "--reading", "gpuverify"]) == 1
    out, err = capsys.readouterr()
    assert "verdict: RACE (DataRace" in out and "left out" not in out
    assert err.strip().splitlines()[-1].endswith("--seed 1 --reading gpuverify")      # the replay keeps it


def test_a_reading_names_the_races_of_a_counted_launch_that_it_leaves_out(tmp_path, capsys):
    src = tmp_path / "two.cu"
    src.write_text("// launch: k grid=1 block=64\n// args: y:int32[64]!out flag:int32[2]\n"
                   "__global__ void k(int* y, int* flag) {\n  flag[0] = 1;\n  flag[1] = threadIdx.x;\n"
                   "  y[threadIdx.x] = threadIdx.x;\n}\n")
    assert main(["racescan", str(src), "--seed", "1", "--reading", "gpuverify"]) == 1
    out = capsys.readouterr().out
    assert "2 distinct data races in this launch; the first: data race on 'flag' index 0" in out
    assert "reading GPUVerify: of the races above it leaves out race 1 and counts the other\n" in out
    assert main(["racescan", str(src), "--seed", "1"]) == 1       # the memory model counts both: no such line
    assert "leaves out" not in capsys.readouterr().out


def test_a_reading_judges_a_launch_again_by_the_schedules_in_lock_step_where_it_assumes_it(capsys):
    warp = str(CORPUS / "warp_no_syncwarp.cu")            # lanes read a neighbour's slot with no __syncwarp
    assert main(["racescan", warp, "--seed", "17", "--reading", "gpuverify-warp-sync"]) == 0
    out = capsys.readouterr().out
    assert "verdict: CLEAN (reading GPUVerify --warp-sync: the races of 1 launch left out, below)" in out
    assert "the schedules alone judged the launch again, a warp's lanes in lock step)" in out
    assert main(["racescan", warp, "--seed", "17", "--reading", "gpuverify"]) == 1       # it counts without --warp-sync
    capsys.readouterr()
    # blocks that store different values into one word: left out with --only-intra-group, and the schedules
    # that then judge the launch find its result depends on the blocks' order
    inter = str(CORPUS / "global_interblock.cu")
    assert main(["racescan", inter, "--seed", "17", "--reading", "gpuverify-intra-group"]) == 1
    out = capsys.readouterr().out
    assert "verdict: ORDER-DEPENDENT (RaceDetected) (reading GPUVerify --only-intra-group" in out
    assert "a warp's lanes in lock step" not in out
    assert main(["racescan", inter, "--seed", "17", "--reading", "faial-grid-level"]) == 1
    assert "verdict: RACE (DataRace, 1 distinct race, scope grid)" in capsys.readouterr().out


def test_a_whole_program_runs_as_its_device_code_and_says_what_it_left_out(tmp_path, capsys):
    src = tmp_path / "prog.cu"
    src.write_text("#include <cstdio>\n__shared__ int smem[64];\n"
                   "__global__ void sum(const int* x, int* out) {\n  smem[threadIdx.x] = x[threadIdx.x];\n"
                   "  if (threadIdx.x == 0) { int s = 0; for (int i = 0; i < 64; ++i) s += smem[i]; *out = s; }\n}\n"
                   "void fill(int* p) { cudaMemset(p, 0, 256); }\n"
                   "int main() {\n  int *x, *out;\n  cudaMalloc(&x, 256);\n  cudaMalloc(&out, 4);\n  fill(x);\n"
                   "  sum<<<1, 64>>>(x, out);\n  return 0;\n}\n")
    assert main(["racescan", str(src), "--kernel", "sum", "--grid", "1", "--block", "64", "--args",
                 "x:int32[64]=random(0,9) out:int32[1]!out", "--seed", "3"]) == 1
    out = capsys.readouterr().out
    assert "host code, not run: fill (line 7), main (line 8)" in out
    assert "verdict: RACE (DataRace" in out and "__shared__ 'smem'" in out      # the missing __syncthreads


def test_headers_are_found_beside_the_source_and_in_minus_i_folders_and_a_changed_one_rebuilds(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "dev.cuh").write_text("__device__ inline int twice(int x) { return 2 * x; }\n")
    poke = tmp_path / "sub" / "poke.cuh"
    poke.write_text("__device__ inline void poke(int* y, int t) { if (t == 0) y[1] = 0; }\n")   # beside thread 1
    src = tmp_path / "k.cu"
    src.write_text('#include "dev.cuh"\n#include "poke.cuh"\n'
                   "__global__ void k(int* y) { int t = threadIdx.x; y[t] = twice(t); poke(y, t); }\n")
    argv = ["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "32", "--args", "y:int32[32]!out",
            "--seed", "2"]
    assert main(argv) == 3                                    # poke.cuh is in no folder the build searches
    assert "poke.cuh" in capsys.readouterr().out
    assert main(argv + ["-I", str(tmp_path / "sub")]) == 1
    out, err = capsys.readouterr()
    assert "data race on 'y' index 1" in out and f"-I {tmp_path / 'sub'}" in err     # the replay keeps -I
    poke.write_text("__device__ inline void poke(int* y, int t) {}\n")   # the header alone changes: a new build
    assert main(argv + ["-I", str(tmp_path / "sub")]) == 0
    assert main(argv + ["-I", str(tmp_path / "none")]) == 2
    assert "-I: no such file" in capsys.readouterr().err


# A benchmark suite's layout (Indigo's): every program is one kernel file, and a shared driver header declares the
# kernel and holds main(), the allocations, the launch and the host helpers. The header's device helper stays.
DRIVER = r"""#pragma once
#include <cstdio>
#include "more/helpers.cuh"
__global__ void test_kernel(int* data, int n);
static void check(cudaError_t e) { if (e != cudaSuccess) { printf("%s\n", cudaGetErrorString(e)); exit(1); } }
int main() {
  int* d = nullptr;
  check(cudaMalloc(&d, 64 * sizeof(int)));
  test_kernel<<<1, 32>>>(d, 32);
  check(cudaDeviceSynchronize());
  return 0;
}
"""
# A library's way: one header defines the execution-space macro, another uses it (the device helper must stay).
CONFIG = "#pragma once\n#define QC_HOST_DEVICE __host__ __device__\n"
HELPERS = ('#include "../config.cuh"\nQC_HOST_DEVICE inline int bump(int x) { return x + 1; }\n'
           "void host_only() { cudaDeviceReset(); }\n")


def test_host_code_in_the_sources_own_headers_is_dropped_too(tmp_path, capsys):
    (tmp_path / "include" / "more").mkdir(parents=True)
    (tmp_path / "include" / "driver.cuh").write_text(DRIVER)
    (tmp_path / "include" / "more" / "helpers.cuh").write_text(HELPERS)
    (tmp_path / "include" / "config.cuh").write_text(CONFIG)
    src = tmp_path / "racy.cu"
    src.write_text('#include "driver.cuh"\n'
                   "__global__ void test_kernel(int* data, int n) { if (threadIdx.x < n) data[0] = bump(data[0]); }\n")
    argv = ["racescan", str(src), "-I", str(tmp_path / "include"), "--kernel", "test_kernel", "--grid", "1",
            "--block", "32", "--args", "data:int32[64]=random(0,9) n:int32=32", "--seed", "3"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "verdict: RACE (DataRace" in out and "data race on 'data' index 0" in out, out
    assert "host code, not run: in driver.cuh: check (line 5), main (line 6); in helpers.cuh: host_only (line 3)" in out
    # the header is the user's file and stays as it was; a GPU build of the program (nvcc) takes it whole
    assert (tmp_path / "include" / "driver.cuh").read_text() == DRIVER


@pytest.mark.parametrize("extra, message", [
    ([], "no `// launch: KERNEL grid=.. block=..` line in its leading comment; give --kernel, --grid and --block"),
    (["--kernel", "k", "--grid", "1", "--block", "4"], "no `// args: ...` line in its leading comment; give --args"),
    (["--kernel", "other", "--grid", "1", "--block", "4", "--args", "y:int32[4]"],
     "--kernel: no __global__ kernel 'other'"),
    (["--kernel", "k", "--grid", "0", "--block", "4", "--args", "y:int32[4]"], "is not 1 to 3 comma-separated positive"),
    (["--kernel", "k", "--grid", "1", "--block", "4", "--args", "y:int32[4] n:int32=2"],
     "--args: 2 spec(s) for the 1 parameters of k (y)"),
    (["--kernel", "k", "--grid", "1", "--block", "4", "--args", "y:int32[4]", "--at", "n=1"],
     "at: n is not a swept scalar"),
    (["--kernel", "k", "--grid", "1", "--block", "4", "--args", "y:float32[4]"],       # named before any build
     "args: y: the kernel takes int*, so the array must have dtype int32, got float32"),
    (["--kernel", "k", "--grid", "1", "--block", "4", "--args", "y:int32=4"],
     "args: y: the parameter is the pointer int*; give an array (`y:dtype[count]`) or `y:null`"),
    (["--kernel", "k", "--grid", "1", "--block", "4", "--args", "y:int32[4]", "--reading", "gpuverify",
      "--race-check", "off"], "--reading gpuverify: a reading sorts the races the detector reports"),
    (["--kernel", "k", "--grid", "1", "--block", "4", "--args", "y:int32[4]", "--sanitize"],
     "--sanitize: the AddressSanitizer build and the race detector's each instrument every access"),
])
def test_bad_input_is_named_and_nothing_runs(tmp_path, capsys, extra, message):
    src = tmp_path / "plain.cu"
    src.write_text("__global__ void k(int* y) { y[threadIdx.x] = 1; }\n")
    assert main(["racescan", str(src), *extra]) == 2
    out, err = capsys.readouterr()
    assert message in err and "race detector" not in out            # refused before the build

def test_a_missing_file_an_outside_point_and_a_source_that_does_not_build(tmp_path, capsys):
    assert main(["racescan", str(tmp_path / "nope.cu")]) == 2
    assert "source: no such file" in capsys.readouterr().err
    assert main(["racescan", ONE_VALUE, "--at", "header_at=500"]) == 2
    assert "at: header_at=500 is outside its domain [1, 128)" in capsys.readouterr().err
    bad = tmp_path / "bad.cu"
    bad.write_text("// launch: k grid=1 block=4\n// args: y:int32[4]!out\n"
                   "__global__ void k(int* y) { y[threadIdx.x] = not_declared; }\n")
    assert main(["racescan", str(bad), "--seed", "1"]) == 3      # nothing was checked
    out = capsys.readouterr().out
    assert "verdict: UNSUPPORTED (BuildError)" in out and "bad.cu" in out


def test_a_header_linked_outside_the_sources_folders_is_neither_built_nor_listed(tmp_path, capsys):
    """qconform's own reading of a program's headers (the host-code listing) keeps to what its confined compiler
    may read: a header that links to a file elsewhere is not opened (nor would the compiler open it)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.h").write_text("int leaked_function_name() { return 42; }\n")
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    (src_dir / "evil.h").symlink_to(elsewhere / "secret.h")
    (src_dir / "fine.h").write_text("void host_helper() {}\n")
    src = src_dir / "prog.cu"
    src.write_text('#include "fine.h"\n#if 0\n#include "evil.h"\n#endif\n'
                   "__global__ void k(int* out) { out[threadIdx.x] = 1; }\n")
    assert main(["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "32", "--args",
                 "out:int32[32]!out", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "in fine.h: host_helper (line 1)" in out and "leaked_function_name" not in out


def test_a_template_kernel_runs_as_the_instantiation_its_host_code_launches(tmp_path, capsys):
    """`--kernel 'route<32, false>'` runs the instantiation that the file's host code makes (and qconform's build
    drops with the host code) without an edit to the file; the barrier that the template's `B` turns off is the
    race, so the other instantiation is the negative control."""
    src = tmp_path / "route.cu"
    src.write_text("namespace moe {\ntemplate <int N, bool B, typename T = float>\n"
                   "__global__ void route(const T* x, T* y) {\n  __shared__ T red[N];\n"
                   "  red[threadIdx.x] = x[threadIdx.x];\n  if (B) __syncthreads();\n"
                   "  y[threadIdx.x] = red[(threadIdx.x + 1) % N];\n}\n}\n"
                   "void host(float* x, float* y) { moe::route<32, true><<<1, 32>>>(x, y); "
                   "moe::route<32, false><<<1, 32>>>(x, y); }\n")
    argv = ["racescan", str(src), "--grid", "1", "--block", "32", "--args", "x:float32[32]=iota y:float32[32]!out",
            "--seed", "2"]
    assert main(argv + ["--kernel", "route<32, false>"]) == 1
    out, err = capsys.readouterr()
    assert "route<32, false><<<1, 32, 0>>>" in out and "data race on __shared__ 'red' (line 4)" in out
    assert "at line 7" in out and "at line 5" in out          # the source's own lines
    replay = err.strip().splitlines()[-1]
    assert "--kernel 'route<32, false>'" in replay              # as given, quoted for a shell
    assert main(shlex.split(replay)[2:]) == 1
    capsys.readouterr()
    assert main(argv + ["--kernel", "route<32,true>"]) == 0
    assert "verdict: CLEAN" in capsys.readouterr().out
    # a type argument of two words keeps its space in the code (`unsigned int`, not `unsignedint`)
    assert main(["racescan", str(src), "--grid", "1", "--block", "32", "--seed", "2", "--kernel",
                 "route<32, true, unsigned int>", "--args", "x:uint32[32]=iota y:uint32[32]!out"]) == 0
    assert "route<32, true, unsigned int><<<1, 32, 0>>>" in capsys.readouterr().out      # as the user wrote it
    assert main(argv + ["--kernel", "route<32>"]) == 2         # a count of arguments the template does not take
    assert "1 template argument(s), but route (line 3) takes 2 to 3" in capsys.readouterr().err
    assert main(argv + ["--kernel", "route"]) == 2            # the template itself: its arguments are asked for
    assert "template kernels, launched by naming their arguments as `--kernel 'route<...>'`: route" in \
        capsys.readouterr().err
    # named with its namespace, as C++ code names it: the same kernel; another namespace is named as wrong
    assert main(argv + ["--kernel", "moe::route<32, false>"]) == 1
    assert "moe::route<32, false><<<1, 32, 0>>>" in capsys.readouterr().out
    assert main(argv + ["--kernel", "::moe::route<32,true>"]) == 0
    capsys.readouterr()
    assert main(argv + ["--kernel", "dense::route<32, false>"]) == 2
    assert "--kernel: route<32,false> is defined in moe, not in dense" in capsys.readouterr().err
    plain = tmp_path / "plain.cu"                             # a name it lacks: its kernels, as C++ names them
    plain.write_text("namespace moe { namespace gate {\n__global__ void fill(int* y) { y[threadIdx.x] = 1; }\n} }\n")
    assert main(["racescan", str(plain), "--grid", "1", "--block", "32", "--kernel", "sort", "--args",
                 "y:int32[32]!out"]) == 2
    err = capsys.readouterr().err
    assert "no __global__ kernel 'sort' in " in err and "(it has: moe::gate::fill)" in err
    assert main(["racescan", str(plain), "--grid", "1", "--block", "32", "--kernel", "moe::gate::fill", "--args",
                 "y:int32[32]!out"]) == 0


STRUCT_KERNEL = """struct inner { float w[2]; };
struct cfg { int scale; bool twice; inner in; };
__global__ void k(const float* x, float* y, const cfg c, float* out) {
  __shared__ float red[32];
  red[threadIdx.x] = x[threadIdx.x] * c.scale + c.in.w[1];
  if (c.twice) __syncthreads();
  y[threadIdx.x] = red[(threadIdx.x + 1) % 32];
  out[threadIdx.x] = c.scale + c.in.w[1];
}
"""


@pytest.mark.parametrize("spec, verdict, exit_status", [
    ("c:struct={scale=2,twice=1,in.w=0.5}", "verdict: CLEAN", 0),
    ("c:struct={scale=2}", "verdict: RACE", 1),            # twice is zero: the barrier is skipped
    ("c:struct", "verdict: RACE", 1),
])
def test_a_struct_passed_by_value_takes_its_fields_from_the_spec(tmp_path, capsys, spec, verdict, exit_status):
    src = tmp_path / "cfg.cu"
    src.write_text(STRUCT_KERNEL)
    assert main(["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "32", "--seed", "1", "--args",
                 f"x:float32[32]=iota y:float32[32]!out {spec} out:float32[32]!out"]) == exit_status
    out, err = capsys.readouterr()
    assert verdict in out
    if exit_status:
        assert f"--args 'x:float32[32]=iota y:float32[32]!out {spec} out:float32[32]!out'" in err


def test_the_struct_value_reaches_the_kernel_field_by_field():
    from harness.racescan import parse_args, make_args
    from cudasrc.structs import struct_layout
    spec, = parse_args("c:struct={scale=-3,twice=1,in.w=0.25}")
    laid = spec.with_layout(struct_layout(STRUCT_KERNEL, "cfg").dtype, "struct cfg")
    (value,), _ = make_args([laid], seed=0)
    assert (value["scale"], value["twice"], list(value["in.w"])) == (-3, True, [0.25, 0.25])
    assert value.dtype.itemsize == 16 and str(laid) == "c:struct={scale=-3,twice=1,in.w=0.25}"
    # an integer literal is taken exactly, not through a float (2**53 + 1 would become 2**53)
    wide = np.dtype([("n", "<u8")])
    (big,), _ = make_args([parse_args("c:struct={n=9007199254740993}")[0].with_layout(wide, "struct w")], seed=0)
    assert int(big["n"]) == 2 ** 53 + 1


@pytest.mark.parametrize("spec, message", [
    ("c:struct={scal=2}", "args: c: struct cfg has no field 'scal' (its fields: scale, twice, in.w)"),
    ("c:struct={scale=x}", "field scale: 'x' is not a number"),
    ("c:struct={scale=2.5}", "field scale is int32: 2.5 is not an integer"),
    ("c:struct={twice=2}", "field twice is bool: 2 is not 0 or 1"),
    ("c:struct={scale=3000000000}", "field scale: 3000000000 does not fit int32"),
    ("c:struct={in.w=1e39}", "field in.w: 1e39 does not fit float32 (it would be inf)"),
    ("c:struct[2]", "a struct passed by value is one value, neither an array nor an output"),
    ("c:struct={scale=2}!out", "a struct passed by value is one value, neither an array nor an output"),
    ("c:struct=scale", "a struct's value is `{field=value,...}`"),
])
def test_a_struct_spec_the_struct_does_not_take_is_named(tmp_path, capsys, spec, message):
    src = tmp_path / "cfg.cu"
    src.write_text(STRUCT_KERNEL)
    assert main(["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "32", "--args",
                 f"x:float32[32] y:float32[32]!out {spec} out:float32[32]!out"]) == 2
    out, err = capsys.readouterr()
    assert message in err and "verdict" not in out                # refused before anything is built or run


def test_struct_is_for_a_struct_parameter(tmp_path, capsys):
    src = tmp_path / "cfg.cu"
    src.write_text(STRUCT_KERNEL)
    assert main(["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "32", "--args",
                 "x:struct y:float32[32]!out c:struct out:float32[32]!out"]) == 2
    assert "args: x: `struct` is for a struct passed by value; the parameter is const float*" in capsys.readouterr().err


FUNCTOR_KERNEL = """struct Plus { __device__ float operator()(float a, float b) const { return a + b; } };
struct Ops { Plus add; __device__ float operator()(float a, float b) const { return add(a, b); } };
template <typename Op>
__global__ void reduce(const float* x, float* y, Op op) {
  __shared__ float s[32];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) { float a = 0; for (int i = 0; i < 32; ++i) a = op(a, s[i]); y[0] = a; }
}
template __global__ void reduce<Plus>(const float*, float*, Plus);
template __global__ void reduce<Ops>(const float*, float*, Ops);
"""


@pytest.mark.parametrize("kernel", ["reduce<Plus>", "reduce<Ops>"])
def test_a_functor_with_no_data_passes_by_value(tmp_path, capsys, kernel):
    """A functor or tag (CUB's and the engines' operators) has no fields: one byte in C++, given as `op:struct`
    (or `{}`), where before it was refused as a struct with no fields; a struct of such members is one byte too."""
    src = tmp_path / "functor.cu"
    src.write_text(FUNCTOR_KERNEL)
    save = tmp_path / "out.npz"
    for spec in ("op:struct", "op:struct={}"):
        assert main(["racescan", str(src), "--kernel", kernel, "--grid", "1", "--block", "32", "--seed", "0",
                     "--args", f"x:float32[32]=iota y:float32[1]!out {spec}", "--save", str(save), "--force"]) == 0
        assert "verdict: CLEAN" in capsys.readouterr().out
        saved = np.load(save)
        assert saved["y"][0] == sum(range(32)) and saved["op"].dtype.itemsize == 1
    assert main(["racescan", str(src), "--kernel", kernel, "--grid", "1", "--block", "32", "--args",
                 "x:float32[32]=iota y:float32[1]!out op:struct={k=1}"]) == 2
    assert "has no field 'k' (its fields: none)" in capsys.readouterr().err


PARAM_KERNEL = """typedef long long dim_t;
struct Param { float* ptr; dim_t dims[4]; dim_t strides[4]; };
struct CParam { const float* ptr; dim_t dims[4]; dim_t strides[4]; };
__global__ void scale(Param out, CParam in, float a) {
  const dim_t x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x >= in.dims[0] || y >= in.dims[1]) return;
  out.ptr[y * out.strides[1] + x FOLD] = a * in.ptr[y * in.strides[1] + x];
}
"""
# arrayfire's way: a tensor is a struct of its data pointer, dims and strides (64 x 4 floats here)
PARAM_ARGS = ("out:struct={ptr=@float32[256]=zeros,dims=values(64,4,1,1),strides=values(1,64,256,256)} "
              "in:struct={ptr=@float32[256]=random(-1,1),dims=values(64,4,1,1),strides=values(1,64,256,256)} "
              "a:float32=2")


@pytest.mark.parametrize("fold, verdict, exit_status", [("", "verdict: CLEAN", 0), ("% 16", "verdict: RACE", 1)])
def test_a_structs_pointer_fields_point_at_arrays_of_the_spec(tmp_path, capsys, fold, verdict, exit_status):
    """`ptr=@float32[256]=random(-1,1)`: an array of its own behind a struct's pointer field, `dims=values(...)` one
    number per element of an array field. The kernel reads and writes them in place (--save keeps what it left),
    and the detector sees a race through the pointer (the negative control folds the columns onto 16 slots)."""
    src, saved = tmp_path / "param.cu", tmp_path / "launch.npz"
    src.write_text(PARAM_KERNEL.replace("FOLD", fold))
    argv = ["racescan", str(src), "--kernel", "scale", "--grid", "1,4", "--block", "64", "--seed", "3",
            "--args", PARAM_ARGS]
    assert main(argv + (["--save", str(saved)] if not fold else [])) == exit_status
    out, err = capsys.readouterr()
    assert verdict in out
    if fold:
        assert "data race on 'out.ptr (through out)'" in out and f"--args '{PARAM_ARGS}'" in err
        return
    data = np.load(saved)
    assert sorted(data.files) == ["a", "in", "in.ptr", "out", "out.ptr"]
    assert list(data["in"]["dims"]) == [64, 4, 1, 1] and data["in"]["ptr"] == 0    # the address is the launch's
    assert np.array_equal(data["out.ptr"], 2 * data["in.ptr"]) and data["in.ptr"].std() > 0.3
    assert main(argv + ["--save", str(tmp_path / "again.npz")]) == 0                     # drawn from the seed
    assert np.array_equal(np.load(tmp_path / "again.npz")["in.ptr"], data["in.ptr"])


def test_a_template_structs_instance_is_laid_out_for_its_arguments(tmp_path, capsys):
    """arrayfire's kernels take `Param<To>` and `CParam<Ti>`, instances of template structs (one a class with
    constructors): racescan lays out `Param<float>` from the template, its pointer `float*`, and checks each array's
    dtype against it."""
    src = tmp_path / "tparam.cu"
    src.write_text("typedef long long dim_t;\nnamespace cuda {\n"
                   "template<typename T> struct Param { T *ptr; dim_t dims[4]; dim_t strides[4]; };\n"
                   "template<typename T> class CParam {\npublic:\n  const T *ptr;\n  dim_t dims[4];\n  dim_t strides[4];\n"
                   "  __device__ __host__ CParam(const T* p) : ptr(p) {}\n};\n"
                   + PARAM_KERNEL.split("};\n", 2)[2].replace("FOLD", "")
                   .replace("__global__ void scale(Param out, CParam in, float a)",
                            "template<typename T>\n__global__ void scale(Param<T> out, CParam<T> in, T a)") + "}\n")
    argv = ["racescan", str(src), "--kernel", "scale<float>", "--grid", "1,4", "--block", "64", "--seed", "3"]
    assert main(argv + ["--args", PARAM_ARGS]) == 0
    assert "verdict: CLEAN" in capsys.readouterr().out
    assert main(argv + ["--args", PARAM_ARGS.replace("ptr=@float32[256]=zeros", "ptr=@float64[256]=zeros")]) == 2
    assert "field ptr: the kernel takes float*, so the array must have dtype float32, got float64" in \
        capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("out:struct={dims=@int64[4]=zeros}", "field dims of struct Param is no pointer"),
    ("out:struct={ptr=5}", "field ptr of struct Param is a pointer (float*): give it `ptr=@dtype[count]=fill`"),
    ("out:struct={ptr=@int32[256]=zeros}", "field ptr: the kernel takes float*, so the array must have dtype float32"),
    ("out:struct={ptr=@float32[256]=zeros!out}", "an array behind a struct's pointer is read and written in place"),
    ("out:struct={ptr=@float32=3}", "a pointer field points at an array, `@dtype[count]=fill`"),
    ("out:struct={dims=values(64,4,1)}", "field dims holds 4 element(s): values(...) gives 3"),
    ("out:struct={dims=values(64,x,1,1)}", "field dims: 'x' in values(...) is not a number"),
    ("out:struct={strides=1,strides=2}", "field strides is given twice"),
])
def test_a_pointer_or_array_field_spec_the_struct_does_not_take_is_named(tmp_path, capsys, spec, message):
    src = tmp_path / "param.cu"
    src.write_text(PARAM_KERNEL.replace("FOLD", ""))
    assert message in _refusal(capsys, src, "scale", f"{spec} in:struct a:float32=1")


def _refusal(capsys, src, kernel: str, specs: str) -> str:
    """What racescan says on stderr when it refuses `specs` for `kernel` of `src` (bad input: exit 2, nothing run)."""
    assert main(["racescan", str(src), "--kernel", kernel, "--grid", "1", "--block", "64", "--args", specs]) == 2
    out, err = capsys.readouterr()
    assert "verdict" not in out
    return err


GRAPH_KERNEL = """typedef struct { int x; int y; } Node;
struct Weighted { float w; int to; };
__global__ void degrees(const Node* nodes, int* out, int n) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v < n) out[v SLOT] = nodes[v].y - nodes[v].x;
}
__global__ void weights(const Weighted* e, float* out) { out[threadIdx.x] = e[threadIdx.x].w; }
"""


@pytest.mark.parametrize("slot, verdict, exit_status", [("", "verdict: CLEAN", 0), ("/ 2", "verdict: RACE", 1)])
def test_an_array_of_structs_of_one_scalar_type_is_given_as_those_scalars(tmp_path, capsys, slot, verdict, exit_status):
    """HeCBench's sssp takes its graph as `const Node*`, Node {int x; int y;}: racescan refused any array but bytes.
    An array of the fields' type, fields in order, stands for the structs (`nodes:int32[128]`: 64 Nodes), and the
    kernel reads them so (--save keeps them as given); the negative control folds the outputs onto half the slots."""
    src, saved = tmp_path / "graph.cu", tmp_path / "launch.npz"
    src.write_text(GRAPH_KERNEL.replace("SLOT", slot))
    pairs = [v for i in range(64) for v in (i, 3 * i)]
    argv = ["racescan", str(src), "--kernel", "degrees", "--grid", "2", "--block", "32", "--seed", "1", "--args",
            f"nodes:int32[128]=values({','.join(map(str, pairs))}) out:int32[64]!out n:int32=64"]
    assert main(argv + (["--save", str(saved)] if not slot else [])) == exit_status
    assert verdict in capsys.readouterr().out
    if not slot:
        data = np.load(saved)
        assert np.array_equal(data["out"], 2 * np.arange(64)) and list(data["nodes"]) == pairs


@pytest.mark.parametrize("spec, message", [
    ("nodes:int32[127]=zeros", "the kernel takes Node*, 2 int32 each; give a multiple of 2 elements (got 127)"),
    ("nodes:float32[128]=zeros", "struct Node is not float32 fields alone with no padding (its fields: x int32, y int32"),
])
def test_an_array_that_cannot_stand_for_the_structs_is_named(tmp_path, capsys, spec, message):
    src = tmp_path / "graph.cu"
    src.write_text(GRAPH_KERNEL.replace("SLOT", ""))
    assert message in _refusal(capsys, src, "degrees", f"{spec} out:int32[64]!out n:int32=64")
    # fields of two types: only their bytes stand for them
    assert "struct Weighted is not float32 fields alone" in \
        _refusal(capsys, src, "weights", "e:float32[64]=zeros out:float32[64]!out")


# A kernel library's layout (vLLM's and llama.cpp's GGUF kernels): the source includes headers that define the
# template kernels, their shared-memory tiles in device functions, SIMD intrinsics, and launcher typedefs that name
# the runtime's stream type; the source's own host code launches one instantiation.
TILES = """#pragma once
template <int N> static __device__ __forceinline__ void tile_of(int** t) {
  __shared__ int tile[N * (32) +     + N];
  *t = tile;
}
typedef void (*launcher_t)(const int* x, int* y, int n, cudaStream_t stream);
"""
KERNELS = """#pragma once
#include "tiles.cuh"
template <int N>
static __global__ void shift(const int* __restrict__ x, int* __restrict__ y, int n) {
  int* tile;
  tile_of<N>(&tile);
  tile[threadIdx.x] = __vsubss4(x[threadIdx.x], 0x01010101);
  BARRIER
  y[threadIdx.x] = tile[(threadIdx.x + 1) % 32];
}
"""


def test_a_template_kernel_of_a_header_with_shared_tiles_in_its_device_functions(tmp_path, capsys):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tiles.cuh").write_text(TILES)
    (tmp_path / "lib" / "kernels.cuh").write_text(KERNELS.replace("BARRIER", ""))
    src = tmp_path / "ops.cu"
    src.write_text('#include "kernels.cuh"\nvoid op(const int* x, int* y, torch::Tensor& t) {\n'
                   '  shift<1><<<1, 32>>>(x, y, 32);\n}\n')
    argv = ["racescan", str(src), "-I", str(tmp_path / "lib"), "--kernel", "shift<1>", "--grid", "1", "--block",
            "32", "--args", "x:int32[32]=random(-128,128) y:int32[32]!out n:int32=32", "--seed", "4"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    # the header's shared tile, its accesses, named by the header's file and line
    assert "data race on __shared__ 'tile' (tiles.cuh:3)" in out, out
    assert "at line 9 (in kernels.cuh:9)" not in out and "kernels.cuh:9" in out and "kernels.cuh:7" in out, out
    (tmp_path / "lib" / "kernels.cuh").write_text(KERNELS.replace("BARRIER", "__syncthreads();"))
    assert main(argv) == 0                                    # the negative control: a barrier between
    assert "verdict: CLEAN" in capsys.readouterr().out


OPTIONAL_BIAS = """__global__ void biased(const float* x, const float* bias, const int* ids, float* y, int n) {
  __shared__ float s[32];
  s[threadIdx.x] = x[ids ? ids[threadIdx.x] : threadIdx.x] + (bias ? bias[threadIdx.x] : 0.0f);
  __syncthreads();
  y[threadIdx.x] = s[(threadIdx.x + 1) % n];
}
"""


def test_a_null_pointer_reaches_the_kernel_as_null(tmp_path, capsys):
    """Optional inputs (llama.cpp's `ids`, a fusion's bias) are tested for null: `name:null` passes one. A pointer
    the kernel reads anyway faults (the negative control), and `null` is only for pointers."""
    src = tmp_path / "bias.cu"
    src.write_text(OPTIONAL_BIAS)
    argv = ["racescan", str(src), "--kernel", "biased", "--grid", "1", "--block", "32", "--seed", "3", "--args"]
    assert main(argv + ["x:float32[32]=iota bias:null ids:null y:float32[32]!out n:int32=32"]) == 0
    assert "verdict: CLEAN" in capsys.readouterr().out
    assert main(argv + ["x:null bias:null ids:null y:float32[32]!out n:int32=32"]) == 1
    out, err = capsys.readouterr()
    assert "KernelCrash" in out and "--args 'x:null bias:null ids:null y:float32[32]!out n:int32=32'" in err
    assert main(argv + ["x:float32[32] bias:null ids:null y:float32[32]!out n:null"]) == 2
    assert "args: n: `null` is for a pointer parameter; the parameter is int" in capsys.readouterr().err
    assert main(argv + ["x:float32[32] bias:null[4] ids:null y:float32[32]!out n:int32=32"]) == 2
    assert "a null pointer is `name:null`, with no count, fill or !out" in capsys.readouterr().err


def test_the_backends_take_none_for_a_null_pointer_and_refuse_it_as_an_output():
    from cudasrc.signatures import kernel_signatures
    from harness.backends.args import ScalarArg, plan_args
    sig, = kernel_signatures(OPTIONAL_BIAS)
    x, y = np.zeros(32, np.float32), np.zeros(32, np.float32)
    plan = plan_args(sig, [x, None, None, y, np.int32(32)], outputs=(3,))
    assert isinstance(plan[1], ScalarArg) and plan[1].value == 0 and plan[1].value.dtype == np.uint64
    with pytest.raises(ValueError, match=r"outputs: args\[3\] \(y\) is a null pointer, so the kernel cannot write it"):
        plan_args(sig, [x, None, None, None, np.int32(32)], outputs=(3,))


def test_a_plain_kernel_of_a_header_runs_through_the_file_that_includes_it(tmp_path, capsys):
    """candle keeps `quantize_q8_1` in `gguf.cuh`, which its MoE file includes: the kernel is compiled into that
    file, so it launches through it, and a race in it is named at the header's line. A name in neither the file
    nor its headers is still bad input."""
    (tmp_path / "quant.cuh").write_text("#pragma once\n__global__ void halve(float* y) { y[threadIdx.x] *= 0.5f; }\n"
                                        "__global__ void smear(float* y) { y[0] = threadIdx.x; }\n")
    src = tmp_path / "user.cu"
    src.write_text('#include "quant.cuh"\n__global__ void twice(float* y) { y[threadIdx.x] *= 2.0f; }\n')
    argv = ["--grid", "1", "--block", "32", "--args", "y:float32[32]=1", "--seed", "1"]
    for file in (src, tmp_path / "quant.cuh"):
        assert main(["racescan", str(file), "--kernel", "halve", *argv]) == 0
        assert "verdict: CLEAN" in capsys.readouterr().out
    assert main(["racescan", str(src), "--kernel", "smear", *argv]) == 1
    assert "at quant.cuh:3" in capsys.readouterr().out
    assert main(["racescan", str(src), "--kernel", "nowhere", *argv]) == 2
    assert "no __global__ kernel 'nowhere'" in capsys.readouterr().err


BINDING_CU = """#include <fakefw/all.h>
#include <fakefw/cuda/guard.h>
__global__ void twice(const float* x, float* y) { y[threadIdx.x] = 2.0f * x[threadIdx.x]; }
void twice_op(fakefw::Tensor& x, fakefw::Tensor& y) {
  const fakefw::cuda::Guard guard(x.device());
  twice<<<1, 32>>>(x.data_ptr<float>(), y.data_ptr<float>());
}
"""


def test_a_frameworks_headers_that_are_not_here_can_stand_for_nothing(tmp_path, capsys):
    """vLLM's kernels include torch's headers for their bindings: `--empty-header` lets the file run as it is. A
    kernel that uses the framework in device code still does not build (the negative control)."""
    src = tmp_path / "binding.cu"
    src.write_text(BINDING_CU)
    argv = ["racescan", str(src), "--kernel", "twice", "--grid", "1", "--block", "32", "--seed", "1",
            "--args", "x:float32[32]=iota y:float32[32]!out"]
    assert main(argv) == 3
    assert "fakefw/all.h: No such file or directory" in capsys.readouterr().out
    empty = ["--empty-header", "fakefw/all.h", "--empty-header", "fakefw/cuda/guard.h"]
    assert main(argv + empty) == 0
    assert "verdict: CLEAN" in capsys.readouterr().out
    src.write_text(BINDING_CU.replace("y[threadIdx.x] = 2.0f", "fakefw::Half h; y[threadIdx.x] = 2.0f"))
    assert main(argv + empty) == 3
    out = capsys.readouterr().out
    assert "verdict: UNSUPPORTED (BuildError)" in out and re.search(r"binding\.cu(?:\(3\)|:3:)", out)   # nvcc's or g++'s
    assert main(argv + ["--empty-header", "../outside.h"]) == 2
    assert "--empty-header: '../outside.h' is not a header's relative path" in capsys.readouterr().err


CONTEXT_CU = """#include <fakefw/cuda/context.h>
__global__ void twice(const float* x, float* y) { y[threadIdx.x] = 2.0f * x[threadIdx.x]; }
void twice_gemm(cublasHandle_t handle, const float* x, float* y);   // a binding's declaration keeps its types
"""


def test_an_empty_header_may_stand_for_the_library_headers_it_includes(tmp_path, capsys):
    """exllama's q4_matmul.cuh takes cublasHandle_t from ATen/cuda/CUDAContext.h, which includes cuBLAS's header:
    `NAME=HEADER` stands for such a header by the library header alone; an empty one leaves the type undeclared."""
    src = tmp_path / "context.cu"
    src.write_text(CONTEXT_CU)
    argv = ["racescan", str(src), "--kernel", "twice", "--grid", "1", "--block", "32", "--seed", "1",
            "--args", "x:float32[32]=iota y:float32[32]!out"]
    assert main(argv + ["--empty-header", "fakefw/cuda/context.h"]) == 3
    out = capsys.readouterr().out
    assert "verdict: UNSUPPORTED (BuildError)" in out and "cublasHandle_t" in out
    stand_in = "fakefw/cuda/context.h=cuda_runtime.h,cublas_v2.h"
    assert main(argv + ["--empty-header", stand_in]) == 0
    assert "verdict: CLEAN" in capsys.readouterr().out
    for bad, says in (("fakefw/cuda/context.h=", "names no header after '='"),
                      ("fakefw/cuda/context.h=../cublas_v2.h", "'../cublas_v2.h' is not a header's relative path"),
                      ("fakefw/cuda/context.h=<cublas_v2.h>", "'<cublas_v2.h>' is not a header's relative path")):
        assert main(argv + ["--empty-header", bad]) == 2
        assert says in capsys.readouterr().err
    assert main(argv + ["--empty-header", "fakefw/cuda/context.h", "--empty-header", stand_in]) == 2
    assert "fakefw/cuda/context.h is given twice, including different headers" in capsys.readouterr().err


SCALE = r"""
__global__ void scale(const float* x, const int* ids, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[ids[i]];
}
"""


def test_save_keeps_the_launchs_arrays_for_a_reference_of_ones_own(tmp_path, capsys):
    src = tmp_path / "scale.cu"
    src.write_text(SCALE)
    out_file = tmp_path / "run.npz"
    argv = ["racescan", str(src), "--kernel", "scale", "--grid", "2", "--block", "32", "--seed", "9", "--args",
            "x:float32[64]=random(-1,1) ids:int32[64]=distinct(0,64,64) y:float32[64]!out s:float32=2.5 n:int32=64"]
    assert main(argv + ["--save", str(out_file)]) == 0
    assert f"saved 5 arguments to {out_file}: x, ids, y, s, n" in capsys.readouterr().out
    saved = np.load(out_file)
    assert sorted(saved["ids"].tolist()) == list(range(64))               # the seeded permutation, as launched
    assert np.array_equal(saved["y"], np.float32(2.5) * saved["x"][saved["ids"]])     # the output the kernel wrote
    assert saved["s"] == np.float32(2.5) and saved["n"] == 64
    before = out_file.read_bytes()
    assert main(argv + ["--save", str(out_file)]) == 2                    # never replaced unasked
    assert "--save: " + str(out_file) + " already exists; give --force to replace it" in capsys.readouterr().err
    assert main(argv[:-1] + [argv[-1].replace("random(-1,1)", "random(-2,2)"), "--save", str(out_file), "--force"]) == 0
    assert out_file.read_bytes() != before and sorted(p.name for p in tmp_path.iterdir()) == ["run.npz", "scale.cu"]


def test_save_refuses_a_sweep_and_a_faulted_launch_writes_nothing(tmp_path, capsys):
    out_file = tmp_path / "sweep.npz"
    assert main(["racescan", ONE_VALUE, "--seed", "17", "--save", str(out_file)]) == 2
    assert "--save: keeps the arrays of one launch, and this runs 127" in capsys.readouterr().err
    assert main(["racescan", ONE_VALUE, "--seed", "17", "--save", str(tmp_path / "a.txt")]) == 2
    assert "does not end in .npz" in capsys.readouterr().err
    assert main(["racescan", ONE_VALUE, "--seed", "17", "--at", "header_at=63", "--save", str(out_file)]) == 1
    assert "nothing written" in capsys.readouterr().out and not out_file.exists()
    assert main(["racescan", ONE_VALUE, "--seed", "17", "--at", "header_at=5", "--save", str(out_file)]) == 0
    assert np.load(out_file)["header_at"] == 5


ENGINE_BUILD = r"""
__global__ void warps(float* y) {
    __shared__ float s[64];
    int t = threadIdx.x;
    s[t] = t;
#ifdef SPLIT_BARRIERS
    if (t < 32)
        __syncthreads();
    else
        __syncthreads();
#else
    __syncthreads();
#endif
    auto twice = [&] __device__ (float v) { return 2.0f * v; };
    y[t] = twice(s[63 - t]);
}
"""


def _engine_argv(tmp_path) -> list[str]:
    src = tmp_path / "engine.cu"
    src.write_text(ENGINE_BUILD)
    return ["racescan", str(src), "--kernel", "warps", "--grid", "1", "--block", "64", "--seed", "1",
            "--args", "y:float32[64]!out"]


@needs_nvcc
def test_nvcc_refuses_a_device_lambda_without_the_relaxation(tmp_path, capsys):
    assert main(_engine_argv(tmp_path)) == 3                 # nothing checked: the source does not build
    assert "--extended-lambda" in capsys.readouterr().out


def test_the_programs_build_options_and_barriers_reached_at_two_sites(tmp_path, capsys):
    """-D and an nvcc relaxation as llama.cpp's build gives them (`-extended-lambda`); a barrier that warps reach
    at two call sites is refused, or completed by count with a caveat printed under the verdict."""
    argv = _engine_argv(tmp_path)
    assert main(argv + ["--nvcc-relax", "extended-lambda"]) == 0
    out = capsys.readouterr().out
    assert "verdict: CLEAN" in out and "caveat" not in out
    split = argv + ["--nvcc-relax", "extended-lambda", "-D", "SPLIT_BARRIERS"]
    assert main(split) == 1
    out, err = capsys.readouterr()
    assert "BarrierDivergence" in out and "-D SPLIT_BARRIERS --nvcc-relax extended-lambda" in err   # the replay
    assert main(split + ["--barrier-sites", "any"]) == 0
    out = capsys.readouterr().out
    assert "verdict: CLEAN" in out and "caveat: emu: 1 __syncthreads() phase(s) of run 1 completed" in out
    assert main(argv + ["-D", "2BAD"]) == 2
    assert "-D: '2BAD' is not NAME or NAME=VALUE" in capsys.readouterr().err


def test_the_addresssanitizer_build_also_makes_every_access_of_the_source(tmp_path, capsys):
    """A read past the end whose value nothing uses: the optimised build drops it, the default build makes it, and
    AddressSanitizer names it (the negative control: the read within bounds is clean)."""
    src = tmp_path / "dead_oob.cu"
    src.write_text("__global__ void k(const int* x, int* y, int past) {\n  int unused = x[threadIdx.x + past];\n"
                   "  (void)unused;\n  y[threadIdx.x] = x[threadIdx.x];\n}\n")
    argv = ["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "64", "--seed", "1", "--race-check", "off",
            "--sanitize", "--args"]
    assert main(argv + ["x:int32[64]=random(0,9) y:int32[64]!out past:int32=64"]) == 1
    assert "OutOfBounds" in capsys.readouterr().out
    assert main(argv + ["x:int32[64]=random(0,9) y:int32[64]!out past:int32=64", "--accesses", "compiled"]) == 0
    capsys.readouterr()
    assert main(argv + ["x:int32[64]=random(0,9) y:int32[64]!out past:int32=0"]) == 0


def test_sanitize_names_an_access_past_a_threads_own_array(tmp_path, capsys):
    """ggml's flash attention of May 2025 (16 columns) ran a loop twice too far over its register array: the plain
    build crashes somewhere else or not at all, the AddressSanitizer build names the line (the negative control: the
    loop within bounds is clean)."""
    src = tmp_path / "regs.cu"
    src.write_text("__global__ void k(float* y, int n) {\n  float acc[4] = {1.f, 2.f, 3.f, 4.f};\n"
                   "  for (int i = 0; i < n; ++i)\n    acc[i] *= 2.0f;\n  y[threadIdx.x] = acc[threadIdx.x % 4];\n}\n")
    argv = ["racescan", str(src), "--kernel", "k", "--grid", "1", "--block", "4", "--seed", "1", "--race-check", "off",
            "--sanitize"]
    assert main(argv + ["--args", "y:float32[4]!out n:int32=8"]) == 1
    out, err = capsys.readouterr()
    assert "AddressSanitizer build" in out and "OutOfBounds" in out and "regs.cu:4" in out
    assert err.strip().splitlines()[-1].endswith("--race-check off --sanitize")
    assert main(argv + ["--args", "y:float32[4]!out n:int32=4"]) == 0


def test_an_overloaded_kernel_is_chosen_by_its_count_of_arguments_or_named_by_its_types(tmp_path, capsys):
    """GPUMD's ensemble.cu defines two `gpu_find_thermo`s: `--kernel` by the plain name takes the one whose
    parameter count the specs give; the other is named by its parameter types; a count that chooses none says so."""
    src = tmp_path / "overloads.cu"
    src.write_text("__global__ void put(int* y) { y[threadIdx.x] = 1; }\n"
                   "__global__ void put(int* y, int* flag) { y[threadIdx.x] = 2; flag[0] = threadIdx.x; }\n")
    base = ["racescan", str(src), "--kernel", "put", "--grid", "1", "--block", "32", "--seed", "3"]
    assert main(base + ["--args", "y:int32[32]!out"]) == 0
    assert "put(int*)<<<1, 32, 0>>>" in capsys.readouterr().out
    assert main(base + ["--args", "y:int32[32]!out flag:int32[1]"]) == 1        # the other overload: its race
    out = capsys.readouterr().out
    assert "put(int*,int*)<<<1, 32, 0>>>" in out and "data race on 'flag' index 0" in out
    named = ["racescan", str(src), "--kernel", "put(int *, int *)", "--grid", "1", "--block", "32", "--seed", "3",
             "--args", "y:int32[32]!out flag:int32[1]"]
    assert main(named) == 1
    capsys.readouterr()
    assert main(base + ["--args", "y:int32[32] flag:int32[1] z:int32[1]"]) == 2
    assert "kernel 'put' is overloaded (put(int*), put(int*,int*)), and none takes 3 argument(s)" in \
        capsys.readouterr().err


def test_the_rule_of_a_warps_lanes_is_an_option_and_its_replay_keeps_it(capsys, monkeypatch):
    """A shared store and another lane's read with only a shuffle between: ordered by the collectives' rule (the
    default), a race when __syncwarp alone orders lanes (the line and the replay say so); the fixed twin, with its
    __syncwarp, is clean under both. $QCONFORM_EMU_WARP_ORDER chooses it too, and the replay names it."""
    racy = str(CORPUS / "warp_shuffle_publish.cu")
    assert main(["racescan", racy, "--seed", "1"]) == 0
    assert main(["racescan", racy, "--seed", "1", "--warp-order", "syncwarp"]) == 1
    out, err = capsys.readouterr()
    assert "lanes ordered by __syncwarp alone" in out and "does not order memory" in out
    assert err.strip().splitlines()[-1].endswith("--warp-order syncwarp")
    assert main(["racescan", str(CORPUS / "warp_shuffle_publish_fixed.cu"), "--seed", "1", "--warp-order",
                 "syncwarp"]) == 0
    monkeypatch.setenv("QCONFORM_EMU_WARP_ORDER", "syncwarp")
    capsys.readouterr()
    assert main(["racescan", racy, "--seed", "1"]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("--warp-order syncwarp")
