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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache

TZ_ENV = "ZDEBUG_TZ"
COARSEST_S = 1.0  # the coarsest time a log prefix prints: whole seconds (glog, journald, Iris CLI)
_NUM = rb"(?P<items>[\d.]+[KMBT]?)"
BYTE_UNITS = ("bytes", "KiB", "MiB", "GiB", "TiB")  # human_bytes: `504 bytes`, `71.88 KiB`; x1024 each
_BYTE_SCALE = {unit: 1024**power for power, unit in enumerate(BYTE_UNITS)}
_BYTES = rb"(?P<bytes>\d+(?:\.\d+)? (?:" + "|".join(BYTE_UNITS).encode() + rb"))"
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
    rb"|(?P<workers>\d+) workers)(?:[;.] items=" + _NUM + rb"(?: \([^)\n]*\), bytes_processed=" + _BYTES + rb")?)?"
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
ITEM_COUNT, BYTE_COUNT = "items=", "bytes_processed="  # the two counts THROUGHPUT prints
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

MAX_INT_DIGITS = 18  # longer integers overflow the tables' int64
_NUMBERS = {
    m.name: (
        frozenset(g.decode() for g in re.findall(rb"\(\?P<(\w+)>\\d\+\)", m.pattern)),  # `\d+` groups
        frozenset(g.decode() for g in re.findall(rb"\(\?P<(\w+)>\[\\d\.\]\+\)", m.pattern)),  # `[\d.]+`
    )
    for m in MESSAGES
}


def readable(message: str, groups: dict[str, str]) -> bool:
    """The numbers of a line that matched `message` fit the tables: its integers in int64, a decimal
    one number (`1.2.3` matches `[0-9.]+` but is none). A line that fails is skipped as unparseable."""
    ints, decimals = _NUMBERS.get(message, (frozenset(), frozenset()))
    return not any(len(groups.get(g) or "") > MAX_INT_DIGITS for g in ints) and not any(
        (groups.get(g) or "").count(".") > 1 or groups.get(g) == "." for g in decimals
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
STAGE_INDEX_RE = re.compile(r"^stage(\d+)-")  # a stage name's `stageN-` prefix: its index
RETURNCODE_RE = re.compile(r"returncode (-?\d+)|exited with code (-?\d+)")
# The shard a fatal_error names (task abort, infra abort, and their older forms); `task` is set
# for a task abort (FATAL_TASK: out of task attempts), not an infra one.
ABORT_SHARD_RE = re.compile(
    r"Shard (?P<shard>\d+) (?:(?P<task>(?:has )?failed \d+ times)|has failed|crashed its worker|has been in flight)"
)

# -- line prefixes and time ----------------------------------------------------------------
# Time parts a prefix pattern may name: Y (4-digit year), M (month number or `Nov`), D (day),
# h, m, s, f (fraction, up to 9 digits), z (`Z` / `+01:00`). A prefix without Y takes the year of
# the evidence's other dates; without M/D, the day of the last dated line.
# a fraction stops where a glued-on date begins (`…25.7082026-11-19 …`: `708`, then the date)
_FRAC = rb"(?:[,.](?P<f>\d{1,9})(?=\d{4}-\d\d-\d\d|[^\d-]|-(?!\d\d-)|$))?"
_HMS = rb"(?P<h>[01]\d|2[0-3]):(?P<m>[0-5]\d):(?P<s>[0-5]\d|60)" + _FRAC
_ZONE = rb"(?P<z>Z|[+-]\d\d:?\d\d)?"
_ISO = rb"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)[ T]" + _HMS + _ZONE
_RFC3339 = rb"(?P<Y>\d{4})-(?P<M>\d\d)-(?P<D>\d\d)T" + _HMS + rb"(?P<z>Z|[+-]\d\d:\d\d)"  # zone required
_MONTHS = rb"Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"


@dataclass(frozen=True)
class Prefix:
    """One form of the text before a Zephyr message: an example as printed, and the pattern of
    the time it carries (None: it carries none). `outer`: a transport's prefix (a log viewer's
    receive time, Iris CLI, kubectl, Ray) that the process's own prefix may follow."""

    name: str
    example: str
    time: bytes | None
    outer: bool = False
    rest: bytes = b""  # an outer prefix: what follows its time, up to the prefix after it

    @property
    def whole(self) -> bytes:
        """An outer prefix's whole pattern (time and rest), groups unnamed."""
        return re.sub(rb"\(\?P<\w+>", b"(?:", (self.time or b"") + self.rest)

    def format(self, ts: float) -> str:
        """The example with its time set to `ts` (UTC; as many fraction digits as the example)."""
        if self.time is None:
            return self.example
        m = re.search(self.time, self.example.encode())
        if m is None:
            raise ValueError(f"prefix {self.name}: its example holds no time")
        digits = len(m["f"]) if m.groupdict().get("f") else 0
        whole, _, frac = f"{ts:.{min(digits, 6)}f}".partition(".")  # decimal rounding (ts * 1e9 is not exact)
        t = time.gmtime(int(whole))
        month = _MONTHS.split(b"|")[t.tm_mon - 1].decode()
        values = {"Y": f"{t.tm_year:04d}", "D": f"{t.tm_mday:02d}", "h": f"{t.tm_hour:02d}", "m": f"{t.tm_min:02d}"}
        values["s"] = f"{t.tm_sec:02d}"
        out, at = [], 0
        for part in sorted((k for k in m.groupdict() if m[k] is not None), key=m.start):
            start, end = m.span(part)
            old = self.example[start:end]
            new = values.get(part)
            if part == "M":
                new = month if old.isalpha() else f"{t.tm_mon:02d}"
            elif part == "f":
                new = frac.ljust(digits, "0")
            elif part == "D" and old.startswith(" "):
                new = f"{t.tm_mday:2d}"
            out += [self.example[at:start], new if new is not None else old]
            at = end
        return "".join(out) + self.example[at:]


PREFIXES: tuple[Prefix, ...] = (
    Prefix("python", "2026-11-19 22:18:25,708 INFO zephyr.execution: ", _ISO),
    Prefix("python-dot", "2026-11-19 22:18:25.708 INFO zephyr.execution: ", _ISO),
    Prefix("python-dash", "2026-11-19 22:18:25,708 - zephyr.execution - INFO - ", _ISO),
    Prefix("level-logger", "INFO zephyr.execution:341 ", None),
    Prefix("bracket-level", "[WARNING] zephyr.execution ", None),
    Prefix(
        "glog-year",
        "I20261119 22:18:25 140415056467648 zephyr.execution ",
        rb"[IWEFD](?P<Y>\d{4})(?P<M>\d\d)(?P<D>\d\d) " + _HMS,
    ),
    Prefix("glog", "I1119 22:18:25.708123 140415 execution.py:341] ", rb"[IWEFD](?P<M>\d\d)(?P<D>\d\d) " + _HMS),
    Prefix("iris-cli", "[22:18:25] task=/alice/job/0 | ", rb"\[" + _HMS + rb"\] ", True, rb"(?:task=\S+ \| )?"),
    Prefix("ray-actor", "(ZephyrWorker pid=4242, ip=10.0.0.7) ", None, True, rb"\([^()\n]*pid=\d+[^()\n]*\) "),
    Prefix(
        "raylet",
        "[2026-11-19 22:18:25,708 I 4242 4243] (raylet) ",
        rb"\[" + _ISO,
        True,
        rb" [IWEFD] [^\]\n]*\] (?:\(\w+\) )?",
    ),
    Prefix("kubectl", "2026-11-19T22:18:25.708123456Z ", _RFC3339, True, b" "),
    Prefix("viewer-glued", "2026-11-19 22:18:25.708", _ISO, True),  # a receive time with no separator
    Prefix(
        "journald",
        "Nov 19 22:18:25 host-7 python3[4242]: ",
        rb"(?P<M>" + _MONTHS + rb") (?P<D>[ \d]\d) " + _HMS,
        True,
        rb" \S+ [\w.\-/]+(?:\[\d+\])?: ",
    ),
    Prefix("clock", "22:18:25.708 ", rb"(?<![\d:.])" + _HMS + rb"(?![\d:])"),
    Prefix("none", "", None),
)


def _time_alternation() -> bytes:
    """Every prefix's time pattern as one alternation: group `p<i>_<part>` of prefix i."""
    parts = []
    for i, p in enumerate(PREFIXES):
        if p.time is not None and p.time not in (q.time for q in PREFIXES[:i]):
            parts.append(b"(?P<p%d>" % i + _prefixed(p.time, b"p%d_" % i) + b")")
    return b"|".join(parts)


# Every time any prefix form carries, searched anywhere in the text before a message (unknown
# prefixes and junk around it included); the most complete (date > month-day > clock) wins, the
# innermost (last) among equals: the process's own time over a viewer's receive time.
TIME_RE = re.compile(_time_alternation())
_MONTH = {m: i for i, m in enumerate(_MONTHS.split(b"|"), 1)}


@dataclass(frozen=True)
class PrefixTime:
    """A time read from a prefix; `year` / `month` None when the prefix carries none."""

    year: int | None
    month: int | None
    day: int | None
    clock: float  # seconds since midnight, fraction included
    zone: str | None  # "Z" / "+01:00" when the prefix says; None: naive (ZDEBUG_TZ)
    step: float = COARSEST_S  # the resolution it was printed at: 1 s without a fraction, 1 ms with 3 digits


# Each alternative of TIME_RE (`p<i>`): its parts' names and group numbers, read with one call.
_TIME_PARTS = {
    tag: tuple(
        (name[len(tag) + 1 :], index) for name, index in TIME_RE.groupindex.items() if name.startswith(tag + "_")
    )
    for tag in TIME_RE.groupindex
    if "_" not in tag
}
# The prefixes of nearly every line: Python logging's or glog's (with or without the year), also
# behind the Iris CLI's. When nothing after that time holds a digit, a colon and a digit, no other
# time is there: it is the one the search over every form would find, without the search. (The
# Iris CLI's clock is matched without its parts, and its task without a colon, so none can hold one.)
_IRIS_CLI = rb"(?:\[\d\d:\d\d:\d\d\] task=[^\s:]* \| )?"
_LEADING_TIMES = tuple(
    (rx, tuple(rx.groupindex.items()))
    for rx in (
        re.compile(_IRIS_CLI + p.time)
        for p in PREFIXES
        if p.name in ("python", "glog-year", "glog") and p.time is not None
    )
)
_CLOCK_PART = re.compile(rb"\d:\d")  # every form's time has one


def _prefix_time(parts: Iterable[tuple[str, bytes | None]]) -> PrefixTime:
    g = {k: v for k, v in parts if v is not None}
    month, frac = g.get("M"), g.get("f")
    return PrefixTime(
        int(g["Y"]) if "Y" in g else None,
        (_MONTH[month] if month in _MONTH else int(month)) if month else None,
        int(g["D"]) if "D" in g else None,
        int(g["h"]) * 3600 + int(g["m"]) * 60 + int(g["s"]) + (int(frac) / 10 ** len(frac) if frac else 0.0),
        g["z"].decode() if "z" in g else None,
        10.0 ** -len(frac) if frac else COARSEST_S,
    )


def prefix_time(text: bytes) -> PrefixTime | None:
    """The time a line's prefix (`text`, the bytes before the message) carries, or None."""
    for rx, parts in _LEADING_TIMES:
        m = rx.match(text)
        if m is not None:
            if _CLOCK_PART.search(text, m.end()) is None:
                return _prefix_time((name, m.group(index)) for name, index in parts)
            break
    return search_time(text)


def search_time(text: bytes) -> PrefixTime | None:
    """`prefix_time` by searching every prefix form's time in `text` (its general path)."""
    best: PrefixTime | None = None
    rank = -1
    for m in TIME_RE.finditer(text):
        parts = _TIME_PARTS[m.lastgroup or ""]  # the alternative that matched
        found = _prefix_time(zip((name for name, _ in parts), m.group(*(i for _, i in parts)), strict=True))
        r = (found.year is not None) * 2 + (found.month is not None)
        if r >= rank:
            best, rank = found, r
    return best


# Start of a line that is not a continuation of a block (traceback): after any outer prefixes,
# a time of a process's own prefix, a level, or a JSON record.
_OUTER = b"|".join(p.whole for p in PREFIXES if p.outer)
# A transport's prefixes at the start of a continuation line (its traceback line as Iris CLI or
# kubectl print it): what the block readers strip.
OUTER_RE = re.compile(rb"^ ?(?:" + _OUTER + rb")+", re.M)
_CONTINUES = rb"\s|Traceback|During handling|The above exception|[\w.]+(?:Error|Exception|Warning|Exit|Interrupt)\b|\^"
LINE_START_RE = re.compile(
    rb"\n(?:(?:" + _OUTER + rb")*"
    rb"(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? (?:[A-Z]|- )|[IWEFD]\d{4,8} \d\d:|\{|\[?(?:"
    + b"|".join(re.escape(w) for w in (b"DEBUG", b"INFO", b"WARNING", b"ERROR", b"CRITICAL"))
    + rb")\b)|(?:"
    + _OUTER
    + rb")++(?!"
    + _CONTINUES
    + rb")|(?:"
    + _OUTER
    + rb")*+(?!"
    + _CONTINUES
    + rb")[^\n]{0,40}?(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d|[IWEFD]\d{4,8} \d\d:\d\d))"
)  # behind a transport's prefix, a bare line is a new one unless it reads as a traceback's; so is
# a line with a date near its start behind unknown text
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


def midnight(year: int, month: int, day: int, zone: str | None) -> float | None:
    """Unix seconds of a date's midnight: in `zone` (`Z`, `+01:00`) when the prefix names one,
    else in ZDEBUG_TZ; None for a date that does not exist."""
    if zone is None:
        return naive_epoch(f"{year:04d}{month:02d}{day:02d}", "00:00:00")
    try:
        base = calendar.timegm((year, month, day, 0, 0, 0))
        datetime(year, month, day)
    except (ValueError, OverflowError):
        return None
    if zone == "Z":
        return float(base)
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    return float(base - sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60))


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


def human_bytes_number(text: str | None) -> float | None:
    """The reverse of `human_bytes`: `71.88 KiB` -> 73605.12 (None: not a size)."""
    number, _, unit = (text or "").partition(" ")
    scale = _BYTE_SCALE.get(unit)
    try:
        return float(number) * scale if scale else None
    except ValueError:
        return None


def human_bytes(n: float) -> str:
    """Zephyr's byte sizes: 504 bytes, 71.88 KiB, 1.20 GiB."""
    if abs(n) < 1024:
        return f"{int(n)} {BYTE_UNITS[0]}"
    for unit in BYTE_UNITS[1:-1]:
        n /= 1024.0
        if abs(n) < 1024:
            return f"{n:.2f} {unit}"
    return f"{n / 1024.0:.2f} {BYTE_UNITS[-1]}"
