"""ci/race_suites/indigo1.py on a miniature checkout of HiRace's artifact (indigo/indigo_sources, indigo_include,
input; files written here in the form of Indigo 1's, not copied from it): labels from the file names as the
artifact counts them, the graph read from the suite's ECL file, the host main's launch, a kernel declared in the
header before the file defines it, and the suite found by ci/score_race_suite.py."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ci.race_suites import indigo1

HEADER = r"""#include <cstdio>
struct ECLgraph { int nodes; int edges; int* nindex; int* nlist; };
ECLgraph readECLgraph(const char* const fname) { ECLgraph g; FILE* f = fopen(fname, "rb"); fclose(f); return g; }
__global__ void test_kernel(int* nindex, int* nlist, data_t* data1, data_t* data2, int n);
int main(int argc, char* argv[]) { return 0; }
"""
# One thread per vertex adds its first neighbour's value into data1[0]: atomically, or (the planted atomicBug)
# as a plain read-modify-write, a race between the 200 threads of the first block.
KERNEL = r"""typedef int data_t;
#include "indigo_cuda.h"
__global__ void test_kernel(int* nindex, int* nlist, data_t* data1, data_t* data2, int numv)
{
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  if (i < numv && nindex[i] < nindex[i + 1]) {
    ADD;
  }
}
void serial_code(int* nindex, int* nlist, data_t* data1, data_t* data2, int numv) { data1[0] = 0; }
"""
FILES = {
    "sum_neighbor": "atomicAdd(data1, data2[nlist[nindex[i]]])",
    "sum_neighbor_atomicBug": "data1[0] += data2[nlist[nindex[i]]]",
    "sum_neighbor_guardBug": "if (data1[0] < data2[i]) atomicMax(data1, data2[i])",
    "sum_neighbor_boundsBug": "atomicAdd(data1, data2[nlist[nindex[i + 1]]])",
}


def _graph(nodes: int = 200, degree: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    nlist = rng.integers(0, nodes, nodes * degree).astype(np.int32)
    return (np.arange(nodes + 1, dtype=np.int32) * degree), nlist


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hirace")
    codes = root / indigo1.CODES / "sum_neighbor"
    codes.mkdir(parents=True)
    (root / indigo1.HEADERS).mkdir(parents=True)
    (root / indigo1.HEADERS / "indigo_cuda.h").write_text(HEADER)
    (root / indigo1.INPUTS).mkdir(parents=True)
    nindex, nlist = _graph()
    np.concatenate([[len(nindex) - 1, len(nlist)], nindex, nlist]).astype("<i4").tofile(
        root / indigo1.INPUTS / indigo1.INPUT_GRAPH)
    for name, add in FILES.items():
        (codes / f"{name}.cu").write_text(KERNEL.replace("ADD", add))
    return root


def test_labels_as_the_artifact_counts_them(checkout, scorer):
    labels = {f.stem: indigo1.label_of(f) for f in indigo1.suite_files(checkout)}
    assert labels == {"sum_neighbor": "race-free", "sum_neighbor_atomicBug": "racy", "sum_neighbor_guardBug": "racy",
                      "sum_neighbor_boundsBug": None}
    suite = scorer.open_suite(checkout)
    assert suite.name == f"Indigo 1 (graph {indigo1.INPUT_GRAPH})" and suite.per_label is None and len(suite.files) == 4
    assert indigo1.suite_files(checkout / indigo1.CODES) is None


def test_the_graph_is_read_and_a_bad_one_named(checkout, tmp_path):
    nindex, nlist = indigo1.read_graph(checkout / indigo1.INPUTS / indigo1.INPUT_GRAPH)
    want_index, want_list = _graph()
    assert np.array_equal(nindex, want_index) and np.array_equal(nlist, want_list)
    bad = tmp_path / "cut.egr"
    np.array([200, 1000, 0, 5], "<i4").tofile(bad)
    with pytest.raises(ValueError, match=r"cut.egr: not an ECL graph \(200 nodes, 1000 edges, 16 bytes\)"):
        indigo1.read_graph(bad)
    args = indigo1.kernel_args(nindex, nlist, seed=0)
    assert args[2][0] == 0 and args[3][0] == 0 and len(args[2]) == max(200, 1000) and int(args[4]) == 200
    assert args[2].max() < 200 and args[3].max() < 1000


def test_files_score_as_labelled_and_bounds_bugs_are_not_scored(checkout, emu):
    files = {f.stem: f for f in indigo1.suite_files(checkout)}
    recs = {name: indigo1.score_file(emu, f, checkout, seed=0) for name, f in files.items()}
    assert recs["sum_neighbor"]["verdict"] == "clean", recs["sum_neighbor"]["detail"]
    for racy in ("sum_neighbor_atomicBug", "sum_neighbor_guardBug"):
        assert recs[racy]["verdict"] == "race" and recs[racy]["data_race"], recs[racy]["detail"]
    assert recs["sum_neighbor_guardBug"]["kernels"]["test_kernel"]["grid"] == [indigo1.BLOCKS]
    # the file's own line, not the inlined header's: `ADD;` is line 7 of every file
    assert "at line 7" in recs["sum_neighbor_atomicBug"]["detail"]
    assert recs["sum_neighbor_boundsBug"]["verdict"] == "not scored"


def test_the_graph_option(checkout, scorer, tmp_path, capsys):
    nindex, nlist = _graph(nodes=20, degree=2)
    np.concatenate([[20, 40], nindex, nlist]).astype("<i4").tofile(checkout / indigo1.INPUTS / "small.egr")
    assert scorer.open_suite(checkout, "small.egr").name == "Indigo 1 (graph small.egr)"
    for graph, rule in (("none.egr", "is not a file name in"), ("../input/small.egr", "is not a file name in")):
        with pytest.raises(SystemExit):
            scorer.main([str(checkout), "--graph", graph])
        assert f"--graph: {graph} {rule}" in capsys.readouterr().err
    out = tmp_path / "small.json"
    assert scorer.main([str(checkout), "--graph", "small.egr", "--out", str(out)]) == 0
    import json
    doc = json.loads(out.read_text())
    assert doc["suite"] == "Indigo 1 (graph small.egr)"
    assert {r["file"]: r["verdict"] for r in doc["records"]} == {
        "sum_neighbor.cu": "clean", "sum_neighbor_atomicBug.cu": "race", "sum_neighbor_guardBug.cu": "race",
        "sum_neighbor_boundsBug.cu": "not scored"}
