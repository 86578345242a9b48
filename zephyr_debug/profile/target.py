"""What to profile: a pid, a worker of a live job (pid from the coordinator's /workers), or
the worker holding a job's worst straggler: the first in-flight shard of `zdebug stragglers`'
findings on a live worker, else the longest-running in-flight shard."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.analyze.analysis import analyze
from zephyr_debug.errors import ZdebugError
from zephyr_debug.model import ALIVE_STATES
from zephyr_debug.sources import live, load


@dataclass
class Target:
    pid: int
    worker: str | None = None
    job_dir: Path | None = None
    runner: str | None = None  # inline | subprocess: the shard runs in a child with the latter
    shard: int | None = None
    elapsed_s: float | None = None  # how long that shard has been running
    why: str | None = None  # why this worker was chosen (--straggler)

    @property
    def label(self) -> str:
        if not self.worker:
            return f"pid {self.pid}"
        why = f", {self.why}: shard {self.shard} running {self.elapsed_s:.1f}s" if self.why else ""
        return f"worker {self.worker} (pid {self.pid}{why})"


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
    ev = load(job)
    running = ev.attempts[ev.attempts["outcome"] == "running"]
    if ev.state != "running" or running.empty:
        raise ZdebugError(f"{job}: no shard in flight (job state {ev.state}); nothing to profile")
    alive = set(ev.workers.loc[ev.workers["state"].isin(ALIVE_STATES), "worker"])
    running = running.assign(age=(ev.now or time.time()) - running["start_ts"].astype(float))
    running = running[running["worker"].isin(alive)].sort_values("age", ascending=False)
    if running.empty:
        raise ZdebugError(f"{job}: no live worker holds an in-flight shard; see `zdebug stragglers {job}`")
    held = {(r.stage, int(r.shard)): r for r in running.itertuples()}
    flagged = [
        (f, held[(f.stage, f.shard)])
        for f in analyze(ev, target=job).problems
        if f.stage is not None and f.shard is not None and (f.stage, f.shard) in held
    ]
    finding, row = flagged[0] if flagged else (None, next(running.itertuples()))
    why = f"straggler ({finding.kind})" if finding else "longest-running in-flight shard"
    url, job_dir, runner = _job_info(job)
    return _worker(
        url, str(row.worker), job_dir, runner, shard=int(row.shard), elapsed_s=round(float(row.age), 2), why=why
    )
