"""Mutation operators on kernel text: every operator class fires where it should and nowhere else (comments,
strings, declarations, pointer stars), ids are stable when the file around a kernel moves, the blanked
source keeps every offset."""
from __future__ import annotations

import pytest

from harness.mutation.operators import OPERATORS, isolate_kernel, kernel_extent, mutant_diff, mutants_of

SRC = """#include <cuda_runtime.h>
// a comment with a < b and x + 1 that must not be mutated
__global__ void other(float* o) { o[0] = 1.0f; }

__global__ void k(const float* a, const signed char* q, float* out, int n) {
  __shared__ float part[64];
  const int lane = threadIdx.x & 31;  /* i < n */
  float acc = 0.0f;
  for (int i = lane; i < n; i += 32) acc += a[i] * (float)q[i];
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
  if (lane == 0) part[threadIdx.x / 32] = acc;
  __syncthreads();
  const float s = fmaxf(acc, 1e-30f) / 127.0f;
  if (threadIdx.x == 0) out[0] = (float)(int)rintf(part[0] / s) + part[1 + lane * 0];
}
"""


def _by_op(ms):
    out = {}
    for m in ms:
        out.setdefault(m.operator, []).append(m)
    return out


def test_every_operator_class_fires_on_a_kernel_that_has_its_construct():
    ms = mutants_of(SRC, "k")
    ops = _by_op(ms)
    assert set(ops) == set(OPERATORS), set(OPERATORS) - set(ops)
    descs = {m.description for m in ms}
    assert "`<` -> `<=`" in descs and "`<` -> `>`" in descs                      # relational, both kinds
    assert "`rintf` -> `roundf`" in descs and "`rintf` -> `truncf`" in descs       # rounding swaps
    assert "`127.0f` -> `128.0f`" in descs                                          # 127 <-> 128
    assert "delete `__syncthreads();`" in descs
    assert any(d.startswith("delete `acc += a[i]") for d in descs)                 # an accumulation
    assert any(d.startswith("delete `out[0] =") for d in descs)                    # a store
    assert "one iteration short: `n` -> `(n) - (32)`" in descs
    assert "one iteration short: start `16` -> `(16) >> 1`" in descs
    assert any("mask `0xffffffffu`" in d for d in descs) and any("offset `off`" in d for d in descs)
    assert "drop `lane * 0` from `[1 + lane * 0]`" in descs


def test_comments_declarations_and_pointer_stars_are_left_alone():
    ms = mutants_of(SRC, "k")
    start, open_, end = kernel_extent(SRC, "k")
    for m in ms:
        assert open_ <= m.start < m.end <= end
        assert "//" not in SRC[m.start:m.end] and "/*" not in SRC[m.start:m.end]
    body = SRC[open_:end]
    comment_at = SRC.index("/* i < n */")
    assert not any(comment_at <= m.start < comment_at + 11 for m in ms)
    # `const float* a` is in the parameter list (outside the body); `part[64]` is a declared size
    decl = SRC.index("part[64]") + 5
    assert not any(m.start == decl for m in ms)
    assert "(float)q[i]" in body and not any(SRC[m.start:m.end] == "*" and SRC[m.start - 6:m.start] == "(float"
                                             for m in ms)


def test_ids_survive_moving_the_kernel_and_the_diff_shows_the_edit():
    a = {(m.id, m.description) for m in mutants_of(SRC, "k")}
    moved = SRC.replace("#include <cuda_runtime.h>\n", "#include <cuda_runtime.h>\n\n\n// more text\n")
    b = {(m.id, m.description) for m in mutants_of(moved, "k")}
    assert a == b and len({i for i, _ in a}) == len(a)
    m = next(m for m in mutants_of(SRC, "k") if m.description == "delete `__syncthreads();`")
    d = mutant_diff(SRC, m)
    assert "-  __syncthreads();" in d and "+  ;" in d


def test_isolating_a_kernel_keeps_offsets_and_blanks_the_others():
    iso = isolate_kernel(SRC, "k")
    assert len(iso) == len(SRC) and iso.count("\n") == SRC.count("\n")
    assert "void other" not in iso and "void k(" in iso
    for m in mutants_of(SRC, "k"):
        assert m.apply(iso)[m.start:m.start + len(m.replacement)] == m.replacement
        assert SRC[m.start:m.end] == iso[m.start:m.end]


def test_unknown_operator_and_missing_kernel_are_errors():
    with pytest.raises(ValueError, match="operators: unknown"):
        mutants_of(SRC, "k", ["swap-everything"])
    with pytest.raises(ValueError, match="kernel nope"):
        mutants_of(SRC, "nope")
