"""What to profile: a pid, a worker of a live job (pid from the coordinator's /workers), or
the worker holding a job's longest-running in-flight shard (the straggler)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import live, load


@dataclass
class Target:
    pid: int
    worker: str | None = None
    job_dir: Path | None = None
    runner: str | None = None  # inline | subprocess: the shard runs in a child with the latter
    shard: int | None = None
    elapsed_s: float | None = None  # how long that shard has been running

    @property
    def label(self) -> str:
        return f"worker {self.worker} (pid {self.pid})" if self.worker else f"pid {self.pid}"


def resolve(target: str | None, job: str | None = None, straggler: str | None = None) -> Target:
    if straggler:
        return _straggler(straggler)
    if not target:
        raise ZdebugError("give a pid, a worker id with --job JOB, or --straggler JOB")
    if target.isdigit():
        return Target(int(target))
    if not job:
        raise ZdebugError(f"{target}: not a pid; a worker id needs --job JOB (the live job it belongs to)")
    url, job_dir, runner = _job_info(job)
    return _worker(url, target, job_dir, runner)


def _job_info(job: str) -> tuple[str, Path | None, str | None]:
    """(coordinator URL, job dir, runner) from a URL or the job dir's job_start event."""
    if job.startswith(("http://", "https://")):
        info = live.fetch(job, "/job")
        return job, Path(info["job_dir"]) if info.get("job_dir") else None, info.get("runner")
    job_dir = jobstore.resolve_job(job)
    start = next((e for e in jobstore.read_events(job_dir / jobstore.EVENTS, []) if e["type"] == "job_start"), None)
    if not start or not start.get("url"):
        raise ZdebugError(f"{job_dir / jobstore.EVENTS}:1: no job_start event with the coordinator url")
    return start["url"], job_dir, start.get("runner")


def _worker(url: str, worker: str, job_dir: Path | None, runner: str | None, **extra) -> Target:
    try:
        workers = live.fetch(url, "/workers")
    except ZdebugError as exc:
        raise ZdebugError(f"job is not running, cannot reach its workers: {exc.message}") from None
    info = workers.get(worker)
    if info is None:
        known = ", ".join(sorted(workers)[:5]) or "none"
        raise ZdebugError(f"{worker}: no such worker in the job at {url} (workers: {known})")
    if not info.get("pid"):
        raise ZdebugError(f"{worker}: the coordinator knows no pid for it (state {info.get('state')})")
    return Target(int(info["pid"]), worker, job_dir, runner, **extra)


def _straggler(job: str) -> Target:
    """The worker holding the in-flight attempt that has run longest."""
    ev = load(job)
    running = ev.attempts[ev.attempts["outcome"] == "running"]
    if ev.state != "running" or running.empty:
        raise ZdebugError(f"{job}: no shard in flight (job state {ev.state}); nothing to profile")
    now = ev.now or time.time()
    worst = running.assign(age=now - running["start_ts"].astype(float)).sort_values("age").iloc[-1]
    url, job_dir, runner = _job_info(job)
    return _worker(url, str(worst["worker"]), job_dir, runner, shard=int(worst["shard"]),
                   elapsed_s=round(float(worst["age"]), 2))
