"""A job's crash groups against the earlier runs of its pipeline in the job store (same
pipeline as `sources.earlier` defines it): `new` (in none of the newest LIMIT earlier runs),
`recurring` (in the run before this one), `regressed` (gone from the run before, seen in an
older one). Fingerprints are stable across installs and Python versions, so a checkout run
and a site-packages run of one pipeline compare."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from zephyr_debug import jobstore
from zephyr_debug.crashes import inputs
from zephyr_debug.crashes.cluster import CrashGroup
from zephyr_debug.crashes.fingerprint import Fingerprinter
from zephyr_debug.crashes.parse import Stats
from zephyr_debug.errors import ZdebugError

LIMIT = 5


def earlier_jobs(job_dir: Path, limit: int = LIMIT) -> list[Path]:
    """The newest `limit` earlier runs of `job_dir`'s pipeline, newest first."""
    from zephyr_debug.sources import earlier

    if not jobstore.is_job_dir(job_dir):
        return []
    me = earlier._identity(job_dir)  # the pipeline key counters compare runs by
    if me is None:
        return []
    found = []
    for path in jobstore.list_jobs(job_dir.parent):
        other = earlier._identity(path) if path.name != job_dir.name else None
        if other is not None and other[0] == me[0] and other[1] < me[1]:
            found.append((other[1], path))
    return [path for _, path in sorted(found, reverse=True)[:limit]]


def fingerprints(job_dir: Path, fp: Fingerprinter) -> set[str] | None:
    """The crash fingerprints of one job, None when it cannot be read."""
    from zephyr_debug.sources import load

    try:
        ev = load(str(job_dir))
    except ZdebugError:
        return None
    return {fp.signature(c.text, c.kind, c.stage).fingerprint for c in inputs.job(ev, Stats())}


def compare(groups: list[CrashGroup], job_dir: Path, fp: Fingerprinter) -> tuple[list[CrashGroup], list[str]]:
    """(groups with their `history` set, the job ids compared with, newest first)."""
    runs = [(path.name, prints) for path in earlier_jobs(job_dir) if (prints := fingerprints(path, fp)) is not None]
    if not runs:
        return groups, []
    out = []
    for g in groups:
        seen: str | None = runs[0][0]
        if g.fingerprint in runs[0][1]:
            state = "recurring"
        else:
            seen = next((name for name, prints in runs[1:] if g.fingerprint in prints), None)
            state = "regressed" if seen else "new"
        out.append(replace(g, history=state, last_seen_in=seen))
    return out, [name for name, _ in runs]
