"""Which shards hold their stage up: robust peer statistics and the time each shard held.

A stage's yardstick is the run time of its finished attempts (`run_s`). On a log scale their
median and robust spread (MAD) give a cut: median + z x sigma, with z raised (Bonferroni) so a
healthy stage of n shards expects `false_rate` shards above it, and never below the floors
(`multiplier` x median, `min_excess_heartbeats` ticks above it). A stage is judged on its own clock:
its tick (`tick_s`) is `TICK_SHARE` of its median run time, never finer than the resolution of its
evidence (the smallest gap between its printed run times for the cut, between its shards' end
times for what a shard held); so the same job run 100x faster or slower gets the same outliers,
whatever Zephyr's heartbeat interval. A shard is an outlier
when its own attempt ran past the cut. It held its stage for as long as it ran past the moment
the stage would have ended had every shard stopped at the cut (`expected_end`): a shard that
finished while others still ran held nothing (Mantri: outliers are judged by what they cost).
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from zephyr_debug.analyze import orderstats
from zephyr_debug.analyze.bystage import stage_slices
from zephyr_debug.analyze.thresholds import MAD_TO_SIGMA, MIN_ROBUST_PEERS, TICK_SHARE, Thresholds

NORMAL_Z = 1.2816  # the 90th percentile of a normal distribution
RESOLUTIONS = (1.0, 0.1, 0.01, 0.001)  # the printed time resolutions of Zephyr's evidence, coarsest first
QUANTILES = (0.5, 0.9, 0.99)  # median_s, p90_s, p99_s
PROBE = 256  # values a resolution is tried on before all of them (most tries fail at once)

STAGE_STATS = [
    "total",
    "done",
    "running",
    "peers",
    "median_s",
    "p90_s",
    "p99_s",
    "sigma_log",
    "cut_s",
    "normal_s",
    "median_size",
    "median_rate",
    "median_cpu",
    "queue_empty",
    "judged",
    "run_tick_s",
    "tick_s",
]


def stage_stats(
    shards: pd.DataFrame, totals: dict[str, int], queue_empty: dict[str, bool], th: Thresholds
) -> pd.DataFrame:
    """Per stage: counts, quantiles of finished run times, robust spread, its ticks, the outlier cut."""
    by = stage_slices(shards["stage"])
    col = {c: by.take(shards[c].to_numpy(dtype=float)) for c in ("run_s", "size", "rate", "cpu", "last_end")}
    done_all = by.take(shards["done"].to_numpy(dtype=bool))
    running_all = by.take(shards["running"].to_numpy(dtype=bool))
    rows = []
    for stage, at in by:
        done = done_all[at]
        run = col["run_s"][at]
        fin = orderstats.partitioned(run[done & (run > 0)], QUANTILES)
        total = max(totals.get(stage, 0), len(done))
        row: dict[str, Any] = {
            "stage": stage,
            "total": total,
            "done": int(done.sum()),
            "running": int(running_all[at].sum()),
            "peers": len(fin),
            **{f"median_{c}": _median(col[c][at][done]) for c in ("size", "rate", "cpu")},
            **dict(zip(("median_s", "p90_s", "p99_s"), orderstats.quantiles(fin, QUANTILES), strict=True)),
        }
        ends = col["last_end"][at][done]
        scale = TICK_SHARE * row["median_s"] if len(fin) else np.nan
        row["run_tick_s"] = float(np.fmax(scale, _resolution(fin)))
        row["tick_s"] = float(np.fmax(scale, _resolution(ends)))
        logs = np.log(fin)
        row["sigma_log"], row["cut_s"] = _cut(fin, logs, row["run_tick_s"], th)
        # a slow-but-normal run (the robust p90): what an outlier is replaced by to see what it held
        normal = np.exp(orderstats.median(logs) + NORMAL_Z * row["sigma_log"])
        row["normal_s"] = float(normal) if len(fin) else np.nan
        row["queue_empty"] = bool(queue_empty.get(stage, row["done"] + row["running"] >= total))
        row["judged"] = bool(len(fin) and row["queue_empty"] and row["done"] >= th.min_finished * total)
        rows.append(row)
    return pd.DataFrame(rows, columns=["stage", *STAGE_STATS]).set_index("stage")


def _resolution(values: np.ndarray) -> float:
    """The time resolution these values were printed at: the coarsest of 1 s (glog prefixes), 0.1 s,
    10 ms (`done in`) and 1 ms (Python logging) that every one of them is a whole multiple of
    (0 without values or finer)."""
    v = values[~np.isnan(values)]
    for unit in RESOLUTIONS:
        if len(v) and _multiples(v[:PROBE], unit) and _multiples(v, unit):
            return unit
    return 0.0


def _multiples(v: np.ndarray, unit: float) -> bool:
    return bool(np.all(np.abs(v / unit - np.round(v / unit)) < 0.01))


def _cut(fin: np.ndarray, logs: np.ndarray, tick: float, th: Thresholds) -> tuple[float, float]:
    """(robust sigma of log run time, the run time above which a shard is an outlier); `fin`
    partitioned at its median (`orderstats.partitioned`), `logs` its logarithms."""
    if not len(fin):
        return np.nan, np.nan
    median = orderstats.median(fin)
    floors = [th.multiplier * median, median + th.min_excess_heartbeats * np.nan_to_num(tick)]
    dev = np.abs(logs - orderstats.median(logs))
    # Half the shards or more ran the very same time: their spread is below the printed
    # resolution, and a mean deviation would be the outliers' own; the floors decide then.
    sigma = float(np.median(dev)) * MAD_TO_SIGMA
    if len(fin) < MIN_ROBUST_PEERS:
        return sigma, max(floors)
    z = max(th.outlier_z, NormalDist().inv_cdf(1 - th.false_rate / len(fin)))
    floors.append(float(np.exp(orderstats.median(logs) + z * sigma)))
    return sigma, max(floors)


def held(shards: pd.DataFrame, stats: pd.DataFrame, now: float) -> pd.DataFrame:
    """Adds to the shard table: `own_s` (the newest attempt's run time, so far when running),
    `outlier`, `end` (its end, or now while unfinished), `expected_end` of its stage (its finished
    outliers run a normal time, an unfinished shard stopped at the cut), `held_s` (how long it
    kept the stage open past that) and `last_s` (how long after every other shard of its stage it
    ended; 0 unless it ended last) and `allow_s` (cut - median: the lateness an outlier is allowed
    before it counts)."""
    cut = shards["stage"].map(stats["cut_s"]).astype(float).to_numpy()
    running = shards["running"].to_numpy(dtype=bool)
    done = shards["done"].to_numpy(dtype=bool)
    start = shards["start"].to_numpy(dtype=float)
    own = np.where(running, now - start, shards["secs"].to_numpy(dtype=float))
    last_end = shards["last_end"].to_numpy(dtype=float)
    start = np.where(np.isnan(start), last_end - own, start)
    end = np.where(done & ~running, np.where(np.isnan(last_end), start + own, last_end), now)
    first = shards["first_start"].to_numpy(dtype=float)
    outlier = own > cut
    normal = shards["stage"].map(stats["normal_s"]).astype(float).to_numpy()
    # The stage's end had its outliers run a normal (p90) time: a finished outlier from its last start,
    # the other finished shards as they ended, an unfinished shard from its first start up to the cut.
    finished = done & ~running
    capped = np.where(
        finished & outlier,
        start + np.fmin(own, normal),
        np.where(finished, end, first + np.fmin(now - first, np.where(np.isnan(cut), now - first, cut))),
    )
    by = stage_slices(shards["stage"])
    stage = by.code
    expected = by.max(capped)[stage]
    top = by.max(end)
    # the latest end among the others: the stage's top end with the one shard holding it left out
    hit = np.flatnonzero(end == top[stage])
    first = hit[np.unique(stage[hit], return_index=True)[1]]
    is_top = np.zeros(len(end), dtype=bool)
    is_top[first] = True
    second = by.max(np.where(is_top, np.nan, end))[stage]
    top = top[stage]
    allowance = cut - shards["stage"].map(stats["median_s"]).astype(float).to_numpy()
    tick = shards["stage"].map(stats["tick_s"]).astype(float).to_numpy()
    out = shards.assign(own_s=own, outlier=outlier, end=end, expected_end=expected, allow_s=allowance, tick_s=tick)
    # A running outlier in a tail holds its stage from its cut on, whatever else still runs.
    past_cut = np.where(running & (own > cut), now - (start + cut), 0.0)
    out["held_s"] = np.fmax(np.clip(np.nan_to_num(end - expected), 0, None), np.nan_to_num(past_cut))
    out["last_s"] = np.where(is_top & (end == top) & ~np.isnan(second), np.nan_to_num(end - second), 0.0)
    return out


def _median(values: np.ndarray) -> float:
    """The median of the numbers among `values` (NaN when none)."""
    v = values[~np.isnan(values)]
    return float(np.median(v)) if len(v) else np.nan
