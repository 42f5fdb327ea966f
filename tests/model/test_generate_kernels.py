"""`qconform generate --backend emu`: the kernels' streams in the report, token locks, replay-launch."""
from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.model.locks import LockError, Stream, apply_lock, read_lock


def _gen(tmp_path, model, *extra):
    out = tmp_path / "rep"
    rc = main(["generate", "--backend", "emu", "--model", str(model), "--lanes", "fast", "--tokens", "2",
               "--prompt-tokens", "1,2,3", "--out", str(out), "--emu-schedules", "2", "--no-router-effect", *extra])
    return rc, json.loads((out / "report.json").read_text()), (out / "report.md").read_text()


def test_generate_on_emu_reports_the_kernels_and_locks_their_stream(tmp_path, tiny1_gguf, capsys):
    lock = tmp_path / "tokens.lock.json"
    rc, doc, md = _gen(tmp_path, tiny1_gguf, "--lock", str(lock))
    assert rc == 0
    (k,) = doc["kernels"]
    assert k["lane"] == "fast" and k["backend"] == "emu" and k["verdict"] == "pass"
    assert k["tokens"] == k["ref_tokens"] and len(k["tokens"]) == 2
    assert [s["name"] for s in doc["external"]] == ["fast kernels (emu)"]      # one more stream column
    assert doc["external"][0]["tokens"] == k["tokens"]
    assert "## Kernels against their reference lane" in md and "Blame reruns" in md
    assert doc["locks"][0]["status"] == "recorded" and lock.is_file()
    (locked,) = read_lock(lock)
    assert locked.lane == "fast" and list(locked.tokens) == k["tokens"] and len(locked.checkpoint_sha256) == 64

    rc, doc, _ = _gen(tmp_path, tiny1_gguf, "--lock", str(lock))
    assert rc == 0 and doc["locks"][0]["status"] == "match"

    # a changed stream: the lock names the first changed step and the run fails
    raw = json.loads(lock.read_text())
    raw["streams"][0]["tokens"][1] = (raw["streams"][0]["tokens"][1] + 1) % 1000
    lock.write_text(json.dumps(raw))
    capsys.readouterr()
    rc, doc, _ = _gen(tmp_path, tiny1_gguf, "--lock", str(lock))
    assert rc == 1
    assert doc["locks"][0]["status"] == "changed" and doc["locks"][0]["first_changed"] == 1
    assert "changed at generated step 1" in capsys.readouterr().out

    # only --update-lock re-blesses
    rc, doc, _ = _gen(tmp_path, tiny1_gguf, "--lock", str(lock), "--update-lock")
    assert rc == 0 and doc["locks"][0]["status"] == "updated"
    assert list(read_lock(lock)[0].tokens) == k["tokens"]


def test_kernel_flags_need_a_kernel_backend(tmp_path, tiny1_gguf, capsys):
    rc = main(["generate", "--model", str(tiny1_gguf), "--lock", str(tmp_path / "l.json"), "--out", str(tmp_path)])
    assert rc == 2 and "--lock: applies to the kernels" in capsys.readouterr().err
    rc = main(["generate", "--backend", "emu", "--model", str(tiny1_gguf), "--lanes", "exact", "--out", str(tmp_path)])
    assert rc == 2 and "has kernels" in capsys.readouterr().err
    rc = main(["generate", "--backend", "emu", "--model", str(tiny1_gguf), "--source", str(tmp_path / "none.cu"),
               "--out", str(tmp_path)])
    assert rc == 2 and "--source: no such file" in capsys.readouterr().err


def test_replay_launch_reruns_one_launch(tiny1_gguf, capsys):
    rc = main(["replay-launch", "--lane", "precise", "--fed", "1,2", "--launch", "3", "--model", str(tiny1_gguf),
               "--backend", "emu"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "step 1 (position 1), layer 0, launch 3 gk_gemv_kv_deq" in out and "verdict: PASS" in out
    rc = main(["replay-launch", "--lane", "precise", "--fed", "1", "--launch", "99", "--model", str(tiny1_gguf),
               "--backend", "emu"])
    assert rc == 2 and "--launch: lane precise has launches 0.." in capsys.readouterr().err


def test_lock_file_rules(tmp_path):
    s = Stream("ab" * 32, (1, 2), "fast", "emu", (5, 6, 7))
    path = tmp_path / "l.json"
    assert apply_lock(path, [s])[0].status == "recorded"
    other = Stream("ab" * 32, (1, 2), "precise", "emu", (5,))
    (c,) = apply_lock(path, [other])
    assert c.status == "not locked" and c.failed and "--update-lock" in c.message
    shorter = Stream("ab" * 32, (1, 2), "fast", "emu", (5, 6))
    (c,) = apply_lock(path, [shorter])
    assert c.status == "changed" and c.first_changed == 2 and c.locked_token == 7 and c.new_token is None
    # the backend is part of the key: an emu lock does not vouch for a GPU stream
    (c,) = apply_lock(path, [Stream("ab" * 32, (1, 2), "fast", "gpu", (5, 6, 7))])
    assert c.status == "not locked"
    path.write_text('{"kind": "something else"}')
    with pytest.raises(LockError, match="is not a token lock"):
        read_lock(path)
    path.write_text('{"kind": "qconform-token-lock", "version": 1, "streams": [{"lane": "fast"}]}')
    with pytest.raises(LockError, match=r"streams\[0\] is malformed"):
        read_lock(path)


def test_sources_with_their_own_headers(tmp_path, tiny1_gguf, seed_gen_sources, capsys):
    """--source files that include a header from a sibling folder: qconform's refusal (exit 3, nothing checked)
    until -I names it; then the lane runs, and its blame replay command carries the -I. A source that does not
    compile is the kernels' fault (exit 1). Neither ends in a traceback."""
    (tmp_path / "common").mkdir()
    (tmp_path / "kern").mkdir()
    (tmp_path / "common" / "defs.h").write_text("#define QC_FROM_HEADER 1\n")
    paths = []
    for label, code in seed_gen_sources:
        path = tmp_path / "kern" / label
        path.write_text('#include "../common/defs.h"\n#if QC_FROM_HEADER != 1\n#error "defs.h"\n#endif\n' + code)
        paths.append(path)
    argv = ["generate", "--backend", "emu", "--model", str(tiny1_gguf), "--lanes", "flash", "--tokens", "1",
            "--prompt-tokens", "1,2", "--no-router-effect", "--emu-schedules", "1"]
    sources = [a for p in paths for a in ("--source", str(p))]
    assert main([*argv, *sources, "--out", str(tmp_path / "r1")]) == 3
    err = capsys.readouterr().err
    assert "nothing was checked" in err and "not allowed to read" in err and "Traceback" not in err
    assert main([*argv, *sources, "-I", str(tmp_path / "common"), "--out", str(tmp_path / "r2")]) == 0
    from harness.model.blame import ReplayTarget
    cmd = ReplayTarget(None, 0, (str(paths[0]),), "emu", (str(tmp_path / "common"),)).command("flash", [1], 0)
    assert cmd.endswith(f"--source {paths[0]} -I {tmp_path / 'common'} --backend emu")
    paths[0].write_text(paths[0].read_text() + "\n__device__ int broken = ;\n")
    capsys.readouterr()
    assert main([*argv, *sources, "-I", str(tmp_path / "common"), "--out", str(tmp_path / "r3")]) == 1
    err = capsys.readouterr().err
    assert "fail: the source does not build" in err and "Traceback" not in err
