"""Where the job stands: the newest status, whether its queue is empty, whether its item count
froze, whether it stalled, and the one-line headline every command prints."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zephyr_debug.findings import ERROR, INFO, Finding, clean_number
from zephyr_debug.model import Evidence
from zephyr_debug.zephyrlog import BYTE_COUNT, ITEM_COUNT


@dataclass(frozen=True)
class Progress:
    """The newest JobStatus-like view of the job (the current stage's counts)."""

    stage: str
    completed: int
    total: int
    in_flight: int
    queue_depth: int
    retries: int  # the current stage's, as Zephyr counts them
    retries_total: int  # retried attempts over every stage
    failures_absorbed: int  # failed attempts of shards that then finished
    done: bool
    fatal_error: str | None
    progress_time: float | None
    since_progress_s: float | None  # None once the job finished
    ended_at: float | None  # when a finished job ended (its last record)

    @property
    def tail(self) -> bool:
        return self.in_flight > 0 and self.queue_depth == 0 and not self.done

    def to_json(self) -> dict[str, Any]:
        return {k: clean_number(v) if not isinstance(v, str) else v for k, v in self.__dict__.items()} | {
            "tail": self.tail
        }


def latest(ev: Evidence, shards: pd.DataFrame | None = None) -> Progress:
    """The live get_status when there is one, else the last status row; a finished job's counts
    come from its attempts (the status line is periodic, a get_status snapshot may predate the
    end); retries from the shard table."""
    if ev.live is not None:
        row = ev.live.to_dict()
    elif len(ev.status):
        last = ev.status.iloc[-1]
        row = {k: _int(last[k]) for k in ("completed", "total", "in_flight", "queue_depth", "retries")}
        row["stage"] = last["stage"]
    else:
        row = {"stage": "", "completed": 0, "total": 0, "in_flight": 0, "queue_depth": 0, "retries": 0}
    a = ev.attempts
    finished = ev.state in ("succeeded", "failed")
    if finished and ev.stages:
        stage = ev.stages[-1]
        mine = a[a["stage"] == stage.name]
        done = int(mine.loc[mine["outcome"] == "done", "shard"].nunique())
        running = int((mine["outcome"] == "running").sum())
        total = stage.total or _int(row["total"])
        completed = max(done, _int(row["completed"]) if row["stage"] == stage.name else 0)
        left = max(total - completed - running, 0)  # an older status line's queue cannot exceed what is left
        row.update(
            stage=stage.name,
            total=total,
            completed=completed,
            in_flight=0 if ev.state == "succeeded" else running,
            queue_depth=0 if ev.state == "succeeded" else min(_int(row.get("queue_depth")), left),
        )
    retried, absorbed = _retries(shards)
    since = None if ev.progress_time is None or finished else max(ev.now - ev.progress_time, 0.0)
    return Progress(
        stage=str(row.get("stage") or ""),
        completed=_int(row["completed"]),
        total=_int(row["total"]),
        in_flight=_int(row["in_flight"]),
        queue_depth=_int(row["queue_depth"]),
        retries=_int(row.get("retries")),
        retries_total=retried,
        failures_absorbed=absorbed,
        done=finished,
        fatal_error=ev.fatal_error,
        progress_time=ev.progress_time,
        since_progress_s=since,
        ended_at=ev.now if finished else None,
    )


def _retries(shards: pd.DataFrame | None) -> tuple[int, int]:
    """(attempts beyond each shard's first, failed attempts of shards that then finished)."""
    if shards is None or not len(shards):
        return 0, 0
    failed = shards["task_failures"].to_numpy() + shards["infra_failures"].to_numpy()
    return int(shards["attempts"].sum() - len(shards)), int(failed[shards["done"].to_numpy(dtype=bool)].sum())


def queue_empty(ev: Evidence, prog: Progress) -> dict[str, bool]:
    """Per stage: its queue is empty (every shard handed out). Finished stages are; the current
    one per its newest status; other stages are left to the shard counts."""
    out = {s.name: True for s in ev.stages if s.end_ts is not None}
    if prog.stage and not prog.done:
        out[prog.stage] = prog.queue_depth == 0
    return out


COUNTERS = ("items", "bytes")  # the status line's progress counters (model.STATUS_COLUMNS)


def frozen_items_s(ev: Evidence, prog: Progress, completions: bool = False) -> float:
    """How long the current stage's status-line counters (`items=`, and `bytes_processed=` where
    printed) have not moved while the stage is in its tail (queue empty, shards in flight): the
    coordinator-only sign of a stuck shard. `completions`: a shard finishing moves them too (the
    freeze starts after the last one), for a claim about every shard in flight."""
    st = ev.status
    if not len(st) or "items" not in st or not prog.tail or ev.state != "running":
        return 0.0
    mine = st[(st["stage"] == prog.stage) & pd.to_numeric(st["items"], errors="coerce").notna()]
    counters = [pd.to_numeric(mine[c], errors="coerce").to_numpy(dtype=float) for c in COUNTERS if c in mine]
    counters = [c for c in counters if len(c) and not np.isnan(c[-1])]
    ts = pd.to_numeric(mine["ts"], errors="coerce").to_numpy(dtype=float)
    tail = (pd.to_numeric(mine["queue_depth"], errors="coerce").to_numpy() == 0) & (
        pd.to_numeric(mine["in_flight"], errors="coerce").to_numpy() > 0
    )
    if not counters or not tail[-1]:
        return 0.0
    same = tail.copy()
    for c in counters:  # a row without a count (a line cut short) is no evidence it moved
        same &= np.isnan(c) | (c == c[-1])
    if completions:
        done = pd.to_numeric(mine["completed"], errors="coerce").to_numpy(dtype=float)
        same &= np.isnan(done) | (done == done[-1])
    k = len(same)
    while k > 0 and same[k - 1]:
        k -= 1
    frozen = float(ts[-1] - ts[k]) if k < len(same) else float(ts[-1] - ts[0])
    flight = mine["in_flight"].iloc[: k + 1]
    if k >= 2 and not any(_visible(c[: k + 1], ts[: k + 1], flight, frozen) for c in counters):
        return 0.0
    return frozen


def _visible(items: np.ndarray, ts: np.ndarray, in_flight: pd.Series, seconds: float) -> bool:
    """Whether the shards in flight would have moved the printed count in `seconds` at the pace the
    stage's shards kept before (items= prints 3 digits: in a 5,000-shard stage a few shards in
    flight may not move `1.89M` for minutes; bytes_processed= prints 2 decimals of its unit)."""
    values = np.unique(items[~np.isnan(items)])[-12:]
    step = float(np.diff(values).min()) if len(values) > 1 else 1.0
    flight = pd.to_numeric(in_flight, errors="coerce").to_numpy(dtype=float)
    span = float(ts[-1] - ts[0])
    busy = float(np.nanmean(flight)) if len(flight) else np.nan
    if not span > 0 or not busy > 0:
        return True
    per_shard = float(items[-1] - items[0]) / span / busy
    return per_shard * float(flight[-1]) * seconds >= 3 * step


def status_interval(ev: Evidence, stage: str) -> float:
    """The period of the stage's status lines (the median gap between them; NaN with fewer than
    two): the time resolution of everything read from them."""
    st = ev.status
    if not len(st):
        return np.nan
    ts = pd.to_numeric(st.loc[st["stage"] == stage, "ts"], errors="coerce").dropna().to_numpy(dtype=float)
    gaps = np.diff(np.sort(ts))
    gaps = gaps[gaps > 0]
    return float(np.median(gaps)) if len(gaps) else np.nan


def stalled(ev: Evidence, stall_s: float) -> Finding | None:
    """No progress for `stall_s` while the job runs: Zephyr's ZephyrPipelineProgressStalled."""
    if ev.state not in ("running", "interrupted"):
        return None
    since, at_least = (
        (ev.now - ev.progress_time, "") if ev.progress_time is not None else (_unchanged_s(ev), "at least ")
    )
    if not since >= stall_s:
        return None
    return Finding(
        kind="stalled",
        causes=("stalled",),
        severity=ERROR,
        title=f"no progress for {at_least}{_minutes(since)}: ZephyrPipelineProgressStalled fires",
        evidence=(
            f"no stage start or shard completion for {at_least}{since / 60:.1f} min"
            + (" (the whole evidence: its status lines never change their completed count)" if at_least else "")
            + f"; alert threshold {stall_s / 60:.0f} min: ZephyrPipelineProgressStalled fires",
        ),
        next=("zdebug playbook stall-alert",),
    )


def _unchanged_s(ev: Evidence) -> float:
    """How long the last stage's completed count has read the same, from the evidence's first
    status line of that count (a log that starts in a tail shows no completion at all)."""
    st = ev.status.dropna(subset=["ts", "completed"]) if len(ev.status) else ev.status
    if not len(st):
        return float("nan")
    last = st.iloc[-1]
    same = st[(st["stage"] == last["stage"]) & (st["completed"] == last["completed"])]
    changed = st.index[(st["stage"] != last["stage"]) | (st["completed"] != last["completed"])]
    if len(changed):
        same = same.loc[same.index > changed[-1]]
    return float(ev.now - same["ts"].min()) if len(same) else float("nan")


def headline(ev: Evidence, prog: Progress, pool, shards: pd.DataFrame, found: list[Finding]) -> str:
    """The outcome in one sentence: succeeded after N retries / aborted / stuck / running."""
    problems = [f for f in found if f.severity != INFO]
    absorbed = f"; {prog.failures_absorbed} failure(s) absorbed by retries" if prog.failures_absorbed else ""
    if ev.state == "succeeded":
        retries = f" after {prog.retries_total} retried attempt(s)" if prog.retries_total else ""
        return f"Succeeded: all {len(ev.stages)} stage(s) completed{retries}{absorbed}."
    if ev.state == "failed":
        reason = (ev.fatal_error or "unknown reason").strip().splitlines()[0]
        cause = next((f for f in found if f.kind != "aborted" and dict(f.metrics).get("aborted_pipeline")), None)
        return f"Aborted in {prog.stage}: {reason}" + (f" (root cause: {cause.title})" if cause else "")
    where = (
        f"{prog.stage}: {prog.completed}/{prog.total} complete, {prog.in_flight} in-flight, {prog.queue_depth} queued"
    )
    if ev.state == "interrupted":
        return f"Interrupted: the coordinator stopped without finishing or aborting ({where})."
    state = (
        (
            "in its tail: " + "; ".join(f.title for f in problems[:2])
            if problems
            else "in its tail, waiting on its last shards"
        )
        if prog.tail
        else "running"
    )
    if problems and not prog.tail:
        state += f"; {len(problems)} problem(s): {problems[0].title}"
    return f"{where}: {state}."


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f}s"


def _int(value) -> int:
    if value is None:
        return 0
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return 0 if math.isnan(number) else int(number)


@dataclass(frozen=True)
class Alone:
    """A stage's last shard running alone (queue empty, one in flight), as its status lines see it:
    the stage's item count then moves only by that shard's progress."""

    start: float
    end: float
    rate: float  # items/s of the shard while alone (NaN without item counts)
    shard_rate: float  # a typical shard's items/s over the stage: items per shard / seconds per shard
    shard_s: float  # a typical shard's run time (`_littles_law`: mean in flight / completions per second)
    step: float  # the smallest change of the printed item count (status lines print 3 digits: 1.09K)
    interval: float = np.nan  # the status line's period (the median gap between the stage's lines)
    size: tuple[float, float, float] = (np.nan, np.nan, np.inf)  # (rate, shard_rate, step) of bytes_processed=

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def line_period(self, default: float) -> float:
        """The status line's period (the resolution of this stretch), else `default`."""
        return self.interval if self.interval > 0 else default

    @property
    def counts(self) -> str:
        """The status line's counts this stretch shows."""
        return f"{ITEM_COUNT} and {BYTE_COUNT}" if np.isfinite(self.size[2]) else ITEM_COUNT

    def pace(self) -> tuple[str, float, float] | None:
        """(the status-line count, its rate while alone, a typical shard's rate) of the count that
        shows the lone shard's pace best: the one that moved by more printed steps (a rate from a
        count that moved one step is that step over the stretch, whatever the shard did). None:
        neither moved."""
        moved = [
            (rate * self.seconds / step, name, rate, typical)
            for name, rate, typical, step in (
                (ITEM_COUNT, self.rate, self.shard_rate, self.step),
                (BYTE_COUNT, *self.size),
            )
            if rate > 0 and typical > 0  # also NaN
        ]
        return max(moved)[1:] if moved else None

    def frozen(self) -> bool:
        """No visible progress although a typical shard would have moved a count 3 steps: items=, or
        bytes_processed= (2 decimals of its unit: finer than items= where that prints 3 digits)."""
        size_rate, size_shard_rate, size_step = self.size
        if size_rate > 0:  # bytes moved: not frozen, whatever the coarser item count shows
            return False
        return (self.rate == 0 and self.shard_rate * self.seconds >= 3 * self.step) or (
            size_rate == 0 and size_shard_rate * self.seconds >= 3 * size_step
        )


def alone(ev: Evidence, stage: str, typical_s: float = np.nan) -> Alone | None:
    """The stage's final stretch with exactly one shard in flight, when its status lines show one.
    `typical_s` (the median run time of its finished shards) stands in for Little's law when the
    stage's queue drained within one status line (shards much shorter than the status period)."""
    st = ev.status
    if not len(st):
        return None
    mine = st[st["stage"] == stage]
    ts = pd.to_numeric(mine["ts"], errors="coerce").to_numpy(dtype=float)
    flight = pd.to_numeric(mine["in_flight"], errors="coerce").to_numpy(dtype=float)
    queued = pd.to_numeric(mine["queue_depth"], errors="coerce").to_numpy(dtype=float)
    done = pd.to_numeric(mine["completed"], errors="coerce").to_numpy(dtype=float)
    items = (
        pd.to_numeric(mine["items"], errors="coerce").to_numpy(dtype=float)
        if "items" in mine
        else np.full(len(mine), np.nan)
    )
    solo = (flight == 1) & (queued == 0)
    if len(ts) < 3 or not solo.any():
        return None
    last = int(np.flatnonzero(solo)[-1])
    first = last
    while first > 0 and solo[first - 1]:
        first -= 1
    shard_s = _littles_law(ts, flight, done, ~solo & (queued > 0))
    if not shard_s > 0:  # also NaN
        shard_s = float(typical_s)
    rate, per_shard, step = _counter(items, ts, done, solo, first)
    size = (
        _counter(pd.to_numeric(mine["bytes"], errors="coerce").to_numpy(dtype=float), ts, done, solo, first)
        if "bytes" in mine
        else (np.nan, np.nan, np.inf)
    )
    gaps = np.diff(ts[~np.isnan(ts)])
    gaps = gaps[gaps > 0]
    began = ts[first] if first == 0 or not ts[first - 1] < ts[first] else (ts[first - 1] + ts[first]) / 2
    return Alone(
        float(began),  # between the last line with more in flight and the first with one: halfway
        float(ts[last]),
        float(rate),
        float(per_shard / shard_s) if shard_s else np.nan,
        shard_s,
        step,
        float(np.median(gaps)) if len(gaps) else np.nan,
        (size[0], float(size[1] / shard_s) if shard_s else np.nan, size[2]),
    )


def _littles_law(ts: np.ndarray, flight: np.ndarray, done: np.ndarray, busy: np.ndarray) -> float:
    """A typical shard's run time from the rows where the stage's queue still held shards: mean in
    flight / completions per second, from the row before its first completion on (the first wave
    runs a whole shard with none completing: counted in, a stage of 200 shards on 128 workers with
    a 49 s mean read 122 s). NaN: fewer than 2 such rows, or nothing completed."""
    rows = np.flatnonzero(busy)
    if len(rows) < 2 or np.isnan(done[rows]).all():
        return np.nan
    moved = rows[done[rows] > np.nanmin(done[rows])]
    if len(moved) and moved[0] > rows[0]:
        rows = rows[rows >= rows[np.searchsorted(rows, moved[0]) - 1]]
    span = ts[rows].max() - ts[rows].min() if len(rows) >= 2 else np.nan
    completions = (np.nanmax(done[rows]) - np.nanmin(done[rows])) / span if span > 0 else np.nan
    return float(np.nanmean(flight[rows]) / completions) if completions > 0 else np.nan


def _counter(values: np.ndarray, ts: np.ndarray, done: np.ndarray, solo: np.ndarray, first: int) -> tuple:
    """(rate while alone from row `first` on, the count per finished shard, the printed step) of
    one status-line counter (NaN / inf where it shows none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        known = ~np.isnan(values)
        k = np.flatnonzero(known & solo)
        k = k[k >= first]
        rate = (
            (values[k[-1]] - values[k[0]]) / (ts[k[-1]] - ts[k[0]]) if len(k) >= 2 and ts[k[-1]] > ts[k[0]] else np.nan
        )
        per = np.flatnonzero(known & (done > 0))
        per_shard = values[per[-1]] / done[per[-1]] if len(per) else np.nan
        distinct = np.unique(values[known])[-12:]  # the printed resolution near the stage's final count
        step = float(np.diff(distinct).min()) if len(distinct) > 1 else np.inf
    return float(rate), float(per_shard), step
