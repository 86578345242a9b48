"""Workers ranked by memory, disk or CPU, with robust outlier marks (median / MAD)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from zephyr_debug.errors import UsageError
from zephyr_debug.findings import SCHEMA_VERSION
from zephyr_debug.model import ALIVE_STATES, Evidence

# Our column <- the spellings seen in the wild, first present wins (value x scale).
SPELLINGS: dict[str, list[tuple[str, float]]] = {
    "memory_mb": [("memory_mb", 1.0), ("memoryMb", 1.0)],
    "memory_peak_mb": [("memory_peak_mb", 1.0), ("memoryPeakMb", 1.0)],
    "disk_mb": [("disk_mb", 1.0), ("diskMb", 1.0)],
    "cpu": [("cpu", 1.0), ("cpuPercent", 1.0), ("cpu_millicores", 0.1), ("cpuMillicores", 0.1)],  # % of a core
}
SORT_KEYS = {"memory": ["memory_peak_mb", "memory_mb"], "disk": ["disk_mb"], "cpu": ["cpu"]}
OUTLIER_Z = 3.5  # modified z-score (Iglewicz & Hoaglin)


def normalize(workers: pd.DataFrame) -> pd.DataFrame:
    """The resource columns under our names, as numbers (some sources send strings)."""
    out = workers.copy()
    for col in ("state", "last_seen_ago"):
        if col not in out:
            out[col] = None
    for name, spellings in SPELLINGS.items():
        value = pd.Series(np.nan, index=out.index, dtype=float)
        for col, scale in spellings:
            if col in out:
                value = value.fillna(pd.to_numeric(out[col], errors="coerce") * scale)
        out[name] = value
    return out


def robust_z(values: pd.Series) -> pd.Series:
    """0.6745 (x - median) / MAD; with MAD = 0 the mean absolute deviation (x 1.2533) stands in."""
    med = values.median()
    dev = (values - med).abs()
    mad = dev.median()
    if mad > 0:
        return 0.6745 * (values - med) / mad
    mean_ad = dev.mean()
    return (values - med) / (1.253314 * mean_ad) if mean_ad > 0 else values * 0.0


@dataclass(frozen=True)
class WorkerRanking:
    """Workers in the asked order (largest first, unknown values last), one dict of numbers each."""

    job: str
    sort: str
    workers: tuple[dict[str, Any], ...]
    memory_limit_mb: float | None = None

    @property
    def outliers(self) -> int:
        return sum(bool(w["outliers"]) for w in self.workers)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "job": self.job,
            "sort": self.sort,
            "memory_limit_mb": self.memory_limit_mb,
            "workers": list(self.workers),
            "outliers": self.outliers,
        }


def rank(ev: Evidence, sort: str = "memory", limit: int | None = None) -> WorkerRanking:
    """The workers of `ev` by `sort` (memory: peak first, so the OOM-killed worker leads)."""
    if sort not in SORT_KEYS:
        raise UsageError(f"--sort {sort}: choose one of {', '.join(SORT_KEYS)}")
    w = normalize(ev.workers)
    limit_mb = ev.config.get("memory_limit_mb")
    if not len(w):
        return WorkerRanking(ev.job, sort, (), limit_mb)
    w["alive"] = w["state"].isin(ALIVE_STATES)
    held, done = _shards(ev)
    now_held = pd.to_numeric(w["shard"], errors="coerce") if "shard" in w else pd.Series(np.nan, index=w.index)
    w["shards_held"] = [
        sorted(set(h if isinstance(h, list) else []) | ({int(s)} if s == s else set()))
        for h, s in zip(w["worker"].map(held), now_held, strict=True)
    ]
    w["shards_done"] = w["worker"].map(done).fillna(0).astype(int)
    metrics = ["memory_mb", "memory_peak_mb", "disk_mb", "cpu"]
    z = pd.DataFrame({m: robust_z(w[m]) for m in metrics})
    w["outliers"] = [[m for m, high in zip(metrics, row, strict=True) if high] for row in (z > OUTLIER_Z).to_numpy()]
    for m in metrics:
        w[f"z_{m}"] = z[m].round(2)
    w["_peak"] = w["memory_peak_mb"].fillna(w["memory_mb"])  # a peak is at least the current value
    keys = ["_peak" if k == "memory_peak_mb" else k for k in SORT_KEYS[sort]]
    w = w.sort_values(
        keys + ["worker"],
        ascending=[False] * len(SORT_KEYS[sort]) + [True],
        na_position="last",
        kind="stable",
    )
    if limit:
        w = w.head(limit)
    cols = [
        "worker",
        "state",
        "alive",
        "last_seen_ago",
        "memory_mb",
        "memory_peak_mb",
        "disk_mb",
        "cpu",
        "shards_held",
        "shards_done",
        "outliers",
        *[f"z_{m}" for m in metrics],
    ]
    columns = [w[c].tolist() for c in cols]  # native Python values, a column at a time
    rows = tuple(dict(zip(cols, row, strict=True)) for row in zip(*columns, strict=True))
    return WorkerRanking(ev.job, sort, rows, limit_mb)


def _shards(ev: Evidence) -> tuple[pd.Series, pd.Series]:
    """Per worker: shards held now (running attempts) and shards finished."""
    a = ev.attempts
    if not len(a):
        return pd.Series(dtype=object), pd.Series(dtype=int)
    shard = pd.to_numeric(a["shard"], errors="coerce")
    running = (a["outcome"] == "running") & shard.notna() & (ev.state in ("running", "interrupted"))
    held = shard[running].astype(int).groupby(a.loc[running, "worker"]).agg(lambda s: sorted(set(s)))
    done = (a["outcome"] == "done").groupby(a["worker"]).sum()
    return held, done
