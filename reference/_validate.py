"""Input checks shared by the reference ops: every violation raises ValueError naming the argument and the rule."""
from __future__ import annotations

import numpy as np

QK = 32  # Q8_0 block length and the activation-quantizer block length


def float_array(name: str, value, ndim: "int | tuple[int, ...] | None" = None, dtype=np.float64,
                finite: bool = False) -> np.ndarray:
    """`value` as a floating array of `dtype` (a real number input is converted, never truncated).

    Integer, boolean or complex input is refused: the ops are defined on real floating values only.
    """
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiu":                 # bool (kind "b"), complex, object, str...
        raise ValueError(f"{name}: expected a real floating array, got dtype {arr.dtype}")
    if arr.dtype.kind in "iu":
        raise ValueError(f"{name}: expected a floating array, got integer dtype {arr.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            raise ValueError(f"{name}: expected {' or '.join(f'{n}-D' for n in allowed)}, got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        where = tuple(int(i) for i in bad)
        raise ValueError(f"{name}: must be finite (no NaN/Inf); first non-finite value at index {where}")
    with np.errstate(over="ignore"):   # a float64 beyond float32's range becomes inf; callers check finiteness
        return arr.astype(dtype, copy=False)


def block_multiple(name: str, n: int) -> None:
    if n <= 0 or n % QK:
        raise ValueError(f"{name}: length {n} must be a positive multiple of {QK} (the quantization block)")


def positive_int(name: str, value) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def choice(name: str, value, choices: tuple) -> str:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    return value
