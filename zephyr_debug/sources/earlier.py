"""Earlier runs of the same pipeline in the job store, as counter summaries (`analyze.counters`).

Same pipeline = same execution-name prefix (the part before `YYYYMMDD-HHMMSS-hex`), same
stages (ops and shard counts), same worker count and runner, read from each job's first
event (`job_start`). Only runs that started before this one count; the newest `LIMIT` are
summarized, each once per process (a finished job dir does not change).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.errors import ZdebugError
from zephyr_debug.model import Evidence

LIMIT = 5
_STAMP_RE = re.compile(r"\d{8}-\d{6}-[0-9a-f]{8}$")


def runs(ev: Evidence, limit: int = LIMIT):
    """Counter summaries of the newest `limit` earlier runs of `ev`'s pipeline (job dirs only)."""
    path = Path(ev.source)
    if not jobstore.is_job_dir(path):
        return []
    me = _identity(path)
    if me is None:
        return []
    earlier = [
        p
        for p in jobstore.list_jobs(path.parent)
        if p.name != path.name and (i := _identity(p)) is not None and i[0] == me[0] and i[1] < me[1]
    ]
    earlier.sort(key=lambda p: _identity(p)[1])  # type: ignore[index]
    out = []
    for p in reversed(earlier[-limit:]):
        run = _summary(str(p), *_stamp(p))
        if run is not None:
            out.append(run)
    return out


def _identity(path: Path) -> tuple[str, float] | None:
    """(pipeline key, start time) from the job's first event, None when it has none."""
    return _read_identity(str(path), *_stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = (path / jobstore.EVENTS).stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4096)
def _read_identity(path: str, _mtime: int, _size: int) -> tuple[str, float] | None:
    try:
        with open(Path(path) / jobstore.EVENTS, "rb") as fh:
            first = json.loads(fh.readline(1 << 20))
    except (OSError, ValueError, RecursionError):  # garbage (200,000-deep JSON) in another run: not comparable
        return None
    if not isinstance(first, dict) or first.get("type") != "job_start" or not isinstance(first.get("ts"), (int, float)):
        return None
    name = _STAMP_RE.sub("", str(first.get("execution_id", "")))
    key = json.dumps(
        [name, first.get("stages"), first.get("workers"), first.get("runner")], sort_keys=True, default=str
    )
    return key, float(first["ts"])


@lru_cache(maxsize=64)
def _summary(path: str, _mtime: int, _size: int):
    from zephyr_debug.analyze.counters import summarize
    from zephyr_debug.sources import jobdir

    try:
        return summarize(jobdir.load(Path(path)))
    except (ZdebugError, ValueError, RecursionError):  # an unreadable earlier run is left out, not fatal
        return None
