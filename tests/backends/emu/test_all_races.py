"""Every distinct race of a launch (harness/backends/emu/races.py): the detector keeps running after a race and
reports each (pair of source lines, buffer or __shared__ variable) once, with how many accesses raced and over
which elements; more than races.SHOWN are counted, not dropped; a fault that stops the launch after a race is
reported with the races. Each racy kernel has a race-free twin (`fix`) that must stay clean."""
from __future__ import annotations

import re

import numpy as np
import pytest

from harness.backends import DataRace, RaceDetected
from harness.backends.emu import races
from harness.backends.emu.backend import EmuBackend

SOURCE = r"""
__global__ void two_races(const float* x, float* y, int* done, int fix) {
  __shared__ int flag;
  if (!fix || threadIdx.x == 0) flag = 1;                      // every thread writes the slot
  __syncthreads();
  if (threadIdx.x == 0) {
    if (fix) atomicAdd(done, flag);
    else done[0] = flag;                                       // every block writes the word
  }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i];
}

__global__ void halves(const float* x, float* y, int fix) {
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  if (fix) __syncthreads();
  float v = s[(t + 32) & 63];                                  // warp 0 reads warp 1's slots and back
  y[t] = x[t] + 0.0f * v;
}

__global__ void unrolled(const float* x, float* y, int fix) {
  __shared__ int s[4];
  if (!fix || threadIdx.x == 0) for (int k = 0; k < 4; ++k) s[k] = threadIdx.x + k;
  __syncthreads();
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * s[threadIdx.x & 3];
}

__global__ void race_then_oob(const float* x, float* y, int far, int fix) {
  __shared__ int flag;
  if (!fix || threadIdx.x == 0) flag = 1;
  __syncthreads();
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * flag;
  if (threadIdx.x == 0 && far >= 0) y[blockDim.x + far] = 1.0f;   // past the end of y
}

__global__ void race_then_trap(const float* x, float* y, int fix) {
  __shared__ int flag;
  if (!fix || threadIdx.x == 0) flag = 1;
  __syncthreads();
  y[threadIdx.x] = x[threadIdx.x] + 0.0f * flag;
  if (threadIdx.x == 0) __trap();
}
"""

N_MANY = races.SHOWN + 4      # distinct races in `many`: more than a report tells in detail
MANY = "__global__ void many(const float* x, float* y, int fix) {\n  __shared__ int s[%d];\n%s\n" \
       "  __syncthreads();\n  y[threadIdx.x] = x[threadIdx.x] + 0.0f * s[threadIdx.x %% %d];\n}\n" % (
           N_MANY, "\n".join(f"  if (!fix || threadIdx.x == 0) s[{k}] = threadIdx.x;" for k in range(N_MANY)), N_MANY)


def _line(text: str, kernel: str) -> int:
    rows = SOURCE.split("\n")
    start = next(i for i, row in enumerate(rows) if f"void {kernel}(" in row)
    return next(i for i, row in enumerate(rows[start:], start + 1) if text in row)


@pytest.fixture(scope="module")
def backend(detector):
    return detector


@pytest.fixture(scope="module")
def module(backend):
    return backend.load(SOURCE + MANY)


def _launch(module, kernel, fix, grid=1, block=64, extra=(), n=None):
    n = n or grid * block
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    module.launch(kernel, (grid,), (block,), 0, [x, y, *extra, np.int32(fix)])
    return x, y


def _race(module, kernel, **kw) -> DataRace:
    with pytest.raises(DataRace) as err:
        _launch(module, kernel, 0, **kw)
    return err.value


def test_two_independent_races_are_both_reported(module):
    err = _race(module, "two_races", grid=3, extra=(np.zeros(1, np.int32),))
    assert err.distinct == 2 and len(err.races) == 2, str(err)
    shared, glob = err.races
    flag, done = _line("flag = 1", "two_races"), _line("else done[0] = flag", "two_races")
    # the first keeps the single-race wording; each names both accesses, its line and its buffer
    assert re.match(rf"data race on __shared__ 'flag' \(line \d+\) index 0 \(byte 0\): write by block \(0,0,0\) "
                    rf"thread \(0,0,0\) \(warp 0 lane 0\) at line {flag} and write by block \(0,0,0\) thread \(1,0,0\) "
                    rf"\(warp 0 lane 1\) at line {flag} are unordered \(lanes of one warp", shared), shared
    assert re.match(rf"data race on 'done' index 0 \(byte 0\): write by block \(0,0,0\) thread \(0,0,0\) \(warp 0 "
                    rf"lane 0\) at line {done} and write by block \(1,0,0\) thread \(0,0,0\) \(warp 0 lane 0\) at "
                    rf"line {done} are unordered \(different blocks", glob), glob
    # extents: 63 threads after the first in each of 3 blocks on the slot; blocks 1 and 2 on the word; every
    # thread stores 1 into the slot and every block the slot's 1 into the word: same-value races
    same = f"; {races.VALUE_NOTES['same']}]"
    # the slot's first conflict is within warp 0, later ones cross warps: the scope is the widest
    assert shared.endswith("[189 racing accesses, index 0; across warps of one block" + same)
    assert glob.endswith("[2 racing accesses, index 0; across blocks" + same)
    assert err.same_value and err.scope == "grid"
    assert err.kinds == (("block", "same"), ("grid", "same"))          # each race's own scope, for a reader's count
    text = str(err)
    assert text.startswith("DataRace: two_races<<<3x1x1, 64x1x1, 0>>>: 2 distinct data races in this launch; the "
                           "first: data race on __shared__ 'flag'"), text
    assert "(schedule forward, poison 0xA5)" in text.splitlines()[0] and f"  race 2: {glob}" in text
    assert err.stopped_by is None and "stopped" not in text
    done = np.zeros(1, np.int32)
    _launch(module, "two_races", 1, grid=3, extra=(done,))       # the twin: clean
    assert done[0] == 3


def test_a_race_over_many_elements_and_threads_is_reported_once_with_its_extent(module):
    err = _race(module, "halves")
    assert err.distinct == 1 and len(err.races) == 1, str(err)
    read, write = _line("float v = s[", "halves"), _line("s[t] = x[t]", "halves")
    assert re.match(rf"data race on __shared__ 's' \(line \d+\) index 32 .*: read by block \(0,0,0\) thread \(0,0,0\) "
                    rf".*at line {read} and write by block \(0,0,0\) thread \(32,0,0\) .*at line {write} are unordered "
                    r"\(different warps", err.races[0]), err.races[0]
    # 32 writes of warp 1 met warp 0's reads, 32 reads of warp 1 met warp 0's writes: every slot
    assert err.races[0].endswith("[64 racing accesses, indices 0..63; across warps of one block]")
    assert err.scope == "block"
    assert not str(err).startswith("DataRace: halves<<<1x1x1, 64x1x1, 0>>>: 1 distinct")   # one race: as before
    _launch(module, "halves", 1)


def test_instructions_of_one_source_line_are_one_race(module):
    err = _race(module, "unrolled", block=8)
    line = _line("for (int k = 0; k < 4; ++k)", "unrolled")
    assert err.distinct == 1, str(err)
    assert f"at line {line} and write by" in err.races[0] and err.races[0].endswith("indices 0..3; within one warp]"), err.races[0]
    _launch(module, "unrolled", 1, block=8)


def test_more_distinct_races_than_shown_says_how_many_were_left_out(module):
    err = _race(module, "many", block=32)
    assert err.distinct == N_MANY and len(err.races) == races.SHOWN, str(err)
    slots = [int(re.search(r"index (\d+)", r).group(1)) for r in err.races]
    assert slots == list(range(races.SHOWN))                      # in the order the launch met them
    text = str(err)
    assert text.startswith(f"DataRace: many<<<1x1x1, 32x1x1, 0>>>: {N_MANY} distinct data races in this launch")
    assert f"  4 more distinct race(s) left out (only the first {races.SHOWN} are told)" in text
    _launch(module, "many", 1, block=32)


def test_a_race_then_an_out_of_bounds_write_reports_both(module):
    # just past the end: the guard band, checked after the launch
    err = _race(module, "race_then_oob", extra=(np.int32(0),))
    assert err.distinct == 1 and "__shared__ 'flag'" in err.races[0]
    assert err.stopped_by.startswith("OutOfBounds: ") and "'y'" in err.stopped_by, err.stopped_by
    assert str(err).splitlines()[-1] == f"then the launch was stopped by {err.stopped_by}"
    # far past the end: the guard pages; the worker dies, and the races it announced are still reported
    err = _race(module, "race_then_oob", extra=(np.int32(4096),))
    # the worker's last words, written as it died, give the race's count and its same-value mark
    assert err.distinct == 1 and "__shared__ 'flag'" in err.races[0], str(err)
    assert re.search(r"\) \[\d+ racing accesses, index 0; .*same value: every racing store", err.races[0]), str(err)
    assert err.stopped_by.startswith("OutOfBounds: write to 'y'") and "guard pages" in err.stopped_by, err.stopped_by
    with pytest.raises(Exception) as oob:                          # the twin: the out-of-bounds write alone
        _launch(module, "race_then_oob", 1, extra=(np.int32(0),))
    assert type(oob.value).__name__ == "OutOfBounds"
    _launch(module, "race_then_oob", 1, extra=(np.int32(-1),))


def test_a_race_then_a_fault_of_the_runtime_reports_both(module):
    err = _race(module, "race_then_trap")
    assert err.distinct == 1 and err.stopped_by.startswith("KernelCrash: block (0,0,0)") and "__trap()" in err.stopped_by
    with pytest.raises(Exception) as trap:
        _launch(module, "race_then_trap", 1)
    assert type(trap.value).__name__ == "KernelCrash"


def test_report_lines_round_trip():
    found = races.parse("3\t0\t7\tindex\tdiffer\twarp\t{pc:0x10}\t{pc:0x20}\t's'\tdata race on 's' index 0 (byte 0): a and b\n"
                        "more\t5\t0\n")
    assert found.distinct == 6 and found.races[0].worded() == "data race on 's' index 0 (byte 0): a and b " \
                                                                "[3 racing accesses, indices 0..7; within one warp]"
    assert found.scope == "?"           # 5 races without details: their scope is not known
    err = races.fault(None, found, "schedule forward", None)
    assert err.kinds == (("warp", "differ"), ("?", "?"))     # the five without details: one entry, scope unknown
    announced = "noise\nemu-race: 0\t0\t2\t2\tbyte\t?\t?\tline 4\tline 4\tv\tdata race on v byte 2\n"
    assert races.from_stderr(announced).races[0].worded() == "data race on v byte 2 [byte 2]"   # nothing more known
    # the last words give the final state; a line the runtime did not write whole is not read
    last = races.from_stderr(announced + "emu-race-state: 0\t5\t2\t9\tsame\tblock\nemu-race-state: 0\t7\t2\n"
                             "emu-race-state: 3\t1\t0\t0\tsame\twarp\nemu-race-state: more\t2\t4\nemu-race: x\n")
    assert last.races[0].worded() == ("data race on v byte 2 [5 racing accesses, bytes 2..9; across warps of one "
                                      "block; same value: every racing store left the bytes as they were]")
    assert len(last.races) == 1 and (last.more, last.unkeyed) == (2, 4)
    # announcements numbered from 0 again are another detector run's: its states are its own
    rerun = races.from_stderr(announced + "emu-race-state: 0\t5\t2\t9\tsame\tblock\n" +
                              announced.replace("byte 2", "byte 3") + "emu-race-state: 0\t1\t3\t3\tdiffer\tgrid\n")
    assert [(r.count, r.values, r.scope) for r in rerun.races] == [(5, "same", "block"), (1, "differ", "grid")]
    assert not races.parse("") and not races.from_stderr("emu-fault: SIGSEGV write at 0x10\n")


HANG = r"""
__global__ void race_then_hang(float* y, int fix, int same, int registers) {
  __shared__ int flag;
  if (!fix || threadIdx.x == 0) flag = same ? 7 : threadIdx.x;   // every thread writes the slot
  __syncthreads();
  y[threadIdx.x] = flag;
  if (threadIdx.x == 0 && registers) while (clock64() >= 0) { }    // a spin with no tracked access at all
  if (threadIdx.x == 0) { volatile int spin = 1; while (spin) { } }    // then the block never finishes
}
"""


def test_a_race_then_a_hang_is_reported_as_the_race():
    """A race seen before the launch hangs is a verdict on the kernel, though the hang alone is the emulator's
    limit (unchecked): the report is the race, saying that the time limit then stopped the launch."""
    be = EmuBackend(schedules=1, timeout_s=2)
    try:
        mod = be.load(HANG)
        y = np.zeros(32, np.float32)
        with pytest.raises(DataRace) as err:
            mod.launch("race_then_hang", (1,), (32,), 0, [y, np.int32(0), np.int32(0), np.int32(0)])
        assert err.value.distinct == 1 and "__shared__ 'flag'" in err.value.races[0], str(err.value)
        assert not err.value.same_value and "same value" not in str(err.value)   # each thread its own value
        # the worker's last words, asked for before the kill: 31 stores met an unordered one, all within a warp
        assert err.value.races[0].endswith("[31 racing accesses, index 0; within one warp]"), str(err.value)
        assert err.value.stopped_by.startswith("KernelTimeout: a block did not finish within 2 s"), err.value.stopped_by
        for registers in (0, 1):     # the next tracked access answers; with none (a register spin), the second ask
            with pytest.raises(DataRace) as same:                  # every store of the same value: so marked
                mod.launch("race_then_hang", (1,), (32,), 0, [y, np.int32(0), np.int32(1), np.int32(registers)])
            assert same.value.same_value and same.value.scope == "warp", str(same.value)
        with pytest.raises(Exception) as hang:                     # the twin: the hang alone
            mod.launch("race_then_hang", (1,), (32,), 0, [y, np.int32(1), np.int32(0), np.int32(0)])
        assert type(hang.value).__name__ == "KernelTimeout" and hang.value.tool_limit
    finally:
        be.close()


def test_a_race_then_the_cpu_time_limit_keeps_the_races_final_state():
    """The worker's CPU time limit ends it with SIGXCPU; the runtime's handler writes the last words first."""
    be = EmuBackend(schedules=1, timeout_s=120, cpu_limit_s=2)
    try:
        mod = be.load(HANG)
        with pytest.raises(DataRace) as err:
            mod.launch("race_then_hang", (1,), (32,), 0, [np.zeros(32, np.float32), np.int32(0), np.int32(1), np.int32(0)])
        assert err.value.same_value and err.value.races[0].startswith("data race on __shared__ 'flag'")
        assert "[31 racing accesses, index 0; within one warp; same value" in err.value.races[0], str(err.value)
        assert err.value.stopped_by.startswith("KernelTimeout: the worker process used up its CPU time limit (2 s")
    finally:
        be.close()


def test_without_last_words_a_race_before_a_hang_keeps_only_its_announcement():
    """The negative control of the last words: a worker killed without being asked leaves the announcement
    alone, with no count and no same-value mark."""
    be = EmuBackend(schedules=1, timeout_s=2)
    be._worker.last_words = None
    try:
        mod = be.load(HANG)
        with pytest.raises(DataRace) as err:
            mod.launch("race_then_hang", (1,), (32,), 0, [np.zeros(32, np.float32), np.int32(0), np.int32(1), np.int32(0)])
        assert not err.value.same_value and err.value.scope == "?" and err.value.races[0].endswith("[index 0]")
    finally:
        be.close()


VALUES = r"""
__global__ void stores(float* y, const int* what, int fix) {
  __shared__ int slot[1];
  __shared__ int other;
  int mode = what[0];
  if (!fix || threadIdx.x == 0) {
    if (mode == 0) slot[0] = 7;                                 // every thread stores the same value
    if (mode == 1) slot[0] = threadIdx.x;                        // each its own value
    if (mode == 2) slot[0] = threadIdx.x < 32 ? 7 : 7 + (threadIdx.x == 63);   // one thread's value differs
    if (mode == 3) { slot[0] = 7; other = threadIdx.x & 1; }     // two races: the first same, the second not
  }
  if (mode == 4 && threadIdx.x == 5) slot[0] = 3;                // a read races with a store
  if (mode == 4 && threadIdx.x == 9) y[0] = slot[0];
  // every thread stores 7 and reads it back (the last stores 8 in mode 6): a store after another's read
  // (read through a volatile pointer: the compiler would take the value just stored)
  volatile int* seen = slot;
  if (mode == 5 || mode == 6) {
    slot[0] = mode == 6 && threadIdx.x == 63 ? 8 : 7;
    if (seen[0] == 8) y[0] = 1;
  }
  if (mode == 7) {                                               // a read after a store
    if (threadIdx.x < 32) slot[0] = 7;
    else if (seen[0] != 7) y[0] = 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) y[1] = slot[0];
}
"""


@pytest.mark.parametrize("mode, expect", [(0, ["same"]), (1, ["differ"]), (2, ["differ"]), (3, ["same", "differ"]),
                                          (4, ["differ"]), (5, ["same", "kept"]), (6, ["differ", "differ"]),
                                          (7, ["same", "kept"])],
                         ids=["same-value", "own-values", "one-differs", "one-of-each", "read-write",
                              "store-after-read-kept", "store-after-read-changed", "read-after-kept-store"])
def test_a_race_says_whether_its_stores_left_the_bytes_as_they_were(backend, mode, expect):
    """Only a race made of plain stores that each left the bytes as they were is marked `same value`; one store
    that changed a byte (the last thread of 64: mode 2), a read, or another race does not carry the mark over.
    A race of stores and reads is `kept value` when each store wrote the bytes its racing accesses saw: a store
    after a read of the value it writes (mode 5), a read after a store compared and found to have left its bytes
    (mode 7). A store not compared (it raced nothing: thread 5 of mode 4) or one that changed the value read
    (thread 63 of mode 6) leaves the race `differ`."""
    mod = backend.load(VALUES)
    y = np.zeros(2, np.float32)
    with pytest.raises(DataRace) as err:
        mod.launch("stores", (1,), (64,), 0, [y, np.array([mode], np.int32), np.int32(0)])
    marks = [next((v for v, note in races.VALUE_NOTES.items() if r.endswith(f"{note}]")), "differ")
             for r in err.value.races]
    assert marks == expect, str(err.value)
    assert err.value.same_value == (expect == ["same"])
    assert [values for _, values in err.value.kinds] == expect
    if mode < 4:
        mod.launch("stores", (1,), (64,), 0, [y, np.array([mode], np.int32), np.int32(1)])   # the twin: clean


LATE_PATH = r"""
__global__ void late_path(int* flag, int* y) {
  // Thread 31 raises the flag; a thread that sees it raised stores its index. The forward order runs
  // threads 0..30 before 31 (no race on that path), the reverse order runs 31 first: then 0..30 all store.
  if (threadIdx.x == 31) atomicExch(flag, 1);
  else if (atomicAdd(flag, 0) == 1) y[0] = threadIdx.x;
}
__global__ void late_path_fixed(int* flag, int* y) {
  if (threadIdx.x == 31) atomicExch(flag, 1);
  else if (atomicAdd(flag, 0) == 1) atomicMax(y, threadIdx.x);
}
"""


def test_a_race_on_a_path_only_another_schedule_takes_is_found_by_running_it_again(emu):
    mod = emu.load(LATE_PATH)
    with pytest.raises(DataRace) as err:
        mod.launch("late_path", (1,), (32,), 0, [np.zeros(1, np.int32), np.zeros(1, np.int32)])
    assert "(schedule reverse" in str(err.value) and "at line 6" in err.value.races[0], str(err.value)
    # the twin's stores are atomic: the schedules still disagree (which thread raised y first), and the reruns
    # under the detector find no race, so the verdict stays the schedules' RaceDetected
    with pytest.raises(RaceDetected):
        mod.launch("late_path_fixed", (1,), (32,), 0, [np.zeros(1, np.int32), np.zeros(1, np.int32)])
