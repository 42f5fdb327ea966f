"""ci/race_suites/gklee.py on a miniature GkleeTests checkout (folders NAME/NAME.cu + NAME/expected.txt, files
written here in the form of GKLEE's tests, not copied from them): labels from expected.txt, the launch and the
buffers read from the host program (`#define`s, `const int`s, main()'s variables, dim3s, a min macro, a loop's
first value), an unreadable launch said so, and the files scored on emu: the racy inter-block write-write
flagged, its race-free twin not (the negative control), the same-value one racy by the memory model but not by
GKLEE's reading."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ci.race_suites import gklee
from cudasrc.signatures import kernel_signatures, strip_comments
from harness.racescan import MEMORY_MODEL, reading


INTER_BLOCK = r"""#include <cstdio>
#define N 64
#define B 2

__global__ void k(int* in)
{
  in[threadIdx.x] = %s;      // every block stores to the same N/B elements
}

int main()
{
  int* din;
  cudaMalloc((void**) &din, N*sizeof(int));
  k<<<B,N/B>>>(din);
  cudaFree(din);
}
"""
RACY = INTER_BLOCK % "blockIdx.x"                      # the blocks store different values: a race
BENIGN = INTER_BLOCK % "threadIdx.x"                   # the same value: a race GKLEE calls benign
TWIN = r"""#define N 64
#define B 2

__global__ void k(int* in)
{
  in[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x;    // one element per thread
}

int main()
{
  int* din;
  cudaMalloc((void**) &din, N*sizeof(int));
  k<<<B,N/B>>>(din);
}
"""
DIMS = r"""#include <stdio.h>
#define W 8
#define imin(a,b) (a<b?a:b)
const int H = W / 2;

__global__ void fill(float* out, int n, int shift)
{
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x + y * n < n * n) out[x + y * n] = shift;
}

void report(float* h) { printf("%f\n", h[0]); }

int main(void)
{
  int side = imin(16, W * 2);
  int num_bytes = side * side * sizeof(float);
  float* d_out;
  cudaMalloc((void **) &d_out, num_bytes);
  dim3 grid(side / W, side / H);
  dim3 block(W, H);
  for (int i = 3; i < 5; i++) {
    fill<<<grid, block>>>(d_out, side, i * 2);
  }
  return 0;
}
"""
UNREADABLE = r"""#include <cstdlib>
__global__ void k(int* in) { in[threadIdx.x] = 0; }

int main(int argc, char** argv)
{
  int* din;
  int threads = atoi(argv[1]);
  cudaMalloc((void**) &din, 1024 * sizeof(int));
  k<<<1, threads>>>(din);
}
"""
DEADLOCK = r"""#define T 64
__global__ void dl(int* in) { if (threadIdx.x < 32) __syncthreads(); in[threadIdx.x] = 1; }
int main() { int* d; cudaMalloc((void**)&d, T*sizeof(int)); dl<<<1,T>>>(d); }
"""

FILES = {  # folder -> (file text, expected.txt)
    "inter_block_race": (RACY, "write write\n"),
    "inter_block_twin": (TWIN, ""),
    "inter_block_benign": (BENIGN, "benign write write\n"),
    "dims": (DIMS, "\n"),
    "unreadable": (UNREADABLE, ""),
    "deadlock": (DEADLOCK, "barrier\n"),
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("GkleeTests")
    for name, (text, expected) in FILES.items():
        (root / name).mkdir()
        (root / name / f"{name}.cu").write_text(text)
        (root / name / "expected.txt").write_text(expected)
    (root / "inter_block_race" / "remote").mkdir()                     # another copy, below the folder: left out
    (root / "inter_block_race" / "remote" / "inter_block_race.cu").write_text(RACY)
    (root / "inter_block_race" / "remote" / "expected.txt").write_text("write write\n")
    (root / "no_expectation").mkdir()                                   # no expected.txt: not a test
    (root / "no_expectation" / "no_expectation.cu").write_text(TWIN)
    return root


def test_labels_and_suite(checkout, scorer):
    files = gklee.suite_files(checkout)
    assert [gklee.record_name(f) for f in files] == [f"{n}/{n}.cu" for n in sorted(FILES)]
    labels = {f.parent.name: gklee.label_of(f) for f in files}
    assert labels == {"inter_block_race": "racy", "inter_block_twin": "race-free", "inter_block_benign": "race-free",
                      "dims": "race-free", "unreadable": "race-free", "deadlock": None}
    c = gklee.classify_expected
    assert c(["read write", "benign read write"])[::2] == ("racy", True)
    assert c(["benign write write"]) == ("race-free", "only benign (same-value) races expected", True)
    assert c(["volatile"])[0] == "race-free" and c([])[0] == "race-free"
    assert c(["barrier"])[0] is None and "halts" in c(["bounds"])[1]
    assert c(["barrier", "write write"])[0] == "racy"        # a race found before GKLEE halted
    assert c(["race"])[0] is None and "not among" in c(["race"])[1]
    assert gklee.suite_files(checkout / "dims") is None       # a test's folder is not a checkout
    suite = scorer.open_suite(checkout)
    assert suite.name == "GKLEE" and suite.per_label is None and len(suite.files) == len(FILES)
    assert suite.key(suite.files[0]) == "deadlock/deadlock.cu" and suite.group(suite.files[0]) == "deadlock"
    assert scorer.READINGS["GKLEE"] is reading.GKLEE


def _parsed(path: Path):
    text = path.read_text()
    host = gklee.Host(strip_comments(text))
    code, dropped = gklee.device_code(text)
    return host, kernel_signatures(code), dropped


def test_launch_parsing(checkout):
    host, sigs, _ = _parsed(checkout / "inter_block_race" / "inter_block_race.cu")
    (grid, block, shared, args, loops), = gklee.launches_of(host, ["k"])[0].values()
    assert (grid, block, shared, args, loops) == ((2, 1, 1), (32, 1, 1), 0, ["din"], {})
    assert gklee.allocations(host) == {"din": 256}

    host, (sig,), dropped = _parsed(checkout / "dims" / "dims.cu")
    assert "report" not in gklee.device_code(DIMS)[0] and dropped == []
    assert host.values == {"H": 4, "side": 16, "num_bytes": 1024} and host.dim3s == {"grid": (2, 4, 1),
                                                                                      "block": (8, 4, 1)}
    launched, not_launched = gklee.launches_of(host, ["fill", "unused"])
    grid, block, shared, args, loops = launched["fill"]
    assert (grid, block, args, loops, not_launched) == ((2, 4, 1), (8, 4, 1), ["d_out", "side", "i * 2"], {"i": 3},
                                                        ["unused"])
    values, sizes, fallback, drawn = gklee.inputs_of(sig, host, args, loops, gklee.allocations(host), grid, block,
                                                     np.random.default_rng(0))
    assert (values, sizes, fallback, drawn) == ({"n": 16, "shift": 6}, {"out": 256}, [], [])
    # an argument the host does not fix: a seeded draw, said so; a size it does not: the fallback, said so
    values, sizes, fallback, drawn = gklee.inputs_of(sig, host, ["d_other", "argc"], {}, {}, grid, block,
                                                     np.random.default_rng(0))
    assert sizes == {"out": gklee.GKLEE_FALLBACK_ELEMENTS} and fallback == ["out"] and drawn == ["n", "shift"]
    assert 1 <= values["n"] <= 64

    e = host.evaluate
    assert (e("-7 / 2"), e("-7 % 2"), e("1024<<4"), e("(W + 1) % 3 ? 10 : 20"), e("sizeof(unsigned int) * 3u")) == \
        (-3, -1, 16384, 20, 12)
    for bad, why in [("atoi(x)", "atoi"), ("W / 0", "division by zero"), ("2.5", "not integer"), ("(W", "unbalanced")]:
        with pytest.raises(gklee.Unreadable, match=why):
            e(bad)
    # a variable main() assigns again, or a kernel launched at two geometries: not guessed
    twice = DIMS.replace("int side = imin(16, W * 2);", "int side = 16;\n  side += 0;")
    with pytest.raises(gklee.Unreadable, match=r"`side`: main\(\) assigns it after its declaration"):
        gklee.launches_of(gklee.Host(strip_comments(twice)), ["fill"])
    again = DIMS.replace("return 0;", "fill<<<1, 32>>>(d_out, side, 0);\n  return 0;")
    with pytest.raises(gklee.Unreadable, match="fill launched at 2 geometries"):
        gklee.launches_of(gklee.Host(strip_comments(again)), ["fill"])
    with pytest.raises(gklee.Unreadable, match="no launch"):
        gklee.launches_of(gklee.Host("int main() { return 0; }"), ["fill"])
    # GKLEE's intrinsics: klee_assume dropped (line count kept), another klee_ call refused
    src = "#include <klee/klee.h>\n__global__ void k(int* a) {\n  klee_assume(a[0] < 8);\n  a[0] = 1;\n}\n"
    code, dropped = gklee.device_code(src)
    assert "klee" not in code and code.count("\n") == src.count("\n") and dropped == ["#include <klee/...>",
                                                                                       "klee_assume x1"]
    with pytest.raises(gklee.Unreadable, match="klee_make_symbolic"):
        gklee.device_code(src.replace("klee_assume(a[0] < 8)", "klee_make_symbolic(a, 4, \"a\")"))


def test_unreadable_and_not_scored(checkout):
    rec = gklee.score_file(None, checkout / "unreadable" / "unreadable.cu", 0)    # nothing loads: no backend
    assert rec["verdict"] == "unsupported" and rec["label"] == "race-free"
    assert rec["detail"].startswith("launch of k <<<1, threads>>>: `threads`: its initializer `atoi(argv[1])`")
    rec = gklee.score_file(None, checkout / "deadlock" / "deadlock.cu", 0)
    assert rec["verdict"] == "not scored" and rec["label"] is None and "barrier" in rec["detail"]


def test_scores_the_miniature_suite(checkout, scorer, tmp_path, capsys):
    out = tmp_path / "verdicts.json"
    assert scorer.main([str(checkout), "--race-check", "on", "--out", str(out), "--timeout", "60"]) == 0
    records = {r["file"]: r for r in json.loads(out.read_text())["records"]}
    racy, twin = records["inter_block_race/inter_block_race.cu"], records["inter_block_twin/inter_block_twin.cu"]
    benign, dims = records["inter_block_benign/inter_block_benign.cu"], records["dims/dims.cu"]
    assert racy["verdict"] == "race" and racy["fault"] == "DataRace" and racy["kinds"] == [["grid", "differ"]]
    assert twin["verdict"] == "clean" and not twin["data_race"]                       # the negative control
    assert benign["verdict"] == "race" and benign["kinds"] == [["grid", "same"]] and benign["benign_races_expected"]
    assert dims["verdict"] == "clean" and dims["grid"] == [2, 4, 1] and dims["block"] == [8, 4, 1]
    assert dims["scalars"] == {"fill": {"n": 16, "shift": 6}} and dims["host_loops"] == {"fill": {"i": 3}}
    assert all(r["reading"] == "GKLEE" for r in records.values() if r["label"])
    # the reading: GKLEE's counts the different-value race, not the same-value one; the memory model both
    assert reading.GKLEE.counts(map(tuple, racy["kinds"])) and not reading.GKLEE.counts(map(tuple, benign["kinds"]))
    assert MEMORY_MODEL.counts(map(tuple, benign["kinds"]))
    summary = capsys.readouterr().out
    assert "racy: 1 selected, 1 ran, race reported on 1 (recall 100.0%)" in summary
    assert "race-free: 4 selected, 3 ran, race reported on 1 (false alarms 33.3%)" in summary
    assert "(GKLEE: every scope, same-value and kept-value races benign): racy 1 of 1 (100.0%), " \
           "race-free 0 of 3 (0.0%)" in summary
    assert "expecting only benign races (racy by the memory model): DataRace on 1 of 1 that ran; labels read by " \
           "the memory model (those racy): racy 2 of 2 (100.0%), race-free 0 of 2 (0.0%)" in summary
    assert "not scored x1: expected.txt: barrier and no race" in summary
