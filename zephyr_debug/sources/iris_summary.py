"""`iris job summary JOB` as printed (its text table), read into the list-tasks form
(`{"tasks": [...]}`) that `tasks.workers` reads; its `--json` form is that shape already.

    Job: /alice/zephyr-abc-p0-workers (zephyr-abc-p0-workers)
    State: running  exit=0  failures=3  preemptions=0
    Tasks: 63/64 completed  running=1  succeeded=63

    TASK  STATE      EXIT  DURATION    PEAK MEM  CUR MEM  ERROR
       0  succeeded     0  10 minutes  2.54 GB   -
"""

from __future__ import annotations

import re

from zephyr_debug.errors import EvidenceError

JOB_RE = re.compile(r"^Job: (\S+)", re.M)
TASKS_RE = re.compile(r"^Tasks: (\d+)/(\d+) completed", re.M)
HEADER_RE = re.compile(r"^\s*TASK\s+STATE\s+EXIT\s+DURATION\s+PEAK MEM\s+CUR MEM\s+ERROR\s*$", re.M)
CELLS_RE = re.compile(r"\s{2,}")
SIZE_RE = re.compile(r"^([\d.]+) (bytes|KB|MB|GB|TB|PB)$")  # humanfriendly.format_size, decimal units
UNITS = {"bytes": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15}


def looks_like(head: bytes) -> bool:
    text = head.decode("utf-8", "replace")
    return bool(JOB_RE.search(text) and TASKS_RE.search(text) and HEADER_RE.search(text))


def parse(text: str, source: str) -> dict:
    """The tasks of the summary's table; EvidenceError naming the line of a row it cannot read."""
    job = JOB_RE.search(text)
    header = HEADER_RE.search(text)
    if job is None or header is None:
        raise EvidenceError(f"{source}:1: not an `iris job summary` (no Job: line or task table)")
    first = text.count("\n", 0, header.end()) + 2
    tasks = []
    for number, line in enumerate(text[header.end() :].splitlines()[1:], first):
        if not line.strip():
            continue
        cells = CELLS_RE.split(line.strip(), maxsplit=6)
        if len(cells) < 6 or not cells[0].isdigit():
            raise EvidenceError(f"{source}:{number}: not a task row of `iris job summary`: {line.strip()[:60]!r}")
        index, state, exit_code, _duration, peak, current, *error = cells
        tasks.append(
            {
                "task_id": f"{job.group(1)}/{index}",
                "state": state,
                "exit_code": int(exit_code) if exit_code.lstrip("-").isdigit() else None,
                "memory_peak_mb": _mb(peak),
                "memory_mb": _mb(current),
                "error": (error[0] if error else "").removesuffix("..."),
            }
        )
    return {"job_id": job.group(1), "tasks": tasks}


def _mb(cell: str) -> float | None:
    m = SIZE_RE.match(cell)
    return float(m.group(1)) * UNITS[m.group(2)] / 1e6 if m else None
