"""The status series store (sources/compact.py): rows arriving one by one (`append`) or in bulk
(`extend`) keep the same rows, every change of state among them, and at most a bounded share of
the rest. Its speed is measured in benchmarks/bench_status_series.py, not here."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zephyr_debug.sources import compact
from zephyr_debug.sources.compact import STATUS_VALUES, StatusSeries

COLUMNS = ["ts", "stage", *STATUS_VALUES[1:]]
COUNTS = ("completed", "total", "in_flight", "queue_depth", "retries", "alive", "registered", "dead")
STATE = [c for c in COLUMNS if c != "ts"]


def _row(stage: str, values) -> dict:
    """A row as the per-line fold appends it: ints for counts, None where the line has none."""
    row: dict = {"stage": stage}
    for c, x in zip(STATUS_VALUES, values, strict=True):
        row[c] = None if x != x else (float(x) if c in compact.STATUS_FLOATS else int(x))
    return row


def _arrays(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    stages = np.array([r["stage"] for r in rows], dtype=object)
    values = np.array([[np.nan if r[c] is None else r[c] for c in STATUS_VALUES] for r in rows], dtype=float)
    return stages, values


def _feed(rows: list[dict], cuts: list[int], bulk: list[bool], amend: dict[int, int]) -> tuple[pd.DataFrame, list]:
    """Rows fed in pieces (ending at `cuts`), each by `extend` or row by row; after the piece
    ending at row i the newest row's retries is set to amend[i]. Returns the frame and `[-1]`
    after each piece."""
    series, lasts, start = StatusSeries(), [], 0
    for end, by_bulk in zip(cuts, bulk, strict=True):
        piece = [dict(r) for r in rows[start:end]]
        if by_bulk:
            series.extend(*_arrays(piece))
        else:
            for r in piece:
                series.append(r)
        if end - 1 in amend:
            series[-1]["retries"] = amend[end - 1]
        lasts.append(dict(series[-1]))
        assert len(series) == end
        start = end
    return series.frame(COLUMNS), lasts


def _small(mp: pytest.MonkeyPatch) -> None:
    """Blocks, recent rows and bins small enough that examples cross their borders."""
    mp.setattr(compact, "BLOCK_ROWS", 16)
    mp.setattr(compact, "RECENT_ROWS", 4)
    mp.setattr(compact, "STATUS_ROWS_PER_STAGE", 8)


_values = st.tuples(
    st.sampled_from([np.nan, 10.0, 11.0, 12.5, 9.0, 30.0]),  # ts: repeats, gaps, going back
    st.sampled_from([0, 1, 2, 5]),  # completed
    st.sampled_from([np.nan, 5, 6]),  # total
    st.sampled_from([np.nan, 0, 1, 3]),  # in_flight
    st.sampled_from([np.nan, 0, 0, 2]),  # queue_depth: often empty
    st.sampled_from([np.nan, np.nan, 0, 1, 4]),  # retries
    st.sampled_from([np.nan, 3, 4]),  # alive
    st.sampled_from([np.nan, 4]),  # registered
    st.sampled_from([np.nan, 0, 1]),  # dead
    st.sampled_from([np.nan, 1e3, 2.5e3]),  # items
    st.sampled_from([np.nan, 7.5e5, 7.5e5, 1.2e6]),  # bytes
)
_rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), _values), min_size=1, max_size=160).map(
    lambda rows: [_row(s, v) for s, v in rows]
)


@st.composite
def _plan(draw):
    """Rows (runs of one repeated row included), two ways to cut them and retries amendments."""
    rows = draw(_rows)
    runs = draw(st.lists(st.tuples(st.integers(0, len(rows) - 1), st.integers(1, 40)), max_size=3))
    for at, n in runs:
        rows[at:at] = [dict(rows[at]) for _ in range(n)]
    n = len(rows)
    amend = draw(st.dictionaries(st.integers(0, n - 1), st.integers(0, 9), max_size=4))
    ways = []
    for _ in range(2):
        cuts = sorted(set(draw(st.lists(st.integers(1, n), max_size=12))) | {a + 1 for a in amend} | {n})
        ways.append((cuts, draw(st.lists(st.booleans(), min_size=len(cuts), max_size=len(cuts)))))
    return rows, amend, ways


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_plan())
def test_any_split_into_append_and_extend_keeps_the_same_rows(plan):
    rows, amend, ways = plan
    with pytest.MonkeyPatch.context() as mp:
        _small(mp)
        by_row, lasts = _feed(rows, [*range(1, len(rows) + 1)], [False] * len(rows), amend)
        for cuts, bulk in [*ways, (ways[0][0], [True] * len(ways[0][0]))]:
            frame, last = _feed(rows, cuts, bulk, amend)
            pd.testing.assert_frame_equal(frame, by_row)
            assert last == [lasts[end - 1] for end in cuts]  # [-1] as append would hold it
        missing = _must_keep(rows, amend) - _tuples(by_row)
        assert not missing, missing


def _tuples(frame: pd.DataFrame) -> Counter:
    """A frame's rows as (stage, *STATUS_VALUES) tuples, None where a row has no value."""
    values = frame[list(STATUS_VALUES)].astype(float).to_numpy()
    return Counter(
        (stage, *(None if x != x else x for x in row))
        for stage, row in zip(frame["stage"], values.tolist(), strict=True)
    )


def _must_keep(rows: list[dict], amend: dict[int, int]) -> Counter:
    """The rows _StageRows' docstring pins (and each stage's newest), by a plain loop."""
    out: dict[str, list] = {}
    for i, r in enumerate(rows):
        out.setdefault(r["stage"], []).append(dict(r, retries=amend.get(i, r["retries"])))
    kept: Counter = Counter()
    for mine in out.values():
        keep, retries, same_before = {0}, None, False
        keep |= set(range(max(len(mine) - compact.RECENT_ROWS, 0), len(mine)))
        for k in range(1, len(mine)):
            p, v = mine[k - 1], mine[k]
            retries = p["retries"] if p["retries"] is not None else retries
            empty, was = v["queue_depth"] == 0, p["queue_depth"] == 0
            tail, was_tail = empty and (v["in_flight"] or 0) > 0, was and (p["in_flight"] or 0) > 0
            change = (
                tail != was_tail
                or (empty and (v["completed"] != p["completed"] or v["in_flight"] != p["in_flight"]))
                or any(v[c] != p[c] and None not in (v[c], p[c]) for c in ("total", "alive", "registered", "dead"))
                or (None not in (v["retries"], retries) and v["retries"] != retries)
            )
            key = ["items", "bytes"] if empty else [c for c in COUNTS if c != "retries"] + ["items", "bytes"]
            same = empty == was and all(v[c] == p[c] for c in key)
            if change:
                keep |= {k - 1, k}
            if same != same_before:
                keep.add(k - 1)
            same_before = same
        kept.update(
            (r["stage"], *(None if r[c] is None else float(r[c]) for c in STATUS_VALUES))
            for r in (mine[k] for k in keep)
        )
    return kept


def test_an_amended_newest_row_is_the_row_kept_on_both_paths():
    rows = [_row("s", [float(t), t, 10, 2, 5, np.nan, 3, 3, 0, np.nan, np.nan]) for t in range(5)]
    for bulk in (False, True):
        series = StatusSeries()
        if bulk:
            series.extend(*_arrays(rows))
        else:
            for r in rows:
                series.append(dict(r))
        series[-1]["retries"] = 7  # what the fold does on a `Shards retried` line
        assert series.frame(COLUMNS)["retries"].iloc[-1] == 7
        series.extend(*_arrays([_row("s", [9.0, 6, 10, 2, 5, np.nan, 3, 3, 0, np.nan, np.nan])]))
        retries = series.frame(COLUMNS)["retries"].tolist()
        assert retries[-2] == 7 and np.isnan(retries[-1]) and len(series) == 6, bulk
        assert rows[-1]["retries"] is None  # the caller's rows are as they were


def _dense_stage(n: int) -> tuple[np.ndarray, np.ndarray]:
    """One stage of `n` rows a status line a few ms apart: completed rising while the queue
    drains, a few changes of workers and retries, then a tail of 100 shards finishing slowly."""
    k = np.arange(n, dtype=float)
    start = n - 100_000  # the tail
    v = np.full((n, len(STATUS_VALUES)), np.nan)
    v[:, 0] = 1_000.0 + k * 0.005
    v[:, 1] = np.where(k < start, k * 5_000 // start, 4_900 + (k - start) // 1_000)
    v[:, 2] = 5_000
    v[:, 3] = np.where(k < start, 150, 5_000 - v[:, 1])
    v[:, 4] = np.where(k < start, np.maximum(4_850 - v[:, 1], 1), 0)
    v[:, 5] = k // 300_000  # retries: 0..3
    v[:, 6] = np.where((k > 400_000) & (k < 400_010), 149, 150)
    v[:, 7], v[:, 8] = 150, 0
    v[:, 9] = np.where(k < start, k * 3, start * 3 + (k - start) // 5_000)
    v[:, 10] = v[:, 9] * 120.0  # bytes: the same steps as items=
    return np.full(n, "map", dtype=object), v


def test_a_million_row_stage_keeps_every_change_and_a_bounded_rest():
    stages, values = _dense_stage(1_000_000)
    series = StatusSeries()
    series.extend(stages, values)
    kept = series.frame(COLUMNS)
    full = pd.DataFrame(values, columns=list(STATUS_VALUES))
    assert len(series) == len(full)
    assert kept["ts"].iloc[[0, -1]].tolist() == full["ts"].iloc[[0, -1]].tolist()
    tail = kept.iloc[-compact.RECENT_ROWS :]
    assert np.array_equal(tail[list(STATUS_VALUES)].to_numpy(float), values[-compact.RECENT_ROWS :])
    moving = ("ts", "completed", "in_flight", "queue_depth", "items", "bytes")
    state = full[[c for c in STATUS_VALUES if c not in moving]]
    empty = full["queue_depth"] == 0
    changes = full["ts"][((state != state.shift()).any(axis=1)) | (empty != empty.shift())]
    in_tail = full[empty]
    tail_state = in_tail[["completed", "in_flight"]]
    changes = pd.concat([changes, in_tail["ts"][(tail_state != tail_state.shift()).any(axis=1)]])
    assert set(changes) <= set(kept["ts"]), len(set(changes) - set(kept["ts"]))
    pinned = len(set(changes))
    assert len(kept) <= compact.STATUS_ROWS_PER_STAGE + compact.RECENT_ROWS + 4 * pinned
    assert len(kept) < 30_000 and kept["ts"].is_monotonic_increasing
    assert (kept.dtypes[list(COUNTS)] == np.int64).all()
