"""Sampling overhead of `zdebug profile` (py-spy at 100 Hz, --idle) on a reference worker.

One inline worker runs one endless CPU-bound shard (fixed work per chunk: build, group, score).
Unsampled windows alternate with windows sampled by py-spy, non-blocking (the default) and
`--blocking` (the worker is paused for each sample), on that same worker. The work rate is the
shard's item progress from the coordinator's /workers (heartbeat samples, timestamped by
last_seen_ago); each window is compared with the unsampled windows on either side. Control
windows (the same timing, nobody sampling) carry the machine's own drift and the bias of the
window's place; the overhead is sampled against control. py-spy's own CPU share is reported.
Items per worker CPU-second is reported too: on a host shared with other load, the wall-clock
ratio also measures the scheduler (a worker paused for a sample waits for py-spy to run again).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil

from zephyr_debug.profile import pyspy
from zephyr_debug.reference import CoordinatorConfig, Job, JobConfig, StageSpec
from zephyr_debug.sources.live import fetch

RATE_HZ = 100
TARGET_PCT = 5.0


def _progress(job: Job, worker: str) -> tuple[float, int, float]:
    """(time of the worker's last heartbeat, items done in its shard then, its CPU seconds so far)."""
    w = fetch(job.url, "/workers")[worker]
    cpu = psutil.Process(w["pid"]).cpu_times()
    return time.time() - float(w["last_seen_ago"]), int(w.get("items") or 0), cpu.user + cpu.system


def _window(job: Job, worker: str, seconds: float) -> tuple[float, int, float]:
    """(wall seconds, items, worker CPU seconds) over one window."""
    t0, i0, c0 = _progress(job, worker)
    time.sleep(seconds)
    t1, i1, c1 = _progress(job, worker)
    return t1 - t0, i1 - i0, c1 - c0


def run(quick: bool = False) -> dict:
    rounds, window = (1, 2) if quick else (9, 3)
    work = {"rows": 10**9, "chunk_rows": 500, "chunk_seconds": 0.0}  # ~100 chunks a window
    config = JobConfig(
        workers=1,
        runner="inline",
        stages=[StageSpec("Map", 1, work)],
        root=Path(tempfile.mkdtemp()),
        coordinator=CoordinatorConfig(heartbeat_interval=0.1, heartbeat_timeout=10.0, status_interval=1.0),
        deadline_s=600,
    )
    job = Job(config).start()
    threading.Thread(target=job.wait, daemon=True).start()
    modes = ["blocking", "nonblocking", "control"] * rounds
    sampled, off = [], []
    spy_cpu = {mode: [] for mode in modes}
    try:
        while not any(w.get("items") for w in fetch(job.url, "/workers").values()):
            time.sleep(0.1)
        worker, info = next(iter(fetch(job.url, "/workers").items()))
        for mode in modes:  # unsampled and sampled windows alternate: off, B, off, N, off, C, ..., off
            off.append(_window(job, worker, window))
            spy = threading.Thread(
                target=pyspy.record,
                args=(info["pid"], config.root / f"{mode}.speedscope.json"),
                kwargs={"duration_s": window + 2, "rate": RATE_HZ, "nonblocking": mode == "nonblocking"},
            )
            before = _children_cpu()
            if mode != "control":  # control: the same window unsampled, the machine's own noise
                spy.start()
            time.sleep(1.0)  # py-spy attached and sampling
            sampled.append(_window(job, worker, window))
            if mode != "control":
                spy.join()
            spy_cpu[mode].append((_children_cpu() - before) / (window + 2))
        off.append(_window(job, worker, window))
    finally:
        job.coordinator._abort("benchmark finished")
    rate_off = [n / dt for dt, n, _ in off]
    per_cpu_off = [n / cpu for _, n, cpu in off]
    # each sampled window against the mean of the unsampled windows on either side (load drifts)
    ratios = {mode: [] for mode in modes}
    cpu_ratios = {mode: [] for mode in modes}
    for i, (mode, (dt, n, cpu)) in enumerate(zip(modes, sampled, strict=True)):
        ratios[mode].append((n / dt) / statistics.mean(rate_off[i : i + 2]))
        cpu_ratios[mode].append((n / cpu) / statistics.mean(per_cpu_off[i : i + 2]))
    control = statistics.median(ratios["control"])
    out = {}
    for mode, flag in (("blocking", " --blocking"), ("nonblocking", "")):
        # Sampled windows against control windows of the same timing: what is left is py-spy.
        ratio = statistics.median(ratios[mode]) / control
        overhead = (1 - ratio) * 100
        out[f"profile_overhead_100hz_{mode}"] = {
            "value": round(overhead, 2),
            "unit": f"% slower while sampled (zdebug profile{flag}) than in unsampled "
            f"control windows, medians of {rounds}; vs the windows between: "
            f"{(1 - statistics.median(ratios[mode])) * 100:+.2f} %, control "
            f"{(1 - control) * 100:+.2f} %",
            "baseline": "same worker, unsampled control windows (items/s)",
            "baseline_value": round(
                statistics.median(n / dt for m, (dt, n, _) in zip(modes, sampled, strict=True) if m == "control"), 1
            ),
            "ratio": round(ratio, 4),
            "target": f"< {TARGET_PCT:g} %",
            "meets": overhead < TARGET_PCT,
            "ratios": [round(r, 3) for r in ratios[mode]],
            "control_ratios": [round(r, 3) for r in ratios["control"]],
            "items_per_cpu_second_ratio": round(statistics.median(cpu_ratios[mode]), 4),
            "pyspy_cpu_share": round(statistics.median(spy_cpu[mode]), 4),
            "loadavg_1m": round(os.getloadavg()[0], 1),
            "cpus": os.cpu_count(),
        }
    return out


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (py-spy, once joined)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
