"""The embedded job store: `$ZDEBUG_HOME/jobs/<execution_id>/`; `ZDEBUG_HOME` defaults to
`$XDG_STATE_HOME/zdebug` (`~/.local/state/zdebug`), so every directory sees the same jobs.

Layout of one job dir:
    events.jsonl          append-only, one JSON event per line ({"ts", "type", ...})
    coordinator.log       the coordinator's log, in Zephyr's line formats
    workers/<id>.log      one log per worker process
    crashes/<shard>-<attempt>.txt   full crash text of a failed attempt
    scratch/<id>/         the worker's scratch dir (shard output)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from zephyr_debug.errors import EvidenceError, UsageError, ZdebugError

EVENTS = "events.jsonl"
COORDINATOR_LOG = "coordinator.log"


def home() -> Path:
    """`$ZDEBUG_HOME`, else `$XDG_STATE_HOME/zdebug`, else `~/.local/state/zdebug`."""
    if os.environ.get("ZDEBUG_HOME"):
        return Path(os.environ["ZDEBUG_HOME"])
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "zdebug"


def jobs_root() -> Path:
    return home() / "jobs"


def new_execution_id(name: str | None = None, now: float | None = None) -> str:
    """Zephyr's default: `%Y%m%d-%H%M%S-<8 hex>`, optionally prefixed by a name."""
    from zephyr_debug.model import safe_name

    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now or time.time()))
    eid = f"{stamp}-{secrets.token_hex(4)}"
    return f"{safe_name(name)}-{eid}" if name else eid


def is_job_dir(path: Path) -> bool:
    return (path / EVENTS).is_file()


def list_jobs(root: Path | None = None) -> list[Path]:
    """Job dirs under the root, oldest first."""
    root = root or jobs_root()
    if not root.is_dir():
        return []
    dirs = [p for p in root.iterdir() if p.is_dir() and is_job_dir(p)]
    return sorted(dirs, key=lambda p: (p / EVENTS).stat().st_mtime)


def resolve_job(ref: str, root: Path | None = None) -> Path:
    """A job dir from a path, an execution id, a unique prefix, or `latest`."""
    path = Path(ref)
    if path.is_dir():
        if is_job_dir(path):
            return path
        raise EvidenceError(f"{ref}: not a job directory (no {EVENTS})")
    root = root or jobs_root()
    jobs = list_jobs(root)
    if ref == "latest":
        if not jobs:
            raise EvidenceError(f"no jobs under {root} (run `zdebug demo` first, or set ZDEBUG_HOME)")
        return jobs[-1]
    if "/" in ref or ref in ("", ".", ".."):
        raise EvidenceError(f"{ref}: no such job or directory")
    exact = [p for p in jobs if p.name == ref]
    matches = exact or [p for p in jobs if p.name.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise EvidenceError(f"{ref}: no such job under {root} (see `zdebug jobs`)")
    names = ", ".join(p.name for p in matches[:5])
    raise UsageError(f"{ref}: ambiguous job prefix ({names})")


COORDINATORS = "coordinators"  # under home(): which coordinator serves each job the store is writing


def _record_path(job_dir: Path) -> Path:
    key = hashlib.sha256(str(job_dir.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return home() / COORDINATORS / f"{key}.json"


def record_coordinator(job_dir: Path, execution_id: str, url: str, pid: int) -> None:
    """Note, outside the job dir, that `url` (served by process `pid`) is the coordinator of the job
    in `job_dir`: the one URL zdebug will ask whether that job still runs. Evidence files (a job
    dir unpacked from elsewhere names any url and pid) are never asked of. Best effort."""
    path = _record_path(job_dir)
    record = {"job_dir": str(job_dir.resolve()), "execution_id": execution_id, "url": url, "pid": pid}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        _prune_records(path.parent)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        temp.write_text(json.dumps(record))
        os.replace(temp, path)


def _prune_records(folder: Path) -> None:
    """Records of launchers that died without a job_end (SIGKILL) go."""
    for old in folder.glob("*.json"):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            pid = json.loads(old.read_text()).get("pid")
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                old.unlink()
            except PermissionError:
                pass  # alive, another user's


def forget_coordinator(job_dir: Path) -> None:
    with contextlib.suppress(OSError):
        _record_path(job_dir).unlink()


def recorded_coordinator(job_dir: Path) -> dict | None:
    """`{"url", "pid", "execution_id"}` the store recorded for `job_dir` while its job ran, else None."""
    try:
        record = json.loads(_record_path(job_dir).read_text())
    except (OSError, ValueError):
        return None
    ok = (
        isinstance(record, dict)
        and record.get("job_dir") == str(job_dir.resolve())
        and isinstance(record.get("url"), str)
        and has_type(record.get("pid"), _INT)
    )
    return record if ok else None


class EventLog:
    """Append-only JSONL writer; one line per event, flushed at once, thread-safe. A failed
    write never raises into the caller's thread: it is kept in `error` for the owner to act on.
    A `job_start` naming its coordinator's `url` and `pid` is also recorded outside the job dir
    (`record_coordinator`) until `job_end`."""

    def __init__(self, path: Path):
        self.path = path
        self.error: ZdebugError | None = None  # the first failed write; later events are dropped
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")
        except OSError as exc:
            raise ZdebugError(f"{path}: cannot write job store ({exc.strerror})") from None

    def write(self, type_: str, **fields) -> dict:
        event = {"ts": round(time.time(), 6), "type": type_, **fields}
        line = json.dumps(event, separators=(",", ":"), default=str)
        if type_ == "job_start" and isinstance(fields.get("url"), str) and isinstance(fields.get("pid"), int):
            record_coordinator(self.path.parent, str(fields.get("execution_id")), fields["url"], fields["pid"])
        elif type_ == "job_end":
            forget_coordinator(self.path.parent)
        with self._lock:
            if not self._fh.closed and self.error is None:
                try:
                    self._fh.write(line + "\n")
                    self._fh.flush()
                except OSError as exc:  # disk full, file too large: the job must stop, not go on blind
                    self.error = ZdebugError(f"{self.path}: cannot write job store ({exc.strerror})")
        return event

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError):  # the flush of what a full disk refused
            self._fh.close()


# What a well-formed event carries: the JSON type of a field wherever it appears, and the
# fields each event type must have. Lines that break these are skipped like garbage.
_NUM, _INT = (int, float), (int,)
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "ts": _NUM,
    "type": (str,),
    "execution_id": (str,),
    "config": (dict,),
    "url": (str,),
    "pid": _INT,
    "runner": (str,),
    "faults": (list,),
    "memory_limit_mb": _NUM,
    "stage": (str,),
    "index": _INT,
    "total": _INT,
    "completed": _INT,
    "in_flight": _INT,
    "queue_depth": _INT,
    "retries": _INT,
    "alive": _INT,
    "registered": _INT,
    "dead": _INT,
    "progress_time": _NUM,
    "shard": _INT,
    "attempt": _INT,
    "worker": (str,),
    "items": _INT,
    "bytes": _INT,
    "elapsed_s": _NUM,
    "returncode": _INT,
    "peak_rss_bytes": _INT,
    "crash_file": (str,),
    "kind": (str,),
    "error": (str,),
    "failure": (str,),
    "reason": (str,),
    "rss_bytes": _INT,
    "rss_peak_bytes": _INT,
    "cpu_pct": _NUM,
    "disk_bytes": _INT,
    "state": (str,),
    "fatal_error": (str,),
}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    "stage_start": ("stage", "index", "total"),
    "stage_end": ("stage",),
    "assign": ("stage", "shard", "attempt", "worker"),
    "shard_done": ("stage", "shard", "attempt", "worker"),
    "shard_failed": ("stage", "shard", "attempt", "worker", "kind"),
    "heartbeat": ("worker",),
    "worker_registered": ("worker",),
    "worker_state": ("worker",),
}
MAX_TS = 1e11  # year 5138: later (or negative, or NaN) timestamps are garbage
MAX_INT = 1 << 63


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(raw: str | bytes):
    """`json.loads`, its strings without lone surrogates (a `\\ud800` escape in JSON is one; no
    output can encode it): each becomes U+FFFD. Raises what json.loads raises."""
    value = json.loads(raw)
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    return _scrub(value) if _SURROGATE_ESCAPE.search(data) else value


def _scrub(value):
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    return value


def in_range(value: float) -> bool:
    """Strictly within ±2^63: NaN, ±inf and absurd counts are garbage, whatever field holds them."""
    return -MAX_INT < value < MAX_INT


def has_type(value: object, types: tuple[type, ...]) -> bool:
    """`value` is one of the JSON `types`; a bool counts as an int only where bool is named."""
    return isinstance(value, types) and (not isinstance(value, bool) or bool in types)


def well_formed(event: object) -> bool:
    """An event dict whose known fields have their types (None allowed unless required)."""
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return False
    ts = event.get("ts")
    if not has_type(ts, _NUM) or not 0 <= cast(float, ts) < MAX_TS:
        return False
    if any(event.get(name) is None for name in REQUIRED_FIELDS.get(event["type"], ())):
        return False
    for name, value in event.items():
        types = FIELD_TYPES.get(name)
        if value is None or types is None:
            continue
        if not has_type(value, types):
            return False
        if isinstance(value, (int, float)) and not in_range(value):  # also rejects NaN
            return False
    return True


def read_events(path: Path, warnings: list[str] | None = None) -> Iterator[dict]:
    """Events of one events.jsonl. Bad lines (a truncated last line from a killed
    coordinator, garbage, fields of the wrong type) are skipped and counted into `warnings`, never fatal."""
    bad: list[int] = []
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read ({exc.strerror})") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                event = parse_json(raw)
            except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: absurdly nested JSON
                if raw.strip():
                    bad.append(lineno)
                continue
            if well_formed(event):
                yield event
            else:
                bad.append(lineno)
    if bad and warnings is not None:
        where = ", ".join(map(str, bad[:3])) + (" …" if len(bad) > 3 else "")
        warnings.append(f"{path}: skipped {len(bad)} unparseable line(s) (line {where})")


def looks_like_execution_id(name: str) -> bool:
    from zephyr_debug.model import EXECUTION_ID_RE

    return bool(EXECUTION_ID_RE.match(name))
