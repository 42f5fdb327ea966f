"""The one argument validator both backends use (harness.backends.args): the rules the per-backend tests
(tests/backends/gpu/test_marshal.py, tests/backends/emu/test_semantics.py) do not already pin."""
from __future__ import annotations

import numpy as np
import pytest

from cudasrc.signatures import kernel_signatures
from harness.backends import args as shared
from harness.backends.args import BufferArg, plan_args

SIG = {s.name: s for s in kernel_signatures(
    "__global__ void k(const float* x, float* y, int n) { }\n"
    "__global__ void v(const unsigned char* p, volatile int* flag, unsigned long long m) { }\n")}


def _args(n=4):
    return [np.ones(n, np.float32), np.zeros(n, np.float32), np.int32(n)]


def test_both_backends_use_the_shared_validator():
    from harness.backends import gpu
    from harness.backends.emu import backend as emu
    assert gpu.plan_args is shared.plan_args and emu.plan_args is shared.plan_args


def test_a_read_only_array_is_fine_behind_a_const_pointer_only():
    args = _args()
    args[0].flags.writeable = False
    assert isinstance(plan_args(SIG["k"], args, outputs=(1,))[0], BufferArg)
    args = _args()
    args[1].flags.writeable = False
    with pytest.raises(ValueError, match=r"args\[1\] \(y: float\*\).*read-only"):
        plan_args(SIG["k"], args, outputs=(1,))


def test_empty_arrays_where_the_backend_refuses_them_and_aliased_arrays_always():
    args = _args()
    args[0] = np.zeros(0, np.float32)
    assert len(plan_args(SIG["k"], args, outputs=(1,))) == 3
    with pytest.raises(ValueError, match=r"args\[0\].*empty"):
        plan_args(SIG["k"], args, outputs=(1,), empty_ok=False)
    y = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=r"args\[0\] and args\[1\] overlap"):
        plan_args(SIG["k"], [y, y, np.int32(4)], outputs=(1,))


def test_compiled_parameter_size_must_match_where_known():
    assert len(plan_args(SIG["k"], _args(), outputs=(1,), native_sizes=(8, 8, 4))) == 3
    with pytest.raises(ValueError, match=r"args\[2\] \(n: int\): the compiled parameter is 8 bytes"):
        plan_args(SIG["k"], _args(), outputs=(1,), native_sizes=(8, 8, 8))


def test_wider_c_types_and_volatile_pointees():
    ok = [np.zeros(4, np.uint8), np.zeros(1, np.int32), np.uint64(3)]
    assert len(plan_args(SIG["v"], ok, outputs=(1,))) == 3
    with pytest.raises(ValueError, match=r"args\[1\].*dtype int32"):
        plan_args(SIG["v"], [ok[0], np.zeros(1, np.int64), ok[2]], outputs=(1,))
    with pytest.raises(ValueError, match=r"args\[2\].*dtype uint64"):
        plan_args(SIG["v"], [*ok[:2], np.int64(3)], outputs=(1,))


AGG = kernel_signatures("struct P { int n; float s; };\n"
                        "__global__ void a(const P p, int (*op)(int), float* const y, const int n) { }\n")[0]


def test_aggregates_and_symbols_by_value():
    from harness.backends.base import Struct, Symbol
    sizes = (8, 8, 8, 4)
    p = np.zeros((), [("n", "<i4"), ("s", "<f4")])[()]
    plan = plan_args(AGG, [p, Symbol("d_op"), np.zeros(4, np.float32), np.int32(4)], (2,), sizes, aggregates_ok=True)
    assert isinstance(plan[0].value, Struct) and plan[1].value == Symbol("d_op") and plan[3].value == 4
    with pytest.raises(ValueError, match=r"by-value parameters of type 'const P' are not supported"):
        plan_args(AGG, [p, Symbol("d_op"), np.zeros(4, np.float32), np.int32(4)], (2,), sizes)   # not this backend
    with pytest.raises(ValueError, match="function-pointer parameter takes Symbol"):
        plan_args(AGG, [p, np.uint64(0), np.zeros(4, np.float32), np.int32(4)], (2,), sizes, aggregates_ok=True)
    with pytest.raises(ValueError, match="Symbol name must be a C identifier"):
        plan_args(AGG, [Symbol("1x"), Symbol("d_op"), np.zeros(4, np.float32), np.int32(4)], (2,), sizes,
                  aggregates_ok=True)
    with pytest.raises(TypeError, match="needs native_sizes"):
        plan_args(AGG, [p, Symbol("d_op"), np.zeros(4, np.float32), np.int32(4)], (2,), aggregates_ok=True)


def test_a_char_pointer_takes_any_array_and_a_sized_byte_type_keeps_its_dtype():
    """C reads any object through `char*` (ggml's `const char * K` holds halves); `int8_t*` means numbers."""
    from cudasrc.signatures import kernel_signatures
    from harness.backends.args import plan_args
    sig, = kernel_signatures("__global__ void k(const char* k, const unsigned char* u, const int8_t* q, float* y) {}")
    y = np.zeros(4, np.float32)
    plan_args(sig, [np.zeros(8, np.float16), np.zeros(2, np.float64), np.zeros(4, np.int8), y], outputs=(3,))
    with pytest.raises(ValueError, match=r"args\[2\] \(q: const int8_t\*\): the kernel takes const int8_t\*, so the "
                                         r"array must have dtype int8, got float16"):
        plan_args(sig, [np.zeros(8, np.float16), np.zeros(2, np.float64), np.zeros(8, np.float16), y], outputs=(3,))
