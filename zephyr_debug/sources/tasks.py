"""Iris `list-tasks` JSON -> worker rows (resource usage), and `get-task-logs` JSON -> log records.

list-tasks: `{"tasks": [{"task_id", "state", "worker_id", "resource_usage": {"memory_mb", "disk_mb",
"cpu_millicores", "memory_peak_mb", …}}]}` (numbers sometimes strings), or the older flat camelCase
`taskId`/`memoryMb`/`diskMb`/`cpuPercent`. get-task-logs: `{"task_logs": [{"logs": [{"data",
"level", "source", "timestamp", "attempt_id"}]}]}`.
"""

from __future__ import annotations

import pandas as pd

from zephyr_debug.model import WORKER_COLUMNS, frame
from zephyr_debug.sources.logtext import record_ts

# Iris task states -> Zephyr-like worker states.
STATES = {
    "RUNNING": "busy",
    "PENDING": "init",
    "BUILDING": "init",
    "ASSIGNED": "init",
    "SUCCEEDED": "done",
    "FAILED": "failed",
    "KILLED": "dead",
    "WORKER_FAILED": "dead",
    "PREEMPTED": "dead",
    "UNSCHEDULABLE": "failed",
}


def is_tasks(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("tasks"), list)


def is_task_logs(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("task_logs", data.get("taskLogs")), list)


def _num(value) -> float | None:
    try:
        return None if value is None or value == "" else float(value)
    except (TypeError, ValueError):
        return None


def _get(d: dict, *names):
    for name in names:
        if d.get(name) is not None:
            return d[name]
    return None


def workers(data: dict) -> pd.DataFrame:
    rows = []
    for task in data["tasks"]:
        if not isinstance(task, dict):
            continue
        usage = _get(task, "resource_usage", "resourceUsage") or task
        state = str(_get(task, "state") or "").upper().removeprefix("TASK_STATE_")  # `iris job summary`: lower
        cpu = _num(_get(usage, "cpu_millicores", "cpuMillicores"))
        rows.append(
            {
                "worker": str(_get(task, "task_id", "taskId", "worker_id", "workerId")),
                "state": STATES.get(state, state.lower() or None),
                "memory_mb": _num(_get(usage, "memory_mb", "memoryMb")),
                "memory_peak_mb": _num(_get(usage, "memory_peak_mb", "memoryPeakMb")),
                "disk_mb": _num(_get(usage, "disk_mb", "diskMb")),
                "cpu": cpu / 10 if cpu is not None else _num(_get(usage, "cpu_percent", "cpuPercent")),
                "iris_worker": _get(task, "worker_id", "workerId"),
                "exit_code": _get(task, "exit_code", "exitCode"),
                "error": _get(task, "error") or None,
            }
        )
    return frame(rows, WORKER_COLUMNS + ["iris_worker", "exit_code", "error"])


def log_records(data: dict) -> list[tuple[float | None, str]]:
    """(timestamp, line) of every log entry, in order."""
    out = []
    for task in data.get("task_logs", data.get("taskLogs")) or []:  # is_task_logs checked: a list
        for entry in (task.get("logs") or []) if isinstance(task, dict) else []:
            if isinstance(entry, dict) and entry.get("data") is not None:
                out.append((record_ts(entry.get("timestamp")), str(entry["data"])))
    return out
