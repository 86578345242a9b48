"""How fast each shard ran against its stage, and how fast its worker runs its other shards."""

from __future__ import annotations

import numpy as np
import pandas as pd

from zephyr_debug.analyze.thresholds import MIN_WORKER_SHARDS


def add_speed(shards: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    """Adds `size_ratio`, `rate_ratio`, `cpu_ratio` (to the stage medians), `speed` (rate ratio,
    or median / run time without item counts), and per shard the speed of its worker on its OTHER
    finished shards (`worker_speed`, geometric mean) and how many those are (`worker_shards`)."""

    def per_stage(col: str) -> np.ndarray:
        return shards["stage"].map(stats[col]).astype(float).to_numpy()

    done = shards["done"].to_numpy(dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore"):
        size_ratio = shards["size"].to_numpy(dtype=float) / per_stage("median_size")
        rate_ratio = shards["rate"].to_numpy(dtype=float) / per_stage("median_rate")
        cpu_ratio = shards["cpu"].to_numpy(dtype=float) / per_stage("median_cpu")
        own = shards["own_s"].to_numpy(dtype=float)
        speed = np.where(np.isnan(rate_ratio), per_stage("median_s") / own, rate_ratio)
        log = np.where(done & (speed > 0), np.log(np.where(speed > 0, speed, 1.0)), np.nan)
    code = shards["worker"].cat.codes.to_numpy() if hasattr(shards["worker"], "cat") else np.full(len(shards), -1)
    n_workers = int(code.max()) + 1 if len(code) else 0
    mine = ~np.isnan(log) & (code >= 0)
    total = np.bincount(code[mine], weights=log[mine], minlength=n_workers)
    count = np.bincount(code[mine], minlength=n_workers)
    known = code >= 0
    pick = np.where(known, code, 0)
    others = np.where(known, count[pick] - mine, 0) if n_workers else np.zeros(len(shards), dtype=int)
    with np.errstate(invalid="ignore", divide="ignore"):
        worker_speed = (
            np.where(others > 0, np.exp((total[pick] - np.where(mine, log, 0.0)) / others), np.nan)
            if n_workers
            else np.full(len(shards), np.nan)
        )
    return shards.assign(
        size_ratio=size_ratio,
        rate_ratio=rate_ratio,
        cpu_ratio=cpu_ratio,
        speed=speed,
        worker_speed=worker_speed,
        worker_shards=others,
    )


def slow_workers(shards: pd.DataFrame, stats: pd.DataFrame, covered_workers: set[str], th) -> list:
    """Workers whose finished shards all run slow: mean log speed at or below `slow_worker_speed`
    and z robust standard errors below the stage, z raised (Bonferroni) with the number of workers
    so natural spread over a few shards is not enough. Information: none of its shards held a
    stage up (those are straggler findings), so it costs throughput, not a tail."""
    from statistics import NormalDist

    from zephyr_debug.findings import INFO, Finding

    code = shards["worker"].cat.codes.to_numpy() if hasattr(shards["worker"], "cat") else np.full(len(shards), -1)
    speed = shards["speed"].to_numpy(dtype=float)
    mine = shards["done"].to_numpy(dtype=bool) & (code >= 0) & (speed > 0)
    if not mine.any():
        return []
    sigma = shards["stage"].map(stats["sigma_log"]).astype(float).to_numpy()
    var = np.square(np.where(sigma > 0, sigma, np.nan))
    names = shards["worker"].cat.categories
    n_workers = len(names)
    n = np.bincount(code[mine], minlength=n_workers)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(code[mine], weights=np.log(speed[mine]), minlength=n_workers) / n
        mean_var = np.bincount(code[mine], weights=np.nan_to_num(var[mine]), minlength=n_workers) / n
        zscore = mean * np.sqrt(n) / np.sqrt(mean_var)
    enough = n >= MIN_WORKER_SHARDS + 1  # a worker judged on its own needs two shards at least
    z = max(th.outlier_z, NormalDist().inv_cdf(1 - th.false_rate / max(int(enough.sum()), 1)))
    slow = pd.DataFrame({"n": n, "mean": mean}, index=names)[
        enough & (mean <= np.log(th.slow_worker_speed)) & (zscore <= -z)
    ]
    out = []
    for worker, r in slow.iterrows():
        if worker in covered_workers:
            continue
        out.append(
            Finding(
                kind="slow-worker",
                causes=("slow-worker",),
                severity=INFO,
                worker=str(worker),
                title=f"worker {worker} runs its shards at {np.exp(r['mean']):.2f}x the stage speed",
                evidence=(
                    f"{int(r['n'])} finished shard(s), geometric mean speed {np.exp(r['mean']):.2f}x; "
                    "none of them held a stage up, so it costs throughput, not a tail",
                ),
            )
        )
    return out
