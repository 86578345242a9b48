"""One round of Iris calls for a job (`fetch`) and its files on disk (`save`).

`fetch` asks the controller for the job and its child jobs, their tasks (resource usage from
each task's own worker: the controller's list-tasks lacks it), the endpoints, the job's logs
(children included) and the Zephyr coordinator's `get_status` / `get_counters`. `save` writes
them as `iris rpc` JSON and log text to a new snapshot dir that `evidencedir` reads back, so
the live view and an offline re-run (`zdebug crashes <that dir>`) share the parsers. A new
kind of fetched evidence is one field of `Fetched`, one call in `fetch` and one file in `save`,
as Zephyr's finelog telemetry is (`iris_finelog`).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from zephyr_debug import zephyrlog
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import safe_name
from zephyr_debug.sources import iris_finelog
from zephyr_debug.sources.finelog import Rows
from zephyr_debug.sources.iris_client import IrisClient

KEEP_SNAPSHOTS = 3
PRUNE_AFTER_S = 60.0
COORDINATOR_RE = re.compile(r"-p(\d+)-coord-\d+$")
WORKER_TASK_RE = re.compile(r"-workers(?:-a\d+)?/\d+$")  # a task of a Zephyr worker group job
ATTEMPT_RE = re.compile(r"-p(\d+)-a(\d+)/")


@dataclass
class Fetched:
    """What one round of Iris calls returned (wire-form dicts, as `iris rpc` prints them)."""

    url: str
    job: str
    jobs: list[dict] = field(default_factory=list)
    endpoints: list[dict] = field(default_factory=list)
    tasks: list[dict] = field(default_factory=list)
    logs: list = field(default_factory=list)  # iris TaskLogEntry, oldest first
    status: dict | None = None  # the coordinator's get_status, as plain data
    counters: dict | None = None
    telemetry: Rows | None = None  # Zephyr's finelog rows of the newest execution
    warnings: list[str] = field(default_factory=list)

    @property
    def coordinator(self) -> str | None:
        """The newest Zephyr coordinator endpoint (highest pipeline, then attempt)."""
        names = [e["name"] for e in self.endpoints if COORDINATOR_RE.search(e.get("name", ""))]
        return max(names, key=_attempt_key) if names else None

    def worker_ids(self) -> dict[str, str]:
        """Iris task id -> Zephyr worker id base: the actor endpoint's last component, or, once the
        task finished and its endpoint is gone, fray's actor naming `<group job>-<task index>`."""
        ids = {
            t["task_id"]: "-".join(t["task_id"].rsplit("/", 2)[-2:])
            for t in self.tasks
            if WORKER_TASK_RE.search(t["task_id"])
        }
        ids.update(
            {
                e["task_id"]: e["name"].rsplit("/", 1)[-1]
                for e in self.endpoints
                if e.get("task_id") and not COORDINATOR_RE.search(e["name"])
            }
        )
        return ids


def _attempt_key(name: str) -> tuple[int, int, str]:
    m = ATTEMPT_RE.search(name)
    return (int(m.group(1)), int(m.group(2)), name) if m else (-1, -1, name)


def fetch(url: str, job: str) -> Fetched:
    iris = IrisClient(url)
    got = Fetched(url, job, jobs=iris.jobs(job))
    if not got.jobs:
        raise EvidenceError(f"{url}: Iris job {job} not found (list it with `iris --controller-url {url} job list`)")
    got.endpoints = iris.endpoints(job)
    with ThreadPoolExecutor(max_workers=4) as pool:
        logs = pool.submit(iris.logs, job)
        calls = (
            {m: pool.submit(_try, iris.actor_call, got.coordinator, m) for m in ("get_status", "get_counters")}
            if got.coordinator
            else {}
        )
        task_lists = list(pool.map(iris.tasks, [j["job_id"] for j in got.jobs]))
        got.tasks = [t for tasks in task_lists for t in tasks]
        _add_usage(iris, got)
        got.logs = logs.result()
        got.telemetry = iris_finelog.fetch(iris, [e.data for e in got.logs], got.warnings)
        for method, call in calls.items():
            result = call.result()
            if isinstance(result, Exception):
                got.warnings.append(f"coordinator {method} failed (pipeline finished?): {str(result)[:160]}")
            else:
                setattr(got, method.removeprefix("get_"), result)
    return got


def _add_usage(iris: IrisClient, got: Fetched) -> None:
    """Each task's resource usage, asked of the Iris worker that runs it (16 at a time)."""
    addresses = sorted({t["worker_address"] for t in got.tasks if t.get("worker_address")})
    usage: dict[str, dict] = {}
    failed: list[str] = []
    with ThreadPoolExecutor(max_workers=16) as workers:
        for address, result in zip(
            addresses, workers.map(lambda a: _try(iris.worker_usage, a), addresses), strict=True
        ):
            if isinstance(result, Exception):
                failed.append(f"{address} ({str(result).splitlines()[0][:100]})")
            else:
                usage.update(result)
    if failed:
        got.warnings.append(
            f"{len(failed)} of {len(addresses)} Iris workers unreachable, no resource usage "
            f"for their tasks: {failed[0]}{' …' if len(failed) > 1 else ''}"
        )
    for task in got.tasks:
        if task["task_id"] in usage:
            task["resource_usage"] = usage[task["task_id"]]


def _try(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # one unreachable worker must not hide the others
        return exc


def save(got: Fetched, root: Path) -> Path:
    """The fetched evidence as files `evidencedir` reads: one new snapshot dir per fetch, so
    concurrent zdebug runs never read a half-written or deleted one. Snapshots beyond the newest
    `KEEP_SNAPSHOTS` go once they are `PRUNE_AFTER_S` old (their readers are long done)."""
    job_dir = root / safe_name(got.url.split("://", 1)[-1]) / safe_name(got.job.strip("/"))
    job_dir.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=job_dir))
    _prune(job_dir)
    with open(out / "job.log", "w", encoding="utf-8") as fh:
        for line in _log_lines(got.logs):
            fh.write(line + "\n")
    (out / "tasks.json").write_text(json.dumps({"tasks": got.tasks}, indent=1) + "\n")
    (out / "jobs.json").write_text(json.dumps({"jobs": got.jobs, "endpoints": got.endpoints}, indent=1) + "\n")
    for name, value in (("get_status", got.status), ("get_counters", got.counters)):
        if value is not None:
            try:
                text = json.dumps(value, indent=1, default=str)
            except ValueError:  # an int of more than 4300 digits (a pickle holds any int)
                got.warnings.append(f"coordinator {name} ignored: it holds a number of more than 4,300 digits")
                continue
            (out / f"{name}.json").write_text(text + "\n")
    if got.telemetry is not None:
        iris_finelog.save(got.telemetry, out)
    return out


def _prune(job_dir: Path) -> None:
    for old in sorted(p for p in job_dir.iterdir() if p.is_dir())[:-KEEP_SNAPSHOTS]:
        try:
            stale = time.time() - old.stat().st_mtime > PRUNE_AFTER_S
        except OSError:  # another zdebug run pruned it first
            continue
        if stale:
            shutil.rmtree(old, ignore_errors=True)


def _log_lines(entries: list) -> list[str]:
    """Every task's lines in Iris time order, a task's untimestamped continuation lines (a
    traceback) kept right after the line they continue, whatever other tasks logged meanwhile."""
    records: list[list[str]] = []
    last: dict[str, list[str]] = {}
    for entry in entries:
        text = entry.data.rstrip("\n")
        record = last.get(entry.task_id)
        if record is not None and not zephyrlog.LINE_START_RE.match(b"\n" + text[:64].encode("utf-8", "replace")):
            record.append(text)
            continue
        last[entry.task_id] = record = [text]
        records.append(record)
    return [line for record in records for line in record]
