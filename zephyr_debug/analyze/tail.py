"""Tail episodes from the status time series: spans where a stage has shards in flight and
none queued (`in_flight > 0 and queue_depth == 0`), i.e. it waits on stragglers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zephyr_debug.findings import clean_number
from zephyr_debug.model import Evidence

MAX_LISTED_SHARDS = 20


@dataclass(frozen=True)
class Episode:
    """One span of a stage's tail."""

    stage: str
    start: float
    end: float
    duration_s: float
    share: float | None  # of the stage's wall time
    in_flight: int
    ongoing: bool  # the job still runs and the stage is still in this tail
    shards: tuple[int, ...]  # the first MAX_LISTED_SHARDS shards in flight during it
    n_shards: int

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "start": self.start,
            "end": self.end,
            "duration_s": clean_number(self.duration_s),
            "share": clean_number(self.share),
            "in_flight": self.in_flight,
            "ongoing": self.ongoing,
            "shards": list(self.shards),
            "n_shards": self.n_shards,
        }


def stage_bounds(ev: Evidence) -> pd.DataFrame:
    """Per stage: start, end and wall_s, from StageInfo, else the first/last record of the stage
    (the end is `now` while the job runs)."""

    def span(frame: pd.DataFrame, lo: np.ndarray, hi: np.ndarray) -> pd.DataFrame:
        return (
            pd.DataFrame({"min": lo, "max": hi}, index=frame.index)
            .groupby(frame["stage"])
            .agg({"min": "min", "max": "max"})
        )

    def times(frame: pd.DataFrame, col: str) -> np.ndarray:
        return pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)

    spans = [span(ev.status, times(ev.status, "ts"), times(ev.status, "ts"))] if len(ev.status) else []
    if len(ev.attempts):  # an attempt's earliest and latest time: one groupby, not one per column
        begun, ended = times(ev.attempts, "start_ts"), times(ev.attempts, "end_ts")
        with np.errstate(invalid="ignore"):
            spans.append(span(ev.attempts, np.fmin(begun, ended), np.fmax(begun, ended)))
    seen = pd.concat(spans) if spans else pd.DataFrame(columns=["min", "max"], dtype=float)
    out = seen.groupby(level=0).agg(start=("min", "min"), seen=("max", "max"))
    info = (
        pd.DataFrame(
            [{"stage": s.name, "start_ts": s.start_ts, "end_ts": s.end_ts} for s in ev.stages],
            columns=["stage", "start_ts", "end_ts"],
        )
        .set_index("stage")
        .astype(float)
    )
    out = info.join(out, how="outer")
    last = out["seen"] if ev.state != "running" else pd.Series(ev.now, index=out.index)
    out["start"] = out["start_ts"].fillna(out["start"])
    out["end"] = out["end_ts"].fillna(last).fillna(ev.now)
    out["wall_s"] = (out["end"] - out["start"]).clip(lower=0)
    return out[["start", "end", "wall_s"]]


def episodes(ev: Evidence, bounds: pd.DataFrame | None = None) -> list[Episode]:
    """Each tail episode: stage, start, duration_s, share of the stage's wall time, shards in flight
    (`bounds`: `stage_bounds(ev)` when the caller has it)."""
    st = ev.status
    if not len(st):
        return []
    st = st.assign(
        ts=pd.to_numeric(st["ts"], errors="coerce"),
        in_flight=pd.to_numeric(st["in_flight"], errors="coerce").fillna(0),
        queue_depth=pd.to_numeric(st["queue_depth"], errors="coerce").fillna(0),
    )
    st = st.dropna(subset=["ts"]).sort_values("ts", kind="stable").reset_index(drop=True)
    tail = (st["in_flight"] > 0) & (st["queue_depth"] == 0)
    run = ((tail != tail.shift()) | (st["stage"] != st["stage"].shift())).cumsum()
    # An episode ends at the next status row (the first one out of the tail), else at the stage end.
    st["next_ts"] = st["ts"].shift(-1).where(st["stage"] == st["stage"].shift(-1))
    bounds = stage_bounds(ev) if bounds is None else bounds
    groups = st[tail].groupby(run[tail])
    eps = groups.agg(
        stage=("stage", "first"), start=("ts", "first"), last=("ts", "last"), in_flight=("in_flight", "max")
    )
    if not len(eps):
        return []
    eps["next_ts"] = groups.tail(1).set_index(run[tail].drop_duplicates(keep="last"))["next_ts"]
    stage_end = eps["stage"].map(bounds["end"])
    eps["end"] = eps["next_ts"].fillna(stage_end).fillna(eps["last"])
    eps["duration_s"] = (eps["end"] - eps["start"]).clip(lower=0)
    wall = eps["stage"].map(bounds["wall_s"])
    eps["share"] = (eps["duration_s"] / wall.where(wall > 0)).clip(upper=1.0)
    finished = {s.name for s in ev.stages if s.end_ts is not None}
    current = st["stage"].iloc[-1]
    return [
        Episode(
            stage=r.stage,
            start=float(r.start),
            end=float(r.end),
            duration_s=round(r.duration_s, 3),
            share=None if np.isnan(r.share) else round(r.share, 3),
            in_flight=int(r.in_flight),
            ongoing=bool(np.isnan(r.next_ts))
            and ev.state == "running"
            and r.stage == current
            and r.stage not in finished,
            **_involved(ev, r),
        )
        for r in eps.itertuples()
    ]


def _involved(ev: Evidence, ep) -> dict:
    """Shards whose attempt overlapped the episode."""
    a = ev.attempts
    if not len(a):
        return {"shards": (), "n_shards": 0}
    a = a[a["stage"] == ep.stage]
    start = pd.to_numeric(a["start_ts"], errors="coerce")
    end = pd.to_numeric(a["end_ts"], errors="coerce").fillna(np.inf)
    shards = np.unique(a.loc[(start < ep.end) & (end > ep.start), "shard"].dropna().astype(int))
    return {"shards": tuple(shards[:MAX_LISTED_SHARDS].tolist()), "n_shards": len(shards)}
