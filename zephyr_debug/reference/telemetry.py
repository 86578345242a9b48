"""The reference pipeline's per-shard telemetry, written to finelog as real Zephyr writes it.

Same namespaces, columns and cadence as Zephyr's `StatsWriter` (`zephyr/stats.py`):
`zephyr.worker` gets a row per shard attempt at START, one at every heartbeat (RUNNING: Zephyr
samples at its heartbeat cadence) and one at END / FAILED, written by the worker running it
(`ShardRows`); `zephyr.stage` gets one row per stage when it ends or the job aborts in it,
written by the launcher from the coordinator's events (`StageRows`). As in Zephyr, telemetry
never fails the job: rows a server does not take are dropped with one log line.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import psutil

from zephyr_debug.errors import ZdebugError
from zephyr_debug.reference.proctree import process_tree

WORKER_NAMESPACE, STAGE_NAMESPACE = "zephyr.worker", "zephyr.stage"
START, RUNNING, END, FAILED = "START", "RUNNING", "END", "FAILED"
FLUSH_TIMEOUT_S = 10.0


@dataclass
class WorkerStat:
    """A `zephyr.worker` row (the columns and types of Zephyr's `ZephyrWorkerStat`)."""

    key_column: ClassVar[str] = "execution_id"
    execution_id: str
    stage_name: str
    shard_idx: int
    status: str
    ts: datetime
    items: int
    bytes_processed: int
    item_rate: float
    byte_rate: float
    cpu_time_total: float
    cpu_current_pct: float
    cpu_avg_pct: float
    mem_current_bytes: int
    mem_avg_bytes: int
    mem_peak_bytes: int


@dataclass
class StageStat:
    """A `zephyr.stage` row (the columns and types of Zephyr's `ZephyrStageStat`)."""

    key_column: ClassVar[str] = "execution_id"
    execution_id: str
    stage_name: str
    status: str
    ts: datetime
    elapsed: float
    items: int
    bytes_processed: int
    item_rate: float
    byte_rate: float
    total_shards: int
    cpu_pct_avg: float
    cpu_time_total: float
    mem_bytes_avg: int
    mem_peak_bytes_max: int


def _utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # finelog stores Zephyr's naive UTC


def connect(url: str):
    """A finelog LogClient for `url` (HOST:PORT or http://HOST:PORT), its INFO lines kept off stderr."""
    import logging

    try:
        from finelog.client import LogClient
    except ImportError:
        raise ZdebugError("--finelog needs the finelog client: pip install 'zephyr-debug[iris]'") from None
    logging.getLogger("finelog.client.log_client").setLevel(logging.WARNING)
    return LogClient.connect(url if "://" in url else f"http://{url}")


class _Writer:
    """One finelog table; a write that fails is logged once, never raised."""

    def __init__(self, url: str, namespace: str, schema: type, log):
        self.log, self.namespace, self._failed = log, namespace, False
        self.client = connect(url)
        self.table = self.client.get_table(namespace, schema)

    def write(self, row) -> None:
        try:
            self.table.write([row])
        except Exception as exc:  # as Zephyr: telemetry is best effort
            self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        if not self._failed:
            self._failed = True
            self.log.warning(f"finelog {self.namespace} write failed, rows dropped: {' '.join(str(exc).split())[:160]}")

    def close(self) -> None:
        try:
            self.table.flush(timeout=FLUSH_TIMEOUT_S)
        except Exception as exc:
            self._warn(exc)
        finally:
            self.client.close()


def _usage(proc: psutil.Process) -> tuple[float, int]:
    """(CPU seconds so far, RSS bytes now) of the worker's process tree: itself, its live
    children, and for CPU its reaped ones."""
    try:
        t, rss = proc.cpu_times(), proc.memory_info().rss
        cpu = t.user + t.system + t.children_user + t.children_system
        for pid in process_tree(proc.pid)[1:]:
            try:
                child = psutil.Process(pid)
                c = child.cpu_times()
                cpu, rss = cpu + c.user + c.system, rss + child.memory_info().rss
            except psutil.Error:
                continue
        return cpu, rss
    except psutil.Error:
        return 0.0, 0


class ShardRows:
    """The `zephyr.worker` rows of the shards one worker runs (a no-op without a URL)."""

    def __init__(self, url: str | None, execution_id: str, log):
        self.execution_id = execution_id
        self._writer = _Writer(url, WORKER_NAMESPACE, WorkerStat, log) if url else None
        self._proc = psutil.Process()
        self._lock = threading.Lock()
        self._shard: dict[str, Any] | None = None

    def start(self, stage: str, shard: int) -> None:
        if self._writer is None:
            return
        with self._lock:
            self._shard = {
                "stage": stage,
                "shard": shard,
                "t0": time.monotonic(),
                "cpu0": _usage(self._proc)[0],
                "rss_sum": 0,
                "rss_n": 0,
                "peak": 0,
            }
            self._row(START, 0, 0, 0.0)

    def running(self, sample: dict) -> None:
        """A heartbeat's sample of the running shard (its `shard`, `items`, `bytes`, `cpu_pct`)."""
        with self._lock:
            if self._shard is not None and sample.get("shard") == self._shard["shard"]:
                self._row(RUNNING, sample.get("items", 0), sample.get("bytes", 0), sample.get("cpu_pct") or 0.0)

    def end(self, ok: bool, items: int, nbytes: int, peak_rss_bytes: int | None) -> dict:
        """The END / FAILED row; returns the attempt's CPU time and memory for its shard report
        (the coordinator's events, from which `StageRows` aggregates), {} without a URL."""
        with self._lock:
            if self._shard is None:
                return {}
            s = self._shard
            s["peak"] = max(s["peak"], peak_rss_bytes or 0)
            cpu = self._row(END if ok else FAILED, items, nbytes, 0.0)
            self._shard = None
            return {
                "cpu_time_s": round(cpu, 3),
                "mem_peak_bytes": s["peak"],
                "mem_avg_bytes": s["rss_sum"] // max(s["rss_n"], 1),
            }

    def _row(self, status: str, items: int, nbytes: int, cpu_pct: float) -> float:
        s, writer = self._shard, self._writer
        assert s is not None and writer is not None  # callers hold an open shard, which needs a writer
        elapsed = max(time.monotonic() - s["t0"], 1e-9)
        cpu, rss = _usage(self._proc)
        cpu = max(cpu - s["cpu0"], 0.0)
        s["rss_sum"], s["rss_n"], s["peak"] = s["rss_sum"] + rss, s["rss_n"] + 1, max(s["peak"], rss)
        writer.write(
            WorkerStat(
                self.execution_id,
                s["stage"],
                s["shard"],
                status,
                _utcnow(),
                int(items),
                int(nbytes),
                items / elapsed,
                nbytes / elapsed,
                cpu,
                float(cpu_pct),
                100.0 * cpu / elapsed,
                rss,
                s["rss_sum"] // s["rss_n"],
                s["peak"],
            )
        )
        return cpu

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class StageRows:
    """The job's event log, writing a `zephyr.stage` row as each stage ends (END) or the job
    aborts in it (FAILED), from the stage's shard_done events. Everything else passes through."""

    def __init__(self, events, url: str, execution_id: str):
        self._events, self.execution_id = events, execution_id
        self._writer = _Writer(url, STAGE_NAMESPACE, StageStat, _EventLogLog(events))
        self._stage: dict[str, Any] | None = None

    def __getattr__(self, name: str):
        return getattr(self._events, name)

    def write(self, type_: str, **fields) -> dict:
        event = self._events.write(type_, **fields)
        if type_ == "stage_start":
            self._stage = {"name": fields["stage"], "total": fields["total"], "t0": time.monotonic(), "done": []}
        elif type_ == "shard_done" and self._stage is not None:
            self._stage["done"].append(fields)
        elif type_ in ("stage_end", "abort") and self._stage is not None:
            self._emit(END if type_ == "stage_end" else FAILED)
            self._stage = None
        return event

    def _emit(self, status: str) -> None:
        s = self._stage
        assert s is not None  # write() emits only with a stage open
        done = s["done"]
        elapsed = max(time.monotonic() - s["t0"], 1e-9)
        items, nbytes = sum(d.get("items") or 0 for d in done), sum(d.get("bytes") or 0 for d in done)
        cpu = sum(d.get("cpu_time_s") or 0.0 for d in done)
        avgs = [d["mem_avg_bytes"] for d in done if d.get("mem_avg_bytes")]
        busy = sum(d.get("elapsed_s") or 0.0 for d in done)
        self._writer.write(
            StageStat(
                self.execution_id,
                s["name"],
                status,
                _utcnow(),
                elapsed,
                int(items),
                int(nbytes),
                items / elapsed,
                nbytes / elapsed,
                int(s["total"]),
                100.0 * cpu / busy if busy else 0.0,
                cpu,
                sum(avgs) // len(avgs) if avgs else 0,
                max((d.get("mem_peak_bytes") or 0 for d in done), default=0),
            )
        )

    def close(self) -> None:
        self._writer.close()
        self._events.close()


class _EventLogLog:
    """Telemetry warnings of the launcher as `telemetry_warning` events."""

    def __init__(self, events):
        self.events = events

    def warning(self, message: str) -> None:
        self.events.write("telemetry_warning", error=message)
