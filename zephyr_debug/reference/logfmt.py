"""Zephyr's log line formats (as the PyPI release prints them) and a small line writer.

Lines are written the way Python logging formats them in Zephyr:
`2026-12-02 21:59:16,743 INFO zephyr.execution: <message>`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

STATUS = "[{exec}] [{stage}] {completed}/{total} complete, {in_flight} in-flight, {queued} queued, {alive}/{registered} workers alive, {dead} dead"
THROUGHPUT = "; items={items} ({item_rate}/s), bytes_processed={bytes} ({byte_rate}/s)"
RETRIED = "[{exec}] Shards retried (attempts: shard count): {counts}"
STAGE_START = "[{exec}] Starting stage {stage} ({ops}) with {n} tasks"
TASKS_COMPLETED = "[{stage}] {completed}/{total} tasks completed"
REGISTERED = "Worker {worker} registered, total: {n}"
REREGISTERING = "Worker {worker} re-registering (likely reconstructed), updating handle"
HEARTBEAT_TIMEOUT = "Zephyr worker {worker} failed to heartbeat within timeout ({secs:.1f}s)"
ALL_DEAD = "All workers are dead/failed. Waiting for workers to recover..."
TASK_REQUEUE = "Shard {shard} failed on worker {worker} (task error {n}/{max}), re-queuing."
TASK_ABORT = "Shard {shard} has failed {n} times (max {max}), last failure on worker {worker}, aborting pipeline."
INFRA_REQUEUE = (
    "Shard {shard} requeued from worker {worker} due to infra failure (preemption/heartbeat). "
    "Total generation: {generation}, task errors so far: {task}/{task_max}, "
    "infra-while-in-flight: {infra}/{infra_max}."
)
INFRA_ABORT = (
    "Shard {shard} has been in flight during {infra} infra failures (max {infra_max}); treating as a "
    "deterministic crasher (likely native SIGSEGV / OOM in shard code) and aborting pipeline. "
    "Last failure on worker {worker}."
)
STALE_RESULT = "Ignoring stale result from worker {worker} for shard {shard} (attempt {attempt}, current {current})"
STRANDED = "Shard {shard} requeued but no live worker remains ({alive}/{registered} workers alive)"
ABORTED = "Coordinator aborted: {error}"

# Worker side.
EXECUTING = "[{worker}] Executing stage {stage} shard {shard} (attempt {attempt})"
SHARD_DONE = "[{worker}] Shard {shard} done in {secs:.2f}s"
WORKER_ERROR = "Worker {worker} error on shard {shard}"
HEARTBEAT_FAILED = "[{worker}] Heartbeat failed ({n}/{max}): {error}"

# fatal_error texts.
FATAL_TASK = "Shard {shard} failed {n} times (max {max}), last failure on worker {worker}.\nLast error:\n{error}"
FATAL_INFRA = (
    "Shard {shard} crashed its worker {n} times (max {max} infra failures while in flight); "
    "treating as a deterministic crasher (likely native SIGSEGV / OOM in shard code). "
    "Last failure on worker {worker}."
)
FATAL_NO_WORKERS = (
    "ZephyrWorkerError: No alive workers for {idle:.1f}s (total elapsed {elapsed:.1f}s). "
    "All {registered} registered workers are dead/failed."
)

# Subprocess runner errors.
OOM_ERROR = "Subprocess for shard {shard} was killed by SIGKILL (returncode -9); most likely OOM-killed by the kernel."
EXIT_ERROR = "Subprocess for shard {shard} exited with code {code}; see worker stderr above for the faulthandler traceback."


def human_count(n: float) -> str:
    """Zephyr's short numbers: 999, 1.09K, 12.3M."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.3g}" if isinstance(n, float) and not float(n).is_integer() else str(int(n))


def human_bytes(n: float) -> str:
    """Zephyr's byte sizes: 504 bytes, 71.88 KiB, 1.2 GiB."""
    if abs(n) < 1024:
        return f"{int(n)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}"
    raise AssertionError("unreachable")


def timestamp(ts: float) -> str:
    """Python logging's asctime: `2026-12-02 21:59:16,743`."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f",{int(ts * 1000) % 1000:03d}"


class LineLog:
    """Thread-safe log file writer in Python logging's default Zephyr layout."""

    def __init__(self, path: Path, name: str):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.name = name
        self._lock = threading.Lock()
        self._fh = open(path, "a", encoding="utf-8")

    def log(self, level: str, message: str) -> None:
        line = f"{timestamp(time.time())} {level} {self.name}: {message}\n"
        self._write(line)

    def info(self, message: str) -> None:
        self.log("INFO", message)

    def warning(self, message: str) -> None:
        self.log("WARNING", message)

    def error(self, message: str) -> None:
        self.log("ERROR", message)

    def raw(self, text: str) -> None:
        """Untimestamped text (tracebacks, faulthandler dumps), as the process wrote it."""
        self._write(text if text.endswith("\n") else text + "\n")

    def _write(self, text: str) -> None:
        with self._lock:
            if not self._fh.closed:
                try:
                    self._fh.write(text)
                    self._fh.flush()
                except OSError:  # disk full: a lost log line must not kill the caller (EventLog stops the job)
                    pass

    def close(self) -> None:
        with self._lock:
            try:
                self._fh.close()
            except OSError:
                pass
