"""A generated job's one `job.log` split as a user fetches it from production: the coordinator's
log and each worker's task log, the latter in one of three forms (`FORMS`): Iris
`get-task-logs` JSON, `iris job logs` text (`[hh:mm:ss] task=… | line`, tasks one after the
other), or one file per worker. Worker lines are the ones zephyrlog says a worker prints
(`Executing …`, `… done in …`, `Worker … error on shard …` with its traceback)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from zephyr_debug import workerid, zephyrlog

FORMS = ("task-logs", "iris-text", "files")
_WORKER_LINES = (zephyrlog.EXECUTING.regex, zephyrlog.SHARD_DONE.regex, zephyrlog.WORKER_ERROR.regex)
_TIMED = re.compile(rb"^(?:\d{4}-\d\d-\d\d |[IWEF]\d{8} |\[\d\d:\d\d:\d\d\] )")
_CLOCK = re.compile(rb"(\d\d:\d\d:\d\d)")


def _task(worker: str) -> str:
    """The Iris task path of a worker id (`zephyr--x-p0-workers-a0-7:0` -> `/alice/zephyr--x-p0-workers-a0/7`)."""
    m = re.match(r"(?P<group>.+)-(?P<index>\d+)(?::\d+)?$", worker)
    return f"/alice/{m['group']}/{m['index']}" if m else f"/alice/{worker}"


def split(job_log: Path, out: Path, form: str) -> list[Path]:
    """Writes `coordinator.log` and the workers' logs in `form` under `out`; returns the files."""
    coord: list[bytes] = []
    tasks: dict[str, list[bytes]] = {}
    current: str | None = None
    for line in job_log.read_bytes().splitlines():
        worker = next((m["worker"] for rx in _WORKER_LINES if (m := rx.search(line))), None)
        if worker is not None:
            current = worker.decode()
            tasks.setdefault(current, []).append(line)
        elif current is not None and not _TIMED.match(line):
            tasks[current].append(line)  # a worker error's traceback
        else:
            current = None
            coord.append(line)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "coordinator.log"]
    files[0].write_bytes(b"\n".join(coord) + b"\n")
    if form == "task-logs":
        logs = [
            {"task_id": _task(w), "logs": [{"data": ln.decode(), "level": "INFO", "attempt_id": 0} for ln in lines]}
            for w, lines in tasks.items()
        ]
        files.append(out / "task-logs.json")
        files[-1].write_text(json.dumps({"task_logs": logs}), encoding="utf-8")
    elif form == "iris-text":
        text = []
        for w, lines in tasks.items():
            clock = b"00:00:00"
            for ln in lines:
                m = _CLOCK.search(ln[:40]) if _TIMED.match(ln) else None
                clock = m.group(1) if m else clock
                text.append(b"[" + clock + b"] task=" + _task(w).encode() + b" | " + ln)
        files.append(out / "worker-logs.txt")
        files[-1].write_bytes(b"\n".join(text) + b"\n")
    elif form == "files":
        for w, lines in tasks.items():
            files.append(out / f"{workerid.key(w).replace('/', '-')}.log")
            files[-1].write_bytes(b"\n".join(lines) + b"\n")
    else:
        raise ValueError(f"unknown form {form!r} (one of {', '.join(FORMS)})")
    return files
