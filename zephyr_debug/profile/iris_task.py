"""`zdebug profile` on an Iris job: Iris's profile-task (py-spy on the task's own host)."""

from __future__ import annotations

import json
import re

from zephyr_debug.errors import ZdebugError
from zephyr_debug.sources import iris
from zephyr_debug.sources.iris_client import IrisClient
from zephyr_debug.sources.iris_snapshot import Fetched

TASK_RE = re.compile(r"/\d+$")  # a job path ending in the task index


def profile_task(target: str, duration: int, worker: str | None = None) -> bytes:
    """Speedscope JSON of an Iris profile-task for `duration` s.

    `target` is `iris://HOST:PORT/<job>` or `…/<task-id>`. For a job, the task is the one hosting
    Zephyr worker `worker`, or, without it, the worker holding the longest-running in-flight
    shard (the straggler), from one load of the job."""
    url, path = iris.parse_target(target)
    if TASK_RE.search(path):
        task = path
    elif worker is None:
        worker, got = _straggler(target)
        task = _task_of(target, got, worker)
    else:
        task = _task_of(target, Fetched(url, path, endpoints=IrisClient(url).endpoints(path)), worker)
    data = IrisClient(url).profile(task, duration)
    try:
        profiles = json.loads(data).get("profiles")
    except (ValueError, AttributeError, RecursionError):
        raise ZdebugError(f"{target}: Iris profile of {task} is not speedscope JSON") from None
    if not profiles:
        raise ZdebugError(
            f"{target}: Iris returned an empty profile for {task}: no samples (the task "
            "idled throughout, or py-spy is missing on the Iris worker's PATH: see its log)"
        )
    return data


def _straggler(target: str) -> tuple[str, Fetched]:
    """The Zephyr worker holding the longest-running in-flight shard, and the Iris replies."""
    ev, got = iris.load_fetched(target)
    running = ev.attempts[ev.attempts["outcome"] == "running"]
    if not len(running):
        raise ZdebugError(f"{target}: no shard in flight to profile; name a worker or an Iris task id")
    start = running["start_ts"].astype(float).fillna(ev.now)
    return str(running.loc[start.idxmin(), "worker"]), got


def _task_of(target: str, got: Fetched, worker: str) -> str:
    tasks = {base: task for task, base in got.worker_ids().items()}
    base = worker.split(":", 1)[0]
    if base not in tasks:
        raise ZdebugError(f"{target}: no Iris task hosts Zephyr worker {worker} (not registered in job {got.job})")
    return tasks[base]
