"""Live source: a running reference coordinator's HTTP API (`http://127.0.0.1:PORT`).

When the coordinator's job dir is readable here, its history is loaded too and the live
`get_status` is laid over it; otherwise the evidence is the live snapshot alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.errors import EvidenceError
from zephyr_debug.model import STATUS_COLUMNS, WORKER_COLUMNS, Evidence, JobStatus, frame
from zephyr_debug.sources import http, jobdir, jobstatus

NOT_OURS = "(is this a zdebug reference coordinator?)"


def fetch(url: str, path: str) -> dict:
    """One JSON object from the coordinator's HTTP API, within the shared deadline. A bad answer
    (another status, not JSON, not an object) is unreadable evidence: EvidenceError, exit 3."""
    reply = http.get(url.rstrip("/") + path, what="coordinator")
    if reply.status != 200:
        moved = f" to {reply.headers['location'][:80]!r}" if reply.headers.get("location") else ""
        raise EvidenceError(f"{url}{path}: HTTP {reply.status}{moved} from the coordinator {NOT_OURS}")
    try:
        data = jobstore.parse_json(reply.body)
    except RecursionError:
        raise EvidenceError(f"{url}{path}: answer nested too deeply {NOT_OURS}") from None
    except json.JSONDecodeError:
        raise EvidenceError(f"{url}{path}: answer is not JSON {NOT_OURS}") from None
    except ValueError:  # CPython refuses int() of more than 4300 digits
        raise EvidenceError(f"{url}{path}: answer holds a number of more than 4,300 digits") from None
    if not isinstance(data, dict):
        raise EvidenceError(f"{url}{path}: unexpected answer {' '.join(str(data).split())[:60]!r} {NOT_OURS}")
    return data


# The JSON types of the reply fields zdebug reads (None allowed); anything else is not a coordinator's answer.
_NUM = (int, float)
REPLY_TYPES: dict[str, dict[str, tuple[type, ...]]] = {
    "/job": {"execution_id": (str,), "job_dir": (str,), "config": (dict,), "progress_time": _NUM},
    "/status": {
        "stage": (str,),
        "completed": (int,),
        "total": (int,),
        "retries": (int,),
        "in_flight": (int,),
        "queue_depth": (int,),
        "done": (bool,),
        "fatal_error": (str,),
        "workers": (dict,),
    },
    "/workers": {"*": (dict,)},
    "/counters": {"*": _NUM},
}
WORKER_TYPES = {
    "state": (str,),
    "last_seen_ago": _NUM,
    "pid": (int,),
    "rss_bytes": _NUM,
    "rss_peak_bytes": _NUM,
    "disk_bytes": _NUM,
    "cpu_pct": _NUM,
}


def _checked(url: str, path: str, data: dict, types: Mapping[str, tuple[type, ...]] | None = None) -> dict:
    types = types or REPLY_TYPES[path]
    for key, value in data.items():
        want = types.get(key) or types.get("*")
        if value is None or not want:
            continue
        if not jobstore.has_type(value, want):
            raise EvidenceError(f"{url}{path}: field {str(key)[:40]!r} is {type(value).__name__} {NOT_OURS}")
        if isinstance(value, (int, float)) and not jobstore.in_range(value):
            shown = repr(value) if isinstance(value, float) else "an integer beyond 2^63"
            raise EvidenceError(f"{url}{path}: field {str(key)[:40]!r} is {shown} {NOT_OURS}")
    if types is REPLY_TYPES["/workers"]:
        for key, worker in data.items():
            if not isinstance(worker, dict):  # null is no worker
                raise EvidenceError(f"{url}{path}: worker {str(key)[:40]!r} is {type(worker).__name__} {NOT_OURS}")
            _checked(url, path, worker, WORKER_TYPES)
    if path == "/status":
        try:
            jobstatus.check(data)
        except ValueError as exc:
            raise EvidenceError(f"{url}{path}: {exc} {NOT_OURS}") from None
    return data


def load(url: str) -> Evidence:
    info, status, workers, counters = (
        _checked(url, p, fetch(url, p)) for p in ("/job", "/status", "/workers", "/counters")
    )
    job_dir = Path(info.get("job_dir", ""))
    if info.get("job_dir") and jobstore.is_job_dir(job_dir):
        ev = jobdir.load(job_dir)
    else:
        ev = Evidence(job=info.get("execution_id", url), source=url, now=time.time(), config=info.get("config", {}))
    now = time.time()
    ev.source, ev.now, ev.counters = url, now, counters
    ev.live = JobStatus(**jobstatus.check(status))
    ev.fatal_error = ev.live.fatal_error
    ev.progress_time = info.get("progress_time", ev.progress_time)
    ev.state = ("failed" if ev.live.fatal_error else "succeeded") if ev.live.done else "running"
    alive = sum(w.get("state") == "active" for w in workers.values())
    row = {
        "ts": now,
        "stage": ev.live.stage,
        "completed": ev.live.completed,
        "total": ev.live.total,
        "in_flight": ev.live.in_flight,
        "queue_depth": ev.live.queue_depth,
        "retries": ev.live.retries,
        "alive": alive,
        "registered": len(workers),
        "dead": len(workers) - alive,
    }
    ev.status = frame(ev.status.to_dict("records") + [row], STATUS_COLUMNS)
    ev.workers = frame([_worker_row(wid, w) for wid, w in workers.items()], WORKER_COLUMNS)
    return ev


def _worker_row(worker_id: str, w: dict) -> dict:
    def mb(key: str) -> float | None:
        return None if w.get(key) is None else round(w[key] / (1 << 20), 2)

    return {
        "worker": worker_id,
        "state": w.get("state"),
        "last_seen_ago": w.get("last_seen_ago"),
        "pid": w.get("pid"),
        "memory_mb": mb("rss_bytes"),
        "memory_peak_mb": mb("rss_peak_bytes"),
        "disk_mb": mb("disk_bytes"),
        "cpu": w.get("cpu_pct"),
        "shard": w.get("shard"),
    }
