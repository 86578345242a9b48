"""Shared records and DataFrame schemas. No I/O here.

Every source fills an `Evidence`; every analyzer reads one. Tables are pandas
DataFrames with the columns listed below (missing values are NaN/None), so analyzers
can stay vectorised whatever the evidence came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import pandas as pd

# Zephyr's worker states, new and old spellings. "alive" = can still run shards.
ALIVE_STATES = frozenset({"active", "ready", "busy", "init"})
DEAD_STATES = frozenset({"failed", "dead", "done"})

# Failure kinds (Zephyr's ShardFailureKind).
TASK, INFRA = "task", "infra"

# Defaults shared with the coordinator (Zephyr's constants).
MAX_SHARD_FAILURES = 3
MAX_SHARD_INFRA_FAILURES = 20
HEARTBEAT_TIMEOUT_S = 120.0
HEARTBEAT_INTERVAL_S = 5.0
NO_WORKERS_TIMEOUT_S = 60.0
STALL_THRESHOLD_S = 45 * 60.0

# Periodic status snapshots (coordinator log status lines, get_status polls, events).
STATUS_COLUMNS = [
    "ts",  # unix seconds
    "stage",
    "completed",
    "total",
    "in_flight",
    "queue_depth",
    "retries",
    "alive",
    "registered",
    "dead",
    "items",  # the status line's items= (NaN where the source has no such count)
    "bytes",  # its bytes_processed= (NaN where it has none): finer than items= where items print 3 digits
]

# One row per shard attempt. outcome: done | failed | requeued | running | stale.
ATTEMPT_COLUMNS = [
    "stage",
    "shard",
    "attempt",
    "worker",
    "start_ts",
    "end_ts",
    "outcome",
    "kind",  # task | infra | None
    "elapsed_s",
    "items",
    "bytes",
    "error",  # one-line error summary
    "crash_file",  # path of the full crash text, when there is one
    "peak_rss_bytes",  # subprocess runner: child's peak RSS (from wait4)
    "returncode",  # subprocess runner: child's return code
    "failure",  # oom | segv | exit | exception: what the error text says ended it
    "reason",  # why an INFRA attempt was lost (heartbeat timeout, re-registered, ...)
    "generation",  # Zephyr's `Total generation` of an infra requeue
    "input_chunks",  # reduce stage: ScatterReader's total chunks (its items count outputs, one per key)
    "max_chunk_rows",  # reduce stage: ScatterReader's largest chunk
    "counters",  # per-attempt user counters, when the source has them
    "cpu_time_s",  # CPU seconds of the attempt (Zephyr's telemetry)
]

# Heartbeat resource/progress samples, one row per worker per heartbeat.
SAMPLE_COLUMNS = [
    "ts",
    "worker",
    "stage",
    "shard",  # shard being run at sample time, or NaN
    "items",  # items processed so far in that shard
    "bytes",
    "rss_bytes",
    "rss_peak_bytes",
    "cpu_pct",
    "disk_bytes",
]

# Latest known state per worker.
WORKER_COLUMNS = [
    "worker",
    "state",
    "last_seen_ago",  # seconds, relative to Evidence.now
    "pid",
    "memory_mb",
    "memory_peak_mb",
    "disk_mb",
    "cpu",  # percent of one core
    "shard",  # shard held now, or NaN
]


def empty_frame(columns: list[str]) -> pd.DataFrame:
    import pandas as pd  # here, not at import: `zdebug crashes` needs no pandas

    return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})


def frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """DataFrame with exactly `columns` (extra keys dropped, missing ones NaN)."""
    import pandas as pd

    if not rows:
        return empty_frame(columns)
    return pd.DataFrame.from_records(rows).reindex(columns=columns)


@dataclass
class JobStatus:
    """Zephyr's get_status() result."""

    stage: str = ""
    completed: int = 0
    total: int = 0
    retries: int = 0
    in_flight: int = 0
    queue_depth: int = 0
    done: bool = False
    fatal_error: str | None = None
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "completed": self.completed,
            "total": self.total,
            "retries": self.retries,
            "in_flight": self.in_flight,
            "queue_depth": self.queue_depth,
            "done": self.done,
            "fatal_error": self.fatal_error,
            "workers": self.workers,
        }


@dataclass
class StageInfo:
    name: str
    index: int
    total: int
    start_ts: float | None = None
    end_ts: float | None = None
    # Zephyr's own per-stage totals (finelog zephyr.stage): elapsed_s, items, bytes, cpu_time_s, ...
    totals: dict[str, float] = field(default_factory=dict)


@dataclass
class Crash:
    """One crash text (a traceback, faulthandler dump or one-line error) and where it was."""

    text: str
    source: str  # file path (or URL) the text came from
    line: int | None = None  # 1-based line in `source` when the crash sits inside a log
    stage: str | None = None
    shard: int | None = None
    attempt: int | None = None
    worker: str | None = None
    kind: str | None = None  # task | infra | oom | segv | exit
    ts: float | None = None

    @property
    def location(self) -> str:
        return f"{self.source}:{self.line}" if self.line else self.source


JOB_STATES = ("running", "succeeded", "failed", "interrupted", "unknown")  # what a job can be in


@dataclass
class SourceRead:
    """One source of the evidence as read: its kind (`log`, `records`, `status`, `tasks`, …), the
    Zephyr event lines found in it and how many of them carried a time; or why it was ignored."""

    path: str
    kind: str
    events: int | None = None  # event lines (log sources only)
    timed: int | None = None  # ... of which carried a time
    ignored: str | None = None  # why nothing of it was used

    def to_json(self) -> dict:
        return {k: v for k, v in vars(self).items() if v is not None}


# Facts of single coordinator log lines the tables do not hold (the known failure modes read them).
class StatusExec(NamedTuple):
    """A status line naming its execution: the execution id and the alive workers it counts."""

    ts: float
    exec: str | None
    alive: int | None


class StageStart(NamedTuple):
    """`Starting stage …` of one execution."""

    ts: float
    exec: str | None
    stage: str


class RpcRetry(NamedTuple):
    """`Operation … failed (attempt N/MAX), retrying`."""

    ts: float
    op: str
    method: str
    n: int
    max_attempts: int
    error: str


class ConnectError(NamedTuple):
    """A worker failing to reach the coordinator."""

    ts: float
    worker: str | None


class WorkerGroup(NamedTuple):
    """`Starting worker group: N workers (max_workers=M, num_shards=S)`."""

    ts: float
    workers: int
    max_workers: int
    shards: int


LogFact = StatusExec | StageStart | RpcRetry | ConnectError | WorkerGroup


@dataclass
class LogFacts:
    """The log-line facts of one job, each kind in log order."""

    status_exec: list[StatusExec] = field(default_factory=list)
    stage_start: list[StageStart] = field(default_factory=list)
    rpc_retry: list[RpcRetry] = field(default_factory=list)
    connect_error: list[ConnectError] = field(default_factory=list)
    worker_group: list[WorkerGroup] = field(default_factory=list)

    def add(self, fact: LogFact, runs: bool = False) -> None:
        """Append `fact` to its kind's list. `runs`: of consecutive facts equal but for the time only
        the first and the last are kept (one per status line is too many)."""
        facts: list = getattr(self, _FACT_FIELD[type(fact)])
        if runs and len(facts) >= 2 and facts[-1][1:] == fact[1:] and facts[-2][1:] == fact[1:]:
            facts[-1] = fact
        else:
            facts.append(fact)


_FACT_FIELD = {
    StatusExec: "status_exec",
    StageStart: "stage_start",
    RpcRetry: "rpc_retry",
    ConnectError: "connect_error",
    WorkerGroup: "worker_group",
}


@dataclass
class Evidence:
    """Everything one source knows about one job."""

    job: str
    source: str
    now: float  # reference time: wall clock for live jobs, last record time otherwise
    state: str = "unknown"  # one of JOB_STATES
    stages: list[StageInfo] = field(default_factory=list)
    status: pd.DataFrame = field(default_factory=lambda: empty_frame(STATUS_COLUMNS))
    attempts: pd.DataFrame = field(default_factory=lambda: empty_frame(ATTEMPT_COLUMNS))
    samples: pd.DataFrame = field(default_factory=lambda: empty_frame(SAMPLE_COLUMNS))
    workers: pd.DataFrame = field(default_factory=lambda: empty_frame(WORKER_COLUMNS))
    crashes: list[Crash] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    fatal_error: str | None = None
    progress_time: float | None = None  # unix time of the last stage start / shard completion
    config: dict[str, Any] = field(default_factory=dict)
    live: JobStatus | None = None  # the last get_status, when the source has one
    warnings: list[str] = field(default_factory=list)  # e.g. "skipped 12 unparseable lines"
    # Workers' last_seen_ago counts from heartbeats (False: from the last log line naming them, which
    # a busy worker may not write for a long time: silence there is not death).
    heartbeat_ages: bool = True
    provenance: list[str] = field(default_factory=list)  # what it was built from, e.g. ["coordinator-log", "finelog"]
    reads: list[SourceRead] = field(default_factory=list)  # each source read, and what it gave
    # (ts, worker, event) for "registered", "reregistered", "heartbeat-timeout" (worker churn), in time order
    worker_events: list[tuple[float, str, str]] = field(default_factory=list)

    log_facts: LogFacts = field(default_factory=LogFacts)  # single log lines' facts (known modes)


EXECUTION_ID_RE = re.compile(r"^(?:[\w.-]+-)?\d{8}-\d{6}-[0-9a-f]{8}$")


def safe_name(name: str) -> str:
    """A string usable as one path component (worker ids contain ':' and '/')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "_"
