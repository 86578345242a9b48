"""For `zdebug report` tests and benchmark: a generated job of production size (default 5,000
shards x 200 workers) and a headless Debian chromium that loads a page with no network."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

from zephyr_debug.model import ATTEMPT_COLUMNS, SAMPLE_COLUMNS, STATUS_COLUMNS, Evidence, StageInfo

T0 = 1_800_000_000.0
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def big_evidence(shards: int = 5_000, workers: int = 200, heartbeat: float = 2.0, status_every: float = 1.0,
                 straggler: int = 4_321, seed: int = 7) -> Evidence:
    """One stage; shard i runs on worker i % workers back to back; `straggler` takes 12x the
    median; every 97th shard fails once (task) and succeeds on a later attempt."""
    rng = np.random.default_rng(seed)
    secs = rng.lognormal(np.log(30), 0.2, shards)
    secs[straggler] *= 12
    shard = np.arange(shards)
    worker = shard % workers
    failed = shard[(shard % 97 == 5) & (shard != straggler)]
    # Each worker's queue: its shards, then the retries of its failed ones.
    runs = pd.DataFrame({"shard": np.r_[shard, failed], "attempt": np.r_[np.zeros(shards, int), np.ones(len(failed), int)],
                         "secs": np.r_[secs, secs[failed]], "worker": np.r_[worker, (failed + 1) % workers]})
    runs["secs"] = runs["secs"].where(~((runs["attempt"] == 0) & runs["shard"].isin(failed)), runs["secs"] / 3)
    runs = runs.sort_values(["worker", "attempt", "shard"], kind="stable")
    runs["end"] = T0 + runs.groupby("worker")["secs"].cumsum()
    runs["start"] = runs["end"] - runs["secs"]
    bad = (runs["attempt"] == 0) & runs["shard"].isin(failed)
    names = np.array([f"zephyr-job-p0-workers-{w}" for w in range(workers)])
    attempts = pd.DataFrame({
        "stage": "Map", "shard": runs["shard"], "attempt": runs["attempt"], "worker": names[runs["worker"]],
        "start_ts": runs["start"], "end_ts": runs["end"], "outcome": np.where(bad, "failed", "done"),
        "kind": np.where(bad, "task", None), "elapsed_s": runs["secs"], "items": 1000.0, "bytes": 5e4,
        "error": np.where(bad, "ValueError: bad record", None)}).reindex(columns=ATTEMPT_COLUMNS)
    end = float(runs["end"].max())
    ts = np.arange(T0, end + status_every, status_every)
    starts, ends = np.sort(runs["start"].to_numpy()), np.sort(runs["end"][~bad].to_numpy())
    completed = np.searchsorted(ends, ts, side="right")
    started = np.searchsorted(starts, ts, side="right")
    ended_all = np.searchsorted(np.sort(runs["end"].to_numpy()), ts, side="right")
    status = pd.DataFrame({"ts": ts, "stage": "Map", "completed": completed, "total": shards,
                           "in_flight": started - ended_all, "queue_depth": np.maximum(shards - completed - (started - ended_all), 0),
                           "retries": 0, "alive": workers, "registered": workers, "dead": 0}).reindex(columns=STATUS_COLUMNS)
    hb = np.arange(T0, end, heartbeat)
    w = np.repeat(np.arange(workers), len(hb))
    t = np.tile(hb, workers)
    samples = pd.DataFrame({"ts": t, "worker": names[w], "stage": "Map",
                            "rss_bytes": (200 + 50 * np.sin(t / 60 + w) + w) * 2**20,
                            "disk_bytes": (t - T0) * 1e4 * (1 + w % 5)}).reindex(columns=SAMPLE_COLUMNS)
    workers_frame = pd.DataFrame({"worker": names, "state": "done", "last_seen_ago": 1.0})
    return Evidence(job="big-job", source="<generated>", now=end, state="succeeded",
                    stages=[StageInfo("Map", 0, shards, T0, end)], status=status, attempts=attempts,
                    samples=samples, workers=workers_frame, config={"heartbeat_interval": heartbeat})


def chromium(page: Path, workdir: Path, timeout: float = 300) -> tuple[str, str, Path, float]:
    """Load `page` from file:// in a fresh profile: (DOM after the scripts ran, browser log
    with console messages, screenshot path, seconds)."""
    if not Path(CHROMIUM).exists():
        raise FileNotFoundError("chromium is missing (apt-get install chromium; .ci/run does)")
    shot = workdir / f"{page.stem}.png"
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={workdir / (page.stem + '-profile')}", "--enable-logging=stderr", "--v=0",
            "--window-size=1400,2400", f"--screenshot={shot}", "--dump-dom", page.resolve().as_uri()]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout, proc.stderr, shot, seconds


def draw_ms(dom: str) -> float | None:
    """The page's own measure of drawing its charts (its footer), None if they were not all drawn."""
    found = re.search(r'id="render-ms">(\d+) ms', dom)
    return float(found.group(1)) if found else None
