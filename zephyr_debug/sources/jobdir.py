"""Job dir source: rebuild an `Evidence` from `events.jsonl` (+ crash files).

A job without `job_end` is `running` when the coordinator the job store recorded for it (never a
url or pid from the evidence) still answers as this job, otherwise `interrupted` (the coordinator
was killed). A truncated last line is skipped and reported.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import urlsplit

import pandas as pd

from zephyr_debug import jobstore
from zephyr_debug.errors import ZdebugError
from zephyr_debug.model import (
    ATTEMPT_COLUMNS,
    JOB_STATES,
    SAMPLE_COLUMNS,
    STATUS_COLUMNS,
    WORKER_COLUMNS,
    Crash,
    Evidence,
    StageInfo,
    frame,
)
from zephyr_debug.sources import http

FAILURE_KIND = {"exception": "task", "oom": "oom", "segv": "segv", "exit": "exit"}
MAX_CRASH_TEXT = 1 << 20
CHURN = {"re-registered": "reregistered", "heartbeat timeout": "heartbeat-timeout"}  # worker_state reason -> event
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}  # 0.0.0.0: `zdebug demo --host 0.0.0.0`


def load(job_dir: Path) -> Evidence:
    warnings: list[str] = []
    events = list(jobstore.read_events(job_dir / jobstore.EVENTS, warnings))
    ev = Evidence(job=job_dir.name, source=str(job_dir), now=events[-1]["ts"] if events else 0.0, warnings=warnings)
    status_rows: list[dict] = []
    samples: list[dict] = []
    attempts: dict[tuple, dict] = {}
    workers: dict[str, dict] = {}
    stages: dict[str, StageInfo] = {}
    oom_killed: dict[str, float] = {}  # worker -> time its process (tree) was last OOM-killed
    ended = False
    for e in events:
        kind, ts = e["type"], e["ts"]
        if kind == "job_start":
            ev.job = e.get("execution_id", ev.job)
            ev.config = {
                **e.get("config", {}),
                "runner": e.get("runner"),
                "url": e.get("url"),
                "memory_limit_mb": e.get("memory_limit_mb"),
                "faults": e.get("faults", []),
            }
        elif kind == "stage_start":
            stages[e["stage"]] = StageInfo(e["stage"], e["index"], e["total"], start_ts=ts)
            ev.progress_time = ts
        elif kind == "stage_end" and e["stage"] in stages:
            stages[e["stage"]].end_ts = ts
        elif kind == "status":
            status_rows.append(e)
            ev.progress_time = e.get("progress_time", ev.progress_time)
        elif kind == "assign":
            attempts[(e["stage"], e["shard"], e["attempt"])] = {
                "stage": e["stage"],
                "shard": e["shard"],
                "attempt": e["attempt"],
                "worker": e["worker"],
                "start_ts": ts,
                "outcome": "running",
            }
            _worker(workers, e["worker"], ts)["shard"] = e["shard"]
        elif kind in ("shard_done", "shard_failed"):
            row = attempts.setdefault(
                (e["stage"], e["shard"], e["attempt"]),
                {"stage": e["stage"], "shard": e["shard"], "attempt": e["attempt"], "worker": e["worker"]},
            )
            row.update(
                end_ts=ts,
                items=e.get("items"),
                bytes=e.get("bytes"),
                returncode=e.get("returncode"),
                peak_rss_bytes=e.get("peak_rss_bytes"),
                crash_file=e.get("crash_file"),
                counters=e.get("counters"),
            )
            start = row.get("start_ts")
            row["elapsed_s"] = e.get("elapsed_s") or (ts - start if start else None)
            if kind == "shard_done":
                row["outcome"] = "done"
                ev.progress_time = ts
            else:
                row.update(
                    outcome="failed",
                    kind=e["kind"],
                    error=e.get("error"),
                    failure=e.get("failure"),
                    reason=e.get("reason"),
                )
                if e["kind"] == "infra" and oom_killed.get(e["worker"], -1.0) >= (start or 0.0):
                    row["failure"] = "oom"  # the OOM killer took the worker while it held this attempt
            worker = _worker(workers, e["worker"], ts)
            if worker.get("shard") == e["shard"]:
                worker["shard"] = None
        elif kind == "heartbeat":
            samples.append(
                {
                    "ts": ts,
                    "worker": e["worker"],
                    "stage": e.get("stage"),
                    "shard": e.get("shard"),
                    "items": e.get("items"),
                    "bytes": e.get("bytes"),
                    "rss_bytes": e.get("rss_bytes"),
                    "rss_peak_bytes": e.get("rss_peak_bytes"),
                    "cpu_pct": e.get("cpu_pct"),
                    "disk_bytes": e.get("disk_bytes"),
                }
            )
            w = _worker(workers, e["worker"], ts)
            w.update(
                pid=e.get("pid", w.get("pid")),
                rss=e.get("rss_bytes"),
                peak=e.get("rss_peak_bytes"),
                disk=e.get("disk_bytes"),
                cpu=e.get("cpu_pct"),
            )
        elif kind in ("worker_registered", "worker_state"):
            w = _worker(workers, e["worker"], ts)
            w["state"] = e.get("state", "active")
            w["pid"] = e.get("pid", w.get("pid"))
            if e.get("reason") == "re-registered":
                w["shard"] = None
            churn = "registered" if kind == "worker_registered" else CHURN.get(str(e.get("reason")))
            if churn:
                ev.worker_events.append((ts, e["worker"], churn))
        elif kind == "oom_kill":
            oom_killed[e["worker"]] = ts
        elif kind == "abort":
            ev.fatal_error = e.get("fatal_error")
        elif kind == "job_end":
            ended = True
            state = e.get("state")
            ev.state = state if state in JOB_STATES else "unknown"
            if ev.state != state:
                shown = str(state)[:80]
                ev.warnings.append(f"events.jsonl: job_end state {shown!r} is not one of {', '.join(JOB_STATES)}")
    ev.stages = sorted(stages.values(), key=lambda s: s.index)
    ev.status = frame(status_rows, STATUS_COLUMNS)
    ev.attempts = frame(list(attempts.values()), ATTEMPT_COLUMNS)
    ev.samples = frame(samples, SAMPLE_COLUMNS)
    if not ended:
        running = _running(job_dir, ev.job)
        ev.state = "running" if running else "interrupted"
        if running:
            ev.now = time.time()
    ev.workers = _worker_frame(workers, ev.now)
    ev.crashes = _crashes(ev.attempts, job_dir, warnings)
    return ev


def _worker(workers: dict[str, dict], worker_id: str, ts: float) -> dict:
    w = workers.setdefault(worker_id, {"worker": worker_id, "state": "active"})
    w["last_seen"] = ts
    return w


def _worker_frame(workers: dict[str, dict], now: float) -> pd.DataFrame:
    rows = [
        {
            "worker": w["worker"],
            "state": w["state"],
            "last_seen_ago": round(now - w["last_seen"], 3),
            "pid": w.get("pid"),
            "memory_mb": _mb(w.get("rss")),
            "memory_peak_mb": _mb(w.get("peak")),
            "disk_mb": _mb(w.get("disk")),
            "cpu": w.get("cpu"),
            "shard": w.get("shard"),
        }
        for w in workers.values()
    ]
    return frame(rows, WORKER_COLUMNS)


def _mb(value) -> float | None:
    return None if value is None else round(value / (1 << 20), 2)


def _crashes(attempts: pd.DataFrame, job_dir: Path, warnings: list[str]) -> list[Crash]:
    """One Crash per failed attempt: the crash file's text, or (infra) the reason alone."""
    crashes = []
    failed = attempts[attempts["outcome"] == "failed"]
    for row in failed.itertuples(index=False):
        text, source = row.error or "", str(job_dir / jobstore.EVENTS)
        if isinstance(row.crash_file, str) and row.crash_file:
            path = _inside(job_dir, row.crash_file)
            if path is None:
                where = (
                    "missing"
                    if (job_dir / row.crash_file).resolve().is_relative_to(job_dir.resolve())
                    else "outside the job dir"
                )
                warnings.append(f"{row.crash_file}: crash file {where}, ignored")
            else:
                try:
                    with open(path, "rb") as fh:
                        text = fh.read(MAX_CRASH_TEXT).decode("utf-8", errors="replace")
                    source = str(path)
                except OSError as exc:
                    warnings.append(f"{path}: crash file unreadable ({exc.strerror})")
        kind = row.kind if row.kind == "infra" else FAILURE_KIND.get(row.failure, "task")
        crashes.append(
            Crash(
                text=text,
                source=source,
                stage=row.stage,
                shard=int(row.shard),
                attempt=int(row.attempt),
                worker=row.worker,
                kind=kind,
                ts=row.end_ts,
            )
        )
    return crashes


def _inside(job_dir: Path, name: str) -> Path | None:
    """`name` resolved inside job_dir, else None. Workers record the path as they saw it
    (absolute, or relative to their cwd); a job dir may have moved since: the part from
    `crashes/` on is tried inside job_dir too."""
    root = job_dir.resolve()
    path = Path(name)
    candidates = [path] if path.is_absolute() else [job_dir / path]
    if "crashes" in path.parts:
        candidates.append(job_dir / Path(*path.parts[path.parts.index("crashes") :]))
    for candidate in candidates:
        resolved = candidate.resolve()
        if resolved.is_relative_to(root) and resolved.is_file():
            return resolved
    return None


def _running(job_dir: Path, job: str) -> bool:
    """Is the job's coordinator still up, as this job? Asked only of the coordinator the job store
    recorded for this dir when it started the job (`jobstore.record_coordinator`), on this machine:
    the url and pid in events.jsonl are evidence, and evidence never makes zdebug call out."""
    record = jobstore.recorded_coordinator(job_dir)
    if record is None or record.get("execution_id") != job or not _pid_alive(record["pid"]):
        return False
    url = record["url"]
    if urlsplit(url).hostname not in LOCAL_HOSTS:
        return False
    try:
        return http.get_json(url + "/job", timeout=1.0).get("execution_id") == job
    except (ZdebugError, AttributeError):
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
