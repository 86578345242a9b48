"""Sampling overhead of `zdebug profile` (py-spy at 100 Hz, --idle) on a reference worker.

One inline worker runs one endless CPU-bound shard (fixed work per chunk: build, group, score).
Windows with and without py-spy alternate on that same worker; the work rate is the shard's
item progress from the coordinator's /workers (heartbeat samples, timestamped by last_seen_ago).
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from zephyr_debug.profile import pyspy
from zephyr_debug.reference import CoordinatorConfig, Job, JobConfig, StageSpec
from zephyr_debug.sources.live import fetch

RATE_HZ = 100
TARGET_PCT = 5.0


def _progress(job: Job, worker: str) -> tuple[float, int]:
    """(time of the worker's last heartbeat, items done in its shard then)."""
    w = fetch(job.url, "/workers")[worker]
    return time.time() - float(w["last_seen_ago"]), int(w.get("items") or 0)


def _window(job: Job, worker: str, seconds: float) -> tuple[float, int]:
    t0, i0 = _progress(job, worker)
    time.sleep(seconds)
    t1, i1 = _progress(job, worker)
    return t1 - t0, i1 - i0


def run(quick: bool = False) -> dict:
    rounds, window = (2, 2) if quick else (6, 3)
    work = {"rows": 10**9, "chunk_rows": 2000, "chunk_seconds": 0.0}
    config = JobConfig(workers=1, runner="inline", stages=[StageSpec("Map", 1, work)], root=Path(tempfile.mkdtemp()),
                       coordinator=CoordinatorConfig(heartbeat_interval=0.1, heartbeat_timeout=10.0,
                                                     status_interval=1.0), deadline_s=600)
    job = Job(config).start()
    threading.Thread(target=job.wait, daemon=True).start()
    try:
        while not any(w.get("items") for w in fetch(job.url, "/workers").values()):
            time.sleep(0.1)
        worker, info = next(iter(fetch(job.url, "/workers").items()))
        off = on = (0.0, 0)
        for _ in range(rounds):
            dt, n = _window(job, worker, window)
            off = (off[0] + dt, off[1] + n)
            spy = threading.Thread(target=pyspy.record, args=(info["pid"], config.root / "bench.speedscope.json"),
                                   kwargs={"duration_s": window + 2, "rate": RATE_HZ})
            spy.start()
            time.sleep(1.0)  # py-spy attached and sampling
            dt, n = _window(job, worker, window)
            on = (on[0] + dt, on[1] + n)
            spy.join()
    finally:
        job.coordinator._abort("benchmark finished")
    rate_off, rate_on = off[1] / off[0], on[1] / on[0]
    ratio = rate_on / rate_off
    overhead = (1 - ratio) * 100
    return {"profile_overhead_100hz": {
        "value": round(overhead, 2), "unit": "% slower while sampled", "baseline": "same worker, not sampled (items/s)",
        "baseline_value": round(rate_off, 1), "ratio": round(ratio, 4), "target": f"< {TARGET_PCT:g} %",
        "meets": overhead < TARGET_PCT}}


if __name__ == "__main__":
    print(run())
