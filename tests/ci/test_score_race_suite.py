"""ci/score_race_suite.py on a miniature suite laid out like Indigo3 (written here, not copied from it): labels
from file names, device code extracted from a whole program (host functions and includes), inputs from a
seeded CSR graph, and the summary's counts."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "score_race_suite.py"

HEADER = r"""
#include <stdio.h>
typedef struct ECLgraph { int nodes; int edges; int* nindex; int* nlist; int* eweight; } ECLgraph;
static int host_helper(int x) { return printf("%d", x); }
int main(int argc, char* argv[]) { cudaMalloc(0, 0); kernel<<<1, 1>>>(); return host_helper(argc); }
"""

KERNEL = r"""
typedef int data_type;
static const int ThreadsPerBlock = 64;
#include "toy_cuda.h"
static __global__ void relax(const ECLgraph g, data_type* const dist, const int iter)
{
  const int v = threadIdx.x + blockIdx.x * ThreadsPerBlock;
  if (v < g.nodes) {
    for (int e = g.nindex[v]; e < g.nindex[v + 1]; e++) {
      const int n = g.nlist[e];
      %s
    }
  }
}
static double host_driver(const ECLgraph g) { relax<<<1, ThreadsPerBlock>>>(g, 0, 1); return 0.0; }
"""
RACY = "dist[n] = dist[n] + 1;      // plain read-modify-write of a neighbour's counter: lost updates on a GPU"
ATOMIC = "atomicAdd(&dist[n], 1);"


@pytest.fixture(scope="module")
def scorer():
    spec = importlib.util.spec_from_file_location("score_race_suite", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture()
def suite(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "toy_cuda.h").write_text(HEADER)
    d = tmp_path / "generatedCodes" / "CUDA" / "TOY-CUDA"
    d.mkdir(parents=True)
    (d / "TOY_CUDA_V_RaceBug_NoBoundsBug.cu").write_text(KERNEL % RACY)
    (d / "TOY_CUDA_V_NoRaceBug_NoBoundsBug.cu").write_text(KERNEL % ATOMIC)
    (d / "TOY_CUDA_V_RaceBug_BoundsBug.cu").write_text(KERNEL % RACY)     # another bug: not scored
    return tmp_path


def test_labels_and_device_code(scorer, suite):
    assert scorer.label_of(Path("A_RaceBug_NoSyncBug.cu")) == "racy"
    assert scorer.label_of(Path("A_NoRaceBug_SyncBug.cu")) == "racy"
    assert scorer.label_of(Path("A_NoRaceBug_NoSyncBug.cu")) == "race-free"
    assert scorer.label_of(Path("A_RaceBug_BoundsBug.cu")) is None
    path = next((suite / "generatedCodes" / "CUDA" / "TOY-CUDA").glob("*_RaceBug_NoBoundsBug.cu"))
    full = scorer.inline_includes(path, suite / "lib")
    dev = scorer.device_code(full)
    assert "host_helper" in full and "int main" in full
    assert "printf" not in dev and "cudaMalloc" not in dev and "<<<" not in dev and "host_driver" not in dev
    assert "__global__ void relax" in dev and "typedef struct ECLgraph" in dev
    assert dev.count("\n") == full.count("\n")       # line numbers of the kernels stay true


def test_scores_the_miniature_suite(scorer, suite, tmp_path, capsys):
    out = tmp_path / "verdicts.json"
    assert scorer.main([str(suite), "--per-label", "5", "--out", str(out), "--timeout", "60"]) == 0
    records = {r["file"]: r for r in json.loads(out.read_text())["records"]}
    assert set(records) == {"TOY_CUDA_V_RaceBug_NoBoundsBug.cu", "TOY_CUDA_V_NoRaceBug_NoBoundsBug.cu"}
    # Fibers never preempt, so no schedule loses an update: only the happens-before detector sees this race.
    assert records["TOY_CUDA_V_RaceBug_NoBoundsBug.cu"]["verdict"] == "race"
    assert records["TOY_CUDA_V_RaceBug_NoBoundsBug.cu"]["fault"] == "DataRace"
    assert records["TOY_CUDA_V_NoRaceBug_NoBoundsBug.cu"]["verdict"] == "clean"
    summary = capsys.readouterr().out
    assert "racy: 1 selected, 1 ran, race reported on 1 (recall 100.0%)" in summary
    assert "race-free: 1 selected, 1 ran, race reported on 0 (false alarms 0.0%)" in summary
    with pytest.raises(SystemExit):          # never overwrites a result file
        scorer.main([str(suite), "--out", str(out)])
