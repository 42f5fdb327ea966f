"""CUDA's SIMD-in-a-word intrinsics (`__vadd4`, `__vsubss4`, `__vcmpges2`, `__vsads4`...) on emu, each checked on
seeded random words and on the lanes' corner values against a NumPy model written from the CUDA Math API's
descriptions (lanes of 8 or 16 bits, signed or unsigned, wrapping or saturating)."""
from __future__ import annotations

import numpy as np
import pytest

# name: (signed lanes, the lane's result from x and y as int64 arrays; W is the lane width)
PAIRS = {
    "__vadd": (False, lambda x, y, W: x + y),
    "__vsub": (False, lambda x, y, W: x - y),
    "__vaddss": (True, lambda x, y, W: np.clip(x + y, -2 ** (W - 1), 2 ** (W - 1) - 1)),
    "__vsubss": (True, lambda x, y, W: np.clip(x - y, -2 ** (W - 1), 2 ** (W - 1) - 1)),
    "__vaddus": (False, lambda x, y, W: np.clip(x + y, 0, 2 ** W - 1)),
    "__vsubus": (False, lambda x, y, W: np.clip(x - y, 0, 2 ** W - 1)),
    # ties away from zero: the halved sum rounded half away from zero
    "__vavgs": (True, lambda x, y, W: np.sign(x + y) * ((np.abs(x + y) + 1) // 2)),
    "__vavgu": (False, lambda x, y, W: (x + y + 1) // 2),
    "__vhaddu": (False, lambda x, y, W: (x + y) // 2),
    "__vabsdiffs": (True, lambda x, y, W: np.abs(x - y)),
    "__vabsdiffu": (False, lambda x, y, W: np.abs(x - y)),
    "__vmaxs": (True, lambda x, y, W: np.maximum(x, y)),
    "__vmaxu": (False, lambda x, y, W: np.maximum(x, y)),
    "__vmins": (True, lambda x, y, W: np.minimum(x, y)),
    "__vminu": (False, lambda x, y, W: np.minimum(x, y)),
    "__vcmpeq": (False, lambda x, y, W: -(x == y).astype(np.int64)),
    "__vcmpne": (False, lambda x, y, W: -(x != y).astype(np.int64)),
    "__vcmpges": (True, lambda x, y, W: -(x >= y).astype(np.int64)),
    "__vcmpgeu": (False, lambda x, y, W: -(x >= y).astype(np.int64)),
    "__vcmpgts": (True, lambda x, y, W: -(x > y).astype(np.int64)),
    "__vcmpgtu": (False, lambda x, y, W: -(x > y).astype(np.int64)),
    "__vcmples": (True, lambda x, y, W: -(x <= y).astype(np.int64)),
    "__vcmpleu": (False, lambda x, y, W: -(x <= y).astype(np.int64)),
    "__vcmplts": (True, lambda x, y, W: -(x < y).astype(np.int64)),
    "__vcmpltu": (False, lambda x, y, W: -(x < y).astype(np.int64)),
    "__vseteq": (False, lambda x, y, W: x == y),
    "__vsetne": (False, lambda x, y, W: x != y),
    "__vsetges": (True, lambda x, y, W: x >= y),
    "__vsetgeu": (False, lambda x, y, W: x >= y),
    "__vsetgts": (True, lambda x, y, W: x > y),
    "__vsetgtu": (False, lambda x, y, W: x > y),
    "__vsetles": (True, lambda x, y, W: x <= y),
    "__vsetleu": (False, lambda x, y, W: x <= y),
    "__vsetlts": (True, lambda x, y, W: x < y),
    "__vsetltu": (False, lambda x, y, W: x < y),
}
ONES = {
    "__vabs": lambda x, W: np.abs(x),
    "__vabsss": lambda x, W: np.minimum(np.abs(x), 2 ** (W - 1) - 1),
    "__vneg": lambda x, W: -x,
    "__vnegss": lambda x, W: np.clip(-x, -2 ** (W - 1), 2 ** (W - 1) - 1),
}
SUMS = {"__vsads": True, "__vsadu": False}      # the sum of the lanes' |x - y|: one number
N = 256


def _lanes(words: np.ndarray, W: int, signed: bool) -> np.ndarray:
    """(n, 32 // W) int64 lanes of uint32 words, low lane first."""
    shifts = np.arange(0, 32, W, dtype=np.uint64)
    lanes = (words.astype(np.uint64)[:, None] >> shifts) & np.uint64(2 ** W - 1)
    lanes = lanes.astype(np.int64)
    return np.where(lanes >= 2 ** (W - 1), lanes - 2 ** W, lanes) if signed else lanes


def _word(lanes: np.ndarray, W: int) -> np.ndarray:
    cut = (lanes.astype(np.int64) & (2 ** W - 1)).astype(np.uint64)
    return (cut << np.arange(0, 32, W, dtype=np.uint64)).sum(axis=1).astype(np.uint32)


def _names() -> list[str]:
    return [f"{n}{k}" for n in list(PAIRS) + list(ONES) + list(SUMS) for k in (2, 4)]


def _source() -> str:
    calls = []
    for i, name in enumerate(_names()):
        args = "a[t]" if name[:-1] in ONES else "a[t], b[t]"
        calls.append(f"  out[{i} * n + t] = {name}({args});")
    return ("__global__ void simd(const unsigned* a, const unsigned* b, unsigned* out, int n) {\n"
            "  int t = blockIdx.x * blockDim.x + threadIdx.x;\n  if (t >= n) return;\n" + "\n".join(calls) + "\n}\n")


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20261206)
    corners = np.array([0, 0xFFFFFFFF, 0x80808080, 0x7F7F7F7F, 0x80007FFF, 0x01FF80FE, 0x7FFF8000, 0xFF00FF00],
                       np.uint32)
    a = np.concatenate([np.repeat(corners, len(corners)), rng.integers(0, 2 ** 32, N - 64, dtype=np.uint32)])
    b = np.concatenate([np.tile(corners, len(corners)), rng.integers(0, 2 ** 32, N - 64, dtype=np.uint32)])
    return a.astype(np.uint32), b.astype(np.uint32)


def _expected(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    base, W = name[:-1], 16 if name.endswith("2") else 8
    if base in ONES:
        return _word(ONES[base](_lanes(a, W, True), W), W)
    if base in SUMS:
        signed = SUMS[base]
        return np.abs(_lanes(a, W, signed) - _lanes(b, W, signed)).sum(axis=1).astype(np.uint32)
    signed, f = PAIRS[base]
    return _word(np.asarray(f(_lanes(a, W, signed), _lanes(b, W, signed), W), np.int64), W)


@pytest.fixture(scope="module")
def results(load):
    a, b = _inputs()
    out = np.zeros(len(_names()) * N, np.uint32)
    load(_source()).launch("simd", (N // 64,), (64,), 0, [a, b, out, np.int32(N)], outputs=(2,))
    return a, b, out.reshape(len(_names()), N)


@pytest.mark.parametrize("name", _names())
def test_each_simd_intrinsic_matches_the_lane_model(results, name):
    a, b, out = results
    got, want = out[_names().index(name)], _expected(name, a, b)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{name}(0x{a[bad[0]]:08x}, 0x{b[bad[0]]:08x}) = 0x{got[bad[0]]:08x}, "
                           f"expected 0x{want[bad[0]]:08x} ({bad.size} of {N} differ; inputs seeded 20261206)")


def test_the_documented_examples():
    a = np.array([0x80808080], np.uint32)
    assert _expected("__vabs4", a, a)[0] == 0x80808080        # CUDA: __vabs4(0x80808080U) returns 0x80808080U
    assert _expected("__vabsss4", a, a)[0] == 0x7F7F7F7F      # CUDA: __vabsss4(0x80808080U) returns 0x7f7f7f7fU


def test_the_inputs_reach_where_saturating_and_wrapping_differ():
    """The inputs (corner words and the seeded ones) are ones on which the saturating and the wrapping models
    differ, so the per-intrinsic test above would tell an intrinsic that wraps where it should saturate."""
    a, b = _inputs()
    wrapped, saturated = _expected("__vadd4", a, b), _expected("__vaddss4", a, b)
    assert (wrapped != saturated).sum() > 10
