"""Zephyr's telemetry of an Iris job: its finelog rows, fetched and saved in the Iris snapshot.

Zephyr's `StatsWriter.resolve_url` asks the Iris controller's endpoint registry for
`/system/log-server` (the controller embeds a finelog server when the cluster configures no
external one). zdebug asks the same registry and reads the server directly when it can reach
it, else through the controller, which proxies finelog for clients outside the cluster. The
execution id is the newest one the job's logs name. The rows are saved in the snapshot as
Parquet (`FILES`), so `evidencedir` (an offline `zdebug status <snapshot dir>` too) merges
them into the logs' evidence. A missing or unreachable log server is a warning, never a failure.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from zephyr_debug import zephyrlog
from zephyr_debug.errors import EvidenceError, ZdebugError
from zephyr_debug.sources import finelog

if TYPE_CHECKING:
    from zephyr_debug.model import Evidence
    from zephyr_debug.sources.iris_client import IrisClient

LOG_SERVER = "/system/log-server"  # iris.cluster.endpoints.LOG_SERVER_ENDPOINT_NAME
PROBE_S = 2.0  # a registered address inside the cluster may not be reachable from here
FILES = {"worker": f"finelog-{finelog.WORKER_TABLE}.parquet", "stage": f"finelog-{finelog.STAGE_TABLE}.parquet"}
PARQUET_MAGIC = b"PAR1"
_META_URL, _META_EXEC = b"zdebug.finelog_url", b"zdebug.execution_id"
_EXEC_LINES = (zephyrlog.PIPELINE, zephyrlog.STATUS, zephyrlog.STAGE_START)


def execution_id(lines: list[str]) -> str | None:
    """The newest execution id the log lines name (pipeline start, status, stage start lines)."""
    found = None
    for line in lines:
        data = line.encode("utf-8", "replace")
        for message in _EXEC_LINES:
            if message.keyword in data:
                m = message.regex.search(data)
                if m and m.group("exec"):
                    found = m.group("exec").decode("utf-8", "replace")
                    break
    return found


def server_urls(iris: IrisClient, warnings: list[str]) -> list[str]:
    """Where to read finelog: the registered `/system/log-server` address if it answers a TCP
    connect from here, then the controller's proxy."""
    urls = []
    try:
        registered = [e.get("address", "") for e in iris.endpoints(LOG_SERVER) if e.get("name") == LOG_SERVER]
    except ZdebugError as exc:
        warnings.append(f"{LOG_SERVER} not resolved ({exc.message}); finelog read through the controller")
        registered = []
    for address in filter(None, registered):
        url = finelog.server_url(address)
        if _reachable(url):
            urls.append(url)
    return [*urls, iris.url] if iris.url not in urls else urls


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=PROBE_S):
            return True
    except (OSError, ValueError):
        return False


def fetch(iris: IrisClient, lines: list[str], warnings: list[str]) -> finelog.Rows | None:
    """The telemetry rows of the job's newest execution, or None with a one-line warning why not."""
    execution = execution_id(lines)
    if execution is None:
        warnings.append("no Zephyr execution id in the job's logs yet: no finelog telemetry fetched")
        return None
    errors = []
    for url in server_urls(iris, warnings):
        try:
            return finelog.fetch(url, execution)
        except ZdebugError as exc:
            errors.append(exc.message)
    warnings.append(f"no finelog telemetry for {execution}: {'; '.join(errors)}"[:300])
    return None


def save(rows: finelog.Rows, out: Path) -> None:
    """The rows as Parquet files in the snapshot dir `out` (server and execution in the metadata)."""
    import pyarrow.parquet as pq

    meta = {_META_URL: rows.url.encode(), _META_EXEC: rows.execution_id.encode()}
    for kind, table in (("worker", rows.worker), ("stage", rows.stage)):
        if table is not None:
            schema_meta = {**(table.schema.metadata or {}), **meta}
            pq.write_table(table.replace_schema_metadata(schema_meta), out / FILES[kind])


def is_file(path: Path, head: bytes) -> bool:
    return path.name in FILES.values() and head.startswith(PARQUET_MAGIC)


def attach_saved(ev: Evidence, files: list[Path]) -> Evidence:
    """`ev` with the saved telemetry of `files` merged in (`finelog.attach`); an unreadable file
    is a warning naming it, and `ev` is kept."""
    try:
        rows = _read(files)
    except ZdebugError as exc:
        ev.warnings.append(f"finelog telemetry not merged: {exc.message}")
        return ev
    if rows is None:
        return ev
    return finelog.attach(ev, finelog.to_evidence(rows))


def _read(files: list[Path]) -> finelog.Rows | None:
    import pyarrow.parquet as pq

    tables = {}
    for file in files:
        try:
            tables[file.name] = pq.read_table(file)
        except Exception as exc:  # truncated / corrupt Parquet: one line naming the file
            reason = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise EvidenceError(f"{file}:1: unreadable Parquet ({reason})") from None
    worker = tables.get(FILES["worker"])
    if worker is None:
        return None
    meta = worker.schema.metadata or {}
    if _META_EXEC not in meta or "seq" not in worker.column_names:
        raise EvidenceError(
            f"{files[0].parent / FILES['worker']}:1: not a zdebug finelog snapshot (no execution id / seq)"
        )
    return finelog.Rows(
        meta.get(_META_URL, b"").decode(), meta[_META_EXEC].decode(), worker, tables.get(FILES["stage"]), []
    )
