"""The shard table: one row per (stage, shard) built from the attempt table and the heartbeat
samples, vectorised (a million attempts in well under a second). Its columns are `SHARD_COLUMNS`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zephyr_debug.analyze.liveness import oom_killed_workers
from zephyr_debug.analyze.thresholds import GAP_HEARTBEATS, Thresholds
from zephyr_debug.model import INFRA, TASK, Evidence

# Every column of the shard table, and what it holds.
SHARD_COLUMNS = {
    "stage": "stage name (categorical)",
    "shard": "shard index (restarts at 0 in every stage)",
    "worker": "worker of the newest attempt (categorical; NaN when no source names it)",
    "running": "the newest attempt is still running",
    "done": "some attempt finished",
    "first_start": "start of the first attempt (unix s)",
    "last_end": "end of the last attempt that ended (unix s)",
    "start": "start of the newest attempt",
    "attempts": "attempts seen",
    "task_failures": "attempts that failed with a TASK error",
    "infra_failures": "attempts lost with their worker (INFRA)",
    "oom_attempts": "failed attempts with an OOM sign (SIGKILL / MemoryError / -9 / 137 / RSS at the limit)",
    "burned_s": "seconds spent in failed attempts",
    "secs_total": "seconds of all attempts",
    "rss_max": "peak RSS over the shard's attempts (bytes)",
    "failed_workers": "distinct workers its failed attempts ran on",
    "secs": "seconds of the newest attempt (so far, when running)",
    "items": "items of the newest attempt (so far, when running)",
    "bytes": "bytes of the newest attempt",
    "size": "input size evidence: ScatterReader chunks x max chunk rows (a reduce stage's items count outputs), "
    "else items",
    "size_is_rows": "size counts input rows (a reduce shard's ScatterReader line): its items and rate count outputs",
    "run_s": "run time of the finished attempt (`done in X s` when logged): the peers' yardstick",
    "failed_row": "position in ev.attempts of the newest failed attempt, -1 when none",
    "last_ts": "time of the newest heartbeat sample of the newest attempt",
    "last_items": "item count at that sample",
    "plateau_s": "longest span with no new items below the final count (s)",
    "stalled_s": "sum of such spans (s)",
    "plateau_now_s": "current span with no new items (s)",
    "cpu": "mean CPU % while holding the shard",
    "elapsed_s": "first start to the end (or to now while running): retries included",
    "rate_secs": "seconds the rate is measured over",
    "rate": "items per second of the newest attempt",
}


def empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float) for c in SHARD_COLUMNS})


def _num(frame: pd.DataFrame, col: str) -> np.ndarray:
    """`col` as floats (NaN where absent or not a number); a sparse object column (a rare field,
    None on most rows) converts only its values."""
    if col not in frame:
        return np.full(len(frame), np.nan)
    s = frame[col]
    if pd.api.types.is_float_dtype(s) or pd.api.types.is_integer_dtype(s) or pd.api.types.is_bool_dtype(s):
        return s.to_numpy(dtype=float)
    out = np.full(len(s), np.nan)
    there = np.flatnonzero(s.notna().to_numpy())
    if len(there):
        values = s.iloc[there]
        try:  # numbers (and None): numpy converts them in one pass
            out[there] = values.to_numpy(dtype=float)
        except (TypeError, ValueError):  # text among them: what is not a number is NaN
            out[there] = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    return out


def _progress(
    ev: Evidence, hb: float, keys: _Keys, attempt_keys: np.ndarray, finished_items: np.ndarray
) -> pd.DataFrame:
    """Per (stage, shard, worker) key from heartbeat samples: last items/ts, longest and current
    no-progress span (seconds; a gap of several heartbeats ends a span: the worker died and
    came back), peak RSS and mean CPU while holding the shard. `finished_items` is the item count
    each attempt (key `attempt_keys`) reported when done (NaN else): the last heartbeat may predate the end."""
    s = ev.samples
    cols = ["last_ts", "last_items", "plateau_s", "stalled_s", "plateau_now_s", "rss_max", "cpu"]
    empty = pd.DataFrame({c: pd.Series(dtype=float) for c in cols})
    if not len(s):
        return empty
    shard, ts = _num(s, "shard"), _num(s, "ts")
    key = keys.encode(s["stage"], shard, s["worker"])
    ok = (key >= 0) & ~np.isnan(ts)
    if not ok.any():
        return empty
    key, ts = key[ok], ts[ok]
    items, rss, cpu = (_num(s, c)[ok] for c in ("items", "rss_bytes", "cpu_pct"))
    order = np.lexsort((ts, key))
    key, ts, items, rss, cpu = key[order], ts[order], items[order], rss[order], cpu[order]
    moved = np.ones(len(key), dtype=bool)
    moved[1:] = (
        (key[1:] != key[:-1]) | (np.diff(ts) > GAP_HEARTBEATS * hb) | (items[1:] != items[:-1]) | np.isnan(items[1:])
    )
    starts = np.flatnonzero(moved)
    run = np.cumsum(moved) - 1
    plateau = (np.maximum.reduceat(ts, starts) - ts[starts])[run]
    frame = pd.DataFrame({"key": key, "ts": ts, "items": items, "plateau": plateau, "rss": rss, "cpu": cpu})
    # A span at the shard's last item count is it finishing (writing output, exiting), not a stall.
    sampled_keys = pd.Index(key[starts]).unique()
    at = sampled_keys.get_indexer(attempt_keys)
    hit = np.flatnonzero(at >= 0)
    reported = np.full(len(sampled_keys), np.nan)
    np.fmax.at(reported, at[hit], finished_items[hit])
    final = np.fmax(
        frame.groupby("key", sort=False)["items"].transform("max").to_numpy(), reported[sampled_keys.get_indexer(key)]
    )
    frame["midway"] = frame["plateau"].where(frame["items"] < final, 0.0)
    frame["stalled"] = frame["midway"].where(moved, 0.0)  # each span counted once
    return frame.groupby("key", sort=False).agg(
        last_ts=("ts", "last"),
        last_items=("items", "last"),
        plateau_s=("midway", "max"),
        stalled_s=("stalled", "sum"),
        plateau_now_s=("plateau", "last"),
        rss_max=("rss", "max"),
        cpu=("cpu", "mean"),
    )


class _Keys:
    """Integer codes for (stage, shard, worker): the analysis groups on ints, not strings."""

    def __init__(self, stages: pd.Index, workers: pd.Index, width: int):
        self.stages, self.workers, self.width = stages, workers, width  # width > every shard number

    def encode(self, stage, shard: np.ndarray, worker) -> np.ndarray:
        """(stage * width + shard) * (workers + 1) + worker + 1; -1 when unknown."""
        sc = self.stages.get_indexer(pd.Index(stage))
        wc = self.workers.get_indexer(pd.Index(worker)) + 1
        ok = (sc >= 0) & ~np.isnan(shard) & (shard >= 0) & (shard < self.width)
        key = (sc * self.width + np.nan_to_num(shard).astype(np.int64)) * (len(self.workers) + 1) + wc
        return np.where(ok, key, -1)


def _is(a: pd.DataFrame, col: str, value: str) -> np.ndarray:
    """Rows whose `col` equals `value` (none when the column is absent)."""
    return (a[col] == value).to_numpy(dtype=bool) if col in a else np.zeros(len(a), dtype=bool)


def build(ev: Evidence, hb: float, th: Thresholds) -> pd.DataFrame:
    """One row per (stage, shard): span, attempts, failures, and its newest attempt."""
    a = ev.attempts
    shard = _num(a, "shard")
    rows = np.flatnonzero(~np.isnan(shard))  # positions in ev.attempts
    if len(rows) < len(a):
        a, shard = a.iloc[rows], shard[rows]
    if not len(a):
        return empty()
    stage_code, stage_names = pd.factorize(a["stage"].fillna(""))
    worker_code, worker_names = pd.factorize(a["worker"])
    width = int(max(shard.max(), _num(ev.samples, "shard").max() if len(ev.samples) else 0)) + 1
    keys = _Keys(pd.Index(stage_names), pd.Index(worker_names), width)
    shard = shard.astype(np.int64)
    key = stage_code * width + shard
    key3 = key * (len(worker_names) + 1) + worker_code + 1
    outcome, kind = a["outcome"], a["kind"]
    running = (outcome == "running").to_numpy(dtype=bool)
    failed = (outcome == "failed").to_numpy(dtype=bool)
    is_done = (outcome == "done").to_numpy(dtype=bool)
    start, end, secs = (_num(a, c) for c in ("start_ts", "end_ts", "elapsed_s"))
    secs = np.where(running, ev.now - start, np.where(np.isnan(secs), end - start, secs))
    items = _num(a, "items")
    progress = _progress(ev, hb, keys, key3, np.where(is_done, items, np.nan))
    at = pd.Index(progress.index).get_indexer(key3)

    def sampled(col: str, where: np.ndarray) -> np.ndarray:
        """`col` of the progress rows at `where` (NaN at -1: no samples, most finished attempts)."""
        out = np.full(len(where), np.nan)
        hit = np.flatnonzero(where >= 0)
        out[hit] = progress[col].to_numpy(dtype=float)[where[hit]]
        return out

    # The limit is per process: a subprocess attempt's own peak (wait4) is the number to compare; the
    # heartbeat samples add the worker's RSS to its child's, so they stand in only when there is none.
    peak = _num(a, "peak_rss_bytes")
    rss = np.where(np.isnan(peak), sampled("rss_max", at), peak)
    limit = ev.config.get("memory_limit_mb")
    near = rss >= th.memory_near * float(limit) * (1 << 20) if limit else np.zeros(len(a), dtype=bool)
    oom = failed & (_is(a, "failure", "oom") | (_num(a, "returncode") == -9) | near)
    task_fail = failed & (kind == TASK).to_numpy(dtype=bool)
    infra_fail = failed & (kind == INFRA).to_numpy(dtype=bool)
    killed = oom_killed_workers(ev)  # Iris: the worker's task was OOM-killed, the log says heartbeat timeout
    if killed:
        oom |= infra_fail & a["worker"].isin(killed).to_numpy(dtype=bool)
    order = np.lexsort((np.nan_to_num(_num(a, "attempt")), key))
    ks = key[order]
    first = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    last = order[np.r_[first[1:] - 1, len(order) - 1]]
    group = np.empty(len(a), dtype=np.int64)
    group[order] = np.repeat(np.arange(len(first)), np.diff(np.r_[first, len(order)]))

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(group, weights=values, minlength=len(first))

    failed_at = np.maximum.reduceat(np.where(failed[order], np.arange(len(order)), -1), first)
    lost = np.unique(group[task_fail | infra_fail] * (len(worker_names) + 1) + worker_code[task_fail | infra_fail])
    done = total(is_done) > 0
    first_start, last_end, secs_total = (
        np.fmin.reduceat(start[order], first),
        np.fmax.reduceat(end[order], first),
        total(np.nan_to_num(secs)),
    )
    at_last = at[last]
    heard = {
        col: sampled(col, at_last)
        for col in ("last_ts", "last_items", "plateau_s", "stalled_s", "plateau_now_s", "cpu")
    }
    elapsed = np.where(done, last_end, ev.now) - first_start
    # Progress so far of a running attempt comes from its heartbeat samples.
    live = running[last]
    since = heard["last_ts"] - start[last]
    since = np.where(since >= 0, since, np.nan)
    done_items = np.where(live, np.where(np.isnan(since), np.nan, heard["last_items"]), items[last])
    # A reduce shard's rows: ScatterReader's chunk count x its largest chunk (items count outputs there).
    rows_in = (
        (_num(a, "input_chunks") * _num(a, "max_chunk_rows"))[last]
        if "input_chunks" in a
        else np.full(len(last), np.nan)
    )
    rate_secs = np.where(live, since, secs[last])
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(rate_secs > 0, done_items / rate_secs, np.nan)
    return pd.DataFrame(
        {
            "stage": pd.Categorical.from_codes(stage_code[last], stage_names),
            "shard": shard[last],
            "worker": pd.Categorical.from_codes(worker_code[last], worker_names),
            "running": live,
            "first_start": first_start,
            "last_end": last_end,
            "done": done,
            "attempts": np.bincount(group, minlength=len(first)),
            "task_failures": total(task_fail).astype(int),
            "infra_failures": total(infra_fail).astype(int),
            "oom_attempts": total(oom).astype(int),
            "burned_s": total(np.where(failed, np.nan_to_num(secs), 0.0)),
            "secs_total": secs_total,
            "rss_max": np.fmax.reduceat(rss[order], first),
            "failed_workers": np.bincount(lost // (len(worker_names) + 1), minlength=len(first)),
            "start": start[last],
            "secs": secs[last],
            "items": done_items,
            "bytes": _num(a, "bytes")[last],
            # how long the finished attempt ran (its peers' yardstick), and the newest failed attempt
            "run_s": np.where(is_done[last], secs[last], np.nan),  # `done in X s` when logged: prefix times are 1 s
            "failed_row": np.where(failed_at >= 0, rows[order[np.maximum(failed_at, 0)]], -1),
            **heard,
            "elapsed_s": np.where(np.isnan(elapsed), secs_total, elapsed),
            "size": np.where(np.isnan(rows_in), done_items, rows_in),
            "size_is_rows": ~np.isnan(rows_in),
            "rate_secs": rate_secs,
            "rate": rate,
        },
        copy=False,
    )
