"""Memory and speed of checkpoints (issue 8, section 1). Run with `pytest tests/bench --benchmark-enable`.

Peak memory: a 32 GB checkpoint must work on a 24 GiB machine, so opening a file and reading a layer may cost
the embedding and LM head (copied out at open) plus what one layer needs -- never more as layers are added.
Measured in a fresh process (peak RSS, ru_maxrss) on a full-width (qwen3-30b-a3b) file of 2 layers; the
file (~2 GB) is made once per generator version and cached. With --benchmark-disable (the default suite) the
same measurement runs on the tails preset as a smoke test.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.model.synthetic import cached_model_path

REPO = Path(__file__).resolve().parents[2]

_MEASURE = r"""
import json, sys
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as fh:    # Linux >= 4.0: VmHWM := VmRSS
            fh.write("5")
        return True
    except OSError:
        return False
from harness.model.checkpoint import open_checkpoint, layer_nbytes, COPY_CHUNK_BYTES
import numpy as np, reference.model, reference.quant
base = status("VmRSS")
ck = open_checkpoint(sys.argv[1], layer_cache_bytes=0)
opened, peak_open = status("VmRSS"), status("VmHWM")
w = ck.weights
emb = w.token_embd.quants.nbytes + w.token_embd.scales.nbytes
out = 0 if w.tied_output else w.output.quants.nbytes + w.output.scales.nbytes
resettable = reset_peak()
layer = w.layer(0)
one = layer_nbytes(layer)
peak_layer0 = status("VmHWM")
del layer
reset_peak()
layer = w.layer(1)
peak_layer1 = status("VmHWM")
del layer
print(json.dumps(dict(base=base, opened=opened, peak_open=peak_open, emb=emb, out=out, layer=one,
                      chunk=COPY_CHUNK_BYTES, resettable=resettable, peak_layer0=peak_layer0,
                      peak_layer1=peak_layer1, peak=status("VmHWM") if not resettable else max(
                          peak_open, peak_layer0, peak_layer1))))
"""


def _full(request) -> bool:
    opt = request.config.getoption
    return bool(opt("benchmark_enable")) or not opt("benchmark_disable")


@pytest.fixture(scope="session")
def wide_file(request):
    """Full width when measuring (made once: ~2 GB, a few minutes at ~15 MB/s on 2 cores), tails otherwise."""
    if _full(request):
        return cached_model_path("qwen3-30b-a3b", layers=2, seed=0, progress=True)
    return cached_model_path("tails", layers=2, seed=0, progress=False)


def _measure(path: Path) -> dict:
    res = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], cwd=REPO, capture_output=True, text=True,
                         timeout=1800)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.benchmark(group="checkpoint memory")
def test_peak_rss_is_one_layer(benchmark, wide_file):
    m = benchmark.pedantic(_measure, args=(wide_file,), rounds=1, iterations=1)
    mib = {k: round(v / 2**20, 1) if not isinstance(v, bool) else v for k, v in m.items()}
    benchmark.extra_info.update(mib)
    print("\ncheckpoint memory (MiB):", mib)
    # The header's parsed vocabulary (~300k strings at full width, ~130 MB of gguf-py field objects) and the
    # interpreter's own growth: an allowance, not a per-layer cost.
    header = 256 << 20
    # open: the embedding and LM head copies, one copy chunk of mapped pages at a time
    assert m["peak_open"] - m["base"] <= m["emb"] + m["out"] + m["chunk"] + header, mib
    # the whole run: embedding + LM head + one layer, whatever the depth
    assert m["peak"] - m["base"] <= m["emb"] + m["out"] + m["layer"] + m["chunk"] + header, mib
    if m["resettable"]:
        # reading a layer costs its copy plus one chunk of mapped pages; the next layer, no more
        for key in ("peak_layer0", "peak_layer1"):
            assert m[key] - m["opened"] <= m["layer"] + m["chunk"] + (32 << 20), (key, mib)
    # and far less than the file
    assert m["peak"] < wide_file.stat().st_size + m["base"]
