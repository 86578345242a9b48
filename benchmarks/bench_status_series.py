"""Status series (sources/compact.py): a million status rows kept by `extend` (then the frame),
against two baselines measured in the same run: `np.sort` of a million floats, and the same rows
appended one by one (per row). Moved here from tests/test_status_series.py: a speed ratio is a
benchmark figure (6.3x quiet, 16.6x on a busy 2-core machine), not a correctness test.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from zephyr_debug.sources.compact import STATUS_VALUES, StatusSeries

SORT_TARGET = 6.0  # extend + frame of 1M rows within 6x of sorting 1M floats
PER_ROW_TARGET = 10.0  # a row by extend at least 10x cheaper than a row by append


def _best(fn, times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run(quick: bool = False) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_status_series import _dense_stage, _row  # the test's own generated stage

    n = 100_000 if quick else 1_000_000
    stages, values = _dense_stage(n)
    rows = [_row("map", v) for v in values[: n // 20].tolist()]
    columns = ["ts", "stage", *STATUS_VALUES[1:]]

    def bulk():
        series = StatusSeries()
        series.extend(stages, values)
        series.frame(columns)

    def one_by_one():
        series = StatusSeries()
        for r in rows:
            series.append(r)
        series.frame(columns)

    floats = np.random.default_rng(0).random(n)
    sort, extend, append = _best(lambda: np.sort(floats)), _best(bulk), _best(one_by_one, 2)
    per_row = (append / len(rows)) / (extend / len(values))
    return {
        "status_series_extend": {
            "value": extend,
            "unit": f"s ({n:,} rows + frame)",
            "baseline": f"np.sort of {n:,} floats",
            "baseline_value": sort,
            "ratio": extend / sort,
            "target": f"<= {SORT_TARGET:g}x",
            "meets": extend / sort <= SORT_TARGET,
        },
        "status_series_per_row": {
            "value": extend / len(values) * 1e6,
            "unit": "us/row by extend",
            "baseline": "append, us/row",
            "baseline_value": append / len(rows) * 1e6,
            "ratio": per_row,
            "target": f">= {PER_ROW_TARGET:g}x cheaper",
            "meets": per_row >= PER_ROW_TARGET,
        },
    }
