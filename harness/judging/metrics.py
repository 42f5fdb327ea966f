"""Error metrics between an actual and a reference array (any shape, float32 or float64).

All metrics are computed in float64. Shapes must match exactly (no broadcasting). Non-finite values are not
hidden: a NaN anywhere in the difference makes max_abs / max_rel / nmse NaN and the comparison records how many
non-finite elements each side holds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

# Default histogram edges of |actual - reference|: 0, then decades 1e-12 .. 1e2, then inf.
DEFAULT_EDGES = (0.0, *[10.0 ** e for e in range(-12, 3)], float("inf"))


def _pair(actual, reference) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(actual)
    r = np.asarray(reference)
    for name, v in (("actual", a), ("reference", r)):
        if v.dtype.kind not in "fiu" or v.dtype == np.bool_:
            raise ValueError(f"{name}: expected a real numeric array, got dtype {v.dtype}")
    if a.shape != r.shape:
        raise ValueError(f"actual: shape {a.shape} must equal reference's shape {r.shape}")
    if a.size == 0:
        raise ValueError("actual: empty arrays have no error metrics")
    return a.astype(np.float64), r.astype(np.float64)


def abs_error(actual, reference) -> np.ndarray:
    a, r = _pair(actual, reference)
    with np.errstate(invalid="ignore"):
        return np.abs(a - r)


def max_abs(actual, reference) -> float:
    """max |actual - reference| (NaN if any difference is NaN)."""
    return float(np.max(abs_error(actual, reference)))


def max_rel(actual, reference, floor: float = 0.0) -> float:
    """max |actual - reference| / max(|reference|, floor). With floor 0, an element whose reference is 0 gives
    0 if actual is 0 too, else inf. Pass e.g. floor = 1e-3 * max|reference| to ignore relative error near zero."""
    a, r = _pair(actual, reference)
    if not np.isfinite(floor) or floor < 0:
        raise ValueError(f"floor: must be finite and >= 0, got {floor!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(a - r)
        den = np.maximum(np.abs(r), floor)
        rel = np.where(err == 0, 0.0, err / den)
    return float(np.max(rel))


def nmse(actual, reference) -> float:
    """sum (actual - reference)^2 / sum reference^2 (0 when both are all-zero, inf when only the reference is)."""
    a, r = _pair(actual, reference)
    with np.errstate(invalid="ignore", over="ignore"):
        num = float(np.sum((a - r) ** 2))
        den = float(np.sum(r * r))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def cosine(actual, reference) -> float:
    """Cosine similarity of the flattened arrays; 1.0 when both are zero, 0.0 when exactly one is."""
    a, r = _pair(actual, reference)
    # a broken kernel's output (inf, NaN) gives a NaN cosine, not a numpy RuntimeWarning on the console
    with np.errstate(all="ignore"):
        na, nr = float(np.linalg.norm(a)), float(np.linalg.norm(r))
        if na == 0.0 or nr == 0.0:
            return 1.0 if na == nr else 0.0
        if not (np.isfinite(na) and np.isfinite(nr)):
            return float("nan")
        return float(np.dot(a.ravel() / na, r.ravel() / nr))


def _ordered_f32(v: np.ndarray) -> np.ndarray:
    """float32 bit patterns mapped to integers monotone in the value (+0 and -0 both map to 0)."""
    bits = v.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def ulp_distance_f32(actual, reference) -> np.ndarray:
    """Per-element distance in float32 ulps (number of float32 values between the two, each rounded to float32).
    NaN on either side gives -1 (no distance), so callers can tell it apart."""
    a, r = _pair(actual, reference)
    d = np.abs(_ordered_f32(a) - _ordered_f32(r))
    return np.where(np.isnan(a) | np.isnan(r), -1, d)


def max_ulp_f32(actual, reference) -> float:
    """Max float32 ulp distance; inf if a NaN appears on one side only (matching NaNs count as 0)."""
    a, r = _pair(actual, reference)
    d = ulp_distance_f32(a, r).astype(np.float64)
    both = np.isnan(a) & np.isnan(r)
    one = np.isnan(a) ^ np.isnan(r)
    if one.any():
        return float("inf")
    d[both] = 0
    return float(d.max())


def worst_index(actual, reference) -> tuple:
    """Index (a tuple, like the arrays' shape) of the largest |actual - reference|; a NaN difference wins."""
    err = abs_error(actual, reference)
    flat = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
    return tuple(int(i) for i in np.unravel_index(flat, err.shape))


def error_histogram(actual, reference, edges=DEFAULT_EDGES) -> dict:
    """Counts of |actual - reference| per bin [edges[i], edges[i+1]) (the last bin includes inf); NaN
    differences are counted separately. Returns {"edges": [...], "counts": [...], "nan": n}."""
    e = [float(v) for v in edges]
    if len(e) < 2 or any(b <= a for a, b in zip(e, e[1:])):
        raise ValueError(f"edges: expected at least two strictly increasing values, got {edges!r}")
    err = abs_error(actual, reference).ravel()
    nan = int(np.isnan(err).sum())
    err = err[~np.isnan(err)]
    idx = np.searchsorted(np.asarray(e), err, side="right") - 1
    idx = np.where(err == e[-1], len(e) - 2, idx)           # inf lands in the last bin when the last edge is inf
    inside = (idx >= 0) & (idx < len(e) - 1)
    counts = np.bincount(idx[inside], minlength=len(e) - 1)
    return {"edges": e, "counts": [int(c) for c in counts], "nan": nan, "outside": int((~inside).sum())}


# log10(|err| / budget) bin edges: one bin per decade from 1e-8 to 1e3 of the budget, then everything above
USAGE_EDGES = tuple(float(e) for e in range(-8, 4))


def usage_histogram(err, budget, edges=USAGE_EDGES) -> dict:
    """Counts of log10(|err| / budget) per bin [edges[i], edges[i+1]), with the elements below the first edge
    (exact or far inside the budget, |err| = 0 included) and above the last counted apart; 0 is the budget
    line. Returns {"edges", "counts", "below", "above", "exact", "nan", "unit"}."""
    e = np.abs(np.asarray(err, dtype=np.float64)).reshape(-1)
    b = np.asarray(budget, dtype=np.float64).reshape(-1)
    if b.shape != e.shape:
        raise ValueError(f"budget: expected {e.size} per-element budgets, got {b.size}")
    nan = ~np.isfinite(e)
    exact = (e == 0) & ~nan
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b > 0, e / b, np.where(e > 0, np.inf, 0.0))
    ok = ~nan & ~exact
    with np.errstate(divide="ignore"):         # a ratio that underflows to 0 is below every edge (-inf)
        lr = np.log10(ratio[ok])
    edges = list(edges)
    counts, _ = np.histogram(lr, bins=edges)
    return {"edges": edges, "counts": [int(c) for c in counts], "below": int((lr < edges[0]).sum()),
            "above": int((lr > edges[-1]).sum()), "exact": int(exact.sum()), "nan": int(nan.sum()),
            "unit": "log10(|error| / budget)"}


@dataclass(frozen=True)
class Comparison:
    """Every metric of one actual-vs-reference pair (plain floats/ints, JSON-ready via as_dict)."""

    max_abs: float
    max_rel: float
    nmse: float
    cosine: float
    max_ulp_f32: float
    worst_index: tuple
    worst_actual: float
    worst_reference: float
    nonfinite_actual: int
    nonfinite_reference: int
    size: int

    def as_dict(self) -> dict:
        d = asdict(self)
        d["worst_index"] = list(self.worst_index)
        return d


def compare(actual, reference, rel_floor: float = 0.0) -> Comparison:
    a, r = _pair(actual, reference)
    wi = worst_index(a, r)
    return Comparison(
        max_abs=max_abs(a, r), max_rel=max_rel(a, r, rel_floor), nmse=nmse(a, r), cosine=cosine(a, r),
        max_ulp_f32=max_ulp_f32(a, r), worst_index=wi, worst_actual=float(a[wi]), worst_reference=float(r[wi]),
        nonfinite_actual=int((~np.isfinite(a)).sum()), nonfinite_reference=int((~np.isfinite(r)).sum()),
        size=int(a.size),
    )
