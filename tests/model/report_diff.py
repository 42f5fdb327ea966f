"""Compare two report.json documents of the same fixed-seed run: everything but timings must be identical, floats
up to the rounding of another summation order (FLOAT_SLACK).
Returns the differences as readable lines (empty: identical); keys only the new document has are listed apart,
as additions (a report may gain fields without changing what it said)."""
from __future__ import annotations

import re

TIMING_KEYS = {"elapsed_s", "seconds_per_step", "duration_s", "started_utc", "kernel_ms", "seconds", "wall_s"}
TIMING_TEXT = re.compile(r"\d+(\.\d+)? m?s\b")
# Two floats are the same number when they differ by at most FLOAT_SLACK of the larger one plus FLOAT_FLOOR. The run's
# float64 arithmetic is summed in the order numpy and its OpenBLAS choose, which changes with their versions and the
# CPU's SIMD width; results then move by rounding alone. Most fields move by a few ulps. A ratio over a rounding-level
# quantity (a float64 lane's bound over its error) amplifies that: the worst such field moved by 8.2e-10 of its value
# between numpy 2.4.6 and the version the lock was written with, so 2^-20 (9.5e-7) leaves a factor of 1000. A value
# that is itself rounding residue (the KL of a float64 lane against the exact lane, ~5e-14) moves by 0.2% of itself,
# 1.3e-16: FLOAT_FLOOR (2^-40, 9.1e-13) is that residue's scale. A changed statistic or bound moves a value by far
# more, and tokens, verdicts and texts are compared exactly.
FLOAT_SLACK = 2.0 ** -20
FLOAT_FLOOR = 2.0 ** -40


def _same_text(a: str, b: str) -> bool:
    return a == b or TIMING_TEXT.sub("# s", a) == TIMING_TEXT.sub("# s", b)


def diff(old, new, path: str = "", added: list | None = None) -> list[str]:
    """Differences of `new` from `old`; keys new adds go to `added` when given, else count as differences."""
    out: list[str] = []
    if isinstance(old, dict) and isinstance(new, dict):
        for k in old:
            if k in TIMING_KEYS:
                continue
            if k not in new:
                out.append(f"{path}.{k}: removed (was {old[k]!r})")
            else:
                out += diff(old[k], new[k], f"{path}.{k}", added)
        for k in new:
            if k not in old and k not in TIMING_KEYS:
                (added if added is not None else out).append(f"{path}.{k}: added ({new[k]!r})"[:300])
    elif isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            out.append(f"{path}: {len(old)} items, now {len(new)}")
        for i, (a, b) in enumerate(zip(old, new)):
            out += diff(a, b, f"{path}[{i}]", added)
    elif isinstance(old, str) and isinstance(new, str):
        if not _same_text(old, new):
            out.append(f"{path}: {old!r} -> {new!r}")
    elif isinstance(old, float) and isinstance(new, float):
        if not abs(old - new) <= FLOAT_SLACK * max(abs(old), abs(new)) + FLOAT_FLOOR:      # NaN never passes
            out.append(f"{path}: {old!r} -> {new!r}")
    elif old != new or type(old) is not type(new):
        out.append(f"{path}: {old!r} -> {new!r}")
    return out


if __name__ == "__main__":
    import json
    import sys
    added: list[str] = []
    lines = diff(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), "", added)
    print("\n".join(lines) or "identical apart from timings")
    if added:
        print(f"{len(added)} added fields:")
        print("\n".join(sorted(set(re.sub(r"\[\d+\]", "[]", a.split(":")[0]) for a in added))))
    sys.exit(1 if lines else 0)
