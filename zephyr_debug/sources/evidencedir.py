"""A file or directory of real Zephyr/Iris output -> one Evidence. Content decides the format:

- log text (coordinator / worker logs, Iris `job logs`, JSON-lines records)  -> logtext
- get_status (JSON string holding the JobStatus repr, bare repr, or JSON object) -> jobstatus
- Iris list-tasks / get-task-logs JSON -> tasks;  get_counters JSON -> counters
- Zephyr's finelog rows saved in an Iris snapshot (Parquet) -> merged telemetry (iris_finelog)

zdebug's own reports (`zdebug report` writes `<dir>/report.html`) are skipped silently. Files
that are unreadable are reported as warnings; only when nothing at all is usable does
loading fail, with one `file:line: …` error.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pandas as pd

from zephyr_debug import streams, workerid, zephyrlog
from zephyr_debug.errors import EvidenceError, ZdebugError
from zephyr_debug.jobstore import in_range, parse_json
from zephyr_debug.model import (
    ALIVE_STATES,
    STATUS_COLUMNS,
    WORKER_COLUMNS,
    Evidence,
    JobStatus,
    SourceRead,
    frame,
)
from zephyr_debug.sources import counters, fusion, iris_finelog, iris_summary, jobstatus, logtext, tasks
from zephyr_debug.sources.timeline import Timeline

MAX_JSON_BYTES = 256 << 20
JSON_LIST_RE = re.compile(rb"\[\s*(?:[{\[\"\]\d-]|true|false|null)")  # `[` then a JSON value (or `]`)
# The start of a page `zdebug report` wrote (render/report.py): its own output, never evidence.
REPORT_RE = re.compile(rb"<!doctype html>\s*<html[^>]*><head><meta charset=\"utf-8\"><title>zdebug report ", re.I)


def load(path: Path) -> Evidence | None:
    try:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    except OSError as exc:  # an unreadable subdirectory
        raise EvidenceError(f"{exc.filename or path}: cannot list ({exc.strerror})") from None
    parts: dict[str, list] = {"log": [], "records": [], "status": [], "tasks": [], "counters": [], "finelog": []}
    errors: list[str] = []
    skipped: list[SourceRead] = []
    for file in files:
        try:
            file = streams.plain(file)  # a compressed log: its decompressed copy
            kind, value = classify(file)
        except ZdebugError as exc:
            errors.append(exc.message)
            skipped.append(SourceRead(str(file), "unreadable", ignored=exc.message))
            continue
        if kind:
            parts[kind].append((file, value))
        else:
            skipped.append(
                SourceRead(str(file), "other", ignored="empty, a zdebug report, or JSON zdebug does not read")
            )
    if not any(parts.values()):
        if errors and (not path.is_dir() or len(errors) == len(files)):
            raise EvidenceError(errors[0])
        return None
    ev = _from_logs(path, parts)
    ev.warnings += [f"ignored {e}" for e in errors]
    ev.reads += [
        SourceRead(str(f), kind) for kind in ("status", "tasks", "counters", "finelog") for f, _ in parts[kind]
    ]
    ev.reads += skipped
    for file, status in parts["status"]:
        _overlay_status(ev, status, file)
    for _, table in parts["tasks"]:
        ev.workers = _merge_workers(ev.workers, table)
    for _, values in parts["counters"]:
        ev.counters = {**values, **ev.counters}  # a log's final counters are newer than a snapshot
    if parts["finelog"]:
        ev = iris_finelog.attach_saved(ev, [file for file, _ in parts["finelog"]])
    return ev


def looks_json(head: bytes) -> bool:
    """The start of a JSON document: not text that starts with `[` (an `iris job logs` line, a
    `[exec] [stage] …` line pasted bare, a raylet or `[LEVEL]` prefix)."""
    body = head.lstrip()
    if body[:1] == b"[":
        return JSON_LIST_RE.match(body) is not None and not (
            zephyrlog.OUTER_RE.match(body) or zephyrlog.LINE_START_RE.match(b"\n" + body[:256])
        )
    return body[:1] in (b"{", b'"')


def _lines_head(file: Path) -> bytes:
    """The sniff window past a long first line (logtext.sniff_head)."""
    with open(file, "rb") as fh:
        return logtext.sniff_head(fh)


def classify(file: Path) -> tuple[str | None, object]:
    """(kind, parsed value) of one file; (None, None) when it is not evidence zdebug knows."""
    try:
        with open(file, "rb") as fh:
            head = fh.read(logtext.SNIFF_BYTES)
    except OSError as exc:  # EACCES, a directory, a file gone since the listing
        raise EvidenceError(f"{file}: cannot read ({exc.strerror or exc})") from None
    body = head.lstrip()
    if not body or REPORT_RE.match(body):  # empty, or a report left among the evidence
        return None, None
    if iris_finelog.is_file(file, head):
        return "finelog", None
    if looks_json(body):
        return _classify_json(file, body)
    if body.startswith(b"JobStatus("):
        return "status", jobstatus.parse(_text(file), str(file))
    if iris_summary.looks_like(head):
        return "tasks", tasks.workers(iris_summary.parse(_text(file), str(file)))
    if logtext.sniff(head) or (b"\x00" not in head and logtext.sniff(_lines_head(file))):
        return "log", None
    what = "binary data" if b"\x00" in head else "unrecognised text"
    raise EvidenceError(f"{file}:1: {what}, not a Zephyr/Iris log, get_status, list-tasks, get-task-logs or counters")


def _classify_json(file: Path, body: bytes) -> tuple[str | None, object]:
    if file.stat().st_size > MAX_JSON_BYTES:
        return ("log", None) if body.startswith(b"{") else (None, None)
    text = _text(file)
    try:
        data = parse_json(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and body.startswith(b"{"):  # JSON lines: Iris / Cloud Logging records
            if not _steps_back(_json_lines(text, streams.ORDER_TIMES)[0]):
                return "log", None  # in order (its head says): read line by line as the log it is
            records, skipped = _json_lines(text)
            return "records", _in_time_order(file, records, skipped)
        raise EvidenceError(f"{file}:{exc.lineno}: invalid or truncated JSON ({exc.msg})") from None
    except RecursionError:
        raise EvidenceError(f"{file}:1: JSON nested too deeply") from None
    except ValueError:  # CPython refuses int() of more than 4300 digits
        raise EvidenceError(f"{file}: JSON holds a number of more than 4,300 digits") from None
    _check_numbers(file, data)
    if tasks.is_task_logs(data):
        return "records", tasks.log_records(data)
    if tasks.is_tasks(data):
        _check_tasks(file, data["tasks"])
        return "tasks", tasks.workers(data)
    if isinstance(data, str):
        status = jobstatus.parse(json.dumps(data), str(file))
        return ("status", status) if status else (None, None)
    if isinstance(data, dict) and logtext.record(data) is not None:
        return "log", None  # a single log record (Iris, Cloud Logging, journald)
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        records = [r for r in map(logtext.record, data) if r is not None]
        if records:  # an export (Cloud Logging lists the newest first): in time order
            return "records", _in_time_order(file, records)
    status = jobstatus.from_dict(data, str(file)) if isinstance(data, dict) else None
    if status is not None:
        return "status", status
    if counters.is_counters(data):
        return "counters", counters.counters(data)
    return None, None


def _json_lines(text: str, limit: int | None = None) -> tuple[list[tuple[float | None, str]], int]:
    """The log records of a JSON Lines text (its first `limit` lines), and how many non-blank lines
    were none."""
    records, skipped = [], 0
    for n, line in enumerate(text.splitlines()):
        if limit is not None and n >= limit:
            break
        if line.strip():
            got = logtext.json_record(line)
            if got is None:
                skipped += 1
            else:
                records.append(got)
    return records, skipped


def _steps_back(records: list) -> bool:
    """Every record has a time and some step between them goes back (whole seconds: one export may
    mix resolutions)."""
    seconds = [int(r[0]) for r in records if r[0] is not None]
    return len(seconds) == len(records) and any(b < a for a, b in itertools.pairwise(seconds))


def _in_time_order(file: Path, records: list, skipped: int = 0) -> list:
    """`records` oldest first (an export may list the newest first); a move is said in a note
    (with the `skipped` lines that were no record)."""
    if not _steps_back(records):
        return records
    unread = f"; {skipped:,} line(s) that are no log record skipped" if skipped else ""
    streams.NOTES.append(f"{file}: entries not in time order (newest first?); read oldest first{unread}")
    seconds = [int(r[0]) for r in records]
    if sum(b < a for a, b in itertools.pairwise(seconds)) > sum(b > a for a, b in itertools.pairwise(seconds)):
        records = records[::-1]  # newest first: entries of one second then keep their order too
    return sorted(records, key=lambda r: int(r[0] or 0))


def _text(file: Path) -> str:
    try:
        return file.read_text("utf-8", "replace")
    except OSError as exc:
        raise EvidenceError(f"{file}: cannot read ({exc.strerror or exc})") from None


def _check_numbers(file: Path, data: object) -> None:
    """Every number in a JSON document finite and within ±2^63 (NaN, Infinity, 1e400 are no
    count, time or size); EvidenceError naming where the first one that is not sits."""
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{str(k)[:40]}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and not in_range(value):
            shown = repr(value) if isinstance(value, float) else "an integer beyond 2^63"
            raise EvidenceError(f"{file}: {where.lstrip('.') or 'the document'} is {shown}, not a number zdebug reads")


def _check_tasks(file: Path, items: list) -> None:
    """list-tasks: each task an object whose resource usage, when given, is an object; its numbers
    written as strings (protobuf's int64) finite too."""
    for i, task in enumerate(items):
        usage = task.get("resource_usage", task.get("resourceUsage")) if isinstance(task, dict) else None
        if usage is None:
            continue
        if not isinstance(usage, dict):
            raise EvidenceError(f"{file}: tasks[{i}].resource_usage is a {type(usage).__name__}, not an object")
        for key, value in usage.items():
            try:
                number = float(value) if isinstance(value, str) else 0.0
            except ValueError:
                continue  # not a number: read as none
            if not in_range(number):
                where = f"tasks[{i}].resource_usage.{str(key)[:40]}"
                raise EvidenceError(f"{file}: {where} is {value[:40]!r}, not a number")


def _from_logs(path: Path, parts: dict[str, list]) -> Evidence:
    name = path.name if path.is_dir() else path.stem
    logs = [file for file, _ in parts["log"]]
    sources = [(file, None) for file in logs] + list(parts["records"])
    tl = Timeline(name, str(path))
    reads, buffers = [], []
    for file, records in sources:
        # one source is folded as it is read (the bulk path where it pays); several are recorded,
        # then folded in time order across them
        into = tl if len(sources) == 1 else fusion.EventBuffer(name, str(file))
        scanner = logtext.LogScanner(into, str(file), dense=len(sources) == 1)
        if records is None:
            scanner.scan_file(file)
        else:
            scanner.scan_records(records)
        reads.append(SourceRead(str(file), "log" if records is None else "records", into.events, into.timed))
        if isinstance(into, fusion.EventBuffer):
            buffers.append(into)
    fusion.replay(tl, buffers)
    if tl.events:
        ev = tl.finish()
        ev.reads = reads
        return ev
    if logs and not (parts["status"] or parts["tasks"] or parts["counters"]):
        raise EvidenceError(f"{logs[0]}:1: no Zephyr coordinator/worker lines found (not a Zephyr log?)")
    newest = max(file.stat().st_mtime for kind in parts.values() for file, _ in kind)
    ev = Evidence(job=name, source=str(path), now=newest)
    ev.reads = reads
    if logs or parts["records"]:
        ev.warnings.append("log files hold no Zephyr coordinator/worker lines")
    return ev


def _overlay_status(ev: Evidence, status: JobStatus, file: Path) -> None:
    """The get_status snapshot becomes the live view, a status row, and worker states."""
    ev.live = status
    ev.heartbeat_ages = True
    ev.fatal_error = ev.fatal_error or status.fatal_error
    if status.fatal_error:
        ev.state = "failed"
    elif ev.state in ("unknown", "running"):
        ev.state = "succeeded" if status.done and status.completed >= status.total else "running"
    states = [w.get("state") for w in status.workers.values()]
    alive = sum(s in ALIVE_STATES for s in states)
    row = {
        "ts": ev.now,
        "stage": status.stage,
        "completed": status.completed,
        "total": status.total,
        "in_flight": status.in_flight,
        "queue_depth": status.queue_depth,
        "retries": status.retries,
        "alive": alive,
        "registered": len(states),
        "dead": len(states) - alive,
    }
    ev.status = frame(ev.status.to_dict("records") + [row], STATUS_COLUMNS)
    live = frame(
        [
            {"worker": wid, "state": w.get("state"), "last_seen_ago": w.get("last_seen_ago")}
            for wid, w in status.workers.items()
        ],
        WORKER_COLUMNS,
    )
    ev.workers = _merge_workers(ev.workers, live)


def _merge_workers(base: pd.DataFrame, extra: pd.DataFrame) -> pd.DataFrame:
    """Rows of `extra` fill/override the same worker's known (non-null) fields, whatever form of
    its name each holds (`workerid.key`); new workers append."""
    if not len(base):
        return extra
    if not len(extra):
        return base
    known = {workerid.key(w): w for w in base["worker"].dropna().astype(str)}  # the newest name of each
    extra = extra.assign(worker=[known.get(workerid.key(w), w) for w in extra["worker"].astype(str)])
    extra = extra.drop_duplicates("worker", keep="last")
    merged = base.set_index("worker")
    update = extra.set_index("worker")
    for col in update.columns:
        if col not in merged:
            merged[col] = None
    merged = merged.astype(object)
    merged.update(update.astype(object))
    new = update.loc[~update.index.isin(merged.index)]
    return (
        pd.concat([merged, new])
        .reset_index()
        .reindex(columns=list(dict.fromkeys(list(base.columns) + list(extra.columns))))
    )
