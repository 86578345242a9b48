"""Every Zephyr / Iris log line zdebug writes or reads, defined once.

A `Message` is one line of Zephyr's output: how Zephyr (and the reference pipeline) writes it
(`fmt`, `str.format` fields) and how it is read back (`pattern`, bytes regex with named
groups). Readers route a line by its keyword (`keyword`: text every form of the line holds
after a space) and count a line that holds `signature` but does not match as unparseable.
Older forms (no `[exec]` prefix, `;` for `.`) are accepted by the same patterns.

Line prefixes (Python logging, glog-like, Iris `[hh:mm:ss] task=… |`) and the one time rule
are here too: a prefix time carries no zone, so it is read in `ZDEBUG_TZ` (default UTC, as
Iris prints it; `set_timezone()` / `--tz` change it), and the writer prints UTC.
"""

from __future__ import annotations

import calendar
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache

TZ_ENV = "ZDEBUG_TZ"
_NUM = rb"(?P<items>[\d.]+[KMBT]?)"
_STAGE = rb"(?P<stage>[^\]\n]+)"
_EXEC = rb"(?:\[(?P<exec>[^\]\n]+)\] )?"


@dataclass(frozen=True)
class Message:
    """One Zephyr log line: writer format, reader pattern (named groups), routing keyword."""

    name: str
    fmt: str | None  # None: Zephyr prints it, the reference pipeline does not
    pattern: bytes
    keyword: bytes  # every form of the line holds b" " + keyword
    signature: bytes | None = None  # a line holding this that does not match is unparseable

    def format(self, **fields: object) -> str:
        if self.fmt is None:
            raise ValueError(f"{self.name} has no writer format")
        return self.fmt.format(**fields)

    @property
    def regex(self) -> re.Pattern[bytes]:
        return _compiled(self.pattern)


@cache
def _compiled(pattern: bytes) -> re.Pattern[bytes]:
    return re.compile(pattern)


# -- coordinator ---------------------------------------------------------------------------
_COUNTS = (  # a status line after its `[stage] `
    rb"(?P<completed>\d+)/(?P<total>\d+) complete, (?P<in_flight>\d+) in-flight, "
    rb"(?P<queued>\d+) queued, (?:(?P<alive>\d+)/(?P<registered>\d+) workers alive, (?P<dead>\d+) dead"
    rb"|(?P<workers>\d+) workers)(?:[;.] items=" + _NUM + rb")?"
)
STATUS = Message(
    "status",
    "[{exec}] [{stage}] {completed}/{total} complete, {in_flight} in-flight, {queued} queued, "
    "{alive}/{registered} workers alive, {dead} dead",
    _EXEC + rb"\[" + _STAGE + rb"\] " + _COUNTS,
    b"complete, ",
    b" complete, ",
)
THROUGHPUT = "; items={items} ({item_rate}/s), bytes_processed={bytes} ({byte_rate}/s)"  # status line's tail
RETRIED = Message(
    "retried",
    "[{exec}] Shards retried (attempts: shard count): {counts}",
    rb"Shards retried \(attempts: shard count\): (?P<counts>\{[^}\n]*\})",
    b"retried ",
)
STAGE_START = Message(
    "stage_start",
    "[{exec}] Starting stage {stage} ({ops}) with {n} tasks",
    _EXEC + rb"Starting stage (?P<stage>\S+(?: \S+)*?) \((?P<ops>[^)\n]*)\) with (?P<n>\d+) tasks",
    b"Starting stage ",
    b"Starting stage ",
)
TASKS_COMPLETED = Message(
    "tasks_completed",
    "[{stage}] {completed}/{total} tasks completed",
    rb"\[" + _STAGE + rb"\] (?P<completed>\d+)/(?P<total>\d+) tasks completed",
    b"tasks completed",
)
REGISTERED = Message(
    "registered",
    "Worker {worker} registered, total: {n}",
    rb"Worker (?P<worker>\S+) registered, total: (?P<n>\d+)",
    b"Worker ",
    b" registered, total",
)
REREGISTERING = Message(
    "reregistering",
    "Worker {worker} re-registering (likely reconstructed), updating handle",
    rb"Worker (?P<worker>\S+) re-registering",
    b"Worker ",
)
HEARTBEAT_TIMEOUT = Message(
    "heartbeat_timeout",
    "Zephyr worker {worker} failed to heartbeat within timeout ({secs:.1f}s)",
    rb"worker (?P<worker>\S+) failed to heartbeat within timeout \((?P<secs>[\d.]+)s\)",
    b"worker ",
    b"failed to heartbeat",
)
ALL_DEAD = Message(
    "all_dead",
    "All workers are dead/failed. Waiting for workers to recover...",
    rb"All workers are dead/failed",
    b"workers ",
)
TASK_REQUEUE = Message(
    "task_requeue",
    "Shard {shard} failed on worker {worker} (task error {n}/{max}), re-queuing.",
    rb"Shard (?P<shard>\d+) failed on worker (?P<worker>\S+) \(task error (?P<n>\d+)/(?P<max>\d+)\)",
    b"Shard ",
    b"(task error",
)
TASK_ABORT = Message(
    "task_abort",
    "Shard {shard} has failed {n} times (max {max}), last failure on worker {worker}, aborting pipeline.",
    rb"Shard (?P<shard>\d+) has failed (?P<n>\d+) times \(max (?P<max>\d+)\), last failure on worker "
    rb"(?P<worker>\S+?),? aborting",
    b"Shard ",
    b"aborting pipeline",
)
INFRA_REQUEUE = Message(
    "infra_requeue",
    "Shard {shard} requeued from worker {worker} due to infra failure (preemption/heartbeat). "
    "Total generation: {generation}, task errors so far: {task}/{task_max}, "
    "infra-while-in-flight: {infra}/{infra_max}.",
    rb"Shard (?P<shard>\d+) requeued from worker (?P<worker>\S+) due to infra failure.*?Total generation: "
    rb"(?P<generation>\d+), task errors so far: (?P<task>\d+)/(?P<task_max>\d+), infra-while-in-flight: "
    rb"(?P<infra>\d+)/(?P<infra_max>\d+)",
    b"Shard ",
    b"infra failure",
)
INFRA_ABORT = Message(
    "infra_abort",
    "Shard {shard} has been in flight during {infra} infra failures (max {infra_max}); treating as a "
    "deterministic crasher (likely native SIGSEGV / OOM in shard code) and aborting pipeline. "
    "Last failure on worker {worker}.",
    rb"Shard (?P<shard>\d+) has been in flight during (?P<infra>\d+) infra failures \(max (?P<infra_max>\d+)\)[;.] "
    rb"treating as a deterministic crasher.*?Last failure on worker (?P<worker>\S+?)\.?$",
    b"Shard ",
    b"deterministic crasher",
)
STALE_RESULT = Message(
    "stale",
    "Ignoring stale result from worker {worker} for shard {shard} (attempt {attempt}, current {current})",
    rb"Ignoring stale result from worker (?P<worker>\S+) for shard (?P<shard>\d+) \(attempt "
    rb"(?P<attempt>\d+), current (?P<current>\d+)\)",
    b"worker ",
)
NO_WORKERS = Message("no_workers", None, rb"(?:ZephyrWorkerError: )?(?P<text>No alive workers for .*)", b"workers ")
ABORTED = Message(
    "aborted", "Coordinator aborted: {error}", rb"Coordinator aborted: (?P<text>.*)", b"Coordinator aborted"
)
PIPELINE_FAILED = Message(
    "pipeline_failed",
    "Actor method 'run_pipeline' failed: {error}",  # fray's driver line
    rb"method 'run_pipeline' failed: (?P<text>.*)",
    b"method 'run_pipeline' failed",
)
# The older status form without alive/dead counts (STATUS reads both).
STATUS_WORKERS_ONLY = (
    "[{stage}] {completed}/{total} complete, {in_flight} in-flight, {queued} queued, {registered} workers"
)
# Lines Zephyr prints that zdebug does not fold (the generator writes them, as the release does).
SHARD_START = "[{exec}] [shard {shard}/{total}] stage={stage}, 1 ops"
SHARD_COMPLETE = "[shard {shard}] Complete: 1 refs produced"
PULL_TASK_OPERATION = "Started operation {op} for {actor}.pull_task"  # Iris actor server DEBUG spam
FINAL_COUNTERS = Message(
    "counters",
    "[coordinator.shutdown] Final counters: {counters}",
    rb"\[coordinator\.shutdown\] Final counters: (?P<counters>\{.*\})",
    b"[coordinator.shutdown]",
)
SHUTDOWN = Message(
    "shutdown",
    "[coordinator.shutdown] Starting shutdown",
    rb"\[coordinator\.shutdown\] Starting shutdown",
    b"[coordinator.shutdown]",
)
PIPELINE = Message(
    "pipeline", "Starting zephyr pipeline: {exec}", rb"Starting zephyr pipeline: (?P<exec>\S+)", b"zephyr pipeline: "
)
STRANDED = "Shard {shard} requeued but no live worker remains ({alive}/{registered} workers alive)"  # reference only

# -- worker --------------------------------------------------------------------------------
_WORKER = rb"\[(?P<worker>[^\]\n]+)\] "
_EXECUTING = rb"Executing stage (?P<stage>\S+(?: \S+)*?) shard (?P<shard>\d+) \(attempt (?P<attempt>\d+)\)"
_DONE = rb"Shard (?P<shard>\d+) done in (?P<secs>[\d.]+)s"
EXECUTING = Message(
    "executing",
    "[{worker}] Executing stage {stage} shard {shard} (attempt {attempt})",
    _WORKER + _EXECUTING,
    b"Executing stage ",
    b"Executing stage",
)
SHARD_DONE = Message("done", "[{worker}] Shard {shard} done in {secs:.2f}s", _WORKER + _DONE, b"Shard ", b" done in ")
WORKER_ERROR = Message(
    "worker_error",
    "Worker {worker} error on shard {shard}",
    rb"Worker (?P<worker>\S+) error on shard (?P<shard>\d+)",
    b"Worker ",
    b" error on shard",
)
SCATTER_READER = Message(
    "scatter_reader",
    "ScatterReader for shard {shard}: {files} files, {chunks} total chunks, max_chunk_rows={rows}, "
    "avg_item_bytes={item_bytes:.1f}",
    rb"ScatterReader for shard (?P<shard>\d+): (?P<files>\d+) files, (?P<chunks>\d+) total chunks, "
    rb"max_chunk_rows=(?P<rows>\d+)",
    b"ScatterReader ",
)
HEARTBEAT_FAILED = "[{worker}] Heartbeat failed ({n}/{max}): {error}"  # reference worker only; zdebug does not read it

# -- driver / Iris / older releases (issue 17's known failure modes) -------------------------
RPC_RETRY = Message(
    "rpc_retry",
    "Operation {op}.{method} failed (attempt {n}/{max}), retrying in {delay:.2f}s: {error}",
    rb"Operation (?P<op>\S+)\.(?P<method>\w+) failed \(attempt (?P<n>\d+)/(?P<max>\d+)\), retrying"
    rb"(?: in [\d.]+s)?:? ?(?P<error>.*)",
    b"Operation ",
    b"), retrying",
)
CONNECT_ERROR = Message(
    "connect_error",
    "Worker {worker} cannot reach the coordinator at {url}: httpx.ConnectError: [Errno 113] No route to host",
    rb"(?:Worker (?P<worker>\S+) .*?)?ConnectError\b.*?No route to host",
    b"route to host",
)
WORKER_GROUP = Message(
    "worker_group",
    "Starting worker group: {n} workers (max_workers={max}, num_shards={shards})",
    rb"Starting worker group: (?P<n>\d+) workers \(max_workers=(?P<max>\d+), "
    rb"num_shards=(?P<shards>\d+)\)",
    b"Starting worker group",
)

# Reading order: the first pattern that matches a line wins.
MESSAGES: tuple[Message, ...] = (
    STATUS,
    TASKS_COMPLETED,
    STAGE_START,
    EXECUTING,
    SHARD_DONE,
    TASK_REQUEUE,
    TASK_ABORT,
    INFRA_REQUEUE,
    INFRA_ABORT,
    REGISTERED,
    REREGISTERING,
    HEARTBEAT_TIMEOUT,
    WORKER_ERROR,
    STALE_RESULT,
    ALL_DEAD,
    NO_WORKERS,
    RETRIED,
    ABORTED,
    PIPELINE_FAILED,
    FINAL_COUNTERS,
    SHUTDOWN,
    PIPELINE,
    SCATTER_READER,
    RPC_RETRY,
    CONNECT_ERROR,
    WORKER_GROUP,
)


def _prefixed(pattern: bytes, prefix: bytes) -> bytes:
    """`pattern` with its group names prefixed (one regex may then hold several messages)."""
    return re.sub(rb"\(\?P<(\w+)>", lambda m: b"(?P<" + prefix + m.group(1) + b">", pattern)


# The three lines a long job writes for every shard (STATUS, EXECUTING, SHARD_DONE) after Python
# logging's prefix, as one pattern that a chunk of text is split by (sources/denseparse.py). It
# starts at the newline before the line and takes the whole line. `first` is the worker of an
# Executing / done line, a status line's exec (then `second` is its stage) or its stage.
DENSE_PATTERN = (
    rb"\n(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d\d\d) [A-Z]+ [\w.\-]+: \[(?P<first>[^\]\n]+)\] (?:"
    + _prefixed(_EXECUTING, b"e_")
    + b"|"
    + _prefixed(_DONE, b"d_")
    + rb"|(?:\[(?P<second>[^\]\n]+)\] )?"
    + _prefixed(_COUNTS, b"s_")
    + rb")[^\n]*"
)


# -- fatal_error texts and subprocess-runner errors ------------------------------------------
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
OOM_ERROR = "Subprocess for shard {shard} was killed by SIGKILL (returncode -9); most likely OOM-killed by the kernel."
EXIT_ERROR = (
    "Subprocess for shard {shard} exited with code {code}; see worker stderr above for the faulthandler traceback."
)
# Error text -> failure kind, most specific first.
FAILURE_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"killed by SIGKILL|returncode -9|MemoryError|OOM ?[Kk]illed|exit(?:ed with)? code 137"), "oom"),
    (re.compile(r"exited with code -11|Segmentation fault"), "segv"),
    (re.compile(r"exited with code -?\d+|Fatal Python error"), "exit"),
)
RETURNCODE_RE = re.compile(r"returncode (-?\d+)|exited with code (-?\d+)")
# The shard a fatal_error names (task abort, infra abort, and their older forms).
ABORT_SHARD_RE = re.compile(
    r"Shard (?P<shard>\d+) (?:failed \d+ times|has failed|crashed its worker|has been in flight)"
)

# -- line prefixes and time ----------------------------------------------------------------
# Optional Iris `[hh:mm:ss] task=… | ` or Ray `(actor pid=N, ip=A) `, then Python logging or glog-like time.
PREFIX_RE = re.compile(
    rb"(?:\([^()\n]*pid=\d+[^()\n]*\) )?"
    rb"(?:\[(?P<clock>\d\d:\d\d:\d\d)\] (?:task=\S+ \| )?)?"
    rb"(?:(?P<date>\d{4}-\d\d-\d\d)[ T](?P<time>\d\d:\d\d:\d\d)(?:[,.](?P<frac>\d{1,6}))?"
    rb"|[IWEFD](?P<gdate>\d{8}) (?P<gtime>\d\d:\d\d:\d\d)(?:\.(?P<gfrac>\d{1,6}))?)?"
)
# Start of a line that is not a continuation of a block (has a timestamp or is a JSON record).
LINE_START_RE = re.compile(
    rb"\n(?:\[\d\d:\d\d:\d\d\] |\([^()\n]*pid=\d+|\d{4}-\d\d-\d\d[ T]\d\d:|[IWEFD]\d{8} \d\d:|\{)"
)
# A log record in text: (python-logging time | glog time) then the message.
RECORD_RE = re.compile(
    r"^(?:(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})(?:,\d{3})? "
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL|FATAL) [\w.\-]+: ?"
    r"|[IWEF](?P<gdate>\d{8}) (?P<gtime>\d{2}:\d{2}:\d{2})(?:\.\d+)? +\d+ [\w.\-]+(?:\.\w+:\d+\])? )(?P<message>.*)$"
)
IRIS_PREFIX_RE = re.compile(r"^\[\d{2}:\d{2}:\d{2}\] task=\S+ \| ")

_zone: str | None = os.environ.get(TZ_ENV) or None


def set_timezone(name: str | None) -> None:
    """Read naive prefix times in zone `name` (an IANA name; None or "UTC" = UTC)."""
    global _zone
    if name and name.upper() != "UTC":
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {name!r}") from exc
    _zone = None if not name or name.upper() == "UTC" else name
    naive_epoch.cache_clear()


def zone() -> str | None:
    """The zone naive prefix times are read in (None: UTC)."""
    return _zone


@lru_cache(maxsize=8192)
def naive_epoch(date: str, clock: str) -> float | None:
    """Unix seconds of a prefix date (`2026-12-02` or `20261202`) and clock (`21:59:16`)."""
    d = date.replace("-", "")
    try:
        parts = (int(d[:4]), int(d[4:6]), int(d[6:8]), int(clock[:2]), int(clock[3:5]), int(clock[6:8]))
        if _zone is None:
            datetime(*parts)  # validates month/day ranges as timegm does not
            return float(calendar.timegm(parts))
        from zoneinfo import ZoneInfo

        return datetime(*parts, tzinfo=ZoneInfo(_zone)).timestamp()
    except (ValueError, OverflowError):
        return None


def timestamp(ts: float) -> str:
    """Python logging's asctime, in UTC: `2026-12-02 21:59:16,743`."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts)) + f",{int(ts * 1000) % 1000:03d}"


# -- numbers -------------------------------------------------------------------------------
_SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def human_count(n: float) -> str:
    """Zephyr's short numbers: 999, 1.09K, 12.3M."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.3g}" if isinstance(n, float) and not float(n).is_integer() else str(int(n))


def human_number(text: str | None) -> float | None:
    """The reverse of `human_count`: `1.09K` -> 1090."""
    if not text:
        return None
    scale = _SUFFIX.get(text[-1], 1.0)
    try:
        return float(text[:-1] if scale != 1.0 else text) * scale
    except ValueError:
        return None


def human_bytes(n: float) -> str:
    """Zephyr's byte sizes: 504 bytes, 71.88 KiB, 1.2 GiB."""
    if abs(n) < 1024:
        return f"{int(n)} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024.0
        if abs(n) < 1024:
            return f"{n:.2f} {unit}"
    return f"{n / 1024.0:.2f} TiB"
