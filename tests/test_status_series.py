"""The status series keeps the same rows whichever way they arrive (one by one or in bulk), and
the newest row stays amendable."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zephyr_debug.sources import compact
from zephyr_debug.sources.compact import STATUS_VALUES, StatusSeries

COLUMNS = ["ts", "stage", *(c for c in STATUS_VALUES if c != "ts")]


def _row(values: list, stage: str) -> dict:
    row = {
        c: (None if v != v else (float(v) if c in ("ts", "items") else int(v)))
        for c, v in zip(STATUS_VALUES, values, strict=True)
    }
    return {**row, "stage": stage}


rows_strategy = st.lists(
    st.tuples(
        st.sampled_from(["stage0-Map", "stage1-Reduce"]),
        st.floats(-1, 30, allow_nan=False),  # time since the row before (mostly forward)
        st.integers(0, 20),  # completed
        st.sampled_from([20, 20, 20, 21]),  # total
        st.integers(0, 4),  # in flight
        st.sampled_from([0, 0, 3, 8]),  # queued
        st.sampled_from([np.nan, 1.0, 2.0]),  # retries
        st.sampled_from([np.nan, 4.0, 3.0]),  # alive
        st.sampled_from([np.nan, 1000.0, 1100.0]),  # items
    ),
    min_size=1,
    max_size=300,
)


def _values(rows) -> tuple[np.ndarray, np.ndarray]:
    stages = np.array([r[0] for r in rows], dtype=object)
    v = np.full((len(rows), len(STATUS_VALUES)), np.nan)
    ts = 0.0
    for k, (_, step, done, total, flight, queue, retries, alive, items) in enumerate(rows):
        ts += step
        v[k] = [ts, done, total, flight, queue, retries, alive, 4.0, 0.0, items]
    return stages, v


@settings(max_examples=120, deadline=None)
@given(rows=rows_strategy, cuts=st.lists(st.integers(0, 300), max_size=6), data=st.data())
def test_append_and_extend_keep_the_same_rows(rows, cuts, data):
    stages, v = _values(rows)
    with pytest.MonkeyPatch.context() as mp:  # small blocks and stores, so both fill up inside an example
        mp.setattr(compact, "BLOCK_ROWS", 16)
        mp.setattr(compact, "RECENT_ROWS", 4)
        mp.setattr(compact, "STATUS_ROWS_PER_STAGE", 10)
        one, bulk = StatusSeries(), StatusSeries()
        for k in range(len(rows)):
            one.append(_row(list(v[k]), stages[k]))
        bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
        for a, b in itertools.pairwise(bounds):
            if data.draw(st.booleans()):
                bulk.extend(stages[a:b], v[a:b])
            else:
                for k in range(a, b):
                    bulk.append(_row(list(v[k]), stages[k]))
            assert bulk[-1] == _row(list(v[b - 1]), stages[b - 1])
        assert len(one) == len(bulk) == len(rows)
        a, b = one.frame(COLUMNS), bulk.frame(COLUMNS)
    assert a.equals(b)
    assert len(a) <= len(rows)


@pytest.mark.parametrize("bulk", [False, True])
def test_newest_row_is_amendable(bulk):
    series = StatusSeries()
    stages, v = _values([("s", float(t), t, 20, 2, 5, np.nan, 4.0, np.nan) for t in range(3)])
    if bulk:
        series.extend(stages, v)
    else:
        for k in range(3):
            series.append(_row(list(v[k]), stages[k]))
    series[-1]["retries"] = 7  # what the fold does on a `Shards retried` line
    frame = series.frame(COLUMNS)
    assert frame["retries"].tolist()[-1] == 7
    assert np.isnan(frame["retries"].tolist()[0])


def test_a_million_rows_stay_bounded_and_keep_each_change():
    n = 1_000_000
    v = np.full((n, len(STATUS_VALUES)), np.nan)
    v[:, 0] = np.arange(n) * 0.05  # ts
    v[:, 1] = np.minimum(np.arange(n), n - 10)  # completed, frozen at the end
    v[:, 2] = n
    v[:, 3] = np.where(np.arange(n) < n - 1_000, 100, 1)  # in flight
    v[:, 4] = np.maximum(n - 1_000 - np.arange(n), 0)  # queue empties 1,000 rows before the end
    v[:, 6:9] = [100, 100, 0]
    v[n // 2 :, 6] = 99  # a worker dies halfway
    series = StatusSeries()
    series.extend(np.full(n, "stage0", dtype=object), v)
    frame = series.frame(COLUMNS)
    tail_rows = int((v[:, 4] == 0).sum())  # each a change of completed: all pinned
    assert len(frame) <= compact.STATUS_ROWS_PER_STAGE + compact.RECENT_ROWS + tail_rows + 200
    assert frame["ts"].iloc[0] == 0 and frame["ts"].iloc[-1] == v[-1, 0]  # first and last row
    assert (frame["alive"] == 99).any() and frame.loc[frame["alive"] == 99, "ts"].min() == v[n // 2, 0]
    assert frame["ts"].is_monotonic_increasing
    tail = frame[frame["queue_depth"] == 0]  # the tail: every change of completed kept
    assert set(tail["completed"]) == set(v[v[:, 4] == 0, 1].astype(int))


@pytest.mark.parametrize("piece", [1, 7, 50, 300])
def test_block_boundaries_do_not_depend_on_how_rows_arrive(piece, monkeypatch):
    """The compression is not block-size invariant (bins widen as rows come): what makes both
    paths equal is that blocks end at the same rows."""
    monkeypatch.setattr(compact, "BLOCK_ROWS", 16)
    monkeypatch.setattr(compact, "RECENT_ROWS", 4)
    monkeypatch.setattr(compact, "STATUS_ROWS_PER_STAGE", 10)
    rng = np.random.default_rng(1)
    rows = [("s", float(step), k, 300, 4, 5, np.nan, 4.0, np.nan) for k, step in enumerate(rng.uniform(0, 30, 300))]
    stages, v = _values(rows)
    one, bulk = StatusSeries(), StatusSeries()
    for k in range(len(rows)):
        one.append(_row(list(v[k]), stages[k]))
    for k in range(0, len(rows), piece):
        bulk.extend(stages[k : k + piece], v[k : k + piece])
    assert one.frame(COLUMNS).equals(bulk.frame(COLUMNS))
