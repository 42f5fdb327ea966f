"""cudasrc.preprocess: a source's conditional directives evaluated as its build evaluates them, so that a kernel's
parameter list with `#ifdef` in it is read with the parameters the build compiles (a user's kernel, the SDK's
SobelShared); line numbers stay."""
from __future__ import annotations

import numpy as np
import pytest

from cudasrc.preprocess import active_source, defines_of
from cudasrc.signatures import kernel_signatures

SOURCE = """#define FIXED 2
__global__ void k(float* y,
#ifdef WITH_SCALE
   float scale,
#endif
#if FIXED * 2 == 4 && !defined(WIDE) || UNKNOWN
   short width,
#elif FIXED
   int width,
#else
   long width,
#endif
   int n) { y[threadIdx.x] = n; }
"""


def test_the_build_flags_choose_the_parameters():
    plain, = kernel_signatures(SOURCE)
    assert plain.params == (("float*", "y"), ("short", "width"), ("int", "n")) and plain.line == 2
    flagged, = kernel_signatures(SOURCE, defines=defines_of(["-DWITH_SCALE", "-DWIDE=1", "-O2"]))
    assert flagged.params == (("float*", "y"), ("float", "scale"), ("int", "width"), ("int", "n"))


def test_dropped_branches_become_empty_lines_and_defines_follow_the_flags():
    out = active_source(SOURCE, {"WIDE": "1"})
    assert out.count("\n") == SOURCE.count("\n") and "scale" not in out and "short" not in out and "int width" in out
    assert defines_of(["-DA", "-DB=3", "-UA", "-I."]) == {"B": "3"}
    assert active_source("#undef FIXED\n#if FIXED\nx\n#endif\n", {"FIXED": "1"}) == "#undef FIXED\n\n\n\n"


@pytest.mark.parametrize("condition,taken", [
    ("!0 == 2", False),              # C: (!0) == 2; not !(0 == 2)
    ("6 & 3 == 3", False),           # C: 6 & (3 == 3)
    ("-7 / 2 == -3 && -7 % 2 == -1", True),     # C truncates toward zero
    ("010 == 8 && 0x10 >> 2 == 4 && 10UL == 10", True),
    ("0 || 0 ? 0 : 1", True),
    ("FIXED > 1 ? defined FIXED : 0", True),
])
def test_conditions_are_evaluated_as_c_evaluates_them(condition, taken):
    out = active_source(f"#define FIXED 2\n#if {condition}\nx\n#endif\n")
    assert ("x" in out) is taken


@pytest.mark.parametrize("text,error", [
    ("#if F(1)\n#endif\n", "function-like macro F"),
    ("#if 'a'\n#endif\n", "character literals"),
    ("#else\n", "#else without #if"),
    ("#ifdef X\n", "#if without #endif"),
    ("#if 1 +\n#endif\n", "cannot evaluate `#if 1 \\+`"),
    ("#if 1 / 0\n#endif\n", "cannot evaluate"),
])
def test_what_cannot_be_evaluated_is_named(text, error):
    with pytest.raises(ValueError, match=error):
        active_source("#define F(x) x\n" + text)


def test_a_kernel_with_a_conditional_parameter_runs_on_emu_with_and_without_the_flag(emu):
    y = np.zeros(32, np.float32)
    emu.load(SOURCE).launch("k", (1,), (32,), 0, [y, np.int16(8), np.int32(5)], [0])
    assert (y == 5).all()
    emu.load(SOURCE, flags=("-DWITH_SCALE",)).launch("k", (1,), (32,), 0,
                                                       [y, np.float32(2), np.int16(8), np.int32(7)], [0])
    assert (y == 7).all()


def test_memory_space_markers_are_spelled_where_used_and_nowhere_else():
    """`#define LOCAL __shared__` (OpenMM's common kernels): a use outside directives becomes `__shared__`, on its
    own line; the directive, a continued directive's lines, a marker defined differently in two branches and a
    macro with other words in it are left as they are."""
    from cudasrc.preprocess import memory_space_markers, with_memory_spaces_spelled
    code = ("#define LOCAL __shared__\n#define CONST static __constant__\n#define X \\\n  LOCAL int y;\n"
            "#ifdef A\n#define MAYBE __shared__\n#else\n#define MAYBE\n#endif\n#define OTHER __shared__ float\n"
            "LOCAL volatile float t[256];\nCONST int c[4];\nMAYBE int m;\n")
    assert memory_space_markers(code) == {"LOCAL": "__shared__", "CONST": "static __constant__"}
    lines = with_memory_spaces_spelled(code).split("\n")
    assert lines[:4] == code.split("\n")[:4]                          # directives and their continuation
    assert lines[10:13] == ["__shared__ volatile float t[256];", "static __constant__ int c[4];", "MAYBE int m;"]
    assert len(lines) == len(code.split("\n"))
