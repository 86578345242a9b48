"""Medians and quantiles read off an array whose order statistics are in place (sorted, or
partitioned at `positions`), equal to `np.median` / `np.quantile` (linear) to the last bit,
without the partition or sort those do again on every call."""

from __future__ import annotations

import numpy as np


def positions(n: int, qs: tuple[float, ...] = ()) -> list[int]:
    """The indices `median` and `quantiles(…, qs)` read from an array of length n."""
    out = {(n - 1) // 2, n // 2}
    for q in qs:
        lo = int(q * (n - 1))
        out |= {lo, min(lo + 1, n - 1)}
    return sorted(out)


def partitioned(values: np.ndarray, qs: tuple[float, ...] = ()) -> np.ndarray:
    """`values` with the order statistics `median` and `quantiles(…, qs)` read in place (one partition)."""
    return np.partition(values, positions(len(values), qs)) if len(values) else values


def median(v: np.ndarray) -> float:
    """`np.median` of `v` (ascending, or `partitioned`); NaN when empty."""
    n = len(v)
    return float((v[(n - 1) // 2] + v[n // 2]) / 2) if n else np.nan


def quantiles(v: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """`np.quantile(v, qs)` (linear) of `v` (ascending, or `partitioned` with these qs)."""
    if not len(v):
        return [np.nan] * len(qs)
    out = []
    for q in qs:
        pos = q * (len(v) - 1)
        lo = int(pos)
        t = pos - lo
        a, b = v[lo], v[min(lo + 1, len(v) - 1)]
        out.append(float(a + (b - a) * t if t < 0.5 else b - (b - a) * (1 - t)))  # numpy's lerp
    return out
